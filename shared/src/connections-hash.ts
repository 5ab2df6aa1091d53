/**
 * Every digest of what pods see from their connections, in one place. A connected cluster is hashed as
 * its embedded configmeta section, a ConfigMap as its configmeta entry, a Secret as its entry plus a
 * keyed MAC of its data (`secretDataMac`, computed once when the Secret enters the cache) — never the
 * values themselves. A metadata-only write to a Secret (a new resourceVersion, the same data and
 * labels) changes nothing. `connectionsHash` folds them into the value kept in status.connectionsHash;
 * a Secret's digest is never shown on its own.
 */
import { createHmac } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import { contentHash } from './hash.js';
import {
  renderConfigMapEntry,
  renderEmbeddedCluster,
  renderSecretEntry,
  type ConnectedCluster,
} from './render-configmeta.js';
import type { ConfigMapLike, SecretLike } from './types.js';

/** Bytes of the key behind secretDataMac. */
export const DIGEST_KEY_BYTES = 32;

/**
 * HMAC-SHA256 of a Secret's data (bound to its uid) under a key only the reconciler can read. An unkeyed
 * digest of a low-entropy value can be reversed offline by trying every candidate, and whatever folds
 * it in (status.connectionsHash) is readable by anyone who can view the cluster; without the key the
 * MAC says nothing about the values.
 */
export function secretDataMac(
  key: Uint8Array,
  uid: string | undefined,
  data: Record<string, string> | undefined,
): string {
  if (key.length < DIGEST_KEY_BYTES) throw new Error(`digest key must be at least ${DIGEST_KEY_BYTES} bytes`);
  return createHmac('sha256', key)
    .update(canonicalJson({ uid: uid ?? '', data: data ?? {} }))
    .digest('hex');
}

export function clusterDigest(c: ConnectedCluster): string {
  return contentHash(renderEmbeddedCluster(c));
}

export function configMapDigest(cm: ConfigMapLike): string {
  return contentHash(renderConfigMapEntry(cm));
}

export function secretDigest(s: SecretLike): string {
  return contentHash({ entry: renderSecretEntry(s), uid: s.metadata.uid, dataMac: s.dataMac });
}

/** The hash over all connected objects' digests ("Kind/name" → digest). */
export function connectionsHash(digests: Record<string, string>): string {
  return contentHash(digests);
}
