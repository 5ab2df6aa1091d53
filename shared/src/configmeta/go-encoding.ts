/**
 * Values written the way KubeDirector's Go code writes them into configmeta: map keys in encoding/json's
 * order, []byte as base64, and Kubernetes quantities rounded as KubeDirector rounds them.
 */

/**
 * A map with its keys in the order Go's encoding/json writes them (byte order). configcli lists a map's
 * keys in file order (`configcli -g nodegroups.1.roles`), so the order is observable. Integer-like keys
 * ("7", "10") are the exception: JavaScript objects always iterate them first, in numeric order.
 */
export function goMap<T>(entries: Iterable<[string, T]>): Record<string, T> {
  const list = [...entries].sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return Object.fromEntries(list);
}

/** MiB from a Kubernetes memory quantity, as KubeDirector computes it: bytes rounded up, then MiB floored. */
export function memoryMiB(q: string | number | undefined): string {
  const v = parseQuantity(q);
  if (!v) return '0';
  return String(ceilDiv(v.num, v.den) / 2n ** 20n);
}

/** Whole cores from a CPU quantity, rounded up ("500m" → 1), as KubeDirector computes it. */
export function cores(q: string | number | undefined): string {
  const v = parseQuantity(q);
  return v ? String(ceilDiv(v.num, v.den)) : '0';
}

const BINARY: Record<string, bigint> = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/**
 * A Kubernetes quantity as an exact fraction num/den (den > 0), or undefined when absent or not a
 * quantity. Exact arithmetic: "1000m" must be exactly one core. Negative values count as absent.
 */
export function parseQuantity(q: string | number | undefined): { num: bigint; den: bigint } | undefined {
  const text = typeof q === 'number' ? (Number.isFinite(q) ? String(q) : '') : q;
  if (typeof text !== 'string') return undefined;
  const m = /^\+?([0-9]*)(?:\.([0-9]*))?(?:([eE])([-+]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/.exec(text.trim());
  if (!m || (m[1] === '' && (m[2] ?? '') === '')) return undefined;
  const frac = m[2] ?? '';
  let num = BigInt((m[1] || '0') + frac);
  let den = 10n ** BigInt(frac.length);
  let exp = 0;
  if (m[3]) exp = Number(m[4]);
  else if (m[5] && m[5] in BINARY) num *= 2n ** BINARY[m[5]]!;
  else exp = DECIMAL[m[5] ?? '']!;
  if (Math.abs(exp) > 100) return undefined;
  if (exp >= 0) num *= 10n ** BigInt(exp);
  else den *= 10n ** BigInt(-exp);
  return { num, den };
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

/** A Go []byte as encoding/json writes it: standard base64 of the UTF-8 bytes. */
export function goBytes(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}
