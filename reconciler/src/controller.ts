/**
 * Wiring: informer events → keys in the work queue (event-routing.ts) → reconcileCluster, and with
 * --reconnect-hook the reconnect passes on a queue of their own. Caches run on every replica (a standby is
 * warm); the queues run only while this replica leads, and every write a reconcile makes goes through a
 * client scoped to that leadership (term-writes.ts): once it ends, nothing more is sent and writes in
 * flight are cut (a request already received by the API server may still apply; its `test`
 * preconditions keep that harmless).
 */
import { API_VERSION, KDCLUSTER_PLURAL, type KDCluster } from '@kd-connections/shared/domain';
import { CONDITION_READY, ReverseIndex, trimPrivateSecret } from '@kd-connections/shared/plan';
import { objectKey, splitKey } from '@kd-connections/shared/primitives';
import {
  ACCEPT_META,
  EventRecorder,
  errorMessage,
  type KubeClient,
  type Logger,
  type EventInput,
} from '@kd-connections/shared/runtime';
import { Caches } from './caches.js';
import type { ReconcilerConfig } from './config.js';
import type { ReconcilerMetrics } from './metrics.js';
import { Expectations } from './expectations.js';
import type { Leadership } from './leader-election.js';
import { routeEvents } from './event-routing.js';
import { reconcileCluster, RetryableError, writeKey, type ReconcileOutcome } from './reconcile.js';
import { termWrites, type Term, type WriteDeps } from './term-writes.js';
import { LimitedPodExec, reconnectPass, type PodExec } from './reconnect-hook.js';
import { MAX_REQUEUE_DELAY_MS, WorkQueue } from '@kd-connections/shared/runtime';

export class Controller {
  readonly caches: Caches;
  readonly queue: WorkQueue;
  readonly index = new ReverseIndex();
  readonly events: EventRecorder;
  readonly expectations = new Expectations();
  /**
   * With --reconnect-hook: the reconnect passes, a queue of their own beside the delivery queue, so a
   * hook that hangs until its timeout holds a hook slot, never a delivery worker; execs bounded by
   * --reconnect-concurrency across all clusters.
   */
  readonly hooks: WorkQueue | undefined;
  private readonly hookExec: LimitedPodExec | undefined;
  /** Fired when leadership ends or the service stops: hooks in flight are cut at once (see stopLeading). */
  private hookStop: AbortController | undefined;
  private term: Term | undefined;
  /** Per key, when the first watch event since its last reconcile arrived (delivery latency). */
  private readonly changedAt = new Map<string, number>();
  /** What the write path of each term records into. */
  private readonly writeDeps: WriteDeps;

  constructor(
    private readonly client: KubeClient,
    private readonly cfg: ReconcilerConfig,
    private readonly metrics: ReconcilerMetrics,
    private readonly log: Logger,
    /** Exec into member pods; needed only with --reconnect-hook. */
    private readonly exec?: PodExec,
  ) {
    this.caches = new Caches({
      client,
      log,
      namespaces: cfg.namespaces,
      systemNamespace: cfg.systemNamespace,
      secretConnections: cfg.secretConnections,
      digestKeyNamespace: cfg.digestKeyNamespace,
      relistPeriodMs: cfg.relistPeriodMs,
      watchTimeoutSeconds: cfg.watchTimeoutSeconds,
      onWatchRestart: (informer, reason) => metrics.watchRestarts.inc({ informer, reason }),
      referenced: (kind, key) => this.index.has(kind, key),
      contentCacheBytes: cfg.contentCacheBytes,
      onContentFetch: (kind, result) => metrics.contentFetches.inc({ kind, result }),
    });
    this.writeDeps = { caches: this.caches, expectations: this.expectations, metrics };
    this.events = new EventRecorder({
      client,
      controller: 'kd-connections.hpe.com/reconciler',
      instance: cfg.identity,
      log,
      onWrite: (ok) => metrics.writes.inc({ kind: 'event', result: ok ? 'ok' : 'error' }),
    });
    this.queue = new WorkQueue((key, signal) => this.reconcile(key, signal), {
      concurrency: cfg.concurrency,
      maxDelayMs: MAX_REQUEUE_DELAY_MS,
      observer: metrics.queueObserver(),
      onResult: (key, result, ms, error, retryInMs) => {
        metrics.reconciled(result, ms);
        metrics.queueDepth.set(this.queue.depth);
        if (result === 'aborted') {
          log.info('reconcile cut short: leadership ended', { cluster: key, error: errorMessage(error) });
        } else if (result === 'error') {
          const level = error instanceof RetryableError ? 'info' : 'warn';
          log[level]('reconcile will be retried', { cluster: key, error: errorMessage(error), retryInMs });
        }
      },
    });
    if (cfg.reconnectHook && exec) {
      this.hookExec = new LimitedPodExec(exec, cfg.reconnectConcurrency);
      this.hooks = new WorkQueue((key, signal) => this.reconnect(key, signal), {
        concurrency: cfg.reconnectConcurrency,
        maxDelayMs: MAX_REQUEUE_DELAY_MS,
        onResult: (key, result, _ms, error, retryInMs) => {
          if (result === 'aborted') log.info('reconnect pass cut short', { cluster: key, error: errorMessage(error) });
          else if (result === 'error') {
            const level = error instanceof RetryableError ? 'info' : 'warn';
            log[level]('reconnect pass will be retried', { cluster: key, error: errorMessage(error), retryInMs });
          }
        },
      });
    }
    routeEvents({
      caches: this.caches,
      index: this.index,
      expectations: this.expectations,
      systemNamespace: cfg.systemNamespace,
      enqueue: (key) => this.enqueue(key),
    });
    metrics.watch({
      queueDepth: () => this.queue.depth,
      inFlight: () => this.queue.inFlight,
      runningForMs: () => this.queue.runningForMs(),
      maxConcurrent: () => cfg.concurrency,
      clusters: () =>
        this.caches.clusters.list().map((c) => ({
          ready: c.status?.conditions?.find((x) => x.type === CONDITION_READY)?.status,
          unsyncedPods: Math.max(0, (c.status?.members?.total ?? 0) - (c.status?.members?.synced ?? 0)),
        })),
      content: () => this.caches.contentStats(),
    });
  }

  private enqueue(key: string): void {
    if (!this.term) return;
    if (!this.changedAt.has(key)) this.changedAt.set(key, Date.now());
    this.queue.add(key);
    this.metrics.queueDepth.set(this.queue.depth);
  }

  /**
   * Called when this replica becomes leader: every cluster is reconciled once (level-triggered resync).
   * The work runs, and writes, until `leadership.signal` fires.
   */
  startLeading(leadership: Leadership): void {
    const { signal, check } = leadership;
    if (signal.aborted) return;
    this.term = { signal, check, client: this.client.scoped({ signal, guard: check }) };
    this.metrics.setLeader(true);
    for (const c of this.caches.clusters.list()) this.queue.add(objectKey(c.metadata.namespace, c.metadata.name));
    this.queue.start(signal);
    this.hookStop = new AbortController();
    this.hooks?.start(AbortSignal.any([signal, this.hookStop.signal]));
  }

  /**
   * Stops taking work; resolves when the reconciles in flight have ended. Hooks in flight are cut at
   * once rather than waited for (they may run for --reconnect-timeout, past any grace period): the
   * process in the container goes on, unrecorded, and the next leader runs that member's hook again.
   */
  async stopLeading(): Promise<void> {
    this.term = undefined;
    this.changedAt.clear();
    this.metrics.setLeader(false);
    this.hookStop?.abort();
    await Promise.all([this.queue.stop(), this.hooks?.stop()]);
  }

  private async reconcile(key: string, signal: AbortSignal): Promise<{ requeueAfterMs: number } | void> {
    const term = this.term;
    if (!term || term.signal !== signal || signal.aborted) return;
    // Events during this run start a new measurement; a run that delivers nothing ends this one.
    const since = this.changedAt.get(key);
    this.changedAt.delete(key);
    const restore = () => {
      if (since !== undefined) this.changedAt.set(key, Math.min(since, this.changedAt.get(key) ?? Infinity));
    };
    let pass: { outcome: ReconcileOutcome; requeueAfterMs?: number };
    try {
      pass = await this.pass(key, term, signal);
    } catch (e) {
      restore();
      throw e;
    }
    if (pass.outcome.deferredMs) restore();
    else {
      if (since !== undefined && pass.outcome.podsWritten > 0)
        this.metrics.deliveryLatency.observe((Date.now() - since) / 1000);
      this.hooks?.add(key);
    }
    if (pass.requeueAfterMs !== undefined) return { requeueAfterMs: pass.requeueAfterMs };
  }

  /** One reconcile of the cluster. */
  private async pass(
    key: string,
    term: Term,
    signal: AbortSignal,
  ): Promise<{ outcome: ReconcileOutcome; requeueAfterMs?: number }> {
    const outcome = await reconcileCluster(key, {
      getCluster: (ns, name) => this.caches.clusters.get(ns, name),
      world: this.caches.world(),
      writes: termWrites(term, this.writeDeps),
      // Events are posted fire-and-forget by the shared recorder; a former leader posts none.
      events: {
        record: (e) => {
          term.check();
          if (!signal.aborted) this.events.record(e, term.client);
        },
      },
      ...(this.caches.privateSecrets
        ? {
            privateSecrets: {
              get: (ns: string, name: string) => this.caches.privateSecrets?.get(ns, name),
              key: () => this.caches.key,
              fetch: async (ns: string, name: string) => {
                const meta = await term.client.getIfExists<{ metadata?: Record<string, unknown> }>(
                  `/api/v1/namespaces/${ns}/secrets/${name}`,
                  { accept: ACCEPT_META },
                );
                return meta && trimPrivateSecret(meta);
              },
            },
          }
        : {}),
      log: this.log,
      opts: {
        systemNamespace: this.cfg.systemNamespace,
        secretConnections: this.cfg.secretConnections,
        clusterDomain: this.cfg.clusterDomain,
        podConcurrency: this.cfg.podConcurrency,
        firstDeliveryWaitMs: this.cfg.firstDeliveryWaitMs,
      },
      pendingWrites: (keys) => this.expectations.waitFor(keys),
    });
    // The watch event that clears the expectation enqueues the key again; the delay is a safety net.
    if (outcome.deferredMs) return { outcome, requeueAfterMs: outcome.deferredMs };
    if (outcome.requeueAfterMs) return { outcome, requeueAfterMs: outcome.requeueAfterMs };
    return { outcome };
  }

  /**
   * The reconnect pass of one cluster (hook queue). It reads the cluster once the cache shows this
   * replica's own last writes of it, so its status record is not refused for a stale copy.
   */
  private async reconnect(key: string, signal: AbortSignal): Promise<{ requeueAfterMs: number } | void> {
    const term = this.term;
    if (!term || !this.hookExec || signal.aborted) return;
    const wait = this.expectations.waitFor([writeKey('kdcluster', key)]);
    if (wait > 0) return { requeueAfterMs: wait };
    const cluster = clusterFromCache(this.caches, key);
    if (!cluster || cluster.metadata.deletionTimestamp) return;
    const writes = termWrites(term, this.writeDeps);
    const record = (e: EventInput) => {
      term.check();
      if (!signal.aborted) this.events.record(e, term.client);
    };
    const next = await reconnectPass(cluster, {
      exec: this.hookExec,
      world: this.caches.world(),
      systemNamespace: this.cfg.systemNamespace,
      timeoutMs: this.cfg.reconnectTimeoutMs,
      // One cluster's members (hanging hooks included) take at most half the slots: others still get theirs.
      concurrency: Math.max(1, Math.floor(this.cfg.reconnectConcurrency / 2)),
      signal,
      check: term.check,
      patchClusterStatus: writes.patchClusterStatus,
      readCluster: (ns, name) =>
        term.client.getIfExists<KDCluster>(`/apis/${API_VERSION}/namespaces/${ns}/${KDCLUSTER_PLURAL}/${name}`),
      events: { record },
      onHook: (result, hook) => this.metrics.reconnectHooks.inc({ result, hook }),
      log: this.log,
    });
    if (next.requeueAfterMs !== undefined) return { requeueAfterMs: next.requeueAfterMs };
  }
}

function clusterFromCache(caches: Caches, key: string): KDCluster | undefined {
  const { namespace, name } = splitKey(key);
  return caches.clusters.get(namespace, name);
}
