/**
 * A watch on a namespace's pods that records when each pod first carries an annotation value accepted by
 * `matches`, in ms from `start()` (the moment just before the edit is sent). Opened before the edit, from
 * the list's resourceVersion, so no update is missed; used by the fan-out and in-container sections.
 */
import { CoreV1Api, Watch, type KubeConfig } from '@kubernetes/client-node';

export interface PodAnnotationWatch {
  /** Marks the edit: only updates after it count. */
  start(): void;
  /** Pod name → ms from start() to the first MODIFIED event whose annotation matches. */
  readonly seen: ReadonlyMap<string, number>;
  /** Resolves once `expected` pods matched; rejects if the watch fails before that. */
  readonly all: Promise<void>;
  stop(): void;
}

export async function watchPodAnnotation(
  kc: KubeConfig,
  namespace: string,
  annotation: string,
  expected: number,
  matches: (value: string) => boolean,
): Promise<PodAnnotationWatch> {
  const list = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, limit: 1 });
  const seen = new Map<string, number>();
  let startedAt = 0;
  let done!: () => void;
  let failed!: (e: unknown) => void;
  const all = new Promise<void>((ok, fail) => {
    done = ok;
    failed = fail;
  });
  // A caller that reads only `seen` never awaits `all`: its rejection (a watch idle past client-node's
  // timeout) must not end the process as an unhandled one.
  all.catch(() => undefined);
  const req = await new Watch(kc).watch(
    `/api/v1/namespaces/${namespace}/pods`,
    { resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true },
    (type: string, obj: { metadata?: { name?: string; annotations?: Record<string, string> } }) => {
      if (type !== 'MODIFIED' || !startedAt) return;
      const at = performance.now() - startedAt;
      const name = obj.metadata?.name ?? '';
      const value = obj.metadata?.annotations?.[annotation];
      if (seen.has(name) || !value || !matches(value)) return;
      seen.set(name, at);
      if (seen.size === expected) done();
    },
    (err: unknown) => {
      if (err && seen.size < expected) failed(err);
    },
  );
  return {
    start: () => {
      startedAt = performance.now();
    },
    seen,
    all,
    stop: () => req.abort(),
  };
}
