/**
 * Gives a burst's memory back once the process has gone quiet.
 *
 * V8 collects when allocation asks for it. A reconciler that has just listed 10,000 pods (or patched
 * them, or received their 10,000 updates) and then idles allocates next to nothing, so the burst's
 * garbage stays committed and resident (figures: docs/performance.md). So, every
 * interval: when the event loop was nearly idle over it and the heap in use has grown by `minGrowthBytes`
 * since the last collection, one full collection of the kind V8 runs under memory pressure (it compacts
 * and returns free pages to the system); and one right after the caches sync, the end of the largest
 * burst. A busy process is left to V8's own heuristics. The collection is shared's fullCollection.
 */
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { fullCollection, type Logger } from '@kd-connections/shared/runtime';

export interface HeapReading {
  /** Event-loop utilization (0–1) since the previous check. */
  utilization: number;
  heapUsed: number;
  /** heapUsed right after the last collection (or at start). */
  heapUsedAfterLast: number;
}

export interface HeapReleasePolicy {
  /** Below this event-loop utilization the process counts as quiet. */
  quietUtilization: number;
  minGrowthBytes: number;
}

export const DEFAULT_HEAP_RELEASE_POLICY: HeapReleasePolicy = { quietUtilization: 0.05, minGrowthBytes: 16 * 2 ** 20 };

/** Whether a check should collect: quiet now, after enough growth (garbage or not) since the last one. */
export function shouldRelease(r: HeapReading, p: HeapReleasePolicy = DEFAULT_HEAP_RELEASE_POLICY): boolean {
  return r.utilization < p.quietUtilization && r.heapUsed - r.heapUsedAfterLast >= p.minGrowthBytes;
}

export interface HeapReleaseOptions {
  log: Logger;
  /** Between two checks; 0: no timer (releaseNow still works). */
  intervalMs: number;
  policy?: HeapReleasePolicy;
  /** Counts collections by reason. */
  onRelease?: (reason: string) => void;
}

export class HeapRelease {
  private timer: NodeJS.Timeout | undefined;
  private lastElu: EventLoopUtilization = performance.eventLoopUtilization();
  private heapUsedAfterLast = process.memoryUsage().heapUsed;

  constructor(private readonly opts: HeapReleaseOptions) {}

  start(): void {
    if (this.opts.intervalMs <= 0 || this.timer) return;
    this.timer = setInterval(() => this.check(), this.opts.intervalMs).unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One periodic check (exposed for tests). */
  check(): void {
    const elu = performance.eventLoopUtilization(this.lastElu);
    this.lastElu = performance.eventLoopUtilization();
    const reading = {
      utilization: elu.utilization,
      heapUsed: process.memoryUsage().heapUsed,
      heapUsedAfterLast: this.heapUsedAfterLast,
    };
    if (shouldRelease(reading, this.opts.policy)) this.releaseNow('quiet after growth');
  }

  /** A full, memory-reducing collection now; logs what it released. */
  releaseNow(reason: string): void {
    const before = process.memoryUsage();
    const t = performance.now();
    fullCollection();
    const ms = performance.now() - t;
    const after = process.memoryUsage();
    this.heapUsedAfterLast = after.heapUsed;
    this.lastElu = performance.eventLoopUtilization();
    this.opts.onRelease?.(reason);
    const mib = (b: number) => Math.round((b / 2 ** 20) * 10) / 10;
    this.opts.log.info('released memory', {
      reason,
      pauseMs: Math.round(ms),
      rssBeforeMiB: mib(before.rss),
      rssAfterMiB: mib(after.rss),
      heapUsedBeforeMiB: mib(before.heapUsed),
      heapUsedAfterMiB: mib(after.heapUsed),
    });
  }
}
