/**
 * Names shared by the three parts of in-pod delivery — the pod webhook that injects the sidecar and
 * volumes, the reconciler that writes the per-cluster private Secret, and the reconnect hook that reads
 * what a member's file holds. One place, so the parts cannot drift apart.
 *
 * Layout in a member pod:
 *  - the `kd-guestconfig` native sidecar (an init container with restartPolicy Always) copies the
 *    downward-API projection of the configmeta annotation (volume `kd-configmeta`, mounted only in the
 *    sidecar at SIDECAR_SOURCE_DIR) into an emptyDir mounted at /etc/guestconfig in the app container(s),
 *    swapping the file atomically (write a temporary file in the directory, then rename);
 *  - the emptyDir is seeded with the image's own /etc/guestconfig files, so nothing the image keeps there
 *    is hidden and the directory stays writable;
 *  - the optional per-cluster private Secret (volume `kd-configmeta-private`, mounted only in the sidecar
 *    at SIDECAR_PRIVATE_DIR) becomes /etc/guestconfig/.priv_configmeta.json and .platform.json, readable
 *    by root only (configcli merges them when it runs as root), when its version is the one the pod's
 *    splice annotation names;
 *  - after each swap the sidecar writes the delivered generator to GENERATOR_FILE.
 */
export const GUESTCONFIG_DIR = '/etc/guestconfig';
export const GUESTCONFIG_SIDECAR = 'kd-guestconfig';
export const GUESTCONFIG_VOLUME = 'kd-guestconfig';
export const PRIVATE_CONFIGMETA_VOLUME = 'kd-configmeta-private';
export const SIDECAR_SOURCE_DIR = '/kd/source';
export const SIDECAR_PRIVATE_DIR = '/kd/private';
/** Written last, after the document: the generator the file in /etc/guestconfig now holds. */
export const GENERATOR_FILE = '.configmeta-generator';
/** configcli's private file and the platform file it needs beside it (it merges neither without both). */
export const PRIVATE_CONFIGMETA_FILE = '.priv_configmeta.json';
export const PLATFORM_FILE = '.platform.json';
/** Keys of the per-cluster private Secret (Secret keys may not start with a dot on every tool's path). */
export const PRIVATE_SECRET_KEY_CONFIGMETA = 'priv_configmeta.json';
export const PRIVATE_SECRET_KEY_PLATFORM = 'platform.json';

/** The per-cluster Secret holding what only the pod's root may read; owned by the kdcluster. */
export function privateConfigMetaSecretName(cluster: string): string {
  return `kd-configmeta-private-${cluster}`;
}

// Additions for the pod webhook and the sidecar image (the names above are fixed; these only extend them).

/** The public document's file name in GUESTCONFIG_DIR (and its item name in the `kd-configmeta` volume). */
export const CONFIGMETA_FILE = 'configmeta.json';
/** The downward-API volume projecting the configmeta and generator annotations; mounted only in the sidecar. */
export const CONFIGMETA_VOLUME = 'kd-configmeta';
/** Item of the `kd-configmeta` volume holding the generator annotation. */
export const SOURCE_GENERATOR_ITEM = 'generator';
/** emptyDir through which the sidecar hands its static busybox to the seed init container(s). */
export const GUESTCONFIG_TOOLS_VOLUME = 'kd-guestconfig-tools';
export const TOOLS_DIR = '/kd-tools';
/** Where a seed init container mounts the `kd-guestconfig` emptyDir (its own /etc/guestconfig stays the image's). */
export const SEED_DIR = '/kd-seed';
/** Seed init containers are named `kd-guestconfig-seed-<n>`, one per distinct image of the receiving containers. */
export const SEED_CONTAINER_PREFIX = 'kd-guestconfig-seed-';
/** The sidecar's program inside its image. */
export const SIDECAR_PROGRAM = '/kd/bin/guestconfig-sync';
/**
 * The sidecar image when none is configured: the one the test harness and `npm start` build from
 * Debian's busybox-static and import into the node (test/images). A release sets --guestconfig-image.
 */
export const DEFAULT_GUESTCONFIG_IMAGE = 'kd.invalid/kd-guestconfig:local';
/** Names the sidecar owns in GUESTCONFIG_DIR: seeding never copies the image's files of these names. */
export const SIDECAR_OWNED_FILES = [CONFIGMETA_FILE, GENERATOR_FILE, PRIVATE_CONFIGMETA_FILE, PLATFORM_FILE] as const;

// In-pod assembly of the KubeDirector document (default mode) and the directory's ownership.

/**
 * The subdirectory of the `kd-guestconfig` emptyDir that the receiving containers mount at
 * /etc/guestconfig (subPath). The emptyDir's own root is world-writable (the kubelet makes it 0777);
 * this directory is created by the sidecar with its owner and 0755 before any other container starts, so
 * nobody else in the pod can create, replace or symlink a name in it. Only the sidecar sees the root.
 */
export const GUESTCONFIG_SUBPATH = 'guestconfig';
/**
 * Public pod annotation: how the sidecar assembles KubeDirector's document from the annotation's
 * document and the private Secret — `1 <version> (<section> <start> <end> <length>)*` (byte ranges of
 * the public text that the private Secret's `<section>.json`, of `<length>` bytes, replaces). `<version>` is a keyed MAC (the reconciler's
 * key), also in the private Secret's `version` key: the sidecar only joins halves of one version.
 */
export const ANNOTATION_CONFIGMETA_SPLICE = 'kd-connections.hpe.com/configmeta-splice';
/** Item of the `kd-configmeta` volume holding the splice annotation. */
export const SOURCE_SPLICE_ITEM = 'splice';
/**
 * Public pod annotation: a digest of the roster (role → member DNS names) the pod's document lists
 * (roster-changes.ts). The sidecar copies it to ROSTER_FILE once that document is in place, so the
 * reconciler can tell that a member's file already lists a membership change before announcing it.
 */
export const ANNOTATION_CONFIGMETA_ROSTER = 'kd-connections.hpe.com/configmeta-roster';
/** Item of the `kd-configmeta` volume holding the roster annotation. */
export const SOURCE_ROSTER_ITEM = 'roster';
/** In the emptyDir's root (the sidecar's only; the app does not see it), beside the root copy of GENERATOR_FILE. */
export const ROSTER_FILE = '.configmeta-roster';
/** Key of the private Secret holding the version its sections belong to. */
export const PRIVATE_SECRET_KEY_VERSION = 'version';
/** Top-level sections of the document the private Secret may replace, each as the key `<section>.json`. */
export const SPLICE_SECTIONS = ['nodegroups', 'connections'] as const;
export type SpliceSection = (typeof SPLICE_SECTIONS)[number];
export const privateSectionKey = (s: SpliceSection): string => `${s}.json`;

/**
 * How connected Secret values reach the container:
 * - `document` (default): /etc/guestconfig/configmeta.json is KubeDirector's document with the Secret
 *   entries as KubeDirector renders them, readable by every user of the container as under KubeDirector;
 * - `private-file`: configmeta.json keeps them redacted; they are only in the owner-only
 *   .priv_configmeta.json, which the stock configcli never reads (third_party/README.md).
 */
export const SECRET_DELIVERY_MODES = ['document', 'private-file'] as const;
export type SecretDelivery = (typeof SECRET_DELIVERY_MODES)[number];

/**
 * True when the webhook gave the pod its delivery: the `kd-configmeta` volume is there (the sidecar layout,
 * or the read-only volume on /etc/guestconfig that earlier versions mounted — those pods still receive
 * the file). Pod volumes are immutable, so a member pod without it never sees the file until recreated.
 */
export function hasConfigMetaDelivery(spec: { [k: string]: unknown } | undefined): boolean {
  const volumes = spec?.volumes;
  return Array.isArray(volumes) && volumes.some((v: { name?: unknown } | null) => v?.name === CONFIGMETA_VOLUME);
}
