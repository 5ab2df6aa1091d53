/**
 * The reconciler assembled: API client → caches → controller (work queue, reconcile) → leader elector,
 * with the probe server beside them. `main.ts` adds the process around it (flags, signals).
 * Caches start at once (a standby is warm); work starts when this replica leads and stops, writes
 * included, when it stops leading.
 */
import { guardEventTarget, KubeDirectorGuard } from '@kd-connections/shared/kubedirector';
import {
  errorMessage,
  EventRecorder,
  KubeClient,
  type LoadedKubeConnection,
  type Logger,
  ProbeServer,
} from '@kd-connections/shared/runtime';
import type { Clock } from '@kd-connections/shared/runtime';
import type { ReconcilerConfig } from './config.js';
import { Controller } from './controller.js';
import { HeapRelease } from './heap-release.js';
import { LeaderElector } from './leader-election.js';
import { ReconcilerMetrics } from './metrics.js';
import { WebSocketPodExec } from './reconnect-hook.js';

export interface ReconcilerServiceOptions {
  config: ReconcilerConfig;
  kubeConfig: LoadedKubeConnection;
  log: Logger;
  /** Default: the system clock. */
  clock?: Clock;
  /** How long start() waits for the caches to fill; default 10 minutes. */
  syncTimeoutMs?: number;
  /** Called when the KubeDirector guard starts refusing after work began (main stops the process). */
  onRefused?: (why: string) => void;
}

export class ReconcilerService {
  readonly metrics: ReconcilerMetrics;
  readonly controller: Controller;
  private readonly client: KubeClient;
  private readonly log: Logger;
  private elector: LeaderElector | undefined;
  /** Without leader election this replica leads until it stops. */
  private solo: AbortController | undefined;
  private probes: ProbeServer | undefined;
  /** Refuses to act while KubeDirector's CRDs or operator are there (it delivers configmeta itself). */
  readonly guard: KubeDirectorGuard;
  private working = false;
  private readonly heapRelease: HeapRelease;

  constructor(private readonly opts: ReconcilerServiceOptions) {
    const { config, log } = opts;
    this.log = log;
    this.metrics = new ReconcilerMetrics({ leaseName: config.leaseName });
    this.client = new KubeClient(opts.kubeConfig, `kd-connections-reconciler/${config.identity}`);
    const exec = config.reconnectHook ? new WebSocketPodExec(() => opts.kubeConfig.clientNodeConfig()) : undefined;
    this.controller = new Controller(this.client, config, this.metrics, log, exec);
    this.heapRelease = new HeapRelease({
      log,
      intervalMs: config.heapReleaseIntervalMs,
      onRelease: (reason) => this.metrics.heapReleases.inc({ reason }),
    });
    this.guard = new KubeDirectorGuard({
      client: this.client,
      log,
      events: new EventRecorder({
        client: this.client,
        controller: 'kd-connections-reconciler',
        instance: config.identity,
        log,
      }),
      regarding: guardEventTarget(),
      component: 'kd-connections reconciler',
      onChange: (why) => {
        if (why && this.working) this.opts.onRefused?.(why);
      },
    });
  }

  /** Resolves once the guard lets this service act (at once, unless KubeDirector is found). */
  private async untilAllowed(): Promise<void> {
    await this.guard.start();
    while (this.guard.refusal !== undefined) {
      await new Promise((r) => setTimeout(r, 5_000));
      await this.guard.check();
    }
  }

  /** Serves the probes, fills the caches, then campaigns for the lease (or leads). Returns the probe port. */
  async start(): Promise<number> {
    const { config: cfg } = this.opts;
    this.probes = new ProbeServer({
      host: cfg.metricsHost,
      port: cfg.metricsPort,
      readiness: () =>
        this.controller.caches.synced ? { ready: true, reasons: [] } : { ready: false, reasons: ['caches not synced'] },
      metrics: this.metrics.registry,
    });
    const probePort = await this.probes.listen();
    this.log.info('starting', {
      identity: cfg.identity,
      namespaces: cfg.namespaces.length ? cfg.namespaces : ['*'],
      systemNamespace: cfg.systemNamespace,
      metricsPort: probePort,
      secretConnections: cfg.secretConnections,
      reconnectHook: cfg.reconnectHook,
    });
    // Nothing is watched, led or written while KubeDirector is found (the probes answer meanwhile).
    await this.untilAllowed();
    this.working = true;
    this.controller.caches.start();
    await this.controller.caches.waitForSync(this.opts.syncTimeoutMs ?? 10 * 60_000);
    // The initial lists were the largest burst this process makes; a standby would keep their garbage.
    if (cfg.heapReleaseIntervalMs > 0) {
      this.heapRelease.releaseNow('caches synced');
      this.heapRelease.start();
    }

    if (cfg.leaderElect) {
      this.elector = new LeaderElector({
        client: this.client,
        namespace: cfg.leaseNamespace,
        name: cfg.leaseName,
        identity: cfg.identity,
        leaseDurationMs: cfg.leaseDurationMs,
        renewDeadlineMs: cfg.renewDeadlineMs,
        retryPeriodMs: cfg.retryPeriodMs,
        log: this.log,
        clock: this.opts.clock,
        onStartedLeading: (leadership) => this.controller.startLeading(leadership),
        onStoppedLeading: () => void this.controller.stopLeading(),
      });
      this.elector.start();
    } else {
      this.solo = new AbortController();
      this.controller.startLeading({ signal: this.solo.signal, check: () => {} });
    }
    return probePort;
  }

  /** Lets the reconciles in flight finish, releases the lease, stops the caches and the probe server. */
  async stop(): Promise<void> {
    this.guard.stop();
    this.heapRelease.stop();
    await this.controller.stopLeading();
    await this.elector?.stop();
    this.solo?.abort();
    await this.controller.caches
      .stop()
      .catch((e) => this.log.warn('stopping caches failed', { error: errorMessage(e) }));
    await this.probes?.close();
    this.client.close();
  }
}
