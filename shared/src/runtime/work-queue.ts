/**
 * A keyed work queue with controller-runtime's semantics:
 * - dedupe: a key waiting in the queue is there once, however often it is added;
 * - one worker per key: a key added while it is being processed is marked dirty and runs again after;
 * - N keys in parallel;
 * - per-key exponential requeue on failure (reset by success), and delayed adds;
 * - terminal errors are not retried (the next event for the key brings it back).
 * Nothing sleeps inside a worker; retries go back through the queue.
 * Work runs under the signal given to start(): when it fires (leadership lost) the queue stops taking
 * keys and drops its pending retries, and every run in flight sees the signal, so its writes end.
 */
import { systemClock, type Clock, type TimerHandle } from './clock.js';

export type ReconcileResult = { requeueAfterMs?: number } | void;

export class TerminalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TerminalError';
  }
}

/** The requeue backoff cap: after an outage every failed key is retried within this long of its end. */
export const MAX_REQUEUE_DELAY_MS = 30_000;

const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** `aborted`: the run's signal fired (leadership lost); not retried here, the next leader resyncs. */
export type RunOutcome = 'success' | 'requeue' | 'error' | 'terminal' | 'aborted';

/**
 * What client-go's workqueue reports (controller-runtime serves it as workqueue_*): a key taken in, the
 * time a key waited before a worker took it, the time its work took, a retry after a failure.
 */
export interface QueueObserver {
  added(): void;
  started(waitedMs: number): void;
  finished(workedMs: number): void;
  retried(): void;
}

export interface QueueOptions {
  concurrency: number;
  baseDelayMs?: number;
  /** Default MAX_REQUEUE_DELAY_MS. */
  maxDelayMs?: number;
  clock?: Clock;
  /** Called after every run, for metrics and logs; `retryInMs`: when it runs again (requeue, error). */
  onResult?: (key: string, outcome: RunOutcome, ms: number, error?: unknown, retryInMs?: number) => void;
  observer?: QueueObserver;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { timer: TimerHandle; due: number }>();
  /** When each waiting key was added, and when each key in progress started (for the observer). */
  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private active = 0;
  private running = false;
  private signal: AbortSignal = new AbortController().signal;
  private idleWaiters: (() => void)[] = [];
  private readonly base: number;
  private readonly max: number;
  private readonly clock: Clock;

  constructor(
    private readonly work: (key: string, signal: AbortSignal) => Promise<ReconcileResult>,
    private readonly opts: QueueOptions,
  ) {
    this.base = opts.baseDelayMs ?? 5;
    this.max = opts.maxDelayMs ?? MAX_REQUEUE_DELAY_MS;
    this.clock = opts.clock ?? systemClock;
  }

  /** Queue depth: keys waiting, not counting those being processed. */
  get depth(): number {
    return this.queue.length;
  }

  get inFlight(): number {
    return this.active;
  }

  /** How long each key in progress has been running, in ms (workqueue_unfinished_work_seconds). */
  runningForMs(): number[] {
    const now = this.clock.now();
    return [...this.startedAt.values()].map((t) => now - t);
  }

  add(key: string): void {
    if (this.processing.has(key)) {
      if (!this.dirty.has(key)) this.opts.observer?.added();
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.opts.observer?.added();
    this.queued.add(key);
    this.queue.push(key);
    this.addedAt.set(key, this.clock.now());
    this.pump();
  }

  /**
   * Adds the key after `ms`; a shorter pending delay wins. A delay past setTimeout's largest (about 24.8
   * days), which would fire at once, is cut to it: the key then comes early and its work asks again.
   */
  addAfter(key: string, delayMs: number): void {
    if (delayMs <= 0) return this.add(key);
    const ms = Math.min(delayMs, MAX_TIMER_DELAY_MS);
    const due = this.clock.now() + ms;
    const pending = this.timers.get(key);
    if (pending && pending.due <= due) return;
    if (pending) this.clock.clearTimeout(pending.timer);
    const timer = this.clock.setTimeout(
      () => {
        this.timers.delete(key);
        this.add(key);
      },
      ms,
      { unref: true },
    );
    this.timers.set(key, { timer, due });
  }

  /** The delay the n-th consecutive failure of a key waits: base · 2^(n-1), capped. */
  backoff(failures: number): number {
    return Math.min(this.max, this.base * 2 ** Math.max(0, failures - 1));
  }

  /**
   * Starts working; every run gets `signal`. When it fires the queue stops as stop() does (a new start()
   * with a new signal resumes). Failure counts start afresh.
   */
  start(signal: AbortSignal = new AbortController().signal): void {
    if (signal.aborted) return;
    this.signal = signal;
    this.failures.clear();
    signal.addEventListener('abort', () => this.signal === signal && void this.stop(), { once: true });
    this.running = true;
    this.pump();
  }

  /** Stops taking new keys; resolves when in-flight work has finished. Queued keys stay queued. */
  async stop(): Promise<void> {
    this.running = false;
    for (const t of this.timers.values()) this.clock.clearTimeout(t.timer);
    this.timers.clear();
    await this.whenIdle();
  }

  /** Resolves when nothing is queued or running (tests, shutdown). */
  whenIdle(): Promise<void> {
    if (this.active === 0 && (this.queue.length === 0 || !this.running)) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private pump(): void {
    while (this.running && this.active < this.opts.concurrency && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      const now = this.clock.now();
      this.opts.observer?.started(now - (this.addedAt.get(key) ?? now));
      this.addedAt.delete(key);
      this.startedAt.set(key, now);
      this.processing.add(key);
      this.active++;
      void this.runOne(key);
    }
    if (this.active === 0 && (this.queue.length === 0 || !this.running)) {
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  private async runOne(key: string): Promise<void> {
    const started = this.clock.now();
    const signal = this.signal;
    let outcome: RunOutcome = 'success';
    let error: unknown;
    let retryIn: number | undefined;
    try {
      const result = await this.work(key, signal);
      this.failures.delete(key);
      if (result && result.requeueAfterMs !== undefined) {
        outcome = 'requeue';
        retryIn = result.requeueAfterMs;
      }
    } catch (e) {
      error = e;
      if (signal.aborted) {
        outcome = 'aborted';
      } else if (e instanceof TerminalError) {
        outcome = 'terminal';
        this.failures.delete(key);
      } else {
        outcome = 'error';
        const n = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, n);
        retryIn = this.backoff(n);
      }
    } finally {
      this.processing.delete(key);
      this.startedAt.delete(key);
      this.active--;
    }
    this.opts.observer?.finished(this.clock.now() - started);
    if (outcome === 'error') this.opts.observer?.retried();
    this.opts.onResult?.(key, outcome, this.clock.now() - started, error, retryIn);
    if (this.dirty.delete(key)) this.add(key);
    else if (retryIn !== undefined && this.running) this.addAfter(key, retryIn);
    this.pump();
  }
}
