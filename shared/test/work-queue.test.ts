import { describe, expect, it } from '@jest/globals';
import { MAX_REQUEUE_DELAY_MS, TerminalError, WorkQueue, type RunOutcome } from '../src/runtime/work-queue.js';
import { FakeClock } from './fake-clock.js';

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('WorkQueue', () => {
  it('dedupes a key added many times while it waits', async () => {
    const runs: string[] = [];
    const q = new WorkQueue(async (k) => void runs.push(k), { concurrency: 1 });
    for (let i = 0; i < 5; i++) q.add('a');
    q.add('b');
    q.add('a');
    expect(q.depth).toBe(2);
    q.start();
    await q.whenIdle();
    expect(runs).toEqual(['a', 'b']);
  });

  it('never runs one key twice at once; an add during processing runs it once more afterwards', async () => {
    const gate = deferred();
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    const q = new WorkQueue(
      async () => {
        runs++;
        active++;
        maxActive = Math.max(maxActive, active);
        if (runs === 1) await gate.promise;
        active--;
      },
      { concurrency: 4 },
    );
    q.start();
    q.add('k');
    await tick();
    q.add('k');
    q.add('k');
    await tick();
    expect(runs).toBe(1); // still processing the first run; the adds only marked it dirty
    gate.resolve();
    await q.whenIdle();
    expect(runs).toBe(2);
    expect(maxActive).toBe(1);
  });

  it('runs different keys in parallel up to the concurrency', async () => {
    const gate = deferred();
    let active = 0;
    let maxActive = 0;
    const q = new WorkQueue(
      async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await gate.promise;
        active--;
      },
      { concurrency: 3 },
    );
    for (const k of ['a', 'b', 'c', 'd', 'e']) q.add(k);
    q.start();
    await tick();
    expect(active).toBe(3);
    expect(q.depth).toBe(2);
    gate.resolve();
    await q.whenIdle();
    expect(maxActive).toBe(3);
  });

  it('requeues failures with exponential backoff and forgets after a success', async () => {
    const times: number[] = [];
    const q = new WorkQueue(
      async () => {
        times.push(Date.now());
        if (times.length < 4) throw new Error('not yet');
      },
      { concurrency: 1, baseDelayMs: 20, maxDelayMs: 1000 },
    );
    expect([1, 2, 3, 4].map((n) => q.backoff(n))).toEqual([20, 40, 80, 160]);
    expect(q.backoff(20)).toBe(1000);
    q.start();
    q.add('k');
    for (let i = 0; i < 100 && times.length < 4; i++) await tick(20);
    expect(times).toHaveLength(4);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    // Each retry waited at least its backoff (timers never fire early).
    expect(gaps[0]).toBeGreaterThanOrEqual(19);
    expect(gaps[1]).toBeGreaterThanOrEqual(39);
    expect(gaps[2]).toBeGreaterThanOrEqual(79);
    await tick(200);
    expect(times).toHaveLength(4); // success: no further runs
  });

  it('does not retry a terminal error, and reports every outcome', async () => {
    const outcomes: string[] = [];
    const q = new WorkQueue(
      async (k) => {
        if (k === 'bad') throw new TerminalError('cannot ever work');
        if (k === 'later') return { requeueAfterMs: 10 };
      },
      { concurrency: 2, onResult: (k, o) => outcomes.push(`${k}:${o}`) },
    );
    q.start();
    q.add('bad');
    q.add('ok');
    await q.whenIdle();
    await tick(30);
    expect(outcomes.sort()).toEqual(['bad:terminal', 'ok:success']);
    q.add('later');
    await tick(50);
    await q.stop();
    expect(outcomes.filter((o) => o === 'later:requeue').length).toBeGreaterThanOrEqual(2);
  });

  it('stop() waits for in-flight work and takes no new keys', async () => {
    const gate = deferred();
    const runs: string[] = [];
    const q = new WorkQueue(
      async (k) => {
        runs.push(k);
        if (k === 'slow') await gate.promise;
      },
      { concurrency: 1 },
    );
    q.start();
    q.add('slow');
    await tick();
    let stopped = false;
    const stopping = q.stop().then(() => (stopped = true));
    q.add('after');
    await tick(10);
    expect(stopped).toBe(false);
    gate.resolve();
    await stopping;
    expect(runs).toEqual(['slow']);
    expect(q.depth).toBe(1); // kept for when work starts again
  });

  it("cuts a delay past setTimeout's largest to it, so a wake months away comes early instead of at once", async () => {
    const clock = new FakeClock();
    const runs: number[] = [];
    const q = new WorkQueue(async () => void runs.push(clock.now()), { concurrency: 1, clock });
    q.start();
    q.addAfter('k', 90 * 24 * 3_600_000);
    await clock.advance(2 ** 31 - 2);
    expect(runs).toEqual([]);
    await clock.advance(1);
    expect(runs).toEqual([clock.now()]);
  });

  it('caps the requeue backoff at 30 s by default, as README promises', () => {
    const q = new WorkQueue(async () => {}, { concurrency: 1 });
    expect(MAX_REQUEUE_DELAY_MS).toBe(30_000);
    expect(q.backoff(12)).toBeLessThan(30_000);
    expect(q.backoff(14)).toBe(30_000);
    expect(q.backoff(1000)).toBe(30_000);
  });

  it.each([60_000, 90_000, 150_000])(
    'a %i ms outage: retries keep going with capped gaps, and the key succeeds within 30 s of the end',
    async (outageMs) => {
      const clock = new FakeClock();
      const start = clock.now();
      const outageEnd = start + outageMs;
      const attempts: number[] = [];
      let succeededAt: number | undefined;
      const q = new WorkQueue(
        async () => {
          attempts.push(clock.now());
          if (clock.now() < outageEnd) throw new Error('connect ECONNREFUSED');
          succeededAt = clock.now();
        },
        { concurrency: 1, clock },
      );
      q.start();
      q.add('k');
      await clock.until(() => succeededAt !== undefined, outageMs + 60_000, 250);
      const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
      expect(Math.max(...gaps)).toBeLessThanOrEqual(MAX_REQUEUE_DELAY_MS);
      expect(succeededAt! - outageEnd).toBeLessThanOrEqual(MAX_REQUEUE_DELAY_MS);
      expect(succeededAt! - outageEnd).toBeGreaterThanOrEqual(0);
      // Growing, not a tight loop: 13 attempts to reach the cap, then two a minute.
      expect(attempts.length).toBeLessThanOrEqual(15 + (outageMs / 60_000) * 2);
      await clock.advance(120_000);
      expect(attempts.at(-1)).toBe(succeededAt);
    },
  );

  it('when its signal fires: the run in flight sees it, is reported aborted, is not retried; the next start resumes', async () => {
    const clock = new FakeClock();
    const seen: AbortSignal[] = [];
    const outcomes: string[] = [];
    const gate = deferred();
    const q = new WorkQueue(
      async (k, signal) => {
        seen.push(signal);
        if (k === 'slow') {
          await Promise.race([gate.promise, new Promise((_, fail) => signal.addEventListener('abort', fail))]);
        }
        if (k === 'failing') throw new Error('refused');
      },
      { concurrency: 2, clock, onResult: (k, o: RunOutcome) => outcomes.push(`${k}:${o}`) },
    );
    const term1 = new AbortController();
    q.start(term1.signal);
    q.add('failing');
    q.add('slow');
    await tick();
    expect(outcomes).toEqual(['failing:error']); // a retry is pending
    term1.abort();
    await q.whenIdle();
    expect(outcomes).toEqual(['failing:error', 'slow:aborted']);
    q.add('later');
    await clock.advance(10 * 60_000);
    expect(outcomes).toHaveLength(2); // stopped: no retry, nothing new
    expect(q.depth).toBe(1);
    const term2 = new AbortController();
    q.start(term2.signal);
    await q.whenIdle();
    expect(outcomes).toEqual(['failing:error', 'slow:aborted', 'later:success']);
    expect(seen.map((s) => s === term2.signal)).toEqual([false, false, true]);
  });
});
