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
