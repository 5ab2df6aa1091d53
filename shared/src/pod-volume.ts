/**
 * The pod webhook's mutation: member pods get a read-only downward-API volume that projects
 * the configmeta annotation to /etc/guestconfig/configmeta.json, the path KubeDirector apps read.
 * The kubelet refreshes the file when the annotation changes.
 */
import { pointer, type PatchOp } from './json-patch.js';
import { ANNOTATION_CONFIGMETA, ANNOTATION_CONFIGMETA_VOLUME, LABEL_KDCLUSTER, type ObjectMeta } from './types.js';

export const CONFIGMETA_VOLUME = 'kd-configmeta';
export const CONFIGMETA_DIR = '/etc/guestconfig';
export const CONFIGMETA_FILE = 'configmeta.json';

interface Mount {
  name?: string;
  mountPath?: string;
  [k: string]: unknown;
}
interface Container {
  name?: string;
  volumeMounts?: Mount[];
  [k: string]: unknown;
}
export interface PodForMutation {
  metadata?: ObjectMeta;
  spec?: { volumes?: { name?: string; [k: string]: unknown }[]; containers?: Container[]; [k: string]: unknown };
}

export interface PodVolumeDecision {
  patch: PatchOp[];
  reason: string;
}

export function configMetaVolume() {
  return {
    name: CONFIGMETA_VOLUME,
    downwardAPI: {
      defaultMode: 0o444,
      items: [{ path: CONFIGMETA_FILE, fieldRef: { fieldPath: `metadata.annotations['${ANNOTATION_CONFIGMETA}']` } }],
    },
  };
}

export function decidePodVolume(pod: PodForMutation): PodVolumeDecision {
  const labels = pod.metadata?.labels ?? {};
  if (!(LABEL_KDCLUSTER in labels)) return { patch: [], reason: `not a member pod (no ${LABEL_KDCLUSTER} label)` };
  if ((pod.metadata?.annotations ?? {})[ANNOTATION_CONFIGMETA_VOLUME] === 'false') {
    return { patch: [], reason: `opted out by ${ANNOTATION_CONFIGMETA_VOLUME}: "false"` };
  }
  const spec = pod.spec ?? {};
  if ((spec.volumes ?? []).some((v) => v?.name === CONFIGMETA_VOLUME))
    return { patch: [], reason: 'volume already present' };
  const containers = Array.isArray(spec.containers) ? spec.containers : [];
  const patch: PatchOp[] = [];
  const mount = { name: CONFIGMETA_VOLUME, mountPath: CONFIGMETA_DIR, readOnly: true };
  for (const [i, c] of containers.entries()) {
    const mounts = Array.isArray(c?.volumeMounts) ? c.volumeMounts : undefined;
    // A container that already mounts something at the directory keeps it.
    if (mounts?.some((m) => m?.mountPath === CONFIGMETA_DIR || m?.mountPath === `${CONFIGMETA_DIR}/`)) continue;
    if (mounts) patch.push({ op: 'add', path: pointer('spec', 'containers', i, 'volumeMounts', '-'), value: mount });
    else patch.push({ op: 'add', path: pointer('spec', 'containers', i, 'volumeMounts'), value: [mount] });
  }
  if (patch.length === 0) return { patch: [], reason: 'no container to mount into' };
  const volumeOp: PatchOp = Array.isArray(spec.volumes)
    ? { op: 'add', path: '/spec/volumes/-', value: configMetaVolume() }
    : { op: 'add', path: '/spec/volumes', value: [configMetaVolume()] };
  return { patch: [volumeOp, ...patch], reason: `mounted at ${CONFIGMETA_DIR} in ${patch.length} container(s)` };
}
