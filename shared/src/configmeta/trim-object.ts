/**
 * What the caches keep of each object, in one place. Every cache stores less than the API server sends:
 * managedFields and kubectl's last-applied copy cost memory and are never read (and for a Secret the
 * last-applied copy quotes the values); ConfigMaps and Secrets read for their labels keep identity and
 * labels only (the reconciler's watch of every labelled one: identity and the type label); a connected
 * ConfigMap keeps what its configmeta entry renders, a connected Secret what the private document renders
 * and a keyed MAC of its data (no managedFields, no last-applied copy); member pods keep what rendering
 * and delivery read, which keeps 10,000 cached pods small.
 */
import {
  ANNOTATION_CONFIGMETA_ROSTER,
  ANNOTATION_CONFIGMETA_SPLICE,
  hasConfigMetaDelivery,
} from '../domain/guestconfig-layout.js';
import { annotationsSize } from './annotation-size.js';
import { secretDataMac } from './secret-data-mac.js';
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
  ANNOTATION_CONFIGMETA_VOLUME,
  type ConfigMapLike,
  type MetaObject,
  type PodLike,
  type SecretLike,
} from '../domain/types.js';

export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/** Annotations never kept nor copied into configmeta. */
export function isDroppedAnnotation(key: string): boolean {
  return key === LAST_APPLIED_ANNOTATION;
}

function slimMeta(m: Record<string, unknown>): Record<string, unknown> {
  const { managedFields: _mf, ...rest } = m;
  const annotations = rest.annotations as Record<string, string> | undefined;
  if (annotations && Object.keys(annotations).some(isDroppedAnnotation)) {
    rest.annotations = Object.fromEntries(Object.entries(annotations).filter(([k]) => !isDroppedAnnotation(k)));
  }
  return rest;
}

/** The whole object without managedFields and the last-applied copy. */
export function slimObject<T extends { metadata?: Record<string, unknown> }>(obj: T): T {
  return obj.metadata ? { ...obj, metadata: slimMeta(obj.metadata) } : obj;
}

/** Identity and labels only: what the connection rules read, and nothing that could hold Secret data. */
export function metaOnly(obj: { apiVersion?: string; kind?: string; metadata?: Record<string, unknown> }): MetaObject {
  const m = obj.metadata ?? {};
  const metadata: MetaObject['metadata'] = {};
  for (const k of ['name', 'namespace', 'uid', 'resourceVersion'] as const) {
    if (typeof m[k] === 'string') metadata[k] = m[k];
  }
  if (m.labels && typeof m.labels === 'object') metadata.labels = { ...(m.labels as Record<string, string>) };
  if (m.deletionTimestamp !== undefined) metadata.deletionTimestamp = m.deletionTimestamp as string;
  return { metadata };
}

/**
 * What a metadata-only cache of labelled ConfigMaps or Secrets keeps of each: identity and the one type
 * label the connection rules read. Nothing else: any tenant can create these objects, and annotations
 * alone may be 256 KiB each. What a connected object renders is fetched on demand (content-cache.ts).
 */
export function typeLabelMeta(obj: { metadata?: Record<string, unknown> }, label: string): MetaObject {
  const m = obj.metadata ?? {};
  const metadata: MetaObject['metadata'] = {};
  for (const k of ['name', 'namespace', 'uid', 'resourceVersion'] as const) {
    if (typeof m[k] === 'string') metadata[k] = m[k];
  }
  const value = (m.labels as Record<string, unknown> | undefined)?.[label];
  if (typeof value === 'string') metadata.labels = { [label]: value };
  if (m.deletionTimestamp !== undefined) metadata.deletionTimestamp = m.deletionTimestamp as string;
  return { metadata };
}

/** Identity, labels and annotations but the last-applied copy: what a connected object's entry renders. */
function renderedMeta(o: { metadata?: Record<string, unknown> }): MetaObject['metadata'] {
  const { metadata } = metaOnly(o);
  const annotations = o.metadata?.annotations as Record<string, string> | undefined;
  const kept = Object.entries(annotations ?? {}).filter(([k]) => !isDroppedAnnotation(k));
  if (kept.length > 0) metadata.annotations = Object.fromEntries(kept);
  return metadata;
}

/** A connected ConfigMap as the reconciler keeps it: what its configmeta entry renders (no binaryData). */
export function trimConfigMap(o: { metadata?: Record<string, unknown> }): ConfigMapLike {
  const data = (o as { data?: Record<string, string> }).data;
  return { metadata: renderedMeta(o), ...(data ? { data: { ...data } } : {}) };
}

export interface TrimSecretOptions {
  /** The reconciler's digest key (secretDataMac). */
  key: Uint8Array;
}

/**
 * A connected Secret as the reconciler keeps it: what the private document renders (identity, labels,
 * annotations but the last-applied copy, the values) and a MAC of the values for change detection.
 * Nothing of it reaches the API but the per-cluster private Secret, which only root in the pod reads.
 */
export function trimSecret(o: { metadata?: Record<string, unknown> }, opts: TrimSecretOptions): SecretLike {
  const data = (o as { data?: Record<string, string> }).data;
  const metadata = renderedMeta(o);
  return {
    metadata,
    keys: Object.keys(data ?? {}).sort(),
    dataMac: secretDataMac(opts.key, metadata.uid, data ?? {}),
    ...(data ? { data: { ...data } } : {}),
  };
}

const OUR_POD_ANNOTATIONS = [
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
  ANNOTATION_CONFIGMETA_SPLICE,
  ANNOTATION_CONFIGMETA_ROSTER,
];

/** A pod as cached: identity, labels, DNS fields, readiness, and our generator/hash annotations. */
export interface CachedPod extends PodLike {
  metadata: PodLike['metadata'] & {
    /** Bytes of the pod's annotations other than ours, for the annotation size limit. */
    otherAnnotationsBytes: number;
  };
  spec: NonNullable<PodLike['spec']> & {
    /**
     * Set when the pod has no configmeta delivery (the webhook's sidecar and volumes) and did not opt out:
     * pod volumes and init containers are immutable, so it never sees the file until it is recreated. One flag instead of the volumes keeps the cache small.
     */
    missingConfigMetaVolume?: true;
  };
}

/** A member pod the webhook did not give its delivery (created while it was down, labelled later, or nothing to deliver to), and not opted out. */
export function lacksConfigMetaVolume(p: PodLike): boolean {
  if (p.metadata.annotations?.[ANNOTATION_CONFIGMETA_VOLUME] === 'false') return false;
  return !hasConfigMetaDelivery(p.spec);
}

export function trimPod(o: { metadata: Record<string, unknown> }): CachedPod {
  const p = o as unknown as PodLike;
  const ann = p.metadata.annotations;
  const ours = ann
    ? Object.fromEntries(
        OUR_POD_ANNOTATIONS.filter((k) => k !== ANNOTATION_CONFIGMETA && k in ann).map((k) => [k, ann[k]!]),
      )
    : undefined;
  const others = ann
    ? Object.fromEntries(Object.entries(ann).filter(([k]) => !OUR_POD_ANNOTATIONS.includes(k)))
    : undefined;
  return {
    metadata: {
      name: p.metadata.name,
      namespace: p.metadata.namespace,
      uid: p.metadata.uid,
      resourceVersion: p.metadata.resourceVersion,
      labels: p.metadata.labels,
      // Kept as a map (possibly empty) when the pod has any annotation: a patch must then add keys, not the map.
      annotations: ours,
      deletionTimestamp: p.metadata.deletionTimestamp,
      // A new member waits for the seats below it for a while from its creation (seats.ts).
      creationTimestamp: p.metadata.creationTimestamp,
      otherAnnotationsBytes: annotationsSize(others),
    },
    spec: {
      hostname: p.spec?.hostname,
      subdomain: p.spec?.subdomain,
      ...(lacksConfigMetaVolume(p) ? { missingConfigMetaVolume: true as const } : {}),
    },
    status: {
      phase: p.status?.phase,
      conditions: (p.status?.conditions ?? [])
        .filter((c) => c.type === 'Ready')
        .map((c) => ({ type: c.type, status: c.status })),
    },
  };
}
