/**
 * JSON with object keys sorted at every level, so equal values always serialize to equal strings
 * whatever order their keys were built in. Arrays keep their order: callers sort set-like lists.
 * `undefined` members are dropped, as JSON.stringify drops them.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    // No prototype: a plain object would turn a "__proto__" key (a valid ConfigMap key) into a prototype
    // assignment and drop it from the JSON, so a change to its value would not change the hash.
    const out: Record<string, unknown> = Object.create(null);
    for (const k of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = sortKeys(v);
    }
    return out;
  }
  return value;
}
