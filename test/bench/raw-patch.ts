/**
 * The API server's limit for the fan-out: a bare client making the same pod patches the reconciler
 * makes for one ConfigMap edit — every member pod, the configmeta annotation and its hash replaced by
 * values of the same size, the same JSON Patch with its `test` preconditions — as fast as the API
 * server accepts them, with the reconciler's concurrency (clusters in parallel × pod patches in flight
 * per cluster). Run with the reconciler stopped, so nothing else writes the pods.
 */
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_CONFIGMETA, ANNOTATION_CONFIGMETA_HASH } from '@kd-connections/shared/domain';
import { setAnnotationsPatch } from '@kd-connections/shared/primitives';
import { mapLimit, timer } from './env.js';
import { round } from './stats.js';

export interface RawPatchResult {
  pods: number;
  /** Clusters in parallel × pod patches in flight per cluster: the reconciler's defaults. */
  concurrency: { clusters: number; podsPerCluster: number };
  meanPatchBytes: number;
  seconds: number;
  patchesPerSecond: number;
  failed: number;
}

/** A value of the same length that differs (the last character changed), so every patch is a real write. */
function sameSize(value: string): string {
  if (value === '') return 'x';
  const last = value[value.length - 1];
  return value.slice(0, -1) + (last === '0' ? '1' : '0');
}

export async function rawPatchRate(
  kc: KubeConfig,
  namespace: string,
  concurrency: { clusters: number; podsPerCluster: number },
): Promise<RawPatchResult> {
  const core = kc.makeApiClient(CoreV1Api);
  const pods = (await core.listNamespacedPod({ namespace })).items.filter(
    (p) => p.metadata?.annotations?.[ANNOTATION_CONFIGMETA] !== undefined,
  );
  const byCluster = new Map<string, V1Pod[]>();
  for (const p of pods) {
    const c = p.metadata?.labels?.['kubedirector.hpe.com/kdcluster'] ?? '';
    byCluster.set(c, [...(byCluster.get(c) ?? []), p]);
  }
  const patches = new Map<V1Pod, object[]>();
  let bytes = 0;
  for (const p of pods) {
    const ann = p.metadata!.annotations!;
    // The configmeta text changes inside (its length kept), as an edited ConfigMap's content would.
    const text = ann[ANNOTATION_CONFIGMETA]!;
    const at = text.lastIndexOf('"version":"') + 11;
    const values = {
      [ANNOTATION_CONFIGMETA]:
        at < 11 ? sameSize(text) : text.slice(0, at) + (text[at] === '0' ? '1' : '0') + text.slice(at + 1),
      [ANNOTATION_CONFIGMETA_HASH]: sameSize(ann[ANNOTATION_CONFIGMETA_HASH] ?? ''),
    };
    const ops = setAnnotationsPatch(
      p.metadata as Parameters<typeof setAnnotationsPatch>[0],
      values,
      ANNOTATION_CONFIGMETA_HASH,
    );
    patches.set(p, ops);
    bytes += Buffer.byteLength(JSON.stringify(ops));
  }
  const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
  let failed = 0;
  const t = timer();
  await mapLimit([...byCluster.values()], concurrency.clusters, (members) =>
    mapLimit(members, concurrency.podsPerCluster, async (p) => {
      try {
        await core.patchNamespacedPod({ name: p.metadata!.name!, namespace, body: patches.get(p)! }, jsonPatch);
      } catch {
        failed++;
      }
    }),
  );
  const seconds = t() / 1000;
  return {
    pods: pods.length,
    concurrency,
    meanPatchBytes: Math.round(bytes / Math.max(1, pods.length)),
    seconds: round(seconds),
    patchesPerSecond: round((pods.length - failed) / seconds),
    failed,
  };
}
