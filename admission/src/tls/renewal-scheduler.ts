/**
 * When the renewal loop runs a pass: at once when asked (joining a pass under way and running one more
 * after it), 100 ms after a watch event (coalescing the burst one write produces), at the time the last
 * pass asked for, and after a failure with jittered exponential backoff. Timers go through the one
 * clamp (timerDelayMs) and never keep the process alive. Watches are only triggers.
 */
import { errorMessage, type Informer } from '@kd-connections/shared/runtime';
import { SingleFlight } from './single-flight.js';

export interface SchedulerOptions {
  /** One pass; resolves with when to look again (undefined: only on events), rejects on failure. */
  pass: () => Promise<Date | undefined>;
  now: () => Date;
  backoff: { initialMs: number; maxMs: number };
  onFailure: (error: string, failures: number, retryInMs: number) => void;
  onRecovered: (failures: number) => void;
}

/** setTimeout's largest delay: a wake months away re-evaluates early instead of firing at once. */
const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

export function timerDelayMs(due: Date, now: Date, minMs = 0): number {
  return Math.min(MAX_TIMER_DELAY_MS, Math.max(minMs, due.getTime() - now.getTime()));
}

/** The smallest wait after a successful pass, so a wake time already due cannot spin. */
const MIN_WAKE_MS = 1_000;
const KICK_DELAY_MS = 100;

export class RenewalScheduler {
  private failures = 0;
  private error: string | undefined;
  private stopped = false;
  private wakeTimer: NodeJS.Timeout | undefined;
  private kickTimer: NodeJS.Timeout | undefined;
  private readonly flight = new SingleFlight(
    () => this.attempt(),
    () => !this.stopped,
  );
  private informers: Informer[] = [];

  constructor(private readonly o: SchedulerOptions) {}

  /** The last pass's error; undefined after a success. */
  get lastError(): string | undefined {
    return this.error;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** One pass (or joins the pass under way and runs another after it); never rejects. */
  run(): Promise<void> {
    return this.flight.run();
  }

  /** A pass soon; calls within the delay share it. */
  kick(): void {
    if (this.stopped || this.kickTimer) return;
    this.kickTimer = setTimeout(() => {
      this.kickTimer = undefined;
      void this.run();
    }, KICK_DELAY_MS);
    this.kickTimer.unref();
  }

  /** Starts `informer`; each of its events asks for a pass. stop() stops it. */
  watch(informer: Informer): void {
    const kick = () => this.kick();
    informer.on('add', kick).on('update', kick).on('delete', kick).start();
    this.informers.push(informer);
  }

  resume(): void {
    this.stopped = false;
  }

  /** No further passes; resolves when the watches have stopped. */
  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.wakeTimer);
    clearTimeout(this.kickTimer);
    const informers = this.informers.splice(0);
    return Promise.all(informers.map((i) => i.stop())).then(() => undefined);
  }

  private wakeAt(at: Date | undefined, minMs: number): void {
    clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    if (!at || this.stopped) return;
    this.wakeTimer = setTimeout(() => void this.run(), timerDelayMs(at, this.o.now(), minMs));
    this.wakeTimer.unref();
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    try {
      const wake = await this.o.pass();
      if (this.failures > 0) this.o.onRecovered(this.failures);
      this.failures = 0;
      this.error = undefined;
      this.wakeAt(wake, MIN_WAKE_MS);
    } catch (e) {
      if (this.stopped) return;
      this.failures++;
      this.error = errorMessage(e);
      const base = Math.min(this.o.backoff.maxMs, this.o.backoff.initialMs * 2 ** (this.failures - 1));
      const delay = Math.round(base * (0.8 + 0.4 * Math.random()));
      this.o.onFailure(this.error, this.failures, delay);
      this.wakeAt(new Date(this.o.now().getTime() + delay), 0);
    }
  }
}
