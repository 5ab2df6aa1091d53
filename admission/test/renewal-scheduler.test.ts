/** When the renewal loop runs: one pass at a time, coalesced kicks, backoff after failures, nothing after stop. */
import { describe, expect, it } from '@jest/globals';
import { RenewalScheduler } from '../src/tls/renewal-scheduler.js';
import { SingleFlight } from '../src/tls/single-flight.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits for `done`, up to 10 s: timers may run late on a busy machine, never early. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await sleep(10);
}

describe('SingleFlight', () => {
  it('never overlaps runs; calls during a run join it and cause exactly one more run', async () => {
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    const flight = new SingleFlight(async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      runs++;
      await sleep(20);
      active--;
    });
    const first = flight.run();
    const joined = [flight.run(), flight.run(), flight.run()];
    expect(joined.every((p) => p === first)).toBe(true);
    await first;
    expect(runs).toBe(2);
    expect(maxActive).toBe(1);
  });

  it('stops re-running when told there should be no more', async () => {
    let runs = 0;
    const flight = new SingleFlight(
      async () => {
        runs++;
        await sleep(5);
      },
      () => false,
    );
    const p = flight.run();
    void flight.run();
    await p;
    expect(runs).toBe(1);
  });
});

describe('RenewalScheduler', () => {
  function scheduler(pass: () => Promise<Date | undefined>) {
    const failures: [string, number, number][] = [];
    const recovered: number[] = [];
    const s = new RenewalScheduler({
      pass,
      now: () => new Date(),
      backoff: { initialMs: 10, maxMs: 40 },
      onFailure: (e, n, delay) => void failures.push([e, n, delay]),
      onRecovered: (n) => void recovered.push(n),
    });
    return { s, failures, recovered };
  }

  it('coalesces a burst of kicks into one pass', async () => {
    let passes = 0;
    const { s } = scheduler(async () => void passes++);
    for (let i = 0; i < 5; i++) s.kick();
    await until(() => passes > 0);
    await sleep(200);
    expect(passes).toBe(1);
    await s.stop();
  });

  it('retries a failing pass with growing, capped, jittered delays, then reports the recovery', async () => {
    let calls = 0;
    const { s, failures, recovered } = scheduler(async () => {
      if (++calls <= 3) throw new Error(`boom ${calls}`);
      return undefined;
    });
    await s.run();
    expect(s.lastError).toBe('boom 1');
    await until(() => recovered.length > 0);
    expect(failures.map(([e, n]) => [e, n])).toEqual([
      ['boom 1', 1],
      ['boom 2', 2],
      ['boom 3', 3],
    ]);
    const delays = failures.map(([, , d]) => d);
    expect(delays[0]).toBeGreaterThanOrEqual(8);
    expect(delays[0]).toBeLessThanOrEqual(12);
    expect(delays[2]).toBeGreaterThanOrEqual(32);
    expect(delays[2]).toBeLessThanOrEqual(48);
    expect(recovered).toEqual([3]);
    expect(s.lastError).toBeUndefined();
    await s.stop();
  });

  it('runs no pass after stop, not even a pending retry', async () => {
    let calls = 0;
    const { s } = scheduler(async () => {
      calls++;
      throw new Error('always');
    });
    await s.run();
    await s.stop();
    s.kick();
    await s.run();
    await sleep(100);
    expect(calls).toBe(1);
    expect(s.isStopped).toBe(true);
  });
});
