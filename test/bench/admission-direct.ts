/**
 * Admission, direct: HTTPS keep-alive load of realistic kdcluster reviews against (a) the admission
 * service (node admission/dist/main.js, caches synced from the control plane) and (b) a bare
 * `node:https` server answering a fixed review with the same TLS settings — each its own process, the
 * load generator a third. Reported: throughput ratio a/b, server CPU per review (process.cpuUsage of
 * the server over the run, divided by the reviews it served), p50/p99 at fixed rates, RSS. A second
 * bare server, "minimal" (parses the review and echoes its uid: the least a working webhook does), is
 * measured at full load too, to show how the gap splits between parsing and deciding.
 */
import type { ChildProcess } from 'node:child_process';
import type { TestEnv } from '../support/cluster.js';
import { apply, kubectlOk } from '../support/kd-objects.js';
import type { BaselineKind, ServerStats } from './baseline-server.js';
import { say } from './env.js';
import type { LoadResult, LoadSpec } from './load-worker.js';
import { ask, forkHelper, httpsPost, negotiatedTls, pin, stopHelper } from './probes.js';
import { metricSum } from '../support/prometheus-text.js';
import type { GoPeer } from './go-peer.js';
import {
  benchReviews,
  deniedReviews,
  expectedAnswer,
  loadRequests,
  meanReviewBytes,
  seedObjects,
  SEED,
  type BenchReview,
} from './reviews.js';
import type { Scale } from './scale.js';
import { median, round, spread, type Spread } from './stats.js';
import { type RunningAdmission } from '../support/services.js';

/**
 * `go`: the controller-runtime peer (go-peer.ts), when it could be built and started; `ab:<name>`: an
 * admission variant of an A/B (--ab).
 */
export type Target = 'service' | BaselineKind | 'go' | `ab:${string}`;

/** An admission service variant for an A/B in one run: another checkout, other node flags, other flags. */
export interface VariantSpec {
  name: string;
  /** A checkout (built) whose admission/dist/main.js runs instead of this one's. */
  root?: string;
  /** NODE_OPTIONS for it. */
  node?: string;
  /** Extra service flags. */
  args: string[];
}

export interface Variant extends VariantSpec {
  svc: RunningAdmission;
}

/** A variant's figures next to the service's, same rounds. */
export interface VariantResult extends FullLoad {
  name: string;
  spec: VariantSpec;
  /** variant ÷ minimal reviews per second, and minimal ÷ variant CPU per review. */
  ratioToMinimal: number;
  cpuRatioToMinimal: number;
  /** service ÷ variant reviews per second, and variant ÷ service CPU per review (> 1: the service is ahead). */
  serviceRatio: number;
  serviceCpuRatio: number;
  /** Its answers compared with the service's on the load and the denied reviews. */
  answers: PeerCheck;
}

export interface ServerRun {
  target: Target;
  round?: number;
  rate?: number;
  load: LoadResult;
  /** Reviews the server counted during the run. */
  served: number;
  cpuMs: number;
  cpuPerReviewUs: number;
  rssMiB: number;
}

export interface FullLoad {
  rps: number;
  cpuPerReviewUs: number;
  p50Ms: number;
  p99Ms: number;
}

export interface DirectResult {
  reviews: { name: string; path: string; bytes: number }[];
  meanReviewBytes: number;
  lookupsPerReview: Record<string, Record<string, number>>;
  tls: Record<'service' | 'baseline', { protocol: string; cipher: string }>;
  pinned: { server: number; loadGenerator: number } | false;
  connections: number;
  throughput: {
    runs: ServerRun[];
    service: FullLoad;
    baseline: FullLoad;
    minimal: FullLoad;
    go?: FullLoad;
    /** service ÷ go reviews per second, and go ÷ service CPU per review (≥ 1 means the service is ahead). */
    ratioToGo?: number;
    cpuRatioToGo?: number;
    /** service ÷ baseline reviews per second: the figure the throughput target is stated in. */
    ratio: number;
    /** baseline ÷ service CPU per review. */
    cpuRatio: number;
    /** service ÷ minimal reviews per second, and minimal ÷ service CPU per review. */
    ratioToMinimal: number;
    cpuRatioToMinimal: number;
    /**
     * The targets' ratios round by round (each round runs the service and its peers back to back, in
     * alternating order): median and range. cpuToMinimal is service ÷ minimal CPU per review.
     */
    spreads?: { ratioToMinimal: Spread; cpuToMinimal: Spread; ratioToGo?: Spread };
  };
  rates: { rate: number; service: ServerRun; baseline: ServerRun; go?: ServerRun; variants?: ServerRun[] }[];
  /** The A/B variants (--ab), measured in the same rounds and at the same rates as the service. */
  variants?: VariantResult[];
  rss: { serviceMiB: number; baselineMiB: number; goMiB?: number };
  /** The Go peer's answers compared with the service's, field by field, on the load and the denied reviews. */
  peerCheck?: PeerCheck;
  /** Why the Go peer is missing from the run, when it is. */
  goError?: string;
  failures: number;
}

/** Seeds the namespace with what the reviews look up and marks the connected clusters ready. */
export interface PeerCheck {
  reviews: number;
  equal: number;
  denied: number;
  differences: { review: string; service: unknown; go: unknown }[];
}

/** What a webhook answer says, without what may differ in form (uid, a 200 status on an allowed answer). */
function answerOf(body: string): Record<string, unknown> {
  const r = (JSON.parse(body) as { response?: Record<string, any> }).response ?? {};
  const status = r.status as { code?: number; reason?: string; message?: string } | undefined;
  return {
    allowed: r.allowed,
    ...(r.allowed ? {} : { code: status?.code, reason: status?.reason, message: status?.message }),
    patchType: r.patchType,
    patch: r.patch ? JSON.parse(Buffer.from(r.patch as string, 'base64').toString('utf8')) : undefined,
    warnings: [...((r.warnings as string[] | undefined) ?? [])].sort(),
  };
}

/** Sends every review to both and compares the answers (the peer must do the same work to be a fair peer). */
export async function comparePeerAnswers(
  reviews: BenchReview[],
  service: (path: string) => string,
  peer: (path: string) => string,
  ca: string,
): Promise<PeerCheck> {
  const check: PeerCheck = { reviews: reviews.length, equal: 0, denied: 0, differences: [] };
  for (const r of reviews) {
    const a = answerOf((await httpsPost(service(r.path), r.body, ca)).body);
    const b = answerOf((await httpsPost(peer(r.path), r.body, ca)).body);
    if (a.allowed === false) check.denied++;
    if (JSON.stringify(a) === JSON.stringify(b)) check.equal++;
    else check.differences.push({ review: r.name, service: a, go: b });
  }
  return check;
}

export async function seedAdmissionNamespace(env: TestEnv): Promise<void> {
  await apply(env, seedObjects());
  await markClustersReady(env, SEED.clusters);
}

/** Status of kdclusters with every member ready, as the reconciler would report them. */
export async function markClustersReady(env: TestEnv, names: readonly string[]): Promise<void> {
  for (const c of names) {
    await kubectlOk(env, [
      'patch',
      'kdcluster',
      c,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { members: { total: 1, ready: 1, synced: 1 } } }),
    ]);
  }
}

export interface Server {
  target: Target;
  port: number;
  stats(): Promise<ServerStats>;
}

export function serviceServer(svc: RunningAdmission, target: Target = 'service'): Server {
  return {
    target,
    port: svc.port,
    async stats() {
      const text = await svc.metrics();
      // The service keeps every log line in this process's memory; drop them between runs.
      svc.clearLogs();
      return {
        cpuMicros: metricSum(text, 'process_cpu_seconds_total') * 1e6,
        rssBytes: metricSum(text, 'process_resident_memory_bytes'),
        served: metricSum(text, 'kd_admission_requests_total'),
      };
    },
  };
}

export async function admissionDirect(
  env: TestEnv,
  svc: RunningAdmission,
  scale: Scale['direct'],
  opts: { pin: boolean; profile?: boolean; peer?: GoPeer; goError?: string; variants?: Variant[] },
): Promise<DirectResult> {
  const ca = env.info.webhookCaPem;
  const reviews = benchReviews(env.namespace);

  // 1. Every review is answered as expected, and from the caches (no live reads).
  const lookupsPerReview: DirectResult['lookupsPerReview'] = {};
  let baselineAnswer = '';
  for (const r of reviews) {
    const lookups = async () => {
      const text = await svc.metrics();
      return Object.fromEntries(
        ['cache', 'live', 'live_not_found'].map((source) => [
          source,
          metricSum(text, 'kd_admission_lookups_total', { source }),
        ]),
      );
    };
    const before = await lookups();
    const res = await httpsPost(svc.url(r.path), r.body, ca);
    const after = await lookups();
    lookupsPerReview[r.name] = Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - before[k]!]));
    checkAnswer(r, res.status, res.body);
    if (r.name === 'mutate-update') baselineAnswer = res.body;
  }

  // 2. The baseline server and the load generator, each a process of its own.
  const baselineProc = forkHelper('./baseline-server.ts');
  const worker = forkHelper('./load-worker.ts');
  try {
    const ports = await ask<Record<BaselineKind, number>>(
      baselineProc,
      { cert: env.info.webhookServing.certPem, key: env.info.webhookServing.keyPem, answer: baselineAnswer },
      'ports',
    );
    const bare = (kind: BaselineKind): Server => ({
      target: kind,
      port: ports[kind],
      stats: () => ask<ServerStats>(baselineProc, { cmd: 'stats', kind }, 'stats'),
    });
    const peer = opts.peer;
    const variants = opts.variants ?? [];
    const abTargets = variants.map((v) => `ab:${v.name}` as const);
    const servers: Partial<Record<Target, Server>> & Record<'service' | BaselineKind, Server> = {
      service: serviceServer(svc),
      ...Object.fromEntries(variants.map((v) => [`ab:${v.name}`, serviceServer(v.svc, `ab:${v.name}`)])),
      baseline: bare('baseline'),
      minimal: bare('minimal'),
      ...(peer ? { go: { target: 'go' as const, port: peer.port, stats: () => peer.stats() } } : {}),
    };
    const peerCheck = peer
      ? await comparePeerAnswers([...reviews, ...deniedReviews(env.namespace)], svc.url, peer.url, ca)
      : undefined;
    // A variant must give the service's answers, field by field, or its figures compare different work.
    const variantChecks = new Map<string, PeerCheck>();
    for (const v of variants) {
      const check = await comparePeerAnswers([...reviews, ...deniedReviews(env.namespace)], svc.url, v.svc.url, ca);
      variantChecks.set(v.name, check);
      say(`admission A/B: ${v.name} answers equal to the service's: ${check.equal}/${check.reviews}`);
    }
    if (peerCheck)
      say(`admission direct: go peer answers equal to the service's: ${peerCheck.equal}/${peerCheck.reviews}`);
    const tlsInfo = {
      service: await negotiatedTls(svc.port, ca),
      baseline: await negotiatedTls(ports.baseline, ca),
    };
    let pinned: DirectResult['pinned'] = false;
    if (opts.pin) {
      const ok =
        (await pin(svc.pid, 0)) &&
        (await pin(baselineProc.pid!, 0)) &&
        (!peer || (await pin(peer.pid, 0))) &&
        (await Promise.all(variants.map((v) => pin(v.svc.pid, 0)))).every(Boolean) &&
        (await pin(worker.pid!, 1));
      pinned = ok ? { server: 0, loadGenerator: 1 } : false;
    }

    const requests = loadRequests(reviews);
    const load = (s: Server, durationSec: number, rate?: number) =>
      runOnce(worker, s, {
        url: `https://127.0.0.1:${s.port}`,
        connections: scale.connections,
        durationSec,
        rate,
        requests,
      });

    // With --cpu-prof the preloaded profiler starts now, so the service's start-up stays out of it.
    if (opts.profile) svc.signal('SIGUSR2');

    // 3. Throughput: alternating rounds, each with a warm-up; the median round counts.
    const runs: ServerRun[] = [];
    for (let round = 1; round <= scale.rounds; round++) {
      const targets: Target[] = ['service', ...abTargets, 'baseline', 'minimal', ...(peer ? ['go' as const] : [])];
      const order = round % 2 === 1 ? targets : [...targets].reverse();
      for (const t of order) {
        say(
          `admission direct: ${t}, round ${round}/${scale.rounds}: warm-up ${scale.warmupSec} s, run ${scale.measureSec} s`,
        );
        await load(servers[t]!, scale.warmupSec);
        runs.push({ ...(await load(servers[t]!, scale.measureSec)), round });
      }
    }
    const agg = (t: Target) => {
      const mine = runs.filter((r) => r.target === t);
      return {
        rps: round(median(mine.map((r) => r.load.rps))),
        cpuPerReviewUs: round(median(mine.map((r) => r.cpuPerReviewUs))),
        p50Ms: round(median(mine.map((r) => r.load.latencyMs.p50))),
        p99Ms: round(median(mine.map((r) => r.load.latencyMs.p99))),
      };
    };
    const perRound = (f: (at: (t: Target) => ServerRun) => number) =>
      spread(
        Array.from({ length: scale.rounds }, (_, i) => {
          const at = (t: Target) => runs.find((r) => r.target === t && r.round === i + 1)!;
          return f(at);
        }),
      );
    const spreads = {
      ratioToMinimal: perRound((at) => at('service').load.rps / at('minimal').load.rps),
      cpuToMinimal: perRound((at) => at('service').cpuPerReviewUs / at('minimal').cpuPerReviewUs),
      ...(peer ? { ratioToGo: perRound((at) => at('service').load.rps / at('go').load.rps) } : {}),
    };
    const service = agg('service');
    const baseline = agg('baseline');
    const minimal = agg('minimal');
    const go = peer ? agg('go') : undefined;

    // 4. Latency at fixed rates.
    const rates: DirectResult['rates'] = [];
    for (const rate of scale.rates) {
      say(`admission direct: ${rate} reviews/s for ${scale.rateSec} s, service, go peer, then baseline`);
      const s = { ...(await load(servers.service, scale.rateSec, rate)), rate };
      const vs: ServerRun[] = [];
      for (const t of abTargets) vs.push({ ...(await load(servers[t]!, scale.rateSec, rate)), rate });
      const g = servers.go ? { ...(await load(servers.go, scale.rateSec, rate)), rate } : undefined;
      const b = { ...(await load(servers.baseline, scale.rateSec, rate)), rate };
      rates.push({ rate, service: s, baseline: b, ...(g ? { go: g } : {}), ...(vs.length ? { variants: vs } : {}) });
    }

    const all = [
      ...runs,
      ...rates.flatMap((r) => [r.service, r.baseline, ...(r.go ? [r.go] : []), ...(r.variants ?? [])]),
    ];
    const variantResults: VariantResult[] = variants.map((v) => {
      const { svc: _svc, ...spec } = v;
      const a = agg(`ab:${v.name}`);
      return {
        name: v.name,
        spec,
        ...a,
        ratioToMinimal: round(a.rps / minimal.rps),
        cpuRatioToMinimal: round(minimal.cpuPerReviewUs / a.cpuPerReviewUs),
        serviceRatio: round(service.rps / a.rps),
        serviceCpuRatio: round(a.cpuPerReviewUs / service.cpuPerReviewUs),
        answers: variantChecks.get(v.name)!,
      };
    });
    return {
      reviews: reviews.map((r) => ({ name: r.name, path: r.path.split('?')[0]!, bytes: Buffer.byteLength(r.body) })),
      meanReviewBytes: meanReviewBytes(reviews),
      lookupsPerReview,
      tls: tlsInfo,
      pinned,
      connections: scale.connections,
      throughput: {
        runs,
        service,
        baseline,
        minimal,
        ratio: round(service.rps / baseline.rps),
        cpuRatio: round(baseline.cpuPerReviewUs / service.cpuPerReviewUs),
        ratioToMinimal: round(service.rps / minimal.rps),
        cpuRatioToMinimal: round(minimal.cpuPerReviewUs / service.cpuPerReviewUs),
        spreads,
        ...(go
          ? {
              go,
              ratioToGo: round(service.rps / go.rps),
              cpuRatioToGo: round(go.cpuPerReviewUs / service.cpuPerReviewUs),
            }
          : {}),
      },
      rates,
      ...(variantResults.length ? { variants: variantResults } : {}),
      rss: {
        serviceMiB: round((await servers.service.stats()).rssBytes / 2 ** 20),
        baselineMiB: round((await servers.baseline.stats()).rssBytes / 2 ** 20),
        ...(servers.go ? { goMiB: round((await servers.go.stats()).rssBytes / 2 ** 20) } : {}),
      },
      ...(peerCheck ? { peerCheck } : {}),
      ...(opts.goError ? { goError: opts.goError } : {}),
      failures: all.reduce((n, r) => n + r.load.non2xx + r.load.errors + r.load.timeouts, 0),
    };
  } finally {
    await stopHelper(worker);
    baselineProc.send({ cmd: 'stop' });
    await stopHelper(baselineProc);
  }
}

export async function runOnce(worker: ChildProcess, s: Server, spec: LoadSpec): Promise<ServerRun> {
  const before = await s.stats();
  const load = await ask<LoadResult>(worker, spec, 'result', (spec.durationSec + 60) * 1000);
  const after = await s.stats();
  const served = after.served - before.served;
  const cpuMicros = after.cpuMicros - before.cpuMicros;
  return {
    target: s.target,
    load,
    served,
    cpuMs: round(cpuMicros / 1000),
    cpuPerReviewUs: round(cpuMicros / Math.max(1, served)),
    rssMiB: round(after.rssBytes / 2 ** 20),
  };
}

export function checkAnswer(r: BenchReview, status: number, body: string): void {
  const want = expectedAnswer(r.name);
  const sent = JSON.parse(r.body) as { request: { uid: string } };
  let got: { response?: { uid?: string; allowed?: boolean; patch?: string } } = {};
  try {
    got = JSON.parse(body) as typeof got;
  } catch {
    // reported below
  }
  const ok =
    status === 200 &&
    got.response?.uid === sent.request.uid &&
    got.response.allowed === want.allowed &&
    !!got.response.patch === want.patch;
  if (!ok) throw new Error(`${r.name}: unexpected answer ${status} ${body.slice(0, 500)}`);
}
