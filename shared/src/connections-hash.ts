/**
 * Every digest of what pods see from their connections, in one place. A connected cluster is hashed as
 * its embedded configmeta section, a ConfigMap as its configmeta entry, a Secret as its entry plus a
 * salted digest of its data (`secretDataHash`, computed once when the Secret enters the cache) — never
 * the values themselves. A metadata-only write to a Secret (a new resourceVersion, the same data and
 * labels) changes nothing. `connectionsHash` folds them into the value kept in status.connectionsHash.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import { contentHash } from './hash.js';
import {
  renderConfigMapEntry,
  renderEmbeddedCluster,
  renderSecretEntry,
  type ConnectedCluster,
} from './render-configmeta.js';
import type { ConfigMapLike, SecretLike } from './types.js';

/**
 * Digest of a Secret's data, salted with its uid. Like Helm's checksum annotations it is a one-way
 * digest of the values; it lives in the reconciler's memory and, folded into other content, in
 * status.connectionsHash — never in configmeta, logs or events.
 */
export function secretDataHash(uid: string | undefined, data: Record<string, string> | undefined): string {
  return createHash('sha256')
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
  return contentHash({ entry: renderSecretEntry(s, {}), uid: s.metadata.uid, dataHash: s.dataHash });
}

/** The hash over all connected objects' digests ("Kind/name" → digest). */
export function connectionsHash(digests: Record<string, string>): string {
  return contentHash(digests);
}
