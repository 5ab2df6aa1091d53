/**
 * A prototype of the alternative delivery path issue 31 item 4 asks for, built to be measured beside the
 * product's (docs/performance.md, "Delivery on a kubelet with its defaults"): a node agent that copies
 * each member pod's configmeta annotation straight into the pod's emptyDir on the host, the way a CSI
 * node plugin (secrets-store-csi-driver's rotation) refreshes what it mounted. The kubelet's volume update,
 * whose rare miss waits for the next periodic resync, is not in its path; the reconciler's one JSON Patch
 * per pod stays the only API write.
 *
 * What a real agent would add is in the docs (a DaemonSet with hostPath into the kubelet's pods directory,
 * the private half of Secret values read from the API); this one runs in the bench process, which is root
 * on the node. Writes are a new file created exclusively (O_EXCL: never through a name the container made)
 * and a rename, so a symlink planted by a user in the container is replaced, never followed.
 */
import { closeSync, existsSync, fchmodSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, Watch, type KubeConfig } from '@kubernetes/client-node';
import { ANNOTATION_CONFIGMETA, ANNOTATION_CONFIGMETA_VOLUME, CONFIGMETA_FILE } from '@kd-connections/shared/domain';
import { CONFIGMETA_DIR } from '@kd-connections/shared/delivery';

/** The label that puts a bench member pod on the agent's path, and the emptyDir the agent writes into. */
export const AGENT_LABEL = 'kd-bench/delivery';
export const AGENT_VOLUME = 'kd-agent-guestconfig';

/** Turns a member pod (before withDelivery) into one the agent serves: no sidecar, an emptyDir on the app's directory. */
export function onAgentPath(pod: Record<string, any>): Record<string, any> {
  const p = structuredClone(pod);
  p.metadata.labels = { ...p.metadata.labels, [AGENT_LABEL]: 'node-agent' };
  p.metadata.annotations = { ...p.metadata.annotations, [ANNOTATION_CONFIGMETA_VOLUME]: 'false' };
  p.spec.volumes = [...(p.spec.volumes ?? []), { name: AGENT_VOLUME, emptyDir: { medium: 'Memory' } }];
  for (const c of p.spec.containers)
    c.volumeMounts = [...(c.volumeMounts ?? []), { name: AGENT_VOLUME, mountPath: CONFIGMETA_DIR }];
  return p;
}

/**
 * Replaces `dir`/configmeta.json with `value`, 0644: a new file created exclusively (a name planted in its
 * place is removed, never written through) and renamed over the old one, so a reader sees either document
 * whole and a symlink in the container's directory is replaced, not followed.
 */
export function writeConfigmeta(dir: string, value: string): void {
  const tmp = join(dir, `.${CONFIGMETA_FILE}.agent-tmp`);
  rmSync(tmp, { force: true });
  const fd = openSync(tmp, 'wx', 0o644);
  try {
    fchmodSync(fd, 0o644); // whatever the umask
    writeSync(fd, value);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, join(dir, CONFIGMETA_FILE));
}

export interface NodeAgent {
  /** Files written (each one a new annotation value reaching one pod). */
  readonly writes: () => number;
  /** Write failures and watch ends, in order (the agent retries both). */
  readonly errors: string[];
  stop(): void;
}

interface PodEvent {
  metadata?: { uid?: string; annotations?: Record<string, string> };
}

/**
 * Watches `namespace`'s pods on `nodeName` that carry AGENT_LABEL and keeps each one's emptyDir file equal
 * to its configmeta annotation. A pod whose volume is not set up yet is retried every `retryMs`; a watch
 * that ends is reopened from a fresh list.
 */
export async function startNodeAgent(
  kc: KubeConfig,
  o: { namespace: string; nodeName: string; kubeletRoot: string; retryMs?: number },
): Promise<NodeAgent> {
  const core = kc.makeApiClient(CoreV1Api);
  const fieldSelector = `spec.nodeName=${o.nodeName}`;
  const labelSelector = AGENT_LABEL;
  const wanted = new Map<string, string>();
  const written = new Map<string, string>();
  const errors: string[] = [];
  let writes = 0;
  let stopped = false;
  let abort: (() => void) | undefined;
  // A failure that repeats every retry is kept once, and at most 100 in all: the report lists them.
  const note = (m: string) => {
    if (errors.at(-1) !== m && errors.length < 100) errors.push(m);
  };

  const sync = (uid: string) => {
    const value = wanted.get(uid);
    if (value === undefined || written.get(uid) === value) return;
    const dir = join(o.kubeletRoot, 'pods', uid, 'volumes', 'kubernetes.io~empty-dir', AGENT_VOLUME);
    if (!existsSync(dir)) return; // not mounted yet: the retry timer comes back
    try {
      writeConfigmeta(dir, value);
      written.set(uid, value);
      writes++;
    } catch (e) {
      note(`write for pod ${uid}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  const onPod = (pod: PodEvent, deleted = false) => {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    const value = pod.metadata?.annotations?.[ANNOTATION_CONFIGMETA];
    if (deleted || value === undefined) {
      wanted.delete(uid);
      written.delete(uid);
      return;
    }
    wanted.set(uid, value);
    sync(uid);
  };

  const open = async (): Promise<void> => {
    const list = await core.listNamespacedPod({ namespace: o.namespace, fieldSelector, labelSelector });
    for (const pod of list.items) onPod(pod as PodEvent);
    const req = await new Watch(kc).watch(
      `/api/v1/namespaces/${o.namespace}/pods`,
      { fieldSelector, labelSelector, resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true },
      (type: string, obj: PodEvent) => {
        if (type === 'ADDED' || type === 'MODIFIED') onPod(obj);
        else if (type === 'DELETED') onPod(obj, true);
      },
      (err: unknown) => {
        if (stopped) return;
        note(`watch ended: ${err instanceof Error ? err.message : String(err ?? 'closed')}; reopening`);
        setTimeout(() => void open().catch((e) => note(`reopen: ${String(e)}`)), 500);
      },
    );
    abort = () => req.abort();
  };
  await open();
  const retry = setInterval(() => {
    for (const uid of wanted.keys()) sync(uid);
  }, o.retryMs ?? 200);

  return {
    writes: () => writes,
    errors,
    stop: () => {
      stopped = true;
      clearInterval(retry);
      abort?.();
    },
  };
}
