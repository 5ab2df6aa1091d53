/**
 * `npm run soak [-- --minutes 15] [-- --rate 10] [-- --sample-seconds 5] [-- --out DIR]`
 *
 * A bounded soak of both services on a control plane of its own (loopback only): the admission
 * service (registered in url mode) and the reconciler, a seeded namespace (clusters connected to
 * ConfigMaps, a Secret and each other, with member pods), then a steady rate of operations through the
 * API server for --minutes: dry-run kdcluster creates that must be admitted and mutated or denied,
 * ConfigMap data changes that fan out to pods, ConfigMaps created and deleted, connection changes on
 * real kdclusters, member pods deleted and created again. Every few seconds it samples, for each service
 * process: RSS (/proc/<pid>/status VmRSS), open descriptors (/proc/<pid>/fd), and from /metrics the
 * event-loop lag (prom-client's nodejs_eventloop_lag_p99_seconds, a histogram reset at every scrape,
 * so one value per interval) and the V8 heap in use. At the end it waits until every pod holds the
 * current configmeta, then writes test/reliability/results/soak-<time>.md and .json and says whether
 * RSS, descriptors and lag stayed flat by these criteria (after a warm-up of max(60 s, 10 %) of the run,
 * comparing the first and the last third of the remaining samples):
 *
 *   RSS flat          median RSS of the last third ≤ 1.10 × the highest RSS up to the end of the first
 *                     third (V8 returns pages and takes them again: a trough is no baseline)
 *   heap flat         median V8 heap in use of the last third ≤ 1.25 × that of the first third
 *   fds flat          the fewest open fds of the last third ≤ the most of the first third + 5 (the floor:
 *                     connections the API server opens in a burst close after its 90 s idle timeout)
 *   lag flat          median p99 lag of the last third ≤ 2 × median of the first third + 5 ms
 *   no failures       every operation got the answer it must get (0 failed admissions or writes)
 *   converged         every member pod holds its cluster's current configmeta within 60 s of the end
 *
 * With --hostile, issue 27's hostile mix joins the same run (bounded, all on loopback): kdapp reviews at
 * the body limit with megabyte version ranges and kdcluster reviews with 5,001 connections posted
 * straight to the admission service (each must be refused, told busy or, for a 7 MB body, have its
 * connection dropped), bursts of ten times the in-flight limit of reviews, a tenant's labelled and
 * unreferenced ConfigMaps of 900 KiB created and deleted (at most 40 alive), and Secrets squatting the
 * private Secret name of new kdclusters with a Secret connection (each must still be untouched when
 * removed). The verdicts then also require both processes never to have restarted. (Hanging reconnect
 * hooks need running containers: they are covered by test/node/reconnect-hook.test.ts, not here.)
 *
 * Exit code 0 when all hold. Not part of `npm test`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as prettier from 'prettier';
import { errorStatus, KubeClient } from '@kd-connections/shared/runtime';
import { startControlPlane } from '../controlplane/controlplane.js';
import { benchEnv } from '../bench/env.js';
import { apply, configMap, getJson, kdApp, kdCluster, memberPod, secret } from '../support/kd-objects.js';
import { mib, openFds, procStatus } from './admission-support.js';
import { hugeRangeAppReview, manyConnectionsReview, outcome, post, type Timed } from './admission-load-support.js';
import { sampleValue } from '../support/prometheus-text.js';
import { installCrds } from '../support/crds.js';
import { startAdmission, startReconciler } from '../support/services.js';
import { registerWebhooks, waitUntilLive, WEBHOOK_NAMES } from '../support/webhook-configurations.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '15' },
    rate: { type: 'string', default: '10' },
    'sample-seconds': { type: 'string', default: '5' },
    out: { type: 'string' },
    hostile: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(
    'npm run soak -- [--minutes 15] [--rate 10 (operations/s)] [--sample-seconds 5] [--hostile] [--out test/reliability/results]',
  );
  process.exit(0);
}
const MINUTES = Number(values.minutes);
const RATE = Number(values.rate);
const SAMPLE_MS = Number(values['sample-seconds']) * 1000;
if (!(MINUTES > 0 && MINUTES <= 24 * 60) || !(RATE > 0 && RATE <= 200) || !(SAMPLE_MS >= 1000)) {
  console.error('--minutes must be in (0, 1440], --rate in (0, 200], --sample-seconds ≥ 1');
  process.exit(2);
}
const OUT = values.out ?? fileURLToPath(new URL('./results/', import.meta.url));
const MAX_IN_FLIGHT = 8;
const CLUSTERS = 10;
const CONFIGMAPS = 10;
const say = (m: string) => console.log(`[soak ${new Date().toISOString().slice(11, 19)}] ${m}`);

// ---------------------------------------------------------------------------------------------------

interface ProcessSample {
  rssMiB: number;
  fds: number;
  /** p99 event-loop delay over the last interval, ms (prom-client's monitor: 10 ms resolution included). */
  lagP99Ms: number;
  /** Event-loop lag measured at the scrape (prom-client's setImmediate probe), ms. */
  lagNowMs: number;
  heapUsedMiB: number;
}
interface Sample {
  t: number;
  ops: number;
  failures: number;
  load1: number;
  admission: ProcessSample;
  reconciler: ProcessSample;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;
/** Least-squares slope of y over t (seconds), per minute. */
function slopePerMinute(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mt = points.reduce((s, p) => s + p[0], 0) / n;
  const my = points.reduce((s, p) => s + p[1], 0) / n;
  const num = points.reduce((s, p) => s + (p[0] - mt) * (p[1] - my), 0);
  const den = points.reduce((s, p) => s + (p[0] - mt) ** 2, 0);
  return den === 0 ? 0 : (num / den) * 60;
}

interface Verdict {
  name: string;
  pass: boolean;
  detail: string;
}

function judge(service: 'admission' | 'reconciler', samples: Sample[], durationS: number): Verdict[] {
  const warm = Math.max(60, durationS * 0.1);
  const steady = samples.filter((s) => s.t >= warm);
  const third = Math.max(1, Math.floor(steady.length / 3));
  const first = steady.slice(0, third).map((s) => s[service]);
  const last = steady.slice(-third).map((s) => s[service]);
  if (steady.length < 3) {
    return [{ name: `${service}: enough samples`, pass: false, detail: `${steady.length} samples after warm-up` }];
  }
  const rss0 = median(first.map((p) => p.rssMiB));
  const rss1 = median(last.map((p) => p.rssMiB));
  // The highest RSS the process had already reached by the end of the first third (warm-up included):
  // V8 returns pages and takes them again (a 30 MiB swing with a flat heap is common), so the level
  // the last third is held to is the one the load had already driven it to, not a trough.
  const endOfFirst = steady[third - 1]!.t;
  const rssEarlyMax = Math.max(...samples.filter((s) => s.t <= endOfFirst).map((s) => s[service].rssMiB));
  const heap0 = median(first.map((p) => p.heapUsedMiB));
  const heap1 = median(last.map((p) => p.heapUsedMiB));
  // The floor: a burst of load makes the API server open more kept-alive connections, which close
  // again after its 90 s idle timeout; a leak raises the floor, a burst only the peaks.
  const fd0 = Math.max(...first.map((p) => p.fds));
  const fd1 = Math.min(...last.map((p) => p.fds));
  const fdPeak = Math.max(...steady.map((s) => s[service].fds));
  const lag0 = median(first.map((p) => p.lagP99Ms));
  const lag1 = median(last.map((p) => p.lagP99Ms));
  const slope = slopePerMinute(steady.map((s) => [s.t, s[service].rssMiB]));
  return [
    {
      name: `${service}: RSS flat`,
      pass: rss1 <= rssEarlyMax * 1.1,
      detail:
        `median of the last third ${round(rss1)} MiB vs ${round(rssEarlyMax)} MiB, the most it used up to the end of ` +
        `the first third (limit +10 %); medians first → last third ${round(rss0)} → ${round(rss1)} MiB; slope ${round(slope, 2)} MiB/min`,
    },
    {
      name: `${service}: V8 heap in use flat`,
      pass: heap1 <= heap0 * 1.25,
      detail: `median ${round(heap0)} → ${round(heap1)} MiB (${round(((heap1 - heap0) / heap0) * 100)} %, limit +25 %)`,
    },
    {
      name: `${service}: descriptors flat`,
      pass: fd1 <= fd0 + 5,
      detail: `fewest in the last third ${fd1} vs most in the first ${fd0} (limit +5); peak ${fdPeak}`,
    },
    {
      name: `${service}: event-loop lag flat`,
      pass: lag1 <= 2 * lag0 + 5,
      detail: `median p99 ${round(lag0, 2)} → ${round(lag1, 2)} ms (limit 2× + 5 ms); max ${round(Math.max(...steady.map((s) => s[service].lagP99Ms)), 2)} ms`,
    },
  ];
}

// ---------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const startedAt = new Date();
  say(`control plane (loopback), ${MINUTES} min at ${RATE} operations/s, a sample every ${SAMPLE_MS / 1000} s`);
  const cp = await startControlPlane({ audit: false });
  const stops: (() => Promise<unknown>)[] = [() => cp.stop()];
  try {
    const ns = `kd-soak-${Math.random().toString(36).slice(2, 8)}`;
    const env = await benchEnv(cp, ns);
    await installCrds(env);
    const admission = await startAdmission(env, [`--system-namespace=${ns}`]);
    stops.unshift(() => admission.stop());
    const hooks = await registerWebhooks(env, admission);
    stops.unshift(() => hooks.remove());
    await waitUntilLive(env);
    const reconciler = await startReconciler(env);
    stops.unshift(() => reconciler.stop());

    // Seed: clusters connected to ConfigMaps, one Secret, each other (a chain), 2 member pods each.
    const cms = Array.from({ length: CONFIGMAPS }, (_, i) => `cm-${i}`);
    const clusters = Array.from({ length: CLUSTERS }, (_, i) => `c-${i}`);
    await apply(env, [
      kdApp('soak-app', { category: 'soak', connectable_to: [{ category: 'soak' }] }),
      ...cms.map((n) => configMap(n, { v: '0' })),
      secret('soak-secret', { password: 'not-a-real-secret' }),
    ]);
    await apply(
      env,
      clusters.map((c, i) =>
        kdCluster(
          c,
          'soak-app',
          {
            configmaps: [cms[i % CONFIGMAPS]!, cms[(i + 1) % CONFIGMAPS]!],
            ...(i % 3 === 0 ? { secrets: ['soak-secret'] } : {}),
            ...(i > 0 ? { clusters: [clusters[i - 1]!] } : {}),
          },
          ['controller'],
          2,
        ),
      ),
    );
    await apply(
      env,
      clusters.flatMap((c) => [memberPod(`${c}-0`, c), memberPod(`${c}-1`, c)]),
    );
    say(`seeded ${CLUSTERS} clusters, ${CONFIGMAPS} ConfigMaps, ${CLUSTERS * 2} member pods; waiting for configmeta`);
    const seeded = await converged(env, clusters, 120_000);
    if (!seeded.ok) throw new Error(`seed did not converge: ${seeded.detail}`);

    // The load.
    const api = new KubeClient(env.kc, 'kd-soak');
    const G = '/apis/kubedirector.hpe.com/v1beta1';
    const counts: Record<string, number> = {};
    const failures: string[] = [];
    let ops = 0;
    let skipped = 0;
    let inFlight = 0;
    let tmpSeq = 0;
    const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)]!;
    const recreating = new Set<string>();
    const dryCreate = (name: string, spec: Record<string, unknown>) =>
      api.request<any>('POST', `${G}/namespaces/${ns}/kubedirectorclusters`, {
        query: { dryRun: 'All' },
        body: { apiVersion: 'kubedirector.hpe.com/v1beta1', kind: 'KubeDirectorCluster', metadata: { name }, spec },
      });
    const OPS: [string, number, () => Promise<void>][] = [
      [
        'dry-run create (admitted, mutated)',
        30,
        async () => {
          const got = await dryCreate('soak-allowed', {
            app: 'soak-app',
            roles: [{ id: 'a', members: 1 }],
            connections: { configmaps: [pick(cms)] },
          });
          if (got.spec?.configMetaGenerator !== 1) throw new Error('not mutated (configMetaGenerator ≠ 1)');
        },
      ],
      [
        'dry-run create (denied)',
        20,
        async () => {
          try {
            await dryCreate('soak-denied', { app: 'no-such-app', roles: [{ id: 'a', members: 1 }] });
          } catch (e) {
            const msg = (e as Error).message;
            // Denied by the validating webhook with its message, not failed calling it (500).
            if (errorStatus(e) === 403 && msg.includes(WEBHOOK_NAMES.validateCluster) && msg.includes('not found'))
              return;
            throw e;
          }
          throw new Error('a create with a missing app was admitted');
        },
      ],
      [
        'ConfigMap data change (fan-out)',
        25,
        async () => {
          await api.request('PATCH', `/api/v1/namespaces/${ns}/configmaps/${pick(cms)}`, {
            body: { data: { v: String(Date.now()) } },
            contentType: 'application/merge-patch+json',
          });
        },
      ],
      [
        'ConfigMap create + delete',
        10,
        async () => {
          const n = tmpSeq++;
          await api.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
            body: configMap(`tmp-${n}`, { n: String(n) }),
          });
          if (n >= 5) await api.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/tmp-${n - 5}`);
        },
      ],
      [
        'kdcluster connection change',
        10,
        async () => {
          const i = Math.floor(Math.random() * CLUSTERS);
          const set = Math.random() < 0.5 ? [cms[i % CONFIGMAPS]!] : [cms[i % CONFIGMAPS]!, cms[(i + 1) % CONFIGMAPS]!];
          await api.request('PATCH', `${G}/namespaces/${ns}/kubedirectorclusters/${clusters[i]}`, {
            body: { spec: { connections: { configmaps: set } } },
            contentType: 'application/merge-patch+json',
          });
        },
      ],
      [
        'member pod delete + create',
        5,
        async () => {
          // One recreation of a pod at a time: a second one's delete would find it gone (404), the
          // harness's own race, not the product's.
          const free = clusters.filter((x) => !recreating.has(`${x}-1`));
          if (free.length === 0) return;
          const c = pick(free);
          const name = `${c}-1`;
          recreating.add(name);
          try {
            await recreate(c, name);
          } finally {
            recreating.delete(name);
          }
        },
      ],
    ];
    async function recreate(c: string, name: string): Promise<void> {
      await api.request('DELETE', `/api/v1/namespaces/${ns}/pods/${name}`, { query: { gracePeriodSeconds: 0 } });
      for (let attempt = 0; ; attempt++) {
        try {
          const pod = await api.request<any>('POST', `/api/v1/namespaces/${ns}/pods`, {
            body: memberPod(name, c, 'controller', { mutated: false }),
          });
          if (!(pod.spec?.volumes ?? []).some((v: any) => v.name === 'kd-configmeta'))
            throw new Error('member pod not mutated (no configmeta volume)');
          return;
        } catch (e) {
          // The delete may still be in progress (409 AlreadyExists): that is not a failure.
          if (errorStatus(e) !== 409 || attempt > 20) throw e;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }
    if (values.hostile) OPS.push(...hostileOps({ env, admission, api, ns, clusters }));
    const total = OPS.reduce((s, o) => s + o[1], 0);
    const choose = () => {
      let r = Math.random() * total;
      for (const o of OPS) if ((r -= o[1]) < 0) return o;
      return OPS[0]!;
    };

    const t0 = Date.now();
    const samples: Sample[] = [];
    const scrape = async (url: string, https: boolean) =>
      https ? await admission.metrics() : await (await fetch(url)).text();
    const processSample = async (pid: number, metrics: string, prefix: string): Promise<ProcessSample> => {
      const st = procStatus(pid);
      return {
        rssMiB: mib(st.rssKiB),
        fds: openFds(pid),
        lagP99Ms: round(sampleValue(metrics, `${prefix}nodejs_eventloop_lag_p99_seconds`) * 1000, 3),
        lagNowMs: round(sampleValue(metrics, `${prefix}nodejs_eventloop_lag_seconds`) * 1000, 3),
        heapUsedMiB: mib(sampleValue(metrics, `${prefix}nodejs_heap_size_used_bytes`) / 1024),
      };
    };
    const sample = async () => {
      const [am, rm] = [await scrape('', true), await scrape(`http://127.0.0.1:${reconciler.port}/metrics`, false)];
      samples.push({
        t: round((Date.now() - t0) / 1000),
        ops,
        failures: failures.length,
        load1: round(loadavg()[0]!, 2),
        admission: await processSample(admission.pid, am, ''),
        reconciler: await processSample(reconciler.child.pid!, rm, ''),
      });
    };
    await sample();
    const sampler = setInterval(
      () => void sample().catch((e) => failures.push(`sampling: ${(e as Error).message}`)),
      SAMPLE_MS,
    );
    let lastReport = Date.now();
    const ticker = setInterval(() => {
      if (inFlight >= MAX_IN_FLIGHT) {
        skipped++;
        return;
      }
      const [name, , run] = choose();
      inFlight++;
      ops++;
      counts[name] = (counts[name] ?? 0) + 1;
      run()
        .catch((e) => failures.push(`${new Date().toISOString()} ${name}: ${(e as Error).message.slice(0, 300)}`))
        .finally(() => inFlight--);
      if (Date.now() - lastReport > 60_000) {
        lastReport = Date.now();
        const s = samples[samples.length - 1]!;
        say(
          `${round((Date.now() - t0) / 60_000)} min: ${ops} operations, ${failures.length} failed; admission ${s.admission.rssMiB} MiB / ${s.admission.fds} fds, reconciler ${s.reconciler.rssMiB} MiB / ${s.reconciler.fds} fds; load ${s.load1}`,
        );
      }
    }, 1000 / RATE);
    await new Promise((r) => setTimeout(r, MINUTES * 60_000));
    clearInterval(ticker);
    while (inFlight > 0) await new Promise((r) => setTimeout(r, 50));
    clearInterval(sampler);
    await sample();
    const durationS = (Date.now() - t0) / 1000;
    say(
      `load done: ${ops} operations in ${round(durationS)} s, ${failures.length} failed, ${skipped} ticks skipped (in-flight cap)`,
    );

    const end = Date.now();
    const finalState = await converged(env, clusters, 60_000);
    const convergedS = round((Date.now() - end) / 1000);
    const errorLogs = [
      ...admission.logs().filter((l) => l.level === 'error'),
      ...reconciler.logs().filter((l) => l.level === 'error'),
    ];

    const verdicts: Verdict[] = [
      ...judge('admission', samples, durationS),
      ...judge('reconciler', samples, durationS),
      { name: 'no failed operations', pass: failures.length === 0, detail: `${failures.length} of ${ops}` },
      {
        name: 'converged after the load',
        pass: finalState.ok,
        detail: finalState.ok ? `all ${CLUSTERS * 2} pods current ${convergedS} s after the end` : finalState.detail,
      },
      { name: 'no error-level log lines', pass: errorLogs.length === 0, detail: `${errorLogs.length}` },
      ...(values.hostile
        ? [
            {
              name: 'no restart of either service',
              pass: !admission.exited && !reconciler.exited,
              detail: `admission pid ${admission.pid} ${admission.exited ? 'exited' : 'running'}, reconciler pid ${reconciler.child.pid} ${reconciler.exited ? 'exited' : 'running'}`,
            },
          ]
        : []),
    ];
    const report = {
      startedAt: startedAt.toISOString(),
      machine: { cores: cpus().length, cpu: cpus()[0]?.model, node: process.version, loadBefore: samples[0]?.load1 },
      parameters: {
        hostile: values.hostile,
        minutes: MINUTES,
        rate: RATE,
        sampleSeconds: SAMPLE_MS / 1000,
        clusters: CLUSTERS,
        configmaps: CONFIGMAPS,
        pods: CLUSTERS * 2,
      },
      operations: { total: ops, perSecond: round(ops / durationS, 2), skippedTicks: skipped, byKind: counts },
      failures: failures.slice(0, 50),
      errorLogs: errorLogs.slice(0, 20),
      verdicts,
      pass: verdicts.every((v) => v.pass),
      samples,
    };
    mkdirSync(OUT, { recursive: true });
    const stamp = startedAt.toISOString().replace(/[:.]/g, '-').slice(0, 19);
    const base = join(OUT, `soak-${stamp}`);
    const options = (await prettier.resolveConfig(`${base}.json`)) ?? {};
    writeFileSync(`${base}.json`, await prettier.format(JSON.stringify(report), { ...options, parser: 'json' }));
    writeFileSync(`${base}.md`, markdown(report));
    for (const v of verdicts) say(`${v.pass ? 'PASS' : 'FAIL'} ${v.name}: ${v.detail}`);
    say(`report: ${base}.md and .json`);
    return report.pass ? 0 : 1;
  } finally {
    for (const stop of stops) await stop().catch(() => undefined);
  }
}

/**
 * The hostile operations (issue 27 items 1–3, 5, 7), mixed in with the ordinary ones at low weights: each
 * "succeeds" when the services answer as they must, and fails the run otherwise.
 */
function hostileOps(o: {
  env: Awaited<ReturnType<typeof benchEnv>>;
  admission: Awaited<ReturnType<typeof startAdmission>>;
  api: KubeClient;
  ns: string;
  clusters: string[];
}): [string, number, () => Promise<void>][] {
  const { env, admission, api, ns } = o;
  const ca = env.info.webhookCaPem;
  let seq = 0;
  const expectOutcome = (a: Timed, ok: RegExp, what: string) => {
    const got = outcome(a);
    if (!ok.test(got)) throw new Error(`${what}: answered ${JSON.stringify(got.slice(0, 160))}`);
  };
  const floods: string[] = [];
  const squats: string[] = [];
  const squatData = { 'priv_configmeta.json': Buffer.from('{"forged":1}').toString('base64') };
  return [
    [
      'hostile: kdapp review at the body limit, megabyte version ranges',
      2,
      async () => {
        const a = await post(
          admission.port,
          '/validate-kdapp',
          hugeRangeAppReview(ns, seq++, 7 * 1024 * 1024 - 4096),
          ca,
          false,
          true,
        );
        expectOutcome(a, /^(denied: .*at most 128|busy|reset)/s, 'huge kdapp review');
      },
    ],
    [
      'hostile: kdcluster review with 5,001 connections',
      2,
      async () => {
        const a = await post(
          admission.port,
          '/validate-kdcluster',
          manyConnectionsReview(ns, `wide-${seq++}`, 'soak-app', { configmaps: 5001 }),
          ca,
        );
        expectOutcome(a, /^(denied: .*has 5001 entries; at most 100|busy)/s, '5,001 connections');
      },
    ],
    [
      'hostile: 40 reviews at once (1 MiB, 100 missing ConfigMaps each)',
      1,
      async () => {
        const n = seq++;
        const all = await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            post(
              admission.port,
              '/validate-kdcluster',
              manyConnectionsReview(ns, `burst-${n}-${i}`, 'soak-app', { configmaps: 100 }, 1024 * 1024),
              ca,
              false,
              true,
            ),
          ),
        );
        for (const a of all) expectOutcome(a, /^(denied|busy|reset)/s, 'burst review');
      },
    ],
    [
      "hostile: a tenant's labelled, unreferenced ConfigMap of 900 KiB",
      3,
      async () => {
        const name = `flood-${seq++}`;
        await api.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
          body: {
            ...configMap(name, { blob: 'x'.repeat(900 * 1024) }),
            metadata: { name, labels: { 'kubedirector.hpe.com/cmType': 'flood' } },
          },
        });
        floods.push(name);
        if (floods.length > 40) await api.request('DELETE', `/api/v1/namespaces/${ns}/configmaps/${floods.shift()}`);
      },
    ],
    [
      "hostile: a Secret squatting a new kdcluster's private Secret name",
      1,
      async () => {
        const c = `squat-${seq++}`;
        const name = `kd-configmeta-private-${c}`;
        await api.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
          body: { apiVersion: 'v1', kind: 'Secret', metadata: { name }, data: squatData },
        });
        await api.request('POST', `/apis/kubedirector.hpe.com/v1beta1/namespaces/${ns}/kubedirectorclusters`, {
          body: kdCluster(c, 'soak-app', { secrets: ['soak-secret'] }),
        });
        squats.push(c);
        if (squats.length <= 3) return;
        const old = squats.shift()!;
        const s = await api.request<any>('GET', `/api/v1/namespaces/${ns}/secrets/kd-configmeta-private-${old}`);
        if (s.metadata.ownerReferences || JSON.stringify(s.data) !== JSON.stringify(squatData))
          throw new Error(`the squatting Secret of ${old} was changed: ${JSON.stringify(s.metadata.ownerReferences)}`);
        await api.request('DELETE', `/apis/kubedirector.hpe.com/v1beta1/namespaces/${ns}/kubedirectorclusters/${old}`);
        await api.request('DELETE', `/api/v1/namespaces/${ns}/secrets/kd-configmeta-private-${old}`);
      },
    ],
  ];
}

async function converged(
  env: Awaited<ReturnType<typeof benchEnv>>,
  clusters: string[],
  timeoutMs: number,
): Promise<{ ok: boolean; detail: string }> {
  const end = Date.now() + timeoutMs;
  let detail = '';
  for (;;) {
    const list = (await getJson(env, ['kubedirectorclusters.kubedirector.hpe.com'])).items as any[];
    const pods = (await getJson(env, ['pods'])).items as any[];
    const behind: string[] = [];
    for (const name of clusters) {
      const c = list.find((x) => x.metadata.name === name);
      const want = c?.spec?.configMetaGenerator ?? 0;
      const synced = (c?.status?.conditions ?? []).some(
        (x: any) => x.type === 'ConfigMetaSynced' && x.status === 'True',
      );
      if (!c || c.status?.lastConfigMetaGenerator !== want || !synced) behind.push(`${name} (status)`);
      for (const p of pods.filter((x) => x.metadata.labels?.['kubedirector.hpe.com/kdcluster'] === name)) {
        if (p.metadata.annotations?.['kubedirector.hpe.com/configmeta-generator'] !== String(want))
          behind.push(p.metadata.name);
      }
    }
    detail = behind.length ? `behind: ${behind.slice(0, 10).join(', ')}` : 'all current';
    if (behind.length === 0) return { ok: true, detail };
    if (Date.now() > end) return { ok: false, detail };
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function markdown(r: any): string {
  const s: Sample[] = r.samples;
  const every = Math.max(1, Math.round(60_000 / SAMPLE_MS));
  const rows = s
    .filter((_, i) => i % every === 0 || i === s.length - 1)
    .map(
      (x) =>
        `| ${x.t} | ${x.ops} | ${x.failures} | ${x.admission.rssMiB} | ${x.admission.heapUsedMiB} | ${x.admission.fds} | ${x.admission.lagP99Ms} / ${x.admission.lagNowMs} | ${x.reconciler.rssMiB} | ${x.reconciler.heapUsedMiB} | ${x.reconciler.fds} | ${x.reconciler.lagP99Ms} / ${x.reconciler.lagNowMs} | ${x.load1} |`,
    );
  return [
    `# Soak ${r.startedAt}`,
    '',
    `${r.pass ? '**PASS**' : '**FAIL**'} — ${r.parameters.hostile ? 'with the hostile mix, ' : ''}${r.parameters.minutes} min at ${r.parameters.rate} operations/s through the API server ` +
      `(${r.operations.total} operations, ${r.operations.perSecond}/s achieved), both services, ` +
      `${r.parameters.clusters} clusters / ${r.parameters.configmaps} ConfigMaps / ${r.parameters.pods} member pods. ` +
      `Machine: ${r.machine.cores} cores (${r.machine.cpu}), Node ${r.machine.node}; shared with other work, so ` +
      `absolute figures are noisy (load average column).`,
    '',
    '| criterion | result | detail |',
    '|---|---|---|',
    ...r.verdicts.map((v: Verdict) => `| ${v.name} | ${v.pass ? 'pass' : '**FAIL**'} | ${v.detail} |`),
    '',
    'Criteria (after a warm-up of max(60 s, 10 %) of the run; first vs last third of the remaining samples): ' +
      'median RSS of the last third ≤ 1.10 × the highest RSS up to the end of the first third (V8 gives pages ' +
      'back and takes them again, so a trough is no baseline); median V8 heap in use grows ≤ 25 %; ' +
      'the fewest open descriptors of the last third ≤ the most of the first third + 5 (the floor: kept-alive ' +
      'connections the API server opens in a burst close after its 90 s idle timeout); ' +
      'median p99 event-loop lag ≤ 2× + 5 ms; ' +
      '0 failed operations; every pod current within 60 s after the load; no error-level log lines. ' +
      "Lag p99 is prom-client's nodejs_eventloop_lag_p99_seconds (reset at each scrape, so one value per " +
      'interval; its monitor samples every 10 ms, so an idle loop reads about 10 ms); "lag now" is ' +
      'nodejs_eventloop_lag_seconds at the scrape. RSS from /proc/<pid>/status, descriptors from /proc/<pid>/fd.',
    '',
    `Operations: ${Object.entries(r.operations.byKind)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
    '',
    '| t (s) | ops | failed | adm RSS MiB | adm heap MiB | adm fds | adm lag p99 / now ms | rec RSS MiB | rec heap MiB | rec fds | rec lag p99 / now ms | load1 |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    r.failures.length
      ? `Failures (first ${r.failures.length}):\n\n${r.failures.map((f: string) => `- ${f}`).join('\n')}\n`
      : '',
  ].join('\n');
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
