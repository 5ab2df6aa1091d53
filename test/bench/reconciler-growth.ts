/**
 * Where reconciler cost grows (issue 31 item 6): one reconciler leads while the set of clusters (5 member
 * pods each, all connected to one ConfigMap) grows in steps, e.g. 1,000 → 50,000 pods. At each step: the
 * new objects are created and delivered to, the ConfigMap is edited (`kubectl patch`, whose start-up the
 * time includes), and the fan-out is timed until the reconciler has patched every pod (its own write
 * counter, polled every 250 ms: that is the resolution); then RSS is taken once it has been quiet for
 * SETTLE_MS, as the memory section takes the leader's. One sample per step.
 * The pods never run (no node): what grows is the caches, the plan and the writes, not the kubelet.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '../controlplane/controlplane.js';
import { apply, configMap, kdApp, kubectlOk } from '../support/kd-objects.js';
import { sleep } from '../support/processes.js';
import { type ReconcilerProcess, startReconciler } from '../support/services.js';
import { benchEnv, say, timer } from './env.js';
import { counters, createClustersAndPods, waitQuiet } from './reconciler-probes.js';
import type { Scale } from './scale.js';
import { round } from './stats.js';

const CM = 'growth-config';
const CM_TYPE = 'settings';
const PODS_PER_CLUSTER = 5;
const SETTLE_MS = 20_000;

export interface ReconcilerGrowthStep {
  pods: number;
  clusters: number;
  /** Creating this step's new clusters and pods, and the first delivery to them (until quiet for 2 s). */
  createSeconds: number;
  deliverSeconds: number;
  /** From starting `kubectl patch` of the ConfigMap (its start-up included) until every pod was patched. */
  fanoutSeconds: number;
  /** Pods ÷ fanoutSeconds (the bumps and status writes of the fan-out happen in the same time). */
  patchesPerSecond: number;
  /**
   * RSS at its highest from the edit on (the garbage of this step's delivery to its new pods included), and
   * SETTLE_MS after the reconciler went quiet.
   */
  peakRssMiB: number;
  rssMiB: number;
  heapUsedMiB: number;
  failedWrites: number;
}

export interface ReconcilerGrowthResult {
  podsPerCluster: number;
  settleSeconds: number;
  steps: ReconcilerGrowthStep[];
  /** When a step did not finish: the steps before it are kept. */
  error?: string;
}

const mib = (b: number) => round(b / 2 ** 20);

export async function reconcilerGrowth(
  cp: ControlPlane,
  scale: Scale,
  logDir?: string,
): Promise<ReconcilerGrowthResult> {
  const env = await benchEnv(cp, 'bench-growth');
  const ns = env.namespace;
  await apply(env, [
    kdApp('grow-app', { category: 'worker', roles: ['worker'] }),
    configMap(CM, { version: 'v0' }, CM_TYPE),
  ]);
  const rec: ReconcilerProcess = await startReconciler(env, { identity: 'bench-growth' });
  const result: ReconcilerGrowthResult = {
    podsPerCluster: PODS_PER_CLUSTER,
    settleSeconds: SETTLE_MS / 1000,
    steps: [],
  };
  try {
    await rec.waitForLog((l) => l.msg === 'became leader', 120_000);
    let clusters = 0;
    for (const pods of scale.growth.pods) {
      const want = Math.ceil(pods / PODS_PER_CLUSTER);
      const total = want * PODS_PER_CLUSTER;
      // Generous: the API server's patch rate on 2 cores is 100–400/s.
      const deadlineMs = 120_000 + total * 20;
      const before = await counters(rec);
      say(`reconciler growth: ${total} pods (${want - clusters} clusters more)`);
      const tc = timer();
      const made = await createClustersAndPods(env.kc, ns, {
        prefix: 'g',
        app: 'grow-app',
        start: clusters,
        clusters: want - clusters,
        podsPerCluster: PODS_PER_CLUSTER,
        configmaps: [CM],
        concurrency: scale.memory.createConcurrency,
      });
      const createSeconds = round(tc() / 1000);
      clusters = want;
      await waitQuiet(
        rec,
        'growth: delivery to the new pods',
        (c) => c.podWrites - before.podWrites >= made.pods,
        deadlineMs,
      );
      const deliverSeconds = round(tc() / 1000 - createSeconds);

      const edit = await counters(rec);
      let peak = 0;
      let fannedOutMs: number | undefined;
      const started = performance.now();
      await kubectlOk(env, [
        'patch',
        'configmap',
        CM,
        '--type=merge',
        '-p',
        JSON.stringify({ data: { version: `v${total}` } }),
      ]);
      const quiet = await waitQuiet(
        rec,
        `growth: fan-out to ${total} pods`,
        (c) => c.podWrites - edit.podWrites >= total && c.statusWrites - edit.statusWrites >= clusters,
        deadlineMs,
        {
          onSample: (c) => {
            peak = Math.max(peak, c.rssBytes);
            if (fannedOutMs === undefined && c.podWrites - edit.podWrites >= total)
              fannedOutMs = performance.now() - started;
          },
        },
      );
      await sleep(SETTLE_MS);
      const settled = await counters(rec);
      const fanoutSeconds = round(fannedOutMs! / 1000);
      const step: ReconcilerGrowthStep = {
        pods: total,
        clusters,
        createSeconds,
        deliverSeconds,
        fanoutSeconds,
        patchesPerSecond: round(total / fanoutSeconds),
        peakRssMiB: mib(Math.max(peak, quiet.rssBytes, settled.rssBytes)),
        rssMiB: mib(settled.rssBytes),
        heapUsedMiB: mib(settled.heapUsedBytes),
        failedWrites: settled.failedWrites - before.failedWrites,
      };
      result.steps.push(step);
      say(
        `reconciler growth: ${step.pods} pods: fan-out ${fanoutSeconds} s, RSS ${step.rssMiB} MiB (peak ${step.peakRssMiB})`,
      );
    }
  } catch (e) {
    result.error = e instanceof Error ? e.message : String(e);
    say(`reconciler growth: ${result.error}`);
  } finally {
    await rec.stop();
    if (logDir) writeFileSync(join(logDir, 'growth-reconciler.log'), rec.output());
    const gone = await env.kubectl(['delete', 'pods,kubedirectorclusters', '--all', '--wait=false']);
    if (gone.code !== 0) say(`reconciler growth: could not delete the section's objects: ${gone.stderr}`);
  }
  return result;
}
