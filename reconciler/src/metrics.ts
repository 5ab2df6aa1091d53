/**
 * Prometheus metrics of the reconciler (served at /metrics). Besides its own kd_reconciler_* series it
 * serves what a controller-runtime controller serves, under the same names and labels, so the queue,
 * reconcile and leader-election panels and alerts an operator team already has work unchanged:
 * workqueue_* (client-go's workqueue, labels controller and name), controller_runtime_reconcile_*
 * (label controller) and leader_election_master_status (label name). process_* and nodejs_* come from
 * prom-client's default metrics, unprefixed.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { QueueObserver, RunOutcome } from '@kd-connections/shared/runtime';

export type WriteKind = 'kdcluster' | 'kdcluster_status' | 'pod' | 'private_secret' | 'event';

/** The controller (and queue) name in controller-runtime's labels: the lower-case kind it reconciles. */
export const CONTROLLER_NAME = 'kubedirectorcluster';

/** client-go's workqueue buckets: 10 ns to 1000 s, ×10 each. */
const WORKQUEUE_BUCKETS = Array.from({ length: 12 }, (_, i) => 1e-8 * 10 ** i);
/** controller-runtime's reconcile_time_seconds buckets. */
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2,
  2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

/** What the collect-time gauges read from the running controller. */
export interface ControllerView {
  queueDepth(): number;
  inFlight(): number;
  runningForMs(): number[];
  maxConcurrent(): number;
  /** Every cached kdcluster's Ready status and its member pods that lack the current configmeta. */
  clusters(): { ready: string | undefined; unsyncedPods: number }[];
  /** Connected content kept between reconciles, per kind. */
  content?(): { kind: string; objects: number; bytes: number }[];
}

export interface ReconcilerMetricsOptions {
  defaultMetrics?: boolean;
  /** The Lease name (leader_election_master_status{name}); without leader election the replica always leads. */
  leaseName?: string;
}

export class ReconcilerMetrics {
  readonly registry = new Registry();
  private view: ControllerView | undefined;
  readonly queueDepth = new Gauge({
    name: 'kd_reconciler_queue_depth',
    help: 'Keys waiting in the work queue',
    registers: [this.registry],
  });
  readonly reconciles = new Counter({
    name: 'kd_reconciler_reconciles_total',
    help: 'Reconcile runs by result (success, requeue, error, terminal, aborted: leadership ended mid-run)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly reconcileSeconds = new Histogram({
    name: 'kd_reconciler_reconcile_duration_seconds',
    help: 'Time one reconcile of a cluster took',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly writes = new Counter({
    name: 'kd_reconciler_api_writes_total',
    help: 'API writes by kind and result (ok, conflict, error)',
    labelNames: ['kind', 'result'] as const,
    registers: [this.registry],
  });
  readonly watchRestarts = new Counter({
    name: 'kd_reconciler_watch_restarts_total',
    help: 'Watches restarted other than by their normal timeout (error, gone)',
    labelNames: ['informer', 'reason'] as const,
    registers: [this.registry],
  });
  readonly reconnectHooks = new Counter({
    name: 'kd_reconciler_reconnect_hooks_total',
    help: 'startscript runs by hook (reconnect, addnodes, delnodes) and result: ok, failed (non-zero exit), timeout (abandoned at --reconnect-timeout), error (exec failed)',
    labelNames: ['result', 'hook'] as const,
    registers: [this.registry],
  });
  readonly heapReleases = new Counter({
    name: 'kd_reconciler_heap_releases_total',
    help: 'Full collections asked for at the end of a burst (reason: caches synced, quiet after growth)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: 'kd_reconciler_leader',
    help: '1 while this replica holds the lease',
    registers: [this.registry],
  });
  readonly contentFetches = new Counter({
    name: 'kd_reconciler_content_fetches_total',
    help: 'Reads of a connected ConfigMap or Secret (kind) whose content was not kept at the watched version, by result (ok, not_found, error)',
    labelNames: ['kind', 'result'] as const,
    registers: [this.registry],
  });
  readonly deliveryLatency = new Histogram({
    name: 'kd_reconciler_configmeta_delivery_latency_seconds',
    help: 'From the watch event that brought a change (connected object, app, member pod, the cluster itself) to every member pod holding the configmeta it implies',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  // --- controller-runtime / client-go compatible ---------------------------------------------------
  private readonly queueLabels = { controller: CONTROLLER_NAME, name: CONTROLLER_NAME };
  private readonly controllerLabel = { controller: CONTROLLER_NAME };
  private readonly perQueue = { labelNames: ['controller', 'name'] as const, registers: [this.registry] };
  private readonly perController = { labelNames: ['controller'] as const, registers: [this.registry] };
  readonly workqueueAdds = new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue',
    ...this.perQueue,
  });
  readonly workqueueQueueDuration = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested',
    buckets: WORKQUEUE_BUCKETS,
    ...this.perQueue,
  });
  readonly workqueueWorkDuration = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes',
    buckets: WORKQUEUE_BUCKETS,
    ...this.perQueue,
  });
  readonly workqueueRetries = new Counter({
    name: 'workqueue_retries_total',
    help: 'Total number of retries handled by workqueue',
    ...this.perQueue,
  });
  readonly reconcileTotal = new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'Total number of reconciliations per controller',
    labelNames: ['controller', 'result'] as const,
    registers: [this.registry],
  });
  readonly reconcileErrors = new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Total number of reconciliation errors per controller',
    ...this.perController,
  });
  readonly terminalErrors = new Counter({
    name: 'controller_runtime_terminal_reconcile_errors_total',
    help: 'Total number of terminal reconciliation errors per controller',
    ...this.perController,
  });
  readonly reconcileTime = new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Length of time per reconciliation per controller',
    buckets: RECONCILE_BUCKETS,
    ...this.perController,
  });
  readonly leaderStatus = new Gauge({
    name: 'leader_election_master_status',
    help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. name is the string used to identify the lease',
    labelNames: ['name'] as const,
    registers: [this.registry],
  });

  constructor(private readonly opts: ReconcilerMetricsOptions = {}) {
    const registers = [this.registry];
    const view = () => this.view;
    // A gauge read from the controller at scrape time.
    const sampled = (
      name: string,
      help: string,
      labels: Record<string, string>,
      value: (v: ControllerView) => number,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: Object.keys(labels),
        registers,
        collect() {
          const v = view();
          this.set(labels, v ? value(v) : 0);
        },
      });
    const q = this.queueLabels;
    const c = this.controllerLabel;
    sampled('workqueue_depth', 'Current depth of workqueue', q, (v) => v.queueDepth());
    sampled(
      'workqueue_unfinished_work_seconds',
      "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
      q,
      (v) => v.runningForMs().reduce((a, b) => a + b, 0) / 1000,
    );
    sampled(
      'workqueue_longest_running_processor_seconds',
      'How many seconds has the longest running processor for workqueue been running.',
      q,
      (v) => Math.max(0, ...v.runningForMs()) / 1000,
    );
    sampled('controller_runtime_active_workers', 'Number of currently used workers per controller', c, (v) =>
      v.inFlight(),
    );
    sampled(
      'controller_runtime_max_concurrent_reconciles',
      'Maximum number of concurrent reconciles per controller',
      c,
      (v) => v.maxConcurrent(),
    );
    // From the watch cache, so every replica (a standby too) reports what status says.
    new Gauge({
      name: 'kd_reconciler_kdclusters',
      help: 'kdclusters in the watched namespaces by their Ready condition (true, false, unknown: not reconciled yet)',
      labelNames: ['ready'] as const,
      registers,
      collect() {
        const counts = { true: 0, false: 0, unknown: 0 };
        for (const c of view()?.clusters() ?? []) {
          const ready = c.ready === 'True' ? 'true' : c.ready === 'False' ? 'false' : 'unknown';
          counts[ready]++;
        }
        for (const [ready, n] of Object.entries(counts)) this.set({ ready }, n);
      },
    });
    for (const [name, help, field] of [
      [
        'kd_reconciler_content_cache_objects',
        'Connected ConfigMaps and Secrets (kind) whose content is kept between reconciles',
        'objects',
      ],
      [
        'kd_reconciler_content_cache_bytes',
        'Bytes of connected content kept between reconciles (kind), as rendered',
        'bytes',
      ],
    ] as const)
      new Gauge({
        name,
        help,
        labelNames: ['kind'] as const,
        registers,
        collect() {
          for (const c of view()?.content?.() ?? []) this.set({ kind: c.kind }, c[field]);
        },
      });
    sampled(
      'kd_reconciler_member_pods_unsynced',
      "Member pods that do not hold the configmeta of their cluster's current generator (from kdcluster status)",
      {},
      (v) => v.clusters().reduce((n, x) => n + x.unsyncedPods, 0),
    );
    // Zero series from the start, as controller-runtime does, so rates and ratios exist before the first error.
    for (const result of ['success', 'error', 'requeue', 'requeue_after'])
      this.reconcileTotal.inc({ ...this.controllerLabel, result }, 0);
    this.reconcileErrors.inc(this.controllerLabel, 0);
    this.terminalErrors.inc(this.controllerLabel, 0);
    this.workqueueAdds.inc(this.queueLabels, 0);
    this.workqueueRetries.inc(this.queueLabels, 0);
    this.setLeader(false);
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** Where the collect-time gauges read queue and cache state from. */
  watch(view: ControllerView): void {
    this.view = view;
  }

  /** Hooks for the work queue, in client-go's terms. */
  queueObserver(): QueueObserver {
    const labels = this.queueLabels;
    return {
      added: () => this.workqueueAdds.inc(labels),
      started: (ms) => this.workqueueQueueDuration.observe(labels, ms / 1000),
      finished: (ms) => this.workqueueWorkDuration.observe(labels, ms / 1000),
      retried: () => this.workqueueRetries.inc(labels),
    };
  }

  /**
   * One finished reconcile, in both vocabularies. controller-runtime's results are success, error,
   * requeue and requeue_after: a timed requeue is requeue_after; a terminal error and a run cut short by
   * the end of leadership are errors (controller-runtime sees a cancelled context as one).
   */
  reconciled(outcome: RunOutcome, ms: number): void {
    this.reconciles.inc({ result: outcome });
    this.reconcileSeconds.observe(ms / 1000);
    const result = outcome === 'success' ? 'success' : outcome === 'requeue' ? 'requeue_after' : 'error';
    this.reconcileTotal.inc({ ...this.controllerLabel, result });
    if (result === 'error') this.reconcileErrors.inc(this.controllerLabel);
    if (outcome === 'terminal') this.terminalErrors.inc(this.controllerLabel);
    this.reconcileTime.observe(this.controllerLabel, ms / 1000);
  }

  setLeader(leading: boolean): void {
    this.leader.set(leading ? 1 : 0);
    this.leaderStatus.set({ name: this.opts.leaseName ?? 'kd-connections-reconciler' }, leading ? 1 : 0);
  }
}
