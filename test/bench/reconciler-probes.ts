/**
 * Watching the reconciler from outside: its Prometheus counters (writes by kind, reconciles, queue
 * depth, RSS), "quiet" (nothing queued, no write for a while), and the API server's audit log as the
 * independent count of every write it made, split into objects, events and its leader Lease.
 */
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from '@kd-connections/shared/runtime';
import { readAudit, type AuditEvent } from '../support/audit.js';
import { memberPod } from '../support/kd-objects.js';
import { mapLimit, withRetry } from './env.js';
import { sleep } from '../support/processes.js';
import { metricSum } from '../support/prometheus-text.js';
import { type ReconcilerProcess } from '../support/services.js';

export interface ReconcilerCounters {
  podWrites: number;
  statusWrites: number;
  clusterWrites: number;
  eventWrites: number;
  failedWrites: number;
  reconciles: number;
  queueDepth: number;
  rssBytes: number;
  heapUsedBytes: number;
  /** process.memoryUsage()'s figures and V8's heap spaces, as prom-client's default metrics report them. */
  memory: MemoryBreakdown;
}

/** Where a process's memory is: bytes, from prom-client's process_* and nodejs_* default metrics. */
export interface MemoryBreakdown {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  /** C++ objects bound to JS ones, Buffers and ArrayBuffers included. */
  external: number;
  /** Per V8 heap space (new, old, code, large_object, ...): committed size and live bytes. */
  spaces: Record<string, { size: number; used: number }>;
  /**
   * Resident bytes by kind of mapping (/proc/PID/smaps, when readable): `brk` is the main thread's malloc
   * heap, `anon` anonymous mappings (V8's heap pages, other threads' malloc arenas, large mallocs), `file`
   * the mapped node binary and libraries.
   */
  mappings?: { brk: number; anon: number; file: number; other: number };
}

/** Resident bytes of a process's mappings by kind, from /proc/PID/smaps; undefined where there is none. */
export function residentByMapping(pid: number): MemoryBreakdown['mappings'] {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return undefined;
  }
  const out = { brk: 0, anon: 0, file: 0, other: 0 };
  let kind: keyof typeof out = 'other';
  for (const line of text.split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const path = head[1]!.trim();
      kind = path === '' ? 'anon' : path === '[heap]' ? 'brk' : path.startsWith('/') ? 'file' : 'other';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[kind] += Number(rss[1]) * 1024;
  }
  return out;
}

export function memoryBreakdown(text: string): MemoryBreakdown {
  const spaces: MemoryBreakdown['spaces'] = {};
  for (const m of text.matchAll(/^nodejs_heap_space_size_(total|used)_bytes\{space="([^"]+)"\}\s+(\S+)/gm)) {
    const s = (spaces[m[2]!] ??= { size: 0, used: 0 });
    if (m[1] === 'total') s.size = Number(m[3]);
    else s.used = Number(m[3]);
  }
  return {
    rss: metricSum(text, 'process_resident_memory_bytes'),
    heapTotal: metricSum(text, 'nodejs_heap_size_total_bytes'),
    heapUsed: metricSum(text, 'nodejs_heap_size_used_bytes'),
    external: metricSum(text, 'nodejs_external_memory_bytes'),
    spaces,
  };
}

export async function counters(rec: ReconcilerProcess): Promise<ReconcilerCounters> {
  const text = await (await fetch(`http://127.0.0.1:${rec.port}/metrics`)).text();
  const w = (kind: string, result = 'ok') => metricSum(text, 'kd_reconciler_api_writes_total', { kind, result });
  return {
    podWrites: w('pod'),
    statusWrites: w('kdcluster_status'),
    clusterWrites: w('kdcluster'),
    eventWrites: w('event'),
    failedWrites:
      metricSum(text, 'kd_reconciler_api_writes_total') -
      metricSum(text, 'kd_reconciler_api_writes_total', { result: 'ok' }),
    reconciles: metricSum(text, 'kd_reconciler_reconciles_total'),
    queueDepth: metricSum(text, 'kd_reconciler_queue_depth'),
    rssBytes: metricSum(text, 'process_resident_memory_bytes'),
    heapUsedBytes: metricSum(text, 'nodejs_heap_size_used_bytes'),
    memory: { ...memoryBreakdown(text), mappings: residentByMapping(rec.pid) },
  };
}

const totalWrites = (c: ReconcilerCounters) =>
  c.podWrites + c.statusWrites + c.clusterWrites + c.eventWrites + c.failedWrites;

/**
 * Waits until `done(counters)` holds, the queue is empty and no write happened for `quietMs`.
 * Resolves with the last counters; rejects at the deadline. `onSample` sees every poll (e.g. peak RSS).
 */
export async function waitQuiet(
  rec: ReconcilerProcess,
  what: string,
  done: (c: ReconcilerCounters) => boolean,
  deadlineMs: number,
  opts: { quietMs?: number; onSample?: (c: ReconcilerCounters) => void } = {},
): Promise<ReconcilerCounters> {
  const quietMs = opts.quietMs ?? 2000;
  const end = Date.now() + deadlineMs;
  let last: ReconcilerCounters | undefined;
  let stableSince = Date.now();
  for (;;) {
    const c = await counters(rec);
    opts.onSample?.(c);
    if (!last || totalWrites(c) !== totalWrites(last) || c.queueDepth > 0) stableSince = Date.now();
    last = c;
    if (done(c) && c.queueDepth === 0 && Date.now() - stableSince >= quietMs) return c;
    if (Date.now() > end) throw new Error(`${what}: not reached within ${deadlineMs / 1000} s (${JSON.stringify(c)})`);
    await sleep(250);
  }
}

export interface WriteCounts {
  /** kdcluster main resource (configMetaGenerator bumps). */
  kdclusters: number;
  'kdclusters/status': number;
  pods: number;
  events: number;
  leases: number;
  other: number;
  /** Of all the above, those that did not succeed (e.g. a refused precondition). */
  failed: number;
  /** When the last object write (not an event or the Lease) was answered, ms since the epoch. */
  lastObjectWriteAt?: number;
}

/** Writes by the reconciler's user agent in the audit log since `since` (all namespaces unless given). */
export function reconcilerWrites(auditLogPath: string, since: Date, namespace?: string): WriteCounts {
  const events = readAudit(auditLogPath).filter(
    (e) =>
      ['create', 'update', 'patch', 'delete', 'deletecollection'].includes(e.verb) &&
      (e.userAgent ?? '').includes('kd-connections-reconciler') &&
      new Date(e.requestReceivedTimestamp) >= since &&
      (namespace === undefined || e.objectRef?.namespace === namespace),
  );
  const out: WriteCounts = {
    kdclusters: 0,
    'kdclusters/status': 0,
    pods: 0,
    events: 0,
    leases: 0,
    other: 0,
    failed: 0,
  };
  for (const e of events) {
    const k = kindOf(e);
    out[k]++;
    if (k !== 'events' && k !== 'leases' && e.stageTimestamp)
      out.lastObjectWriteAt = Math.max(out.lastObjectWriteAt ?? 0, Date.parse(e.stageTimestamp));
    const code = e.responseStatus?.code ?? 0;
    if (code < 200 || code >= 300) out.failed++;
  }
  return out;
}

function kindOf(e: AuditEvent): Exclude<keyof WriteCounts, 'failed'> {
  const r = e.objectRef?.resource;
  const sub = e.objectRef?.subresource;
  if (r === 'kubedirectorclusters') return sub === 'status' ? 'kdclusters/status' : sub ? 'other' : 'kdclusters';
  if (r === 'pods' && !sub) return 'pods';
  if (r === 'events') return 'events';
  if (r === 'leases') return 'leases';
  return 'other';
}

/** Object writes: everything but events and the leader Lease. */
export const objectWrites = (w: WriteCounts): number => w.kdclusters + w['kdclusters/status'] + w.pods + w.other;

const G = { group: 'kubedirector.hpe.com', version: 'v1beta1', plural: 'kubedirectorclusters' } as const;

/**
 * Creates `clusters` kdclusters of `app`, each connected to `configmaps[i % n]` with `podsPerCluster`
 * member pods, at most `concurrency` requests in flight. Plain JSON over one keep-alive agent (the
 * shared KubeClient): client-node's typed serialization would cost this process more CPU than the
 * API server spends, on a machine where both compete for the same cores.
 */
export async function createClustersAndPods(
  kc: KubeConfig,
  namespace: string,
  o: {
    prefix: string;
    app: string;
    clusters: number;
    podsPerCluster: number;
    configmaps: string[];
    concurrency: number;
    /** The first cluster's index (a section that grows its set in steps). */
    start?: number;
  },
): Promise<{ clusters: number; pods: number }> {
  const client = new KubeClient(kc, 'kd-bench');
  const start = o.start ?? 0;
  const names = Array.from({ length: o.clusters }, (_, i) => `${o.prefix}-${String(start + i).padStart(4, '0')}`);
  await mapLimit(names, o.concurrency, (name, i) =>
    withRetry(`create kdcluster ${name}`, () =>
      client.request('POST', `/apis/${G.group}/${G.version}/namespaces/${namespace}/${G.plural}`, {
        body: {
          apiVersion: 'kubedirector.hpe.com/v1beta1',
          kind: 'KubeDirectorCluster',
          metadata: { name },
          spec: {
            app: o.app,
            roles: [{ id: 'worker', members: o.podsPerCluster, resources: { limits: { cpu: '1', memory: '1Gi' } } }],
            connections: { configmaps: [o.configmaps[i % o.configmaps.length]!] },
          },
        },
      }),
    ),
  );
  const pods = names.flatMap((c) => Array.from({ length: o.podsPerCluster }, (_, j) => ({ cluster: c, j })));
  await mapLimit(pods, o.concurrency, ({ cluster, j }) =>
    withRetry(`create pod ${cluster}-${j}`, () =>
      client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
        body: memberPod(`${cluster}-${j}`, cluster, 'worker'),
      }),
    ),
  );
  client.close();
  return { clusters: names.length, pods: pods.length };
}
