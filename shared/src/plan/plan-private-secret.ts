/**
 * The per-cluster private Secret (guestconfig-layout.ts names it): the decision whether to create,
 * patch or delete it, as a pure function of the rendered private files and the cached copy. The cache
 * holds its metadata only; the content is compared through a keyed MAC kept in an annotation, so an
 * unchanged document writes nothing — across restarts too — and nothing derived from Secret values is
 * readable without the reconciler's key.
 */
import { createHmac } from 'node:crypto';
import { canonicalJson } from '../primitives/canonical-json.js';
import { DIGEST_KEY_BYTES } from '../configmeta/secret-data-mac.js';
import {
  PRIVATE_SECRET_KEY_CONFIGMETA,
  PRIVATE_SECRET_KEY_PLATFORM,
  PRIVATE_SECRET_KEY_VERSION,
  SPLICE_SECTIONS,
  privateConfigMetaSecretName,
  privateSectionKey,
} from '../domain/guestconfig-layout.js';
import { pointer, testIdentity, type PatchOp } from '../primitives/json-patch.js';
import type { PrivateFiles } from '../configmeta/render-private-configmeta.js';
import { API_VERSION, type KDCluster } from '../domain/types.js';

/** The field manager of the reconciler's writes: a later data write by any other manager is a hand edit. */
export const RECONCILER_FIELD_MANAGER = 'kd-connections-reconciler';

/** Says which cluster a private Secret belongs to (also the reconciler's watch selector). */
export const LABEL_PRIVATE_CONFIGMETA_OF = 'kd-connections.hpe.com/private-configmeta-of';
export const ANNOTATION_PRIVATE_CONTENT_MAC = 'kd-connections.hpe.com/content-mac';
const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'kd-connections' };

/** A private Secret as the reconciler caches it: metadata only, never its data. */
export interface CachedPrivateSecret {
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    /** Only the content MAC. */
    annotations?: Record<string, string>;
    ownerReferences?: { kind?: string; uid?: string; controller?: boolean }[];
    /** Field managers other than the reconciler that wrote `data` after its last write of it (a hand edit). */
    dataEditedBy?: string[];
  };
}

export interface SecretBody {
  apiVersion: 'v1';
  kind: 'Secret';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences: Record<string, unknown>[];
  };
  type: 'Opaque';
  data: Record<string, string>;
}

export type PrivateSecretWrite =
  | { kind: 'create'; name: string; body: SecretBody }
  /** editedBy: the data was changed by these field managers, and the patch puts it back. */
  | { kind: 'patch'; name: string; ops: PatchOp[]; editedBy?: string[] }
  /** Deleted with preconditions on uid and resourceVersion. */
  | { kind: 'delete'; name: string; uid: string; resourceVersion?: string; why: string };

/** HMAC-SHA256 of the files under the reconciler's key, bound to the owning cluster's uid. */
export function privateContentMac(key: Uint8Array, clusterUid: string, files: PrivateFiles): string {
  if (key.length < DIGEST_KEY_BYTES) throw new Error(`digest key must be at least ${DIGEST_KEY_BYTES} bytes`);
  return createHmac('sha256', key)
    .update(canonicalJson({ kind: 'private-configmeta', uid: clusterUid, files }))
    .digest('hex');
}

/**
 * The version the sidecar matches between the pod annotation and the private Secret: a keyed MAC of the
 * files under its own label (not the content MAC), shortened. It is in a pod annotation, which more users
 * read than Secrets: keyed, so it tells nothing about the values (a plain hash would let anyone confirm a
 * guess, test/reliability/secret-digest-guess.test.ts).
 */
export function privateVersion(key: Uint8Array, clusterUid: string, files: PrivateFiles): string {
  if (key.length < DIGEST_KEY_BYTES) throw new Error(`digest key must be at least ${DIGEST_KEY_BYTES} bytes`);
  return createHmac('sha256', key)
    .update(canonicalJson({ kind: 'private-configmeta-version', uid: clusterUid, files }))
    .digest('hex')
    .slice(0, 32);
}

/** Only what the plan reads: identity, labels, the MAC annotation and owners. */
export function trimPrivateSecret(o: { metadata?: Record<string, unknown> }): CachedPrivateSecret {
  const m = (o.metadata ?? {}) as CachedPrivateSecret['metadata'] & Record<string, unknown>;
  const mac = m.annotations?.[ANNOTATION_PRIVATE_CONTENT_MAC];
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      labels: m.labels,
      // Kept as a map (possibly empty) when the Secret has any annotation: a patch must then add a key.
      ...(m.annotations ? { annotations: mac !== undefined ? { [ANNOTATION_PRIVATE_CONTENT_MAC]: mac } : {} } : {}),
      ownerReferences: (m.ownerReferences ?? []).map((r) => ({ kind: r.kind, uid: r.uid, controller: r.controller })),
      ...dataEditors(m.managedFields),
    },
  };
}

type ManagedField = { manager?: string; time?: string; fieldsV1?: Record<string, unknown> };

/**
 * Who wrote the Secret's data after the reconciler last did, from managedFields (the server records, per
 * manager, the fields each write changed and when): managers other than RECONCILER_FIELD_MANAGER whose
 * entry owns `data` fields and is later than the reconciler's own (to the second, as the server records).
 */
function dataEditors(managed: unknown): { dataEditedBy?: string[] } {
  if (!Array.isArray(managed)) return {};
  const entries = (managed as ManagedField[]).filter((f) => f.fieldsV1 && 'f:data' in f.fieldsV1);
  const time = (f: ManagedField) => Date.parse(f.time ?? '') || 0;
  const ours = Math.max(0, ...entries.filter((f) => f.manager === RECONCILER_FIELD_MANAGER).map(time));
  const others = entries.filter((f) => f.manager !== RECONCILER_FIELD_MANAGER && time(f) > ours);
  return others.length > 0 ? { dataEditedBy: [...new Set(others.map((f) => f.manager ?? 'unknown'))].sort() } : {};
}

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
const dataOf = (files: PrivateFiles, version: string): Record<string, string> => {
  const data: Record<string, string> = {
    [PRIVATE_SECRET_KEY_CONFIGMETA]: b64(files.configmeta),
    [PRIVATE_SECRET_KEY_PLATFORM]: b64(files.platform),
    [PRIVATE_SECRET_KEY_VERSION]: b64(version),
  };
  for (const s of SPLICE_SECTIONS) {
    const text = files.sections[s];
    if (text !== undefined) data[privateSectionKey(s)] = b64(text);
  }
  return data;
};

export function privateSecretBody(cluster: KDCluster, files: PrivateFiles, mac: string, version: string): SecretBody {
  const { name = '', namespace = '', uid = '' } = cluster.metadata;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: privateConfigMetaSecretName(name),
      namespace,
      labels: { ...MANAGED_BY, [LABEL_PRIVATE_CONFIGMETA_OF]: name },
      annotations: { [ANNOTATION_PRIVATE_CONTENT_MAC]: mac },
      // Deleted with the cluster by the garbage collector. blockOwnerDeletion would need update on
      // kdclusters/finalizers; nothing has to wait for this Secret.
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: 'KubeDirectorCluster',
          name,
          uid,
          controller: true,
          blockOwnerDeletion: false,
        },
      ],
    },
    type: 'Opaque',
    data: dataOf(files, version),
  };
}

/**
 * Whose a Secret of the private Secret's name is. Ours: labelled as this cluster's private configmeta and
 * controlled by this kdcluster (its uid). An earlier cluster's: labelled so, controlled by a kdcluster of
 * another uid (the garbage collector removes it too once it sees the owner gone). Anything else is
 * someone else's: never read from, changed or deleted.
 */
export function privateSecretOwner(
  existing: CachedPrivateSecret,
  cluster: KDCluster,
): { owner: 'ours' | 'earlier-cluster' } | { owner: 'foreign'; why: string } {
  const controller = (existing.metadata.ownerReferences ?? []).find((r) => r.controller);
  const name = cluster.metadata.name ?? '';
  const label = existing.metadata.labels?.[LABEL_PRIVATE_CONFIGMETA_OF];
  if (label === undefined) return { owner: 'foreign', why: `it has no label ${LABEL_PRIVATE_CONFIGMETA_OF}=${name}` };
  if (label !== name) {
    const why = `its label ${LABEL_PRIVATE_CONFIGMETA_OF} is ${JSON.stringify(label)}, not ${JSON.stringify(name)}`;
    return { owner: 'foreign', why };
  }
  if (controller?.kind !== 'KubeDirectorCluster')
    return { owner: 'foreign', why: 'it is not controlled by a KubeDirectorCluster (no controller owner reference)' };
  return controller.uid === cluster.metadata.uid ? { owner: 'ours' } : { owner: 'earlier-cluster' };
}

/** Status and event text for a private Secret name someone else holds: what it is and what to do. */
export function foreignPrivateSecretMessage(cluster: KDCluster, why: string): string {
  const { name = '', namespace = '' } = cluster.metadata;
  return (
    `Secret ${namespace}/${privateConfigMetaSecretName(name)} is not this kdcluster's private configmeta ` +
    `Secret (${why}); kd-connections never uses or changes it, and the member pods get configmeta without ` +
    `Secret values until it is deleted or renamed (then the reconciler creates its own)`
  );
}

/**
 * The one write (or none) that brings the private Secret of `cluster` to `files` (undefined: it should
 * not exist). A Secret left by an earlier cluster of the same name is deleted first; the next reconcile
 * creates the new one. Someone else's Secret of that name is left alone (no write).
 */
export function planPrivateSecret(
  cluster: KDCluster,
  files: PrivateFiles | undefined,
  existing: CachedPrivateSecret | undefined,
  key: Uint8Array,
): PrivateSecretWrite | undefined {
  const name = privateConfigMetaSecretName(cluster.metadata.name ?? '');
  const uid = cluster.metadata.uid ?? '';
  const remove = (why: string): PrivateSecretWrite => ({
    kind: 'delete',
    name,
    uid: existing!.metadata.uid ?? '',
    resourceVersion: existing!.metadata.resourceVersion,
    why,
  });
  const owner = existing && privateSecretOwner(existing, cluster).owner;
  if (owner === 'foreign') return undefined;
  if (owner === 'earlier-cluster') return remove('it belongs to an earlier cluster of the same name');
  if (!files) return existing ? remove('the cluster has no Secret connection') : undefined;
  const mac = privateContentMac(key, uid, files);
  const version = privateVersion(key, uid, files);
  if (!existing) return { kind: 'create', name, body: privateSecretBody(cluster, files, mac, version) };
  const annotations = existing.metadata.annotations;
  const editedBy = existing.metadata.dataEditedBy;
  if (annotations?.[ANNOTATION_PRIVATE_CONTENT_MAC] === mac && !editedBy?.length) return undefined;
  const guard = testIdentity(existing.metadata);
  if (guard.length < 2) throw new Error(`private Secret ${name}: cached copy has no uid or resourceVersion`);
  return {
    kind: 'patch',
    name,
    ops: [
      ...guard,
      { op: 'add', path: '/data', value: dataOf(files, version) },
      annotations
        ? { op: 'add', path: pointer('metadata', 'annotations', ANNOTATION_PRIVATE_CONTENT_MAC), value: mac }
        : { op: 'add', path: '/metadata/annotations', value: { [ANNOTATION_PRIVATE_CONTENT_MAC]: mac } },
    ],
    ...(editedBy?.length ? { editedBy } : {}),
  };
}
