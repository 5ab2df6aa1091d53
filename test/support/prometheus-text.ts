/** Reading samples out of Prometheus text exposition (what the services' /metrics return). */

function sum(text: string, name: string, labels: Record<string, string>): { sum: number; found: boolean } {
  let total = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    const m = /^([^{\s]+)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) {
      total += Number(m[3]);
      found = true;
    }
  }
  return { sum: total, found };
}

/** Sum of the samples of `name` whose labels include every given label; 0 when there are none. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  return sum(text, name, labels).sum;
}

/** Like metricSum, but NaN when no sample matches (a gauge that is absent is not zero). */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number {
  const r = sum(text, name, labels);
  return r.found ? r.sum : NaN;
}
