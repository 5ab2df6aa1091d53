/**
 * Where admission cost grows (issue 31 item 6): the same four reviews as admission-direct, with k
 * connections per cluster for k from 1 to 100 — ⌈k/2⌉ clusters (each looked up with its app and checked
 * against connectable_to) and ⌊k/2⌋ labelled ConfigMaps; the UPDATE adds the last cluster, so the
 * mutating webhook raises configMetaGenerator. Per k: p99 at a fixed rate (the target's 500/s) and CPU
 * per review at full load, on the service started for the admission sections.
 */
import type { TestEnv } from '../support/cluster.js';
import { apply, configMap, kdCluster } from '../support/kd-objects.js';
import { type RunningAdmission } from '../support/services.js';
import { checkAnswer, markClustersReady, runOnce, serviceServer } from './admission-direct.js';
import { say } from './env.js';
import { forkHelper, httpsPost, pin, stopHelper } from './probes.js';
import { benchReviews, loadRequests, meanReviewBytes, SEED, type Connections } from './reviews.js';
import type { Scale } from './scale.js';
import { round } from './stats.js';

export interface AdmissionGrowthStep {
  connections: number;
  clusters: number;
  configmaps: number;
  meanReviewBytes: number;
  /** At the fixed rate. */
  rate: number;
  p50Ms: number;
  p99Ms: number;
  /** At full load. */
  rps: number;
  cpuPerReviewUs: number;
  failures: number;
}

export interface AdmissionGrowthResult {
  rate: number;
  rateSec: number;
  fullLoadSec: number;
  steps: AdmissionGrowthStep[];
}

const clusterName = (i: number) => `grow-c-${i}`;
const configMapName = (i: number) => `grow-m-${i}`;

export function growthConnections(k: number): { before: Connections; after: Connections } {
  const clusters = Array.from({ length: Math.ceil(k / 2) }, (_, i) => clusterName(i));
  const configmaps = Array.from({ length: Math.floor(k / 2) }, (_, i) => configMapName(i));
  return {
    before: { clusters: clusters.slice(0, -1), configmaps, secrets: [] },
    after: { clusters, configmaps, secrets: [] },
  };
}

export async function admissionGrowth(
  env: TestEnv,
  svc: RunningAdmission,
  scale: Scale['growth'],
  direct: Scale['direct'],
  opts: { pin: boolean },
): Promise<AdmissionGrowthResult> {
  const most = Math.max(...scale.connections);
  const clusters = Math.ceil(most / 2);
  say(`admission growth: seeding ${clusters} clusters and ${Math.floor(most / 2)} ConfigMaps`);
  await apply(env, [
    ...Array.from({ length: clusters }, (_, i) => kdCluster(clusterName(i), SEED.apps[1]!, {}, ['worker'])),
    ...Array.from({ length: Math.floor(most / 2) }, (_, i) => configMap(configMapName(i), { path: `/g/${i}` })),
  ]);
  // Ready, like the connected clusters of admission-direct's seed.
  await markClustersReady(
    env,
    Array.from({ length: clusters }, (_, i) => clusterName(i)),
  );

  const worker = forkHelper('./load-worker.ts');
  const server = serviceServer(svc);
  try {
    if (opts.pin) {
      await pin(svc.pid, 0);
      await pin(worker.pid!, 1);
    }
    const steps: AdmissionGrowthStep[] = [];
    for (const k of scale.connections) {
      const { before, after } = growthConnections(k);
      const reviews = benchReviews(env.namespace, before, after);
      // Every review is answered as expected (allowed; the mutating ones with a patch) before any load.
      for (const r of reviews) {
        const res = await httpsPost(svc.url(r.path), r.body, env.info.webhookCaPem);
        checkAnswer(r, res.status, res.body);
      }
      const requests = loadRequests(reviews);
      const load = (durationSec: number, rate?: number) =>
        runOnce(worker, server, {
          url: `https://127.0.0.1:${svc.port}`,
          connections: direct.connections,
          durationSec,
          rate,
          requests,
        });
      say(`admission growth: ${k} connections: ${scale.rate}/s for ${direct.rateSec} s, then full load`);
      await load(direct.warmupSec);
      const atRate = await load(direct.rateSec, scale.rate);
      const full = await load(direct.measureSec);
      steps.push({
        connections: k,
        clusters: after.clusters.length,
        configmaps: after.configmaps.length,
        meanReviewBytes: meanReviewBytes(reviews),
        rate: scale.rate,
        p50Ms: round(atRate.load.latencyMs.p50),
        p99Ms: round(atRate.load.latencyMs.p99),
        rps: round(full.load.rps),
        cpuPerReviewUs: full.cpuPerReviewUs,
        failures: [atRate, full].reduce((n, r) => n + r.load.non2xx + r.load.errors + r.load.timeouts, 0),
      });
    }
    return { rate: scale.rate, rateSec: direct.rateSec, fullLoadSec: direct.measureSec, steps };
  } finally {
    await stopHelper(worker);
  }
}
