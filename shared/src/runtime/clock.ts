/**
 * Time as the leader elector and the work queue see it. Injected so that their timing rules (renew
 * deadline, lease expiry, requeue backoff) can be tested with a clock the test moves by hand.
 */
export type TimerHandle = unknown;

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** `unref`: the timer does not keep the process alive. */
  setTimeout(fn: () => void, ms: number, opts?: { unref?: boolean }): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms, opts) => {
    const t = setTimeout(fn, ms);
    if (opts?.unref) t.unref();
    return t;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
