/**
 * The pod webhook's mutation: how /etc/guestconfig/configmeta.json reaches a member pod's app without
 * hiding or freezing the directory (layout and names in guestconfig-layout.ts; why in
 * docs/architecture.md).
 *
 * - Which containers: `app` when the pod has a container of that name (KubeDirector delivers there),
 *   otherwise every container. A receiving container that already mounts something at /etc/guestconfig
 *   keeps it and gets nothing; when that leaves no receiver, nothing is injected (the reason says so).
 * - What is added, all in front of the pod's own init containers:
 *   1. the `kd-guestconfig` native sidecar (restartPolicy Always): it copies its static busybox into the
 *      tools emptyDir, then keeps the document (and the private files) in the `kd-guestconfig` emptyDir
 *      by atomic swap. Its startupProbe succeeds once configmeta.json is non-empty, and Kubernetes starts
 *      the next init container and the app only after that — a pod whose annotation is not written yet
 *      waits instead of starting on an empty file;
 *   2. one seed init container per distinct image of the receiving containers: it runs that image with
 *      the sidecar's busybox as its program (no shell needed in the image) and copies the image's own
 *      /etc/guestconfig entries into the emptyDir, except the names the sidecar owns and names already
 *      there. A missing /etc/guestconfig in the image is fine.
 *   The receiving containers mount the emptyDir at /etc/guestconfig, read-write.
 */
import { pointer, type PatchOp } from '../primitives/json-patch.js';
import {
  CONFIGMETA_FILE,
  CONFIGMETA_VOLUME,
  DEFAULT_GUESTCONFIG_IMAGE,
  GUESTCONFIG_DIR,
  GUESTCONFIG_SIDECAR,
  GUESTCONFIG_SUBPATH,
  GUESTCONFIG_TOOLS_VOLUME,
  ANNOTATION_CONFIGMETA_SPLICE,
  SOURCE_SPLICE_ITEM,
  SOURCE_ROSTER_ITEM,
  ANNOTATION_CONFIGMETA_ROSTER,
  type SecretDelivery,
  GUESTCONFIG_VOLUME,
  PRIVATE_CONFIGMETA_VOLUME,
  SEED_CONTAINER_PREFIX,
  SEED_DIR,
  SIDECAR_OWNED_FILES,
  SIDECAR_PRIVATE_DIR,
  SIDECAR_PROGRAM,
  SIDECAR_SOURCE_DIR,
  SOURCE_GENERATOR_ITEM,
  TOOLS_DIR,
  hasConfigMetaDelivery,
  privateConfigMetaSecretName,
} from '../domain/guestconfig-layout.js';
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_VOLUME,
  LABEL_KDCLUSTER,
  type ObjectMeta,
} from '../domain/types.js';

/** The directory apps read (kept under this name for existing callers). */
export const CONFIGMETA_DIR = GUESTCONFIG_DIR;

interface Mount {
  name?: string;
  mountPath?: string;
  [k: string]: unknown;
}
interface Container {
  name?: string;
  image?: string;
  securityContext?: { [k: string]: unknown };
  imagePullPolicy?: string;
  volumeMounts?: Mount[];
  [k: string]: unknown;
}
export interface PodForMutation {
  metadata?: ObjectMeta;
  spec?: {
    securityContext?: { [k: string]: unknown };
    volumes?: { name?: string; [k: string]: unknown }[];
    containers?: Container[];
    initContainers?: Container[];
    [k: string]: unknown;
  };
}

export interface PodDeliveryOptions {
  /** The sidecar image (the admission service's --guestconfig-image). */
  image: string;
  /** How connected Secret values reach the container (--secret-delivery); `document` when unset. */
  secretDelivery?: SecretDelivery;
}

/**
 * The user the injected containers run as. Root (0) unless the pod asks for non-root (runAsNonRoot, or a
 * non-zero runAsUser, on the pod or on every receiving container — what a namespace enforcing the
 * `restricted` Pod Security Standard requires): then the pod's (or the app container's) runAsUser, and
 * its fsGroup (or runAsGroup) as group, so the delivered files belong to the user configcli runs as.
 */
export interface DeliveryUser {
  uid: number;
  gid: number;
  nonRoot: boolean;
}

/** A uid for the injected containers of a non-root pod that names none (the app then reads 0644 files). */
export const FALLBACK_NON_ROOT_UID = 65532;

type SecCtx = { runAsNonRoot?: unknown; runAsUser?: unknown; runAsGroup?: unknown; fsGroup?: unknown };
const num = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined);

export function deliveryUser(pod: PodForMutation, receivers: readonly Container[]): DeliveryUser {
  const podCtx = ((pod.spec ?? {}).securityContext ?? {}) as SecCtx;
  const ctx = (c: Container) => ({ ...podCtx, ...((c.securityContext ?? {}) as SecCtx) });
  const asksNonRoot = (x: SecCtx) => x.runAsNonRoot === true || (num(x.runAsUser) ?? 0) > 0;
  const nonRoot = asksNonRoot(podCtx) || (receivers.length > 0 && receivers.every((c) => asksNonRoot(ctx(c))));
  if (!nonRoot) return { uid: 0, gid: 0, nonRoot: false };
  const first = receivers[0] ? ctx(receivers[0]) : podCtx;
  const uid = num(first.runAsUser) || FALLBACK_NON_ROOT_UID;
  const gid = num(podCtx.fsGroup) ?? num(first.runAsGroup) ?? uid;
  return { uid, gid, nonRoot: true };
}

export interface PodDeliveryDecision {
  patch: PatchOp[];
  reason: string;
}

/** The downward-API volume the sidecar reads: the configmeta document and the generator it belongs to. */
export function configMetaVolume() {
  const item = (path: string, annotation: string) => ({
    path,
    fieldRef: { fieldPath: `metadata.annotations['${annotation}']` },
  });
  return {
    name: CONFIGMETA_VOLUME,
    downwardAPI: {
      defaultMode: 0o444,
      items: [
        item(CONFIGMETA_FILE, ANNOTATION_CONFIGMETA),
        item(SOURCE_GENERATOR_ITEM, ANNOTATION_CONFIGMETA_GENERATOR),
        item(SOURCE_SPLICE_ITEM, ANNOTATION_CONFIGMETA_SPLICE),
        item(SOURCE_ROSTER_ITEM, ANNOTATION_CONFIGMETA_ROSTER),
      ],
    },
  };
}

/**
 * The seed program, run by the sidecar's busybox (`busybox sh -c`) inside the app's image: copies each
 * entry of the image's /etc/guestconfig that the emptyDir does not hold yet, skipping the sidecar's
 * names. Entry by entry, because copying `dir/.` would also give the emptyDir the image directory's
 * owner and mode (a 0700 directory of another user would lock the sidecar out).
 */
export function seedScript(nonRoot = false): string {
  const owned = SIDECAR_OWNED_FILES.join('|');
  return [
    `[ -d ${GUESTCONFIG_DIR} ] || exit 0`,
    `cd ${GUESTCONFIG_DIR} || exit 1`,
    `for f in * .[!.]* ..?*; do`,
    `  [ -e "$f" ] || [ -L "$f" ] || continue`,
    `  case "$f" in ${owned}|.kd-tmp.*) continue ;; esac`,
    // A non-root seed cannot keep other owners: the copies are the pod user's, with their modes.
    `  [ -e "${SEED_DIR}/$f" ] || [ -L "${SEED_DIR}/$f" ] || cp ${nonRoot ? '-pR' : '-a'} "$f" ${SEED_DIR}/ || exit 1`,
    `done`,
    // The directory gets the image's own mode (and, as root, its owner): 0755 root is what the sidecar made.
    ...(nonRoot ? [] : [`chown "$(stat -c %u:%g .)" ${SEED_DIR} || exit 1`]),
    `chmod "$(stat -c %a .)" ${SEED_DIR} || exit 1`,
  ].join('\n');
}

type Resources = { requests: Record<string, string>; limits: Record<string, string> };

/**
 * Resources of the injected containers, small because the sidecar only copies a file bounded by the
 * annotation size limit a few times a second at most. A pod whose containers are all Guaranteed
 * (CPU and memory limits, requests equal to them) gets requests equal to limits, so it stays Guaranteed;
 * any other pod gets a small request and a memory limit but no CPU limit, so a burst of copying is never
 * throttled and many member pods fit on a node (5m each).
 */
export function deliveryResources(containers: readonly unknown[]): Resources {
  const guaranteed =
    containers.length > 0 &&
    containers.every((c) => {
      const r = (c as { resources?: { limits?: Record<string, unknown>; requests?: Record<string, unknown> } })
        ?.resources;
      const lim = r?.limits ?? {};
      const req = r?.requests ?? {};
      return ['cpu', 'memory'].every(
        (k) => lim[k] !== undefined && (req[k] === undefined || String(req[k]) === String(lim[k])),
      );
    });
  return guaranteed
    ? { requests: { cpu: '20m', memory: '16Mi' }, limits: { cpu: '20m', memory: '16Mi' } }
    : { requests: { cpu: '5m', memory: '16Mi' }, limits: { memory: '32Mi' } };
}

/**
 * Root with only the capabilities named, or the pod's non-root user with none (and the RuntimeDefault
 * seccomp profile `restricted` requires); no privilege escalation, nothing writable outside its volumes.
 */
function runAs(user: DeliveryUser, add: string[]) {
  if (user.nonRoot)
    return {
      runAsUser: user.uid,
      runAsGroup: user.gid,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    };
  return {
    runAsUser: 0,
    runAsGroup: 0,
    runAsNonRoot: false,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'], ...(add.length ? { add } : {}) },
  };
}

const ROOT: DeliveryUser = { uid: 0, gid: 0, nonRoot: false };

export function sidecarContainer(
  image: string,
  resources: Resources = deliveryResources([]),
  user: DeliveryUser = ROOT,
  secretDelivery: SecretDelivery = 'document',
) {
  return {
    name: GUESTCONFIG_SIDECAR,
    image,
    imagePullPolicy: 'IfNotPresent',
    command: [SIDECAR_PROGRAM],
    env: [{ name: 'KD_SECRET_DELIVERY', value: secretDelivery }],
    restartPolicy: 'Always',
    // Gates everything after it: Kubernetes starts the next init container and the app only once a
    // restartPolicy:Always init container's startupProbe has succeeded. A failure restarts the sidecar
    // (which then waits again); an hour of one-second probes before that.
    startupProbe: {
      exec: { command: ['/bin/test', '-s', `${GUESTCONFIG_DIR}/${GUESTCONFIG_SUBPATH}/${CONFIGMETA_FILE}`] },
      periodSeconds: 1,
      timeoutSeconds: 1,
      failureThreshold: 3600,
    },
    resources,
    // Root, because the files must be root's (configcli merges the private ones only for root); only
    // DAC_OVERRIDE, to keep writing when the seed gave the directory the image's non-root owner. In a
    // non-root pod, the pod's user: the files are then that user's.
    securityContext: runAs(user, ['DAC_OVERRIDE']),
    volumeMounts: [
      { name: CONFIGMETA_VOLUME, mountPath: SIDECAR_SOURCE_DIR, readOnly: true },
      { name: PRIVATE_CONFIGMETA_VOLUME, mountPath: SIDECAR_PRIVATE_DIR, readOnly: true },
      { name: GUESTCONFIG_VOLUME, mountPath: GUESTCONFIG_DIR },
      { name: GUESTCONFIG_TOOLS_VOLUME, mountPath: TOOLS_DIR },
    ],
  };
}

export function seedContainer(
  index: number,
  image: string,
  imagePullPolicy: string | undefined,
  resources: Resources = deliveryResources([]),
  user: DeliveryUser = ROOT,
) {
  return {
    name: `${SEED_CONTAINER_PREFIX}${index}`,
    image,
    ...(imagePullPolicy ? { imagePullPolicy } : {}),
    command: [`${TOOLS_DIR}/busybox`, 'sh', '-c', seedScript(user.nonRoot)],
    resources,
    // Root with only what copying with owners and modes needs (read any file, set owner and mode), so an
    // image whose /etc/guestconfig belongs to another user is copied as it is.
    securityContext: runAs(user, ['CHOWN', 'DAC_OVERRIDE', 'FOWNER']),
    volumeMounts: [
      { name: GUESTCONFIG_VOLUME, mountPath: SEED_DIR, subPath: GUESTCONFIG_SUBPATH },
      { name: GUESTCONFIG_TOOLS_VOLUME, mountPath: TOOLS_DIR, readOnly: true },
    ],
  };
}

export function deliveryVolumes(cluster: string, user: DeliveryUser = ROOT) {
  return [
    configMetaVolume(),
    {
      name: PRIVATE_CONFIGMETA_VOLUME,
      // Mounted only in the sidecar; readable by its user (0444 for a non-root one the kubelet does not own).
      secret: {
        secretName: privateConfigMetaSecretName(cluster),
        optional: true,
        defaultMode: user.nonRoot ? 0o444 : 0o400,
      },
    },
    // In memory: the private files never touch the node's disk. Small: the document is bounded by the
    // annotation size limit, and what the image and the app keep there is configuration.
    { name: GUESTCONFIG_VOLUME, emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
    { name: GUESTCONFIG_TOOLS_VOLUME, emptyDir: { sizeLimit: '16Mi' } },
  ];
}

/** kubectl's choice of container when none is named. */
export const DEFAULT_CONTAINER_ANNOTATION = 'kubectl.kubernetes.io/default-container';

const OUR_VOLUMES = [CONFIGMETA_VOLUME, PRIVATE_CONFIGMETA_VOLUME, GUESTCONFIG_VOLUME, GUESTCONFIG_TOOLS_VOLUME];

const mountsDir = (c: Container) =>
  Array.isArray(c.volumeMounts) &&
  c.volumeMounts.some((m) => m?.mountPath === GUESTCONFIG_DIR || m?.mountPath === `${GUESTCONFIG_DIR}/`);

const nameOf = (c: Container, i: number) => (typeof c.name === 'string' ? c.name : `#${i}`);

export function decidePodDelivery(
  pod: PodForMutation,
  opts: PodDeliveryOptions = { image: DEFAULT_GUESTCONFIG_IMAGE },
): PodDeliveryDecision {
  const labels = pod.metadata?.labels ?? {};
  const cluster = labels[LABEL_KDCLUSTER];
  if (cluster === undefined) return { patch: [], reason: `not a member pod (no ${LABEL_KDCLUSTER} label)` };
  if (cluster === '') return { patch: [], reason: `not injected: the ${LABEL_KDCLUSTER} label is empty` };
  if ((pod.metadata?.annotations ?? {})[ANNOTATION_CONFIGMETA_VOLUME] === 'false') {
    return { patch: [], reason: `opted out by ${ANNOTATION_CONFIGMETA_VOLUME}: "false"` };
  }
  const spec = pod.spec ?? {};
  if (hasConfigMetaDelivery(spec)) return { patch: [], reason: `volume ${CONFIGMETA_VOLUME} already present` };
  const taken = OUR_VOLUMES.find((n) => (spec.volumes ?? []).some((v) => v?.name === n));
  if (taken) return { patch: [], reason: `not injected: the pod already has a volume named ${taken}` };
  const inits = Array.isArray(spec.initContainers) ? spec.initContainers : undefined;
  const clash = (inits ?? []).find(
    (c) => c?.name === GUESTCONFIG_SIDECAR || (typeof c?.name === 'string' && c.name.startsWith(SEED_CONTAINER_PREFIX)),
  );
  if (clash) return { patch: [], reason: `not injected: the pod already has an init container named ${clash.name}` };

  const containers = (Array.isArray(spec.containers) ? spec.containers : []).map((c, i) => ({ c: c ?? {}, i }));
  const app = containers.filter(({ c }) => c.name === 'app');
  const targets = app.length > 0 ? app : containers;
  const kept = targets.filter(({ c }) => mountsDir(c));
  const receivers = targets.filter(({ c }) => !mountsDir(c));
  const keptNote = kept.length
    ? `; kept the existing mount at ${GUESTCONFIG_DIR} in ${kept.map(({ c, i }) => nameOf(c, i)).join(', ')}`
    : '';
  if (receivers.length === 0) {
    return {
      patch: [],
      reason: targets.length === 0 ? 'no container to deliver to' : `no container to deliver to${keptNote}`,
    };
  }

  const patch: PatchOp[] = [];
  const user = deliveryUser(
    pod,
    receivers.map(({ c }) => c),
  );
  const volumes = deliveryVolumes(cluster, user);
  if (Array.isArray(spec.volumes))
    for (const v of volumes) patch.push({ op: 'add', path: '/spec/volumes/-', value: v });
  else patch.push({ op: 'add', path: '/spec/volumes', value: volumes });

  const resources = deliveryResources(containers.map(({ c }) => c));
  const seeds: ReturnType<typeof seedContainer>[] = [];
  for (const { c } of receivers) {
    if (typeof c.image !== 'string' || seeds.some((s) => s.image === c.image)) continue;
    seeds.push(seedContainer(seeds.length, c.image, c.imagePullPolicy, resources, user));
  }
  const ours = [sidecarContainer(opts.image, resources, user, opts.secretDelivery ?? 'document'), ...seeds];
  // In front of the pod's own init containers, in order: the file exists before anything of the pod runs.
  if (inits) ours.forEach((c, k) => patch.push({ op: 'add', path: pointer('spec', 'initContainers', k), value: c }));
  else patch.push({ op: 'add', path: '/spec/initContainers', value: ours });

  // Only the sidecar's subdirectory, never the emptyDir's world-writable root.
  const mount = { name: GUESTCONFIG_VOLUME, mountPath: GUESTCONFIG_DIR, subPath: GUESTCONFIG_SUBPATH };
  for (const { c, i } of receivers) {
    if (Array.isArray(c.volumeMounts))
      patch.push({ op: 'add', path: pointer('spec', 'containers', i, 'volumeMounts', '-'), value: mount });
    else patch.push({ op: 'add', path: pointer('spec', 'containers', i, 'volumeMounts'), value: [mount] });
  }
  // The pod now has several containers: `kubectl exec`/`logs` without -c keep meaning the app, quietly.
  const annotations = pod.metadata?.annotations;
  if (app.length > 0 && annotations?.[DEFAULT_CONTAINER_ANNOTATION] === undefined) {
    patch.push(
      annotations
        ? { op: 'add', path: pointer('metadata', 'annotations', DEFAULT_CONTAINER_ANNOTATION), value: 'app' }
        : { op: 'add', path: '/metadata/annotations', value: { [DEFAULT_CONTAINER_ANNOTATION]: 'app' } },
    );
  }
  const names = receivers.map(({ c, i }) => nameOf(c, i)).join(', ');
  return {
    patch,
    reason: `sidecar ${GUESTCONFIG_SIDECAR} delivers ${GUESTCONFIG_DIR} to ${names} (seeded from ${seeds.length} image(s)${user.nonRoot ? `; as uid ${user.uid} gid ${user.gid}` : ''})${keptNote}`,
  };
}
