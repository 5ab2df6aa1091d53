/**
 * The keyed MAC of a Secret's data, computed once when the Secret enters the reconciler's cache
 * (trim-object.ts) and folded into its digest (connections-hash.ts) instead of the values themselves.
 */
import { createHmac } from 'node:crypto';
import { canonicalJson } from '../primitives/canonical-json.js';

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
