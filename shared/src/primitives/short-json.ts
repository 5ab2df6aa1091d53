/**
 * Values quoted for messages, cut to `max` characters: a request may carry a megabyte where a name
 * belongs, and the answer must stay short (and must not carry the value back whole).
 */

/** `String(v)`, cut. */
export function shortText(v: unknown, max: number): string {
  const s = String(v);
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** JSON of `v` (a string stays quoted after the cut). */
export function shortJson(v: unknown, max: number): string {
  if (typeof v === 'string') return JSON.stringify(shortText(v, max));
  return shortText(JSON.stringify(v) ?? String(v), max);
}
