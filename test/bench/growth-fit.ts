/**
 * How a cost grows with size, stated from the points measured: least-squares fits of y = a + b·f(n) for
 * f in log n, n and n², the one with the smallest squared error named, unless it leaves more than half
 * the straight line's squared error (then n). n log n is not among them: over the ranges
 * measured (1–100, 1k–50k) a straight line explains 99.5 % of an exact n log n, so no run could tell them
 * apart. A cost that moves by less than 10 % of its mean across the whole range is called flat; one that
 * moves more but that no shape fits to R² 0.8 (noise, a collection that came or did not) is unclear.
 */
import { round } from './stats.js';

export interface Point {
  x: number;
  y: number;
}

export interface GrowthFit {
  /** 'flat', 'unclear', 'log n', 'n' or 'n²'. */
  shape: string;
  /** y = intercept + slope · f(n) for the named shape (absent when flat or unclear). */
  intercept?: number;
  slope?: number;
  r2?: number;
  /** The straight-line fit, always given: what one more unit of n costs. */
  linear: { intercept: number; slope: number; r2: number };
  /** y at the largest n ÷ y at the smallest. */
  growth: number;
}

const SHAPES: [string, (n: number) => number][] = [
  ['log n', (n) => Math.log(n)],
  ['n', (n) => n],
  ['n²', (n) => n * n],
];

function leastSquares(points: readonly Point[], f: (n: number) => number) {
  const xs = points.map((p) => f(p.x));
  const ys = points.map((p) => p.y);
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  xs.forEach((x, i) => {
    sxy += (x - mx) * (ys[i]! - my);
    sxx += (x - mx) ** 2;
    syy += (ys[i]! - my) ** 2;
  });
  const slope = sxx === 0 ? 0 : sxy / sxx;
  const intercept = my - slope * mx;
  const sse = xs.reduce((s, x, i) => s + (ys[i]! - intercept - slope * x) ** 2, 0);
  return { intercept, slope, sse, r2: syy === 0 ? 1 : 1 - sse / syy, mean: my };
}

export function fitGrowth(points: readonly Point[]): GrowthFit {
  if (points.length < 3) throw new Error(`a growth fit needs at least 3 points, got ${points.length}`);
  const sorted = [...points].sort((a, b) => a.x - b.x);
  const lin = leastSquares(sorted, (n) => n);
  const linear = { intercept: round(lin.intercept), slope: round(lin.slope, 6), r2: round(lin.r2) };
  const growth = round(sorted[sorted.length - 1]!.y / sorted[0]!.y);
  const ys = sorted.map((p) => p.y);
  const fits = SHAPES.map(([shape, f]) => ({ shape, ...leastSquares(sorted, f) })).filter((s) => s.slope > 0);
  let best = fits.sort((a, b) => a.sse - b.sse)[0];
  if (Math.max(...ys) - Math.min(...ys) < 0.1 * Math.abs(lin.mean)) return { shape: 'flat', linear, growth };
  // A curve is named only when it leaves at most half the straight line's squared error: a few noisy
  // points fit n² or log n a little better by chance.
  if (best && best.shape !== 'n' && lin.slope > 0 && best.sse > 0.5 * lin.sse) best = { shape: 'n', ...lin };
  if (!best || best.r2 < 0.8) return { shape: 'unclear', linear, growth };
  return {
    shape: best.shape,
    intercept: round(best.intercept),
    slope: round(best.slope, 6),
    r2: round(best.r2),
    linear,
    growth,
  };
}

/** "n (R² 0.998): +0.81 per 1000 above 95.2" — the fit in words for a report line. */
export function describeFit(fit: GrowthFit, unit: string, per = 1): string {
  const l = fit.linear;
  const marginal = `${l.slope * per >= 0 ? '+' : ''}${round(l.slope * per)} ${unit} per ${per === 1 ? 'unit' : per}`;
  const shape =
    fit.shape === 'flat'
      ? 'flat'
      : fit.shape === 'unclear'
        ? 'no shape fits (R² < 0.8)'
        : `${fit.shape} (R² ${fit.r2})`;
  return `${shape}; straight line: ${marginal} above ${round(l.intercept)} ${unit} (R² ${l.r2}); ×${fit.growth} over the range`;
}
