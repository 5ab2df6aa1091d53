/**
 * Hostile load against the RUNNING admission service (admission/dist/main.js, caches on the real
 * control plane), posted straight to the service as anyone who can reach it could (issue 27, items
 * 1–3):
 *
 * 1. memory: 100 concurrent validate-kdapp reviews at the body limit, each with six connectable_to
 *    versions that are unique ranges of a megabyte (what the version memos used to keep whole) → the
 *    peak RSS stays under 60 % of the chart's admission memory limit, /readyz stays green, and a
 *    legitimate review sent during the flood is answered every time;
 * 2. lookups: a kdcluster review with 5,001 ConfigMap connections is refused before any lookup; a
 *    review whose lookups outlast its deadline gets "could not check N connections in time";
 * 3. concurrency: ten times the in-flight limit of reviews at once → never more than the limit in
 *    flight (the service's own high-water mark), the excess answered (queued or "busy"), memory under
 *    the chart's limit.
 *
 * Latencies are printed (the figures in docs/reliability.md), never asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { parse } from 'yaml';
import { useTestEnv } from '../support/cluster.js';
import { apply, kdApp, kdCluster } from '../support/kd-objects.js';
import { repoPath } from '../support/processes.js';
import { metricSum } from '../support/prometheus-text.js';
import { installCrds } from '../support/crds.js';
import { type RunningAdmission, startAdmission } from '../support/services.js';
import { mib, procStatus } from './admission-support.js';
import {
  APP_KIND,
  hugeRangeAppReview,
  manyConnectionsReview,
  outcome,
  percentile,
  pool,
  post,
  review,
  sample,
  type Timed,
} from './admission-load-support.js';

const env = useTestEnv();
let svc: RunningAdmission;

const BODY_LIMIT = 7 * 1024 * 1024;
/** The admission container's memory limit in the chart's values, MiB. */
const CHART_LIMIT_MIB = (() => {
  const values = parse(readFileSync(repoPath('charts/kd-connections/values.yaml'), 'utf8')) as {
    admission: { resources: { limits: { memory: string } } };
  };
  const m = /^(\d+)Mi$/.exec(values.admission.resources.limits.memory);
  if (!m) throw new Error(`unexpected admission memory limit ${values.admission.resources.limits.memory}`);
  return Number(m[1]);
})();

const ca = () => env.info.webhookCaPem;

function legitAppReview(n: number): Buffer {
  return review(
    APP_KIND,
    env.namespace,
    kdApp(`legit-${n}`, { category: 'load', connectable_to: [{ category: 'load' }] }),
  );
}

/** GET /readyz as the chart's readiness probe does: 0 when no answer within its timeoutSeconds (2). */
function readyz(s: RunningAdmission): Promise<number> {
  return new Promise((resolve) => {
    const req = https.get(s.url('/readyz'), { ca: ca(), agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => {
      req.destroy();
      resolve(0);
    });
    req.on('error', () => resolve(0));
  });
}

/** Sends legitimate kdapp reviews one after another until `done` resolves; every one must be allowed. */
async function legitimateTraffic(s: RunningAdmission, done: Promise<unknown>): Promise<Timed[]> {
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => {});
  const out: Timed[] = [];
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let n = 0; !finished || out.length < 5; n++) {
      out.push(await post(s.port, '/validate-kdapp', legitAppReview(n), ca(), agent));
    }
  } finally {
    agent.destroy();
  }
  return out;
}

beforeAll(async () => {
  await installCrds(env);
  await apply(env, [
    kdApp('load-app', { category: 'load', connectable_to: [{ category: 'load' }] }),
    kdCluster('peer', 'load-app'),
  ]);
  svc = await startAdmission(env, [`--system-namespace=${env.namespace}`]);
}, 120_000);

afterAll(async () => {
  await svc?.stop();
});

describe('1. memory: reviews built to make the service hold as much as it can', () => {
  it('100 concurrent kdapp reviews at the body limit with megabyte version ranges: peak RSS under 60 % of the chart limit, ready, legitimate reviews answered', async () => {
    // Measured 53-54 % of the limit, alone and with both cores kept busy (docs/reliability.md); before the
    // collections of body garbage and the 2 MiB young generation 57-60 %, before the review limits 1,404 MiB.
    const bound = 0.6 * CHART_LIMIT_MIB;
    const before = procStatus(svc.pid);
    const answeredByService = async () =>
      metricSum(await svc.metrics(), 'kd_admission_requests_total', { webhook: 'validate-kdapp' });
    const countedBefore = await answeredByService();
    const sampler = sample(svc.pid, () => readyz(svc));
    const flood = pool(100, 100, (i) =>
      post(svc.port, '/validate-kdapp', hugeRangeAppReview(env.namespace, i, BODY_LIMIT - 4096), ca(), false, true),
    );
    const legit = legitimateTraffic(svc, flood);
    const attacks = await flood;
    const answered = await legit;
    await sampler.stop();
    const after = procStatus(svc.pid);
    const countedAfter = await answeredByService();
    const figures = {
      chartLimitMiB: CHART_LIMIT_MIB,
      rssBeforeMiB: mib(before.rssKiB),
      rssAfterMiB: mib(after.rssKiB),
      rssPeakMiB: mib(after.hwmKiB),
      attackStatuses: countBy(attacks.map(outcome)),
      attackP99Ms: Math.round(
        percentile(
          attacks.map((a) => a.ms),
          99,
        ),
      ),
      legitimate: answered.length,
      legitimateP50Ms: Math.round(
        percentile(
          answered.map((a) => a.ms),
          50,
        ),
      ),
      legitimateP99Ms: Math.round(
        percentile(
          answered.map((a) => a.ms),
          99,
        ),
      ),
      legitimateMaxMs: Math.round(Math.max(...answered.map((a) => a.ms))),
      answeredByService: countedAfter - countedBefore,
      readyChecks: sampler.readyChecks(),
      notReady: sampler.notReady(),
    };
    console.log(`FIGURES item 1 (memory): ${JSON.stringify(figures)}`);

    // The service answered every request it was sent, attacks and legitimate ones: a refusal naming what
    // is too long, or "busy" once its bytes in flight were taken. The attacker's side may still see a
    // reset where the server stopped draining an unread 7 MB body after its bound (discardRest) and
    // closed: how many depends on the machine's load, so the count is shown, not judged.
    expect(figures.answeredByService).toBe(attacks.length + answered.length);
    for (const a of attacks) expect(outcome(a)).toMatch(/^(denied: .*at most 128|busy|reset)/s);
    expect(
      answered.filter((a) => a.response?.allowed !== true).map((a) => `${a.status} ${a.text.slice(0, 200)}`),
    ).toEqual([]);
    expect(figures.notReady).toBe(0);
    expect(after.hwmKiB / 1024).toBeLessThan(bound);
  }, 300_000);
});

describe('2. lookups: one review cannot make the service read without bound', () => {
  it('a kdcluster review with 5,001 ConfigMap connections is refused before any lookup', async () => {
    const lookups = async () => metricSum(await svc.metrics(), 'kd_admission_lookups_total');
    const before = await lookups();
    const got = await post(
      svc.port,
      '/validate-kdcluster',
      manyConnectionsReview(env.namespace, 'wide', 'load-app', { configmaps: 5001 }),
      ca(),
    );
    const after = await lookups();
    console.log(
      `FIGURES item 2 (5,001 connections): ${JSON.stringify({ ms: Math.round(got.ms), lookups: after - before, status: got.status, message: got.response?.status?.message?.slice(0, 200) })}`,
    );
    expect(got.status).toBe(200);
    expect(got.response?.allowed).toBe(false);
    expect(got.response?.status?.message).toContain('spec.connections.configmaps: has 5001 entries; at most 100');
    expect(after - before).toBe(0);
  }, 120_000);

  it('a review whose lookups outlast its deadline is denied with "could not check N connections in time"', async () => {
    // A deadline far below what 300 live reads of missing objects take, so it is always passed.
    const quick = await startAdmission(env, [`--system-namespace=${env.namespace}`, '--review-deadline=20ms']);
    try {
      const got = await post(
        quick.port,
        '/validate-kdcluster?timeout=3s',
        manyConnectionsReview(env.namespace, 'slow', 'load-app', { configmaps: 100, secrets: 100, clusters: 100 }),
        ca(),
      );
      console.log(
        `FIGURES item 2 (deadline): ${JSON.stringify({ ms: Math.round(got.ms), status: got.status, message: got.response?.status?.message })}`,
      );
      expect(got.status).toBe(200);
      expect(got.response?.allowed).toBe(false);
      expect(got.response?.status?.message).toMatch(/^could not check 300 connections in time/);
    } finally {
      await quick.stop();
    }
  }, 120_000);
});

describe('3. concurrency: ten times the in-flight limit at once', () => {
  it('never more than the limit in flight, the excess answered, memory under the chart limit', async () => {
    const limit = 4;
    const capped = await startAdmission(env, [`--system-namespace=${env.namespace}`, `--max-in-flight=${limit}`]);
    try {
      // Each review: 1 MiB of annotation and 100 connections to ConfigMaps that do not exist (live reads).
      const sampler = sample(capped.pid, () => readyz(capped));
      const flood = pool(10 * limit, 10 * limit, (i) =>
        post(
          capped.port,
          '/validate-kdcluster',
          manyConnectionsReview(env.namespace, `over-${i}`, 'load-app', { configmaps: 100 }, 1024 * 1024),
          ca(),
        ),
      );
      const legit = legitimateTraffic(capped, flood);
      const all = await flood;
      const answered = await legit;
      await sampler.stop();
      const text = await capped.metrics();
      const peak = metricSum(text, 'kd_admission_reviews_in_flight_max');
      const decided = [...all, ...answered].filter((a) => a.status === 200);
      const figures = {
        limit,
        sent: all.length,
        outcomes: countBy(all.map(outcome)),
        inFlightMax: peak,
        busyTotal: metricSum(text, 'kd_admission_reviews_refused_busy_total'),
        decidedP50Ms: Math.round(
          percentile(
            decided.map((a) => a.ms),
            50,
          ),
        ),
        decidedP99Ms: Math.round(
          percentile(
            decided.map((a) => a.ms),
            99,
          ),
        ),
        legitimate: answered.length,
        legitimateAllowed: answered.filter((a) => a.response?.allowed === true).length,
        legitimateP99Ms: Math.round(
          percentile(
            answered.map((a) => a.ms),
            99,
          ),
        ),
        rssPeakMiB: mib(procStatus(capped.pid).hwmKiB),
        notReady: sampler.notReady(),
      };
      console.log(`FIGURES item 3 (concurrency): ${JSON.stringify(figures)}`);
      for (const a of [...all, ...answered]) expect(outcome(a)).toMatch(/^(denied|allowed|busy)/s);
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThanOrEqual(limit);
      expect(figures.notReady).toBe(0);
      expect(procStatus(capped.pid).hwmKiB / 1024).toBeLessThan(CHART_LIMIT_MIB);
    } finally {
      await capped.stop();
    }
  }, 300_000);
});

function countBy(xs: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) {
    // Cluster names differ per review; the count is per kind of answer.
    const k = x
      .replace(/over-\d+/g, 'over-N')
      .replace(/cm-over-N-\d+/g, 'cm-…')
      .slice(0, 100);
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}
