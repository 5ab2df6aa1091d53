/**
 * A keyed work queue with controller-runtime's semantics:
 * - dedupe: a key waiting in the queue is there once, however often it is added;
 * - one worker per key: a key added while it is being processed is marked dirty and runs again after;
 * - N keys in parallel;
 * - per-key exponential requeue on failure (reset by success), and delayed adds;
 * - terminal errors are not retried (the next event for the key brings it back).
 * Nothing sleeps inside a worker; retries go back through the queue.
 */

export type ReconcileResult = { requeueAfterMs?: number } | void;

export class TerminalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TerminalError';
  }
}

export interface QueueOptions {
  concurrency: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Called after every run, for metrics and logs. */
  onResult?: (key: string, outcome: 'success' | 'requeue' | 'error' | 'terminal', ms: number, error?: unknown) => void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; due: number }>();
  private active = 0;
  private running = false;
  private idleWaiters: (() => void)[] = [];
  private readonly base: number;
  private readonly max: number;

  constructor(
    private readonly work: (key: string) => Promise<ReconcileResult>,
    private readonly opts: QueueOptions,
  ) {
    this.base = opts.baseDelayMs ?? 5;
    this.max = opts.maxDelayMs ?? 5 * 60_000;
  }

  /** Queue depth: keys waiting, not counting those being processed. */
  get depth(): number {
    return this.queue.length;
  }

  get inFlight(): number {
    return this.active;
  }

  add(key: string): void {
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.pump();
  }

  /** Adds the key after `ms`; a shorter pending delay wins. */
  addAfter(key: string, ms: number): void {
    if (ms <= 0) return this.add(key);
    const due = Date.now() + ms;
    const pending = this.timers.get(key);
    if (pending && pending.due <= due) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { timer, due });
  }

  /** The delay the n-th consecutive failure of a key waits: base · 2^(n-1), capped. */
  backoff(failures: number): number {
    return Math.min(this.max, this.base * 2 ** Math.max(0, failures - 1));
  }

  start(): void {
    this.running = true;
    this.pump();
  }

  /** Stops taking new keys; resolves when in-flight work has finished. Queued keys stay queued. */
  async stop(): Promise<void> {
    this.running = false;
    for (const t of this.timers.values()) clearTimeout(t.timer);
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
      this.processing.add(key);
      this.active++;
      void this.runOne(key);
    }
    if (this.active === 0 && (this.queue.length === 0 || !this.running)) {
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  private async runOne(key: string): Promise<void> {
    const started = Date.now();
    let outcome: 'success' | 'requeue' | 'error' | 'terminal' = 'success';
    let error: unknown;
    let retryIn: number | undefined;
    try {
      const result = await this.work(key);
      this.failures.delete(key);
      if (result && result.requeueAfterMs !== undefined) {
        outcome = 'requeue';
        retryIn = result.requeueAfterMs;
      }
    } catch (e) {
      error = e;
      if (e instanceof TerminalError) {
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
      this.active--;
    }
    this.opts.onResult?.(key, outcome, Date.now() - started, error);
    if (this.dirty.delete(key)) this.add(key);
    else if (retryIn !== undefined && this.running) this.addAfter(key, retryIn);
    this.pump();
  }
}
