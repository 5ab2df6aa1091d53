/** The review limiter (turns by count and bytes, bounded waiting) and the review deadline. Pure. */
import { describe, expect, it } from '@jest/globals';
import { reviewDeadlineMs } from '../src/review-deadline.js';
import { ReviewLimiter, type Turn } from '../src/review-limiter.js';

const MiB = 1024 * 1024;
const turn = async (t: Promise<Turn> | Turn) => await t;

describe('ReviewLimiter', () => {
  it('lets in at most maxInFlight; the next waits and gets the first freed turn', async () => {
    const l = new ReviewLimiter({ maxInFlight: 2, maxBytes: 100 * MiB, maxQueued: 10 });
    const a = await turn(l.acquire(1, 1000));
    const b = await turn(l.acquire(1, 1000));
    const c = l.acquire(1, 1000);
    expect(c).toBeInstanceOf(Promise);
    expect(l.counts).toEqual({ inFlight: 2, queued: 1, bytes: 2 });
    if (!a.ok || !b.ok) throw new Error('no turn');
    a.release();
    expect((await turn(c)).ok).toBe(true);
    expect(l.highWater).toBe(2);
  });

  it('bounds bytes, lets a small review pass beside a large one, and runs an oversized one alone', async () => {
    const l = new ReviewLimiter({ maxInFlight: 8, maxBytes: 8 * MiB, maxQueued: 10 });
    const big = await turn(l.acquire(7 * MiB, 1000));
    const big2 = l.acquire(7 * MiB, 1000);
    expect(big2).toBeInstanceOf(Promise);
    expect((await turn(l.acquire(64 * 1024, 1000))).ok).toBe(true);
    if (!big.ok) throw new Error('no turn');
    big.release();
    const next = await turn(big2);
    if (!next.ok) throw new Error('no turn');
    next.release();
    const empty = new ReviewLimiter({ maxInFlight: 8, maxBytes: MiB, maxQueued: 0 });
    expect((await turn(empty.acquire(7 * MiB, 1000))).ok).toBe(true);
  });

  it('answers "busy" at once when the queue is full, and after the wait when no turn came', async () => {
    const l = new ReviewLimiter({ maxInFlight: 1, maxBytes: MiB, maxQueued: 1 });
    await turn(l.acquire(1, 1000));
    const waiting = l.acquire(1, 30);
    const full = await turn(l.acquire(1, 1000));
    expect(full).toMatchObject({ ok: false, reason: 'queue-full' });
    expect(!full.ok && full.message).toMatch(
      /^admission service busy: 1 review\(s\) in flight \(limit 1\) and 1 waiting/,
    );
    expect(await turn(waiting)).toMatchObject({ ok: false, reason: 'deadline' });
    expect(l.counts.queued).toBe(0);
  });
});

describe('reviewDeadlineMs', () => {
  it("is the configured deadline, lowered below the API server's ?timeout= less 500 ms", () => {
    expect(reviewDeadlineMs('/validate-kdcluster', 2500)).toBe(2500);
    expect(reviewDeadlineMs('/validate-kdcluster?timeout=10s', 2500)).toBe(2500);
    expect(reviewDeadlineMs('/validate-kdcluster?timeout=2s', 2500)).toBe(1500);
    expect(reviewDeadlineMs('/validate-kdcluster?timeout=1s', 2500)).toBe(500);
    expect(reviewDeadlineMs('/validate-kdcluster?timeout=100ms', 2500)).toBe(1);
    expect(reviewDeadlineMs('/validate-kdcluster?timeout=bogus', 2500)).toBe(2500);
  });
});
