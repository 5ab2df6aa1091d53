/** A clock the test moves by hand; timers fire in due order, with pending promise work run between them. */
import type { Clock, TimerHandle } from '../src/runtime/clock.js';

/** Lets every promise chain that can move on do so (one macrotask turn drains the microtasks). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly timers = new Map<number, { due: number; fn: () => void }>();

  constructor(start = 1_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = ++this.seq;
    this.timers.set(id, { due: this.t + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.timers.delete(handle as number);
  }

  /** Moves time forward by `ms`, firing each timer at its due time. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await settle();
    for (;;) {
      let next: [number, { due: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].due <= end && (!next || e[1].due < next[1].due)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].due;
      next[1].fn();
      await settle();
    }
    this.t = end;
    await settle();
  }

  /** Moves time forward without running any timer: a process that was paused and has not run since. */
  jump(ms: number): void {
    this.t += ms;
  }

  /** Advances in `step` increments until `cond` holds; returns the time it took, or throws after `maxMs`. */
  async until(cond: () => boolean, maxMs: number, step = 10): Promise<number> {
    const start = this.t;
    while (!cond()) {
      if (this.t - start >= maxMs) throw new Error(`condition not met within ${maxMs} ms of fake time`);
      await this.advance(step);
    }
    return this.t - start;
  }
}
