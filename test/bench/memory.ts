/**
 * Reconciler memory with many objects in its caches: N clusters with M member pods each, created
 * through the API server at bounded concurrency. The reconciler first runs as a standby (the benchmark
 * holds its leader Lease), so what is measured is the caches alone; then the Lease is released, it
 * leads, delivers configmeta to every pod, and RSS is measured again: the peak during the delivery, when
 * it goes quiet, and after SETTLE_MS more (V8 gives back the heap the burst grew only once allocation
 * has been low for a while: right after the burst, part of the heap is garbage not yet collected).
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '../controlplane/controlplane.js';
import { apply, configMap, kdApp } from '../support/kd-objects.js';
import { benchEnv, say, timer } from './env.js';
import { sleep } from '../support/processes.js';
import {
  counters,
  createClustersAndPods,
  waitQuiet,
  type MemoryBreakdown,
  type ReconcilerCounters,
} from './reconciler-probes.js';
import type { Scale } from './scale.js';
import { round } from './stats.js';
import { type ReconcilerProcess, serviceNodeOptions, startReconciler } from '../support/services.js';

const LEASE = 'kd-connections-reconciler';
const SETTLE_MS = 20_000;

/** A MemoryBreakdown in MiB. */
export type MemoryFigures = MemoryBreakdown;

export interface MemoryOptions {
  /** Where to write heap snapshots of the leader (when settled) and of the standby after delivery. */
  heapSnapshotDir?: string;
  /** More standbys after delivery, each with its own NODE_OPTIONS (an A/B of V8 flags in one run). */
  standbyVariants?: { name: string; nodeOptions: string; env?: Record<string, string> }[];
  /** Extra environment of every reconciler of this section (e.g. NODE_OPTIONS for an A/B). */
  reconcilerEnv?: NodeJS.ProcessEnv;
}

export interface MemoryResult {
  clusters: number;
  pods: number;
  create: { seconds: number; objectsPerSecond: number };
  /** Caches synced, not leading (no work done): the cost of the caches. */
  standby: StandbyFigures;
  /** Leading: every pod written once, status everywhere. Absent when the deadline passed first. */
  leading?: {
    deliverySeconds: number;
    podWrites: number;
    statusWrites: number;
    peakRssMiB: number;
    /** When the last write was 3 s ago. */
    rssMiB: number;
    heapUsedMiB: number;
    memory?: MemoryFigures;
    /** SETTLE_MS later, nothing having happened. */
    settledRssMiB: number;
    settledHeapUsedMiB: number;
    settledMemory?: MemoryFigures;
    settleSeconds: number;
    completed: boolean;
  };
  /**
   * A second reconciler started as a standby once every pod carries configmeta (the first one leads):
   * the cost of the caches in the state a cluster is in most of the time.
   */
  standbyAfterDelivery?: StandbyFigures;
  standbyAfterDeliveryError?: string;
  /** The standby after delivery again under other NODE_OPTIONS (MemoryOptions.standbyVariants). */
  standbyVariants?: ({
    name: string;
    nodeOptions: string;
    env?: Record<string, string>;
    error?: string;
  } & Partial<StandbyFigures>)[];
  /** The reconcilers' NODE_OPTIONS (the services' own flags unless the run chose others). */
  reconcilerNodeOptions?: string;
  /** The reconcilers' extra environment, when the run set one. */
  reconcilerEnv?: NodeJS.ProcessEnv;
  /** Heap snapshots written: of the leader when settled, of the standby after delivery. */
  heapSnapshots?: { leader?: string; standbyAfterDelivery?: string };
}

export interface StandbyFigures {
  syncSeconds: number;
  rssMiB: number;
  heapUsedMiB: number;
  memory?: MemoryFigures;
  /** The same process SETTLE_MS later (the leader's figure is taken that long after it went quiet). */
  settled?: { afterSeconds: number; rssMiB: number; heapUsedMiB: number };
}

function figures(m: MemoryBreakdown): MemoryFigures {
  return {
    rss: mib(m.rss),
    heapTotal: mib(m.heapTotal),
    heapUsed: mib(m.heapUsed),
    external: mib(m.external),
    spaces: Object.fromEntries(Object.entries(m.spaces).map(([k, v]) => [k, { size: mib(v.size), used: mib(v.used) }])),
    ...(m.mappings
      ? {
          mappings: {
            brk: mib(m.mappings.brk),
            anon: mib(m.mappings.anon),
            file: mib(m.mappings.file),
            other: mib(m.mappings.other),
          },
        }
      : {}),
  };
}

/** Waits for /readyz, lets the initial lists settle, and samples RSS (the last of five samples, 1 s apart). */
async function standbyFigures(rec: ReconcilerProcess): Promise<StandbyFigures> {
  const ts = timer();
  for (;;) {
    const r = await fetch(`http://127.0.0.1:${rec.port}/readyz`).catch(() => undefined);
    if (r?.status === 200) break;
    if (ts() > 300_000) throw new Error('reconciler caches not synced within 300 s');
    if (rec.exited) throw new Error(`reconciler exited:\n${rec.output().slice(-2000)}`);
    await sleep(200);
  }
  const syncSeconds = round(ts() / 1000);
  let c: ReconcilerCounters = await counters(rec);
  for (let i = 0; i < 5; i++) {
    await sleep(1000);
    c = await counters(rec);
  }
  if (c.podWrites + c.statusWrites > 0) throw new Error('the standby reconciler wrote; the Lease did not hold it');
  return { syncSeconds, rssMiB: mib(c.rssBytes), heapUsedMiB: mib(c.heapUsedBytes), memory: figures(c.memory) };
}

const mib = (b: number) => round(b / 2 ** 20);

/** Sends SIGUSR2 (the reconciler runs with --heapsnapshot-signal) and waits for the file to be written. */
async function heapSnapshot(rec: ReconcilerProcess, dir: string): Promise<string | undefined> {
  const before = new Set(existsSync(dir) ? readdirSync(dir) : []);
  rec.signal('SIGUSR2');
  const t = timer();
  while (t() < 180_000) {
    await sleep(1000);
    const made = readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    // The reconciler answers /metrics again once the (synchronous) snapshot is written.
    if (made.length > 0 && (await counters(rec).catch(() => undefined))) return join(dir, made[0]!);
  }
  return undefined;
}

export async function reconcilerMemory(
  cp: ControlPlane,
  scale: Scale,
  logDir?: string,
  opts: MemoryOptions = {},
): Promise<MemoryResult> {
  const snapshotEnv = opts.heapSnapshotDir
    ? {
        NODE_OPTIONS:
          `${opts.reconcilerEnv?.NODE_OPTIONS ?? serviceNodeOptions('reconciler')} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${opts.heapSnapshotDir}`.trim(),
      }
    : {};
  const recEnv = { ...opts.reconcilerEnv, ...snapshotEnv };
  const s = scale.memory;
  const env = await benchEnv(cp, 'bench-memory');
  const ns = env.namespace;
  await apply(env, [
    kdApp('mem-app', { category: 'worker', roles: ['worker'] }),
    configMap('mem-config-0', { version: 'v1', path: '/data/a' }, 'settings'),
    configMap('mem-config-1', { version: 'v1', path: '/data/b' }, 'settings'),
  ]);
  // Held by the benchmark: the reconciler syncs its caches and waits as a standby.
  const holder = 'bench-holder';
  const lease = (holderIdentity: string, seconds: number) => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: LEASE, namespace: ns },
    spec: { holderIdentity, leaseDurationSeconds: seconds, renewTime: new Date().toISOString().replace('Z', '000Z') },
  });
  await apply(env, [lease(holder, 3600)]);

  say(`memory: creating ${s.clusters} clusters × ${s.podsPerCluster} pods (${s.createConcurrency} in flight)`);
  const tc = timer();
  const made = await createClustersAndPods(env.kc, ns, {
    prefix: 'm',
    app: 'mem-app',
    clusters: s.clusters,
    podsPerCluster: s.podsPerCluster,
    configmaps: ['mem-config-0', 'mem-config-1'],
    concurrency: s.createConcurrency,
  });
  const createSec = tc() / 1000;
  say(`memory: created ${made.clusters + made.pods} objects in ${round(createSec)} s`);

  const rec: ReconcilerProcess = await startReconciler(env, { identity: 'bench-memory', env: recEnv });
  try {
    // Settle after the initial lists; the last sample counts (RSS after the list buffers are gone).
    const standby = await standbyFigures(rec);
    say(`memory: standby with ${made.clusters} clusters / ${made.pods} pods cached: RSS ${standby.rssMiB} MiB`);

    // Release the Lease: the reconciler leads and delivers to every pod.
    await apply(env, [lease('', 1)]);
    const td = timer();
    let peak = 0;
    let leading: MemoryResult['leading'];
    let leaderSnapshot: string | undefined;
    try {
      const done = await waitQuiet(
        rec,
        'memory: delivery',
        (x) => x.podWrites >= made.pods && x.statusWrites >= made.clusters,
        s.deliveryDeadlineSec * 1000,
        { quietMs: 3000, onSample: (x) => (peak = Math.max(peak, x.rssBytes)) },
      );
      const deliverySeconds = round(td() / 1000);
      await sleep(SETTLE_MS);
      const settled = await counters(rec);
      if (opts.heapSnapshotDir) leaderSnapshot = await heapSnapshot(rec, opts.heapSnapshotDir);
      leading = {
        deliverySeconds,
        podWrites: done.podWrites,
        statusWrites: done.statusWrites,
        peakRssMiB: mib(peak),
        rssMiB: mib(done.rssBytes),
        heapUsedMiB: mib(done.heapUsedBytes),
        memory: figures(done.memory),
        settledRssMiB: mib(settled.rssBytes),
        settledHeapUsedMiB: mib(settled.heapUsedBytes),
        settledMemory: figures(settled.memory),
        settleSeconds: SETTLE_MS / 1000,
        completed: true,
      };
    } catch (e) {
      say(`memory: ${(e as Error).message}`);
      const x = await counters(rec);
      leading = {
        deliverySeconds: round(td() / 1000),
        podWrites: x.podWrites,
        statusWrites: x.statusWrites,
        peakRssMiB: mib(Math.max(peak, x.rssBytes)),
        rssMiB: mib(x.rssBytes),
        heapUsedMiB: mib(x.heapUsedBytes),
        settledRssMiB: NaN,
        settledHeapUsedMiB: NaN,
        settleSeconds: 0,
        completed: false,
      };
    }
    // Standby again, now that every pod carries configmeta: a second process while the first leads.
    let standbyAfterDelivery: MemoryResult['standbyAfterDelivery'];
    let standbyAfterDeliveryError: string | undefined;
    let snapshot: string | undefined;
    const standbyVariants: NonNullable<MemoryResult['standbyVariants']> = [];
    if (leading.completed) {
      const second = await startReconciler(env, { identity: 'bench-memory-standby', env: recEnv });
      try {
        standbyAfterDelivery = await standbyFigures(second);
        say(`memory: standby after delivery: RSS ${standbyAfterDelivery.rssMiB} MiB`);
        // Sampled 5 s after its sync (the protocol) and again as long after as the leader is.
        await sleep(SETTLE_MS);
        const later = await counters(second);
        standbyAfterDelivery.settled = {
          afterSeconds: SETTLE_MS / 1000 + 5,
          rssMiB: mib(later.rssBytes),
          heapUsedMiB: mib(later.heapUsedBytes),
        };
        say(
          `memory: standby after delivery, ${SETTLE_MS / 1000} s later: RSS ${standbyAfterDelivery.settled.rssMiB} MiB`,
        );
        if (opts.heapSnapshotDir) {
          snapshot = await heapSnapshot(second, opts.heapSnapshotDir);
          say(`memory: heap snapshot ${snapshot ?? 'not written within 180 s'}`);
        }
      } catch (e) {
        standbyAfterDeliveryError = (e as Error).message;
      } finally {
        await second.stop();
        if (logDir) writeFileSync(join(logDir, 'memory-standby-after-delivery.log'), second.output());
      }
      // The same standby under other V8 flags, one after the other, in the same state.
      for (const v of opts.standbyVariants ?? []) {
        const other = await startReconciler(env, {
          identity: `bench-memory-${v.name}`,
          env: { ...opts.reconcilerEnv, ...v.env, NODE_OPTIONS: v.nodeOptions },
        });
        try {
          const figures = await standbyFigures(other);
          say(`memory: standby after delivery, ${v.name} (${v.nodeOptions || 'no flags'}): RSS ${figures.rssMiB} MiB`);
          standbyVariants.push({ ...v, ...figures });
        } catch (e) {
          standbyVariants.push({ ...v, error: (e as Error).message });
        } finally {
          await other.stop();
        }
      }
    }
    return {
      ...(standbyVariants.length ? { standbyVariants } : {}),
      ...(standbyAfterDelivery ? { standbyAfterDelivery } : {}),
      ...(standbyAfterDeliveryError ? { standbyAfterDeliveryError } : {}),
      ...(opts.reconcilerEnv ? { reconcilerEnv: opts.reconcilerEnv } : {}),
      reconcilerNodeOptions: opts.reconcilerEnv?.NODE_OPTIONS ?? serviceNodeOptions('reconciler'),
      ...(snapshot || leaderSnapshot
        ? { heapSnapshots: { standbyAfterDelivery: snapshot, leader: leaderSnapshot } }
        : {}),
      clusters: made.clusters,
      pods: made.pods,
      create: { seconds: round(createSec), objectsPerSecond: round((made.clusters + made.pods) / createSec) },
      standby,
      leading,
    };
  } finally {
    await rec.stop();
    if (logDir) writeFileSync(join(logDir, 'memory-reconciler.log'), rec.output());
  }
}
