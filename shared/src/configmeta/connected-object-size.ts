/**
 * How big a connected ConfigMap or Secret may be and still be delivered. Each goes into one container
 * whose size Kubernetes limits: a ConfigMap's entry into configmeta, which is a pod annotation (256 KiB
 * for all of a pod's annotations), a Secret's entry into the private document, which is the value of
 * a Secret (1 MiB). An entry bigger than its container can never be delivered, however small the rest;
 * such an object is left out of configmeta and reported, and the reconciler keeps nothing of its data.
 */
import { ANNOTATIONS_SIZE_LIMIT } from './annotation-size.js';
import { renderConfigMapEntry } from './render-configmeta.js';
import { renderPrivateSecretEntry } from './render-private-configmeta.js';
import { trimConfigMap, trimSecret, typeLabelMeta, type TrimSecretOptions } from './trim-object.js';
import { LABEL_CM_TYPE, LABEL_SECRET_TYPE, type ConfigMapLike, type SecretLike } from '../domain/types.js';

/** An object as the API server sends it (data and the rest beside metadata). */
type KubeObjectLike = { metadata?: Record<string, unknown> };

/** Kubernetes' limit on the data of a Secret (the private Secret holds the private document). */
export const SECRET_SIZE_LIMIT = 1024 * 1024;

export const CONNECTED_OBJECT_LIMITS = { ConfigMap: ANNOTATIONS_SIZE_LIMIT, Secret: SECRET_SIZE_LIMIT } as const;

/** Bytes of the ConfigMap's entry in configmeta (JSON, as the pod annotation holds it). */
export function configMapEntryBytes(cm: ConfigMapLike): number {
  return Buffer.byteLength(JSON.stringify(renderConfigMapEntry(cm)));
}

/** Bytes of the Secret's entry in the private document. */
export function secretEntryBytes(s: SecretLike): number {
  return Buffer.byteLength(JSON.stringify(renderPrivateSecretEntry(s)));
}

/** The status message of a connection whose object is too big to deliver. */
export function tooLargeToDeliver(kind: 'ConfigMap' | 'Secret', name: string, bytes: number): string {
  const where =
    kind === 'ConfigMap'
      ? 'configmeta is a pod annotation, and annotations are limited'
      : 'the private document is a Secret, and Secrets are limited';
  return `${kind.toLowerCase()} "${name}" is ${bytes} bytes in configmeta, more than can ever be delivered (${where} to ${CONNECTED_OBJECT_LIMITS[kind]} bytes); it is left out until it is smaller`;
}

/** What the reconciler keeps of a fetched object, and its size for the content cache's budget. */
export interface Kept<T> {
  value: T;
  bytes: number;
}

/** What an object too big to deliver costs in the cache: its identity and type label. */
const STUB_BYTES = 256;

/** A fetched ConfigMap as kept for rendering, or a stub when it is too big to deliver. */
export function keepConfigMap(o: KubeObjectLike): Kept<ConfigMapLike> {
  const cm = trimConfigMap(o);
  const bytes = configMapEntryBytes(cm);
  if (bytes <= CONNECTED_OBJECT_LIMITS.ConfigMap) return { value: cm, bytes };
  return { value: { metadata: typeLabelMeta(o, LABEL_CM_TYPE).metadata, tooLargeBytes: bytes }, bytes: STUB_BYTES };
}

/** A fetched Secret as kept for rendering (values and their MAC), or a stub when it is too big to deliver. */
export function keepSecret(o: KubeObjectLike, opts: TrimSecretOptions): Kept<SecretLike> {
  const s = trimSecret(o, opts);
  const bytes = secretEntryBytes(s);
  if (bytes <= CONNECTED_OBJECT_LIMITS.Secret) return { value: s, bytes };
  const metadata = typeLabelMeta(o, LABEL_SECRET_TYPE).metadata;
  return { value: { metadata, keys: [], tooLargeBytes: bytes }, bytes: STUB_BYTES };
}
