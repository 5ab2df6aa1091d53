/**
 * The reconciler assembled: API client → caches → controller (work queue, reconcile) → leader elector,
 * with the probe server beside them. `main.ts` adds the process around it (flags, signals).
 * Caches start at once (a standby is warm); work starts when this replica leads and stops, writes
 * included, when it stops leading.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { errorMessage, KubeClient, type Logger } from '@kd-connections/shared';
import type { Clock } from './clock.js';
import type { ReconcilerConfig } from './config.js';
import { Controller } from './controller.js';
import { LeaderElector } from './leader-election.js';
import { ReconcilerMetrics } from './metrics.js';
import { startProbeServer, type ProbeServer } from './probe-server.js';

export interface ReconcilerServiceOptions {
  config: ReconcilerConfig;
  kubeConfig: KubeConfig;
  log: Logger;
  /** Default: the system clock. */
  clock?: Clock;
  /** How long start() waits for the caches to fill; default 10 minutes. */
  syncTimeoutMs?: number;
}

export class ReconcilerService {
  readonly metrics = new ReconcilerMetrics();
  readonly controller: Controller;
  private readonly client: KubeClient;
  private readonly log: Logger;
  private elector: LeaderElector | undefined;
  /** Without leader election this replica leads until it stops. */
  private solo: AbortController | undefined;
  private probes: ProbeServer | undefined;

  constructor(private readonly opts: ReconcilerServiceOptions) {
    const { config, log } = opts;
    this.log = log;
    this.client = new KubeClient(opts.kubeConfig, `kd-connections-reconciler/${config.identity}`);
    this.controller = new Controller(this.client, config, this.metrics, log);
  }

  /** Serves the probes, fills the caches, then campaigns for the lease (or leads). Returns the probe port. */
  async start(): Promise<number> {
    const { config: cfg } = this.opts;
    this.probes = await startProbeServer(
      cfg.metricsHost,
      cfg.metricsPort,
      () => this.controller.caches.synced,
      this.metrics.registry,
    );
    this.log.info('starting', {
      identity: cfg.identity,
      namespaces: cfg.namespaces.length ? cfg.namespaces : ['*'],
      systemNamespace: cfg.systemNamespace,
      metricsPort: this.probes.port,
      secretConnections: cfg.secretConnections,
    });
    this.controller.caches.start();
    await this.controller.caches.waitForSync(this.opts.syncTimeoutMs ?? 10 * 60_000);

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
    return this.probes.port;
  }

  /** Lets the reconciles in flight finish, releases the lease, stops the caches and the probe server. */
  async stop(): Promise<void> {
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
