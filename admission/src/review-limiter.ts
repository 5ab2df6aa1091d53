/**
 * How many reviews are decided at once, and how many body bytes they may bring. A review takes a turn
 * before its body is read: a waiting review costs a socket and a few kilobytes of buffered input, not
 * its body. Turns go to the first waiting review that fits, not strictly in order, so small reviews
 * (what the API server sends for ordinary objects) pass beside large ones that wait for bytes. A review
 * waits at most until its deadline, and no review waits when `maxQueued` are waiting already: then it
 * is told "busy" at once. A review larger than `maxBytes` is let in when nothing else is in flight.
 */
export interface LimiterOptions {
  maxInFlight: number;
  maxBytes: number;
  maxQueued: number;
  /** In-flight and queued counts after each change (metrics). */
  onChange?: (inFlight: number, queued: number) => void;
}

export type Turn =
  { ok: true; release: () => void } | { ok: false; reason: 'queue-full' | 'deadline'; message: string };

interface Waiter {
  bytes: number;
  grant: () => void;
}

export class ReviewLimiter {
  private inFlight = 0;
  private bytes = 0;
  private readonly waiting: Waiter[] = [];
  /** The most reviews ever in flight at once. */
  highWater = 0;

  constructor(private readonly opts: LimiterOptions) {}

  get counts(): { inFlight: number; queued: number; bytes: number } {
    return { inFlight: this.inFlight, queued: this.waiting.length, bytes: this.bytes };
  }

  private fits(bytes: number): boolean {
    if (this.inFlight >= this.opts.maxInFlight) return false;
    return this.inFlight === 0 || this.bytes + bytes <= this.opts.maxBytes;
  }

  private take(bytes: number): () => void {
    this.inFlight++;
    this.bytes += bytes;
    if (this.inFlight > this.highWater) this.highWater = this.inFlight;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      this.bytes -= bytes;
      this.admitWaiting();
      this.changed();
    };
  }

  private admitWaiting(): void {
    for (let i = 0; i < this.waiting.length;) {
      const w = this.waiting[i]!;
      if (this.fits(w.bytes)) {
        this.waiting.splice(i, 1);
        w.grant();
      } else i++;
    }
  }

  private changed(): void {
    this.opts.onChange?.(this.inFlight, this.waiting.length);
  }

  /** A turn for a review of `bytes` (its declared length), waiting at most `waitMs`. */
  acquire(bytes: number, waitMs: number): Promise<Turn> | Turn {
    // Whoever waits does not fit (every release lets in all that do): one that fits now need not wait.
    if (this.fits(bytes)) {
      const release = this.take(bytes);
      this.changed();
      return { ok: true, release };
    }
    const busy = `admission service busy: ${this.inFlight} review(s) in flight (limit ${this.opts.maxInFlight}) and ${this.waiting.length} waiting`;
    if (this.waiting.length >= this.opts.maxQueued || waitMs <= 0) {
      return { ok: false, reason: 'queue-full', message: `${busy} (limit ${this.opts.maxQueued}); try again` };
    }
    return new Promise<Turn>((resolve) => {
      const w: Waiter = {
        bytes,
        grant: () => {
          clearTimeout(timer);
          resolve({ ok: true, release: this.take(bytes) });
        },
      };
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(w);
        if (i >= 0) this.waiting.splice(i, 1);
        this.changed();
        resolve({
          ok: false,
          reason: 'deadline',
          message: `admission service busy: no turn within ${Math.round(waitMs)} ms (${this.inFlight} review(s) in flight, limit ${this.opts.maxInFlight}); try again`,
        });
      }, waitMs);
      this.waiting.push(w);
      this.changed();
    });
  }
}
