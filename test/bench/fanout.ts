/**
 * Reconciler fan-out on the real control plane: one ConfigMap connected to N clusters with M member
 * pods each. After the first delivery has settled, the ConfigMap is edited; a watch on the pods (from
 * this process) records when each pod holds configmeta with the new content. The API server's audit
 * log counts the reconciler's writes, compared with the minimum (1 generator bump + 1 status write per
 * cluster, 1 patch per pod). Then: writes during an idle period, and after a restart with nothing
 * changed. The reconciler runs with its defaults (concurrency 4, 8 pod patches in flight per cluster).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ANNOTATION_CONFIGMETA } from '@kd-connections/shared/domain';
import type { ControlPlane } from '../controlplane/controlplane.js';
import { apply, configMap, kdApp } from '../support/kd-objects.js';
import { benchEnv, say, timer } from './env.js';
import { sleep } from '../support/processes.js';
import {
  counters,
  createClustersAndPods,
  objectWrites,
  reconcilerWrites,
  waitQuiet,
  type WriteCounts,
} from './reconciler-probes.js';
import { watchPodAnnotation } from './pod-annotation-watch.js';
import { rawPatchRate, type RawPatchResult } from './raw-patch.js';
import type { Scale } from './scale.js';
import { percentile, round } from './stats.js';
import { type ReconcilerProcess, startReconciler } from '../support/services.js';

const CM = 'shared-config';
/** configmeta groups connected ConfigMaps by this label value (kubedirector.hpe.com/cmType). */
const CM_TYPE = 'settings';

export interface FanoutResult {
  clusters: number;
  pods: number;
  createSeconds: number;
  firstDelivery: { seconds: number; podWrites: number; statusWrites: number };
  edit: {
    /** From the ConfigMap PATCH being sent to the pod holding the new configmeta, in ms. */
    firstPodMs: number;
    p50PodMs: number;
    allPodsMs: number;
    podsUpdated: number;
    /** Until the reconciler is quiet again (status written everywhere). */
    settledMs: number;
    /** From the edit until the API server answered the reconciler's last object write (audit log). */
    writesMs?: number;
    writes: WriteCounts;
    minimum: number;
    /** (bumps + status + pod patches) / minimum. */
    ratio: number;
    reconcilerCounted: { pod: number; status: number; cluster: number; event: number; failed: number };
  };
  idle: { seconds: number; writes: WriteCounts; objectWrites: number };
  restart: { secondsToQuiet: number; reconciles: number; writes: WriteCounts; objectWrites: number };
  reconcilerRssMiB: number;
  /** The same pod patches by a bare client, the reconciler stopped: what the API server takes. */
  raw?: RawPatchResult;
  /** Pods ÷ seconds from the edit until the last pod held the new configmeta. */
  deliveryPerSecond: number;
  /** deliveryPerSecond ÷ raw.patchesPerSecond. */
  deliveryRatioToRaw?: number;
  rawError?: string;
}

export async function fanout(cp: ControlPlane, scale: Scale, logDir?: string): Promise<FanoutResult> {
  const s = scale.fanout;
  const env = await benchEnv(cp, 'bench-fanout');
  const ns = env.namespace;
  const core = env.kc.makeApiClient(CoreV1Api);

  await apply(env, [
    kdApp('fan-app', { category: 'worker', roles: ['worker'] }),
    configMap(CM, { version: 'v1' }, CM_TYPE),
  ]);
  say(`fan-out: creating ${s.clusters} clusters × ${s.podsPerCluster} pods`);
  const tc = timer();
  const made = await createClustersAndPods(env.kc, ns, {
    prefix: 'c',
    app: 'fan-app',
    clusters: s.clusters,
    podsPerCluster: s.podsPerCluster,
    configmaps: [CM],
    concurrency: scale.createConcurrency,
  });
  const createSeconds = round(tc() / 1000);
  const pods = made.pods;

  let rec: ReconcilerProcess | undefined = await startReconciler(env, { identity: 'bench-fanout-1' });
  try {
    const t1 = timer();
    await rec.waitForLog((l) => l.msg === 'became leader', 120_000);
    const first = await waitQuiet(
      rec,
      'first delivery',
      (c) => c.podWrites >= pods && c.statusWrites >= made.clusters,
      s.deadlineSec * 1000,
    );
    const firstDelivery = {
      seconds: round(t1() / 1000),
      podWrites: first.podWrites,
      statusWrites: first.statusWrites,
    };
    say(`fan-out: first delivery settled in ${firstDelivery.seconds} s; editing the ConfigMap`);
    await sleep(1000);

    // The edit, watched from here.
    const token = `v2-${Date.now().toString(36)}`;
    const watch = await watchPodAnnotation(env.kc, ns, ANNOTATION_CONFIGMETA, pods, (text) => {
      const doc = JSON.parse(text) as {
        connections?: {
          configmaps?: Record<string, { metadata?: { name?: string }; data?: { version?: string } }[]>;
        };
      };
      const entries = doc.connections?.configmaps?.[CM_TYPE] ?? [];
      return entries.some((e) => e.metadata?.name === CM && e.data?.version === token);
    });
    const updatedAt = watch.seen;
    const since = new Date();
    const before = await counters(rec);
    // Timed from just before the PATCH is sent (the reconciler may act before its answer arrives here).
    const editStart = performance.now();
    watch.start();
    await core.patchNamespacedConfigMap(
      { name: CM, namespace: ns, body: [{ op: 'replace', path: '/data/version', value: token }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    const deadline = sleep(s.deadlineSec * 1000).then(() => {
      throw new Error(`only ${updatedAt.size}/${pods} pods hold the new configmeta after ${s.deadlineSec} s`);
    });
    await Promise.race([watch.all, deadline]).finally(() => watch.stop());
    const after = await waitQuiet(
      rec,
      'after the edit',
      (c) => c.statusWrites - before.statusWrites >= made.clusters,
      s.deadlineSec * 1000,
    );
    const settledMs = performance.now() - editStart;
    await sleep(1500); // the audit log is written as requests complete; let the last ones land
    const writes = reconcilerWrites(env.info.auditLogPath, since, ns);
    const minimum = made.clusters * 2 + pods;
    const times = Float64Array.from(updatedAt.values()).sort();
    const edit: FanoutResult['edit'] = {
      firstPodMs: round(times[0]!),
      p50PodMs: round(percentile(times, 50)),
      allPodsMs: round(times[times.length - 1]!),
      podsUpdated: updatedAt.size,
      settledMs: round(settledMs),
      ...(writes.lastObjectWriteAt ? { writesMs: round(writes.lastObjectWriteAt - since.getTime()) } : {}),
      writes,
      minimum,
      ratio: round((writes.kdclusters + writes['kdclusters/status'] + writes.pods + writes.other) / minimum),
      reconcilerCounted: {
        pod: after.podWrites - before.podWrites,
        status: after.statusWrites - before.statusWrites,
        cluster: after.clusterWrites - before.clusterWrites,
        event: after.eventWrites - before.eventWrites,
        failed: after.failedWrites - before.failedWrites,
      },
    };
    say(
      `fan-out: all ${pods} pods current ${round(edit.allPodsMs / 1000)} s after the edit; write ratio ${edit.ratio}`,
    );

    // Idle.
    say(`fan-out: idle for ${s.idleSec} s`);
    const idleSince = new Date();
    await sleep(s.idleSec * 1000);
    const idleWrites = reconcilerWrites(env.info.auditLogPath, idleSince);

    // Restart with nothing changed.
    say('fan-out: restarting the reconciler');
    await rec.stop();
    if (logDir) writeFileSync(join(logDir, `fanout-${rec.identity}.log`), rec.output());
    const restartSince = new Date();
    const t2 = timer();
    rec = await startReconciler(env, { identity: 'bench-fanout-2' });
    await rec.waitForLog((l) => l.msg === 'became leader', 120_000);
    const settled = await waitQuiet(rec, 'after restart', (c) => c.reconciles >= made.clusters, s.deadlineSec * 1000, {
      quietMs: 3000,
    });
    const secondsToQuiet = round(t2() / 1000);
    await sleep(1500);
    const restartWrites = reconcilerWrites(env.info.auditLogPath, restartSince);
    const rss = (await counters(rec)).rssBytes;

    // The API server's limit: the same pod patches from a bare client, nobody else writing.
    await rec.stop();
    if (logDir) writeFileSync(join(logDir, `fanout-${rec.identity}.log`), rec.output());
    rec = undefined;
    say(`fan-out: ${pods} pod patches from a bare client (the reconciler stopped)`);
    let raw: RawPatchResult | undefined;
    let rawError: string | undefined;
    try {
      raw = await rawPatchRate(env.kc, ns, { clusters: 4, podsPerCluster: 8 });
    } catch (e) {
      rawError = e instanceof Error ? e.message : String(e);
    }
    const deliveryPerSecond = round(edit.podsUpdated / (edit.allPodsMs / 1000));
    return {
      clusters: made.clusters,
      pods,
      createSeconds,
      firstDelivery,
      edit,
      idle: { seconds: s.idleSec, writes: idleWrites, objectWrites: objectWrites(idleWrites) },
      restart: {
        secondsToQuiet,
        reconciles: settled.reconciles,
        writes: restartWrites,
        objectWrites: objectWrites(restartWrites),
      },
      reconcilerRssMiB: round(rss / 2 ** 20),
      deliveryPerSecond,
      ...(raw ? { raw, deliveryRatioToRaw: round(deliveryPerSecond / raw.patchesPerSecond) } : {}),
      ...(rawError ? { rawError } : {}),
    };
  } finally {
    await rec?.stop();
    if (logDir && rec) writeFileSync(join(logDir, `fanout-${rec.identity}.log`), rec.output());
    // Its pods never run (no node takes them). Left behind as 1,000 unschedulable pods, they slowed the
    // in-container section, which starts a scheduler and a node: its first documents came 51–67 s after
    // its pods were created instead of 31–42 s (results/diag-*, 2026-12-03-issue19*).
    // Not --wait: kubectl waits for each of the 1,200 objects in turn (80 s); unscheduled pods go at once.
    const gone = await env.kubectl(['delete', 'pods,kubedirectorclusters', '--all', '--wait=false']);
    if (gone.code !== 0) say(`fan-out: could not delete the section's objects: ${gone.stderr}`);
    for (let i = 0; i < 60 && (await env.kubectl(['get', 'pods', '-o', 'name'])).stdout.trim(); i++) await sleep(1000);
  }
}
