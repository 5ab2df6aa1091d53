/** Prometheus metrics of the reconciler (served at /metrics). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type WriteKind = 'kdcluster' | 'kdcluster_status' | 'pod' | 'private_secret' | 'event';

export class ReconcilerMetrics {
  readonly registry = new Registry();
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
  readonly leader = new Gauge({
    name: 'kd_reconciler_leader',
    help: '1 while this replica holds the lease',
    registers: [this.registry],
  });

  constructor(defaults = true) {
    if (defaults) collectDefaultMetrics({ register: this.registry });
  }
}
