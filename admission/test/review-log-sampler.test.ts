import { describe, expect, it } from '@jest/globals';
import { ReviewLogSampler } from '../src/review-log-sampler.js';

describe('ReviewLogSampler', () => {
  it('keeps the first lines of each kind in a second, then one in N, and reports how many it left out', () => {
    let now = 10_000;
    const s = new ReviewLogSampler(3, 4, () => now);
    const taken = Array.from({ length: 12 }, () => s.take('mutate UPDATE patched'));
    // 1-3 kept, then every 4th after the burst (the 7th and the 11th), each saying how many it stands for.
    expect(taken).toEqual([0, 0, 0, undefined, undefined, undefined, 3, undefined, undefined, undefined, 3, undefined]);
    // Another kind has its own budget.
    expect(s.take('validate UPDATE allowed')).toBe(0);
    // The next second starts a new burst; the one line left out at the end of the last is reported.
    now += 1000;
    expect(s.take('mutate UPDATE patched')).toBe(1);
    expect(s.take('mutate UPDATE patched')).toBe(0);
  });

  it('keeps every line below the burst, whatever the rate over seconds', () => {
    let now = 0;
    const s = new ReviewLogSampler(100, 100, () => now);
    for (let sec = 0; sec < 5; sec++, now += 1000)
      for (let i = 0; i < 100; i++) expect(s.take('validate CREATE allowed')).toBe(0);
  });
});
