/**
 * The end-of-burst collection: the rule (quiet and grown) and that releaseNow really runs a full
 * collection — an object reachable only through a WeakRef is gone afterwards — and logs what it released.
 */
import { describe, expect, it } from '@jest/globals';
import { createLogger } from '@kd-connections/shared/runtime';
import { DEFAULT_HEAP_RELEASE_POLICY, HeapRelease, shouldRelease } from '../src/heap-release.js';

const MiB = 2 ** 20;

describe('shouldRelease', () => {
  const base = { utilization: 0.01, heapUsed: 100 * MiB, heapUsedAfterLast: 60 * MiB };

  it('collects when the event loop was quiet and the heap grew by the minimum since the last collection', () => {
    expect(shouldRelease(base)).toBe(true);
    expect(shouldRelease({ ...base, heapUsed: 60 * MiB + DEFAULT_HEAP_RELEASE_POLICY.minGrowthBytes })).toBe(true);
  });

  it('leaves a busy process to V8', () => {
    expect(shouldRelease({ ...base, utilization: 0.05 })).toBe(false);
    expect(shouldRelease({ ...base, utilization: 0.9 })).toBe(false);
  });

  it('does not collect again without growth (or after the heap shrank)', () => {
    expect(shouldRelease({ ...base, heapUsed: 60 * MiB + DEFAULT_HEAP_RELEASE_POLICY.minGrowthBytes - 1 })).toBe(false);
    expect(shouldRelease({ ...base, heapUsed: 40 * MiB })).toBe(false);
  });

  it('follows a policy given', () => {
    expect(shouldRelease(base, { quietUtilization: 0.5, minGrowthBytes: 50 * MiB })).toBe(false);
    expect(shouldRelease({ ...base, utilization: 0.3 }, { quietUtilization: 0.5, minGrowthBytes: 10 * MiB })).toBe(
      true,
    );
  });
});

describe('HeapRelease', () => {
  it('releaseNow runs a full collection, counts it and logs the heap and RSS before and after', async () => {
    const lines: Record<string, unknown>[] = [];
    const reasons: string[] = [];
    const release = new HeapRelease({
      log: createLogger({ component: 'test', write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) }),
      intervalMs: 0,
      onRelease: (r) => reasons.push(r),
    });
    // Old enough to be out of the young generation's reach: only a full collection frees it.
    let garbage: { pad: string }[] | undefined = Array.from({ length: 20_000 }, (_, i) => ({
      pad: `x${i}`.repeat(20),
    }));
    const ref = new WeakRef(garbage);
    garbage = undefined;
    // A WeakRef keeps its target until the current job ends.
    await new Promise((r) => setImmediate(r));
    release.releaseNow('test');
    expect(ref.deref()).toBeUndefined();
    expect(reasons).toEqual(['test']);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: 'released memory', reason: 'test', level: 'info' });
    for (const k of ['pauseMs', 'rssBeforeMiB', 'rssAfterMiB', 'heapUsedBeforeMiB', 'heapUsedAfterMiB'])
      expect(typeof lines[0]![k]).toBe('number');
    expect(lines[0]!.heapUsedAfterMiB as number).toBeLessThanOrEqual(lines[0]!.heapUsedBeforeMiB as number);
  });

  it('a check while the heap has not grown does not collect; intervalMs 0 starts no timer', () => {
    const reasons: string[] = [];
    const release = new HeapRelease({
      log: createLogger({ component: 'test', write: () => {} }),
      intervalMs: 0,
      policy: { quietUtilization: 1.01, minGrowthBytes: 1024 * MiB },
      onRelease: (r) => reasons.push(r),
    });
    release.start();
    release.check();
    expect(reasons).toEqual([]);
    release.stop();
  });

  it('a check after growth in a quiet process collects', () => {
    const reasons: string[] = [];
    const release = new HeapRelease({
      log: createLogger({ component: 'test', write: () => {} }),
      intervalMs: 0,
      // Any utilization counts as quiet here; growth of 1 byte suffices.
      policy: { quietUtilization: 1.01, minGrowthBytes: 1 },
      onRelease: (r) => reasons.push(r),
    });
    const kept = Array.from({ length: 50_000 }, (_, i) => ({ i }));
    release.check();
    expect(kept).toHaveLength(50_000);
    expect(reasons).toEqual(['quiet after growth']);
  });
});
