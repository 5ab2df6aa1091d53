/**
 * The reconciler's metrics in controller-runtime's vocabulary: the work queue reports client-go's
 * workqueue_* series (adds, waits, work time, retries, unfinished work), reconcile results map onto
 * controller_runtime_reconcile_*, and leadership onto leader_election_master_status.
 */
import { describe, expect, it } from '@jest/globals';
import { CONTROLLER_NAME, ReconcilerMetrics } from '../src/metrics.js';
import { WorkQueue } from '@kd-connections/shared/runtime';
import { FakeClock, settle } from '../../shared/test/fake-clock.js';

const Q = `controller="${CONTROLLER_NAME}",name="${CONTROLLER_NAME}"`;
const C = `controller="${CONTROLLER_NAME}"`;

/** The value of one sample line of the exposition text (undefined when absent). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('workqueue_* from the work queue', () => {
  it('counts adds as client-go does, times the wait and the work, counts retries, reports unfinished work', async () => {
    const clock = new FakeClock();
    const metrics = new ReconcilerMetrics({ defaultMetrics: false });
    let release!: () => void;
    let fail = true;
    const q = new WorkQueue(
      async (key) => {
        if (key === 'slow') await new Promise<void>((r) => (release = r));
        else if (fail) {
          fail = false;
          throw new Error('boom');
        }
      },
      { concurrency: 2, clock, baseDelayMs: 10, observer: metrics.queueObserver() },
    );
    metrics.watch({
      queueDepth: () => q.depth,
      inFlight: () => q.inFlight,
      runningForMs: () => q.runningForMs(),
      maxConcurrent: () => 2,
      clusters: () => [],
    });
    q.add('a');
    q.add('a'); // waiting already: not an add
    q.add('slow');
    let text = await metrics.registry.metrics();
    expect(sample(text, `workqueue_adds_total{${Q}}`)).toBe(2);
    expect(sample(text, `workqueue_depth{${Q}}`)).toBe(2);

    await clock.advance(3000); // both waited 3 s before a worker took them
    q.start();
    await settle();
    // 'a' failed once and waits for its retry; 'slow' is still running.
    await clock.advance(1500);
    text = await metrics.registry.metrics();
    expect(sample(text, `workqueue_retries_total{${Q}}`)).toBe(1);
    expect(sample(text, `workqueue_queue_duration_seconds_count{${Q}}`)).toBeGreaterThanOrEqual(3);
    expect(sample(text, `workqueue_queue_duration_seconds_bucket{le="1",${Q}}`)).toBe(1); // the retry's short wait
    expect(sample(text, `workqueue_longest_running_processor_seconds{${Q}}`)).toBe(1.5);
    expect(sample(text, `workqueue_unfinished_work_seconds{${Q}}`)).toBe(1.5);
    expect(sample(text, `controller_runtime_active_workers{${C}}`)).toBe(1);
    expect(sample(text, `controller_runtime_max_concurrent_reconciles{${C}}`)).toBe(2);

    release();
    await q.whenIdle();
    text = await metrics.registry.metrics();
    expect(sample(text, `workqueue_work_duration_seconds_count{${Q}}`)).toBe(3);
    expect(sample(text, `workqueue_unfinished_work_seconds{${Q}}`)).toBe(0);
    expect(sample(text, `workqueue_depth{${Q}}`)).toBe(0);
  });
});

describe('controller_runtime_reconcile_* and leader_election_master_status', () => {
  it('maps each run outcome onto controller-runtime results and keeps the kd_ series in full detail', async () => {
    const m = new ReconcilerMetrics({ defaultMetrics: false, leaseName: 'kd-reconciler' });
    const before = await m.registry.metrics();
    expect(sample(before, `controller_runtime_reconcile_total{${C},result="requeue"}`)).toBe(0);
    expect(sample(before, `controller_runtime_reconcile_errors_total{${C}}`)).toBe(0);
    for (const o of ['success', 'success', 'requeue', 'error', 'terminal', 'aborted'] as const) m.reconciled(o, 20);
    const text = await m.registry.metrics();
    expect(sample(text, `controller_runtime_reconcile_total{${C},result="success"}`)).toBe(2);
    expect(sample(text, `controller_runtime_reconcile_total{${C},result="requeue_after"}`)).toBe(1);
    expect(sample(text, `controller_runtime_reconcile_total{${C},result="error"}`)).toBe(3);
    expect(sample(text, `controller_runtime_reconcile_total{${C},result="requeue"}`)).toBe(0);
    expect(sample(text, `controller_runtime_reconcile_errors_total{${C}}`)).toBe(3);
    expect(sample(text, `controller_runtime_terminal_reconcile_errors_total{${C}}`)).toBe(1);
    expect(sample(text, `controller_runtime_reconcile_time_seconds_count{${C}}`)).toBe(6);
    expect(sample(text, `controller_runtime_reconcile_time_seconds_bucket{le="0.025",${C}}`)).toBe(6);
    expect(sample(text, 'kd_reconciler_reconciles_total{result="aborted"}')).toBe(1);
    expect(sample(text, 'leader_election_master_status{name="kd-reconciler"}')).toBe(0);
    m.setLeader(true);
    expect(sample(await m.registry.metrics(), 'leader_election_master_status{name="kd-reconciler"}')).toBe(1);
  });

  it('cluster gauges come from the cached status: Ready counts and member pods without current configmeta', async () => {
    const m = new ReconcilerMetrics({ defaultMetrics: false });
    m.watch({
      queueDepth: () => 0,
      inFlight: () => 0,
      runningForMs: () => [],
      maxConcurrent: () => 1,
      clusters: () => [
        { ready: 'True', unsyncedPods: 0 },
        { ready: 'False', unsyncedPods: 2 },
        { ready: undefined, unsyncedPods: 1 },
      ],
    });
    const text = await m.registry.metrics();
    expect(sample(text, 'kd_reconciler_kdclusters{ready="true"}')).toBe(1);
    expect(sample(text, 'kd_reconciler_kdclusters{ready="false"}')).toBe(1);
    expect(sample(text, 'kd_reconciler_kdclusters{ready="unknown"}')).toBe(1);
    expect(sample(text, 'kd_reconciler_member_pods_unsynced')).toBe(3);
  });

  it('process_* and nodejs_* are unprefixed', async () => {
    const text = await new ReconcilerMetrics().registry.metrics();
    expect(text).toMatch(/^process_cpu_seconds_total /m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes /m);
  });
});
