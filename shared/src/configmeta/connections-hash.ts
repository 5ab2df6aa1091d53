/**
 * Every digest of what pods see from their connections, in one place. A connected cluster is hashed as
 * its embedded configmeta section, a ConfigMap as its configmeta entry, a Secret as its entry plus a
 * keyed MAC of its data (`secretDataMac` of secret-data-mac.ts, computed once when the Secret enters the cache) — never the
 * values themselves. A metadata-only write to a Secret (a new resourceVersion, the same data and
 * labels) changes nothing. `connectionsHash` folds them into the value kept in status.connectionsHash;
 * a Secret's digest is never shown on its own.
 */
import { contentHash } from '../primitives/hash.js';
import { renderConfigMapEntry, renderEmbeddedCluster, renderSecretEntry } from './render-configmeta.js';
import { type ConnectedCluster } from './configmeta-types.js';
import type { ConfigMapLike, SecretLike } from '../domain/types.js';

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
