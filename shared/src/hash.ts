import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';

/** sha256 of the canonical JSON of `value`, lowercase hex (64 characters). */
export function contentHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

/** A short form for per-connection digests in status (collisions only matter for naming a cause). */
export function shortHash(value: unknown): string {
  return contentHash(value).slice(0, 16);
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

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
