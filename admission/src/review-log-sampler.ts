/**
 * Which per-review log lines are written at --log-level=info: every denial, refusal and error, and of
 * the reviews that pass (allowed, patched) the first BURST per second for each webhook, operation and decision,
 * then one in THEREAFTER — the sampling of zap's production logger (Initial 100, Thereafter 100). A
 * written line carries `sampledOut`: how many lines of its kind were left out since the
 * last one written, so the counts still add up; kd_admission_requests_total counts every review. At
 * --log-level=debug every review is logged. Why: at full load the per-review line cost about a fifth of
 * the service's CPU per review (test/bench/results/2026-12-03-adm-ab8.md, variant "every").
 */
export const BURST = 100;
export const THEREAFTER = 100;

export class ReviewLogSampler {
  private second = -1;
  private readonly seen = new Map<string, { n: number; skipped: number }>();

  constructor(
    private readonly burst = BURST,
    private readonly thereafter = THEREAFTER,
    private readonly now: () => number = Date.now,
  ) {}

  /** undefined: leave this line out; a number: write it, with how many of its kind were left out before it. */
  take(key: string): number | undefined {
    const s = Math.floor(this.now() / 1000);
    if (s !== this.second) {
      // A new second; what was left out in the last one is still reported with the next line written.
      this.second = s;
      for (const [k, e] of this.seen) {
        if (e.skipped === 0) this.seen.delete(k);
        else e.n = 0;
      }
    }
    let e = this.seen.get(key);
    if (!e) this.seen.set(key, (e = { n: 0, skipped: 0 }));
    e.n++;
    if (e.n <= this.burst || (e.n - this.burst) % this.thereafter === 0) {
      const skipped = e.skipped;
      e.skipped = 0;
      return skipped;
    }
    e.skipped++;
    return undefined;
  }
}
