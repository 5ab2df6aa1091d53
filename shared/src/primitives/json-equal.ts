/**
 * Equality of two JSON values (what JSON.parse gives: null, booleans, numbers, strings, arrays, plain
 * objects): same keys, same values, key order aside. The admission path compares an object's spec with
 * the old one on every update; util.isDeepStrictEqual gives the same answer for such values but also
 * handles prototypes, cycles and every built-in type, which costs several times more per call.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x);
  if (keys.length !== Object.keys(y).length) return false;
  for (const k of keys) if (!Object.prototype.hasOwnProperty.call(y, k) || !jsonEqual(x[k], y[k])) return false;
  return true;
}
