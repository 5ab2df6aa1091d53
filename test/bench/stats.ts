/** Small statistics over latency samples (milliseconds) and the rounding every report uses. */

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of sorted samples. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function summarize(samples: ArrayLike<number>): Summary {
  const s = Float64Array.from(samples).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    count: s.length,
    mean: round(sum / (s.length || 1)),
    p50: round(percentile(s, 50)),
    p90: round(percentile(s, 90)),
    p99: round(percentile(s, 99)),
    max: round(s.length ? s[s.length - 1]! : NaN),
  };
}

/** Three significant decimals for small numbers, fewer for big ones. */
export function round(v: number, digits = 3): number {
  if (!Number.isFinite(v)) return v;
  const mag = Math.abs(v);
  const d = mag >= 1000 ? 0 : mag >= 100 ? 1 : mag >= 10 ? 2 : digits;
  const f = 10 ** d;
  return Math.round(v * f) / f;
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(xs: number[]): number {
  const s = Float64Array.from(xs).sort();
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** A figure over rounds: its median and the range it moved in. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  rounds: number;
}

export function spread(values: number[]): Spread {
  return {
    median: round(median(values)),
    min: round(Math.min(...values)),
    max: round(Math.max(...values)),
    rounds: values.length,
  };
}

/**
 * A verdict that survives noise: met only when every round clears the target, NOT met only when none
 * does; otherwise the rounds straddle it and the verdict is "within noise".
 */
export function spreadVerdict(
  s: Spread,
  target: number,
  want: 'atLeast' | 'atMost',
): 'met' | 'NOT met' | 'within noise' {
  const clears = (v: number) => (want === 'atLeast' ? v >= target : v <= target);
  if (clears(s.min) && clears(s.max)) return 'met';
  if (!clears(s.min) && !clears(s.max)) return 'NOT met';
  return 'within noise';
}

/** "median (min–max)". */
export function spreadText(s: Spread): string {
  return `${s.median} (${s.min}–${s.max})`;
}
