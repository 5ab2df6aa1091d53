/**
 * Wiring: informer events → keys in the work queue (via the reverse index) → reconcileCluster.
 * Handlers only enqueue; they never look at what changed beyond deciding whom to wake. Caches run on
 * every replica (a standby is warm); the queue runs only while this replica leads, and every write a
 * reconcile makes goes through a client scoped to that leadership: once it ends, nothing more is sent
 * and writes in flight are cut (a request already received by the API server may still apply; its
 * `test` preconditions keep that harmless).
 */
import {
  ACCEPT_META,
  API_VERSION,
  CONDITION_READY,
  EventRecorder,
  errorMessage,
  isConflict,
  KDCLUSTER_PLURAL,
  LABEL_KDCLUSTER,
  LABEL_PRIVATE_CONFIGMETA_OF,
  LABEL_ROLE,
  objectKey,
  ReverseIndex,
  splitKey,
  RECONCILER_FIELD_MANAGER,
  trimPrivateSecret,
  type KDCluster,
  type KubeClient,
  type Logger,
  type EventInput,
  type PatchOp,
  type SecretBody,
} from '@kd-connections/shared';
import { Caches, INDEX_CLUSTERS_BY_APP, type CachedPod } from './caches.js';
import type { ReconcilerConfig } from './config.js';
import type { ReconcilerMetrics, WriteKind } from './metrics.js';
import { Expectations, rvAtLeast } from './expectations.js';
import type { Leadership } from './leader-election.js';
import { reconcileCluster, RetryableError, writeKey, type ReconcileOutcome, type Writes } from './reconcile.js';
import { LimitedPodExec, reconnectPass, type PodExec } from './reconnect-hook.js';
import { MAX_REQUEUE_DELAY_MS, WorkQueue } from './work-queue.js';

/** One term of leadership as the write path sees it. */
interface Term {
  signal: AbortSignal;
  check: () => void;
  /** The API client for writes, scoped to the term. */
  client: KubeClient;
}

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
    this.wire();
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

  private enqueueDependents(kind: 'Cluster' | 'ConfigMap' | 'Secret', key: string): void {
    for (const k of this.index.dependentsOf(kind, key)) this.enqueue(k);
  }

  private wire(): void {
    const { clusters, apps, configMaps, secrets, pods, privateSecrets } = this.caches;
    const onCluster = (c: KDCluster, old?: KDCluster) => {
      const key = objectKey(c.metadata.namespace, c.metadata.name);
      this.expectations.observe(writeKey('kdcluster', key), c.metadata.resourceVersion);
      for (const r of this.index.set(key, c.spec?.connections)) this.caches.release(r);
      this.enqueue(key);
      // A connected cluster's embedded view depends on its spec (and pods, below), not on its status.
      if (!old || old.metadata.generation !== c.metadata.generation) this.enqueueDependents('Cluster', key);
    };
    clusters.on('add', (c) => onCluster(c));
    clusters.on('update', (c, old) => onCluster(c, old));
    clusters.on('delete', (c) => {
      const key = objectKey(c.metadata.namespace, c.metadata.name);
      this.expectations.observe(writeKey('kdcluster', key), undefined);
      for (const r of this.index.delete(key)) this.caches.release(r);
      this.enqueueDependents('Cluster', key);
    });

    const onApp = (a: { metadata: { namespace?: string; name?: string } }) => {
      const users =
        a.metadata.namespace === this.cfg.systemNamespace
          ? clusters.byIndex(INDEX_CLUSTERS_BY_APP, `*/${a.metadata.name}`)
          : clusters.byIndex(INDEX_CLUSTERS_BY_APP, `${a.metadata.namespace}/${a.metadata.name}`);
      for (const c of users) {
        const key = objectKey(c.metadata.namespace, c.metadata.name);
        this.enqueue(key);
        this.enqueueDependents('Cluster', key);
      }
    };
    for (const ev of ['add', 'update', 'delete'] as const) apps.on(ev, onApp);

    for (const ev of ['add', 'update', 'delete'] as const) {
      configMaps.on(ev, (cm) =>
        this.enqueueDependents('ConfigMap', objectKey(cm.metadata.namespace, cm.metadata.name)),
      );
      secrets?.on(ev, (s) => this.enqueueDependents('Secret', objectKey(s.metadata.namespace, s.metadata.name)));
    }

    // A private Secret changed or went away (ours, or someone else's doing): its cluster checks it.
    for (const ev of ['add', 'update', 'delete'] as const) {
      privateSecrets?.on(ev, (s) => {
        const { namespace, name } = s.metadata;
        this.expectations.observe(
          writeKey('secret', objectKey(namespace, name)),
          ev === 'delete' ? undefined : s.metadata.resourceVersion,
        );
        const cluster = s.metadata.labels?.[LABEL_PRIVATE_CONFIGMETA_OF];
        if (cluster) this.enqueue(objectKey(namespace, cluster));
      });
    }

    // What a connected cluster's embedded view uses of a pod; annotation writes (ours) leave it alone.
    const membership = (p: CachedPod) =>
      JSON.stringify([
        p.metadata.labels?.[LABEL_ROLE],
        !!p.metadata.deletionTimestamp,
        p.spec?.hostname,
        p.spec?.subdomain,
        p.metadata.uid,
      ]);
    const onPod = (p: CachedPod, old?: CachedPod, gone = false) => {
      this.expectations.observe(
        writeKey('pod', objectKey(p.metadata.namespace, p.metadata.name)),
        gone ? undefined : p.metadata.resourceVersion,
      );
      const cluster = p.metadata.labels?.[LABEL_KDCLUSTER];
      const before = old?.metadata.labels?.[LABEL_KDCLUSTER];
      for (const c of new Set([cluster, before])) {
        if (!c) continue;
        const key = objectKey(p.metadata.namespace, c);
        this.enqueue(key);
        if (!old || membership(old) !== membership(p) || before !== cluster) this.enqueueDependents('Cluster', key);
      }
    };
    pods.on('add', (p) => onPod(p));
    pods.on('update', (p, old) => onPod(p, old));
    pods.on('delete', (p) => onPod(p, { ...p, metadata: { ...p.metadata, uid: `${p.metadata.uid}-gone` } }, true));
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

  private writes(term: Term): Writes {
    const counted = async <T>(kind: WriteKind, w: () => Promise<T>): Promise<T> => {
      try {
        const r = await w();
        this.metrics.writes.inc({ kind, result: 'ok' });
        return r;
      } catch (e) {
        this.metrics.writes.inc({ kind, result: isConflict(e) ? 'conflict' : 'error' });
        throw e;
      }
    };
    const kd = (ns: string, name: string) => `/apis/${API_VERSION}/namespaces/${ns}/${KDCLUSTER_PLURAL}/${name}`;
    const fm = { fieldManager: RECONCILER_FIELD_MANAGER };
    // The watch can deliver a write (or a later one) before its answer arrives here; the cache then
    // already holds that version, and expecting it would hold reconciles back until the expectation expires.
    const expectCluster = (c: KDCluster) => {
      const rv = c.metadata.resourceVersion;
      if (
        !rvAtLeast(
          this.caches.clusters.get(c.metadata.namespace ?? '', c.metadata.name ?? '')?.metadata.resourceVersion,
          rv,
        )
      )
        this.expectations.expect(writeKey('kdcluster', objectKey(c.metadata.namespace, c.metadata.name)), rv);
      return c;
    };
    return {
      patchCluster: (ns, name, ops: PatchOp[]) =>
        counted('kdcluster', async () =>
          expectCluster(await term.client.jsonPatch<KDCluster>(kd(ns, name), ops, { query: fm })),
        ),
      patchClusterStatus: (ns, name, ops: PatchOp[]) =>
        counted('kdcluster_status', async () =>
          expectCluster(await term.client.jsonPatch<KDCluster>(`${kd(ns, name)}/status`, ops, { query: fm })),
        ),
      patchPod: (ns, name, ops: PatchOp[]) =>
        counted('pod', async () => {
          const pod = await term.client.jsonPatch<{ metadata: { resourceVersion?: string } }>(
            `/api/v1/namespaces/${ns}/pods/${name}`,
            ops,
            { query: fm },
          );
          const rv = pod.metadata.resourceVersion;
          if (!rvAtLeast(this.caches.pods.get(ns, name)?.metadata.resourceVersion, rv))
            this.expectations.expect(writeKey('pod', objectKey(ns, name)), rv);
          return pod.metadata.resourceVersion;
        }),
      ...this.secretWrites(term, counted),
    };
  }

  /** Writes of the private Secrets; each records the version it produced, as the other writes do. */
  private secretWrites(
    term: Term,
    counted: <T>(kind: WriteKind, w: () => Promise<T>) => Promise<T>,
  ): Pick<Writes, 'createSecret' | 'patchSecret' | 'deleteSecret'> {
    const path = (ns: string, name?: string) => `/api/v1/namespaces/${ns}/secrets${name ? `/${name}` : ''}`;
    const query = { fieldManager: RECONCILER_FIELD_MANAGER };
    type Meta = { metadata?: { resourceVersion?: string } };
    const expect = (ns: string, name: string, written: Meta) => {
      const rv = written.metadata?.resourceVersion;
      if (!rvAtLeast(this.caches.privateSecrets?.get(ns, name)?.metadata.resourceVersion, rv))
        this.expectations.expect(writeKey('secret', objectKey(ns, name)), rv);
    };
    return {
      createSecret: (ns, body: SecretBody) =>
        counted('private_secret', async () =>
          expect(ns, body.metadata.name, await term.client.request<Meta>('POST', path(ns), { body, query })),
        ),
      patchSecret: (ns, name, ops) =>
        counted('private_secret', async () =>
          expect(ns, name, await term.client.jsonPatch<Meta>(path(ns, name), ops, { query })),
        ),
      deleteSecret: (ns, name, preconditions) =>
        counted('private_secret', async () => {
          const body = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions };
          expect(ns, name, await term.client.request<Meta>('DELETE', path(ns, name), { body }));
        }),
    };
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
      writes: this.writes(term),
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
      },
      pendingWrites: (keys) => this.expectations.waitFor(keys),
    });
    // The watch event that clears the expectation enqueues the key again; the delay is a safety net.
    if (outcome.deferredMs) return { outcome, requeueAfterMs: outcome.deferredMs };
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
    const writes = this.writes(term);
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
      onHook: (result) => this.metrics.reconnectHooks.inc({ result }),
      log: this.log,
    });
    if (next.requeueAfterMs !== undefined) return { requeueAfterMs: next.requeueAfterMs };
  }
}

function clusterFromCache(caches: Caches, key: string): KDCluster | undefined {
  const { namespace, name } = splitKey(key);
  return caches.clusters.get(namespace, name);
}
