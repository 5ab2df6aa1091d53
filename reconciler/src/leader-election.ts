/**
 * Leader election through a coordination.k8s.io/v1 Lease, with client-go's timing (15 s lease,
 * 10 s renew deadline, 2 s retry). Expiry is judged by when *this* process last saw the lease change,
 * not by the timestamps in it, so clock skew between replicas does not matter. Every write is a JSON
 * Patch guarded by the lease's resourceVersion; a lost race just waits for the next retry.
 * A leader that cannot renew within the deadline steps down before anyone else may take over
 * (renew deadline < lease duration). On graceful shutdown the lease is released at once.
 */
import { errorMessage, errorStatus, microTime, type KubeClient, type Logger } from '@kd-connections/shared';

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

interface Lease {
  metadata: { resourceVersion?: string };
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

export class LeaderElector {
  private leading = false;
  private timer: NodeJS.Timeout | undefined;
  private lastRenew = 0;
  private observed: { record: string; at: number } | undefined;
  private readonly duration: number;
  private readonly deadline: number;
  private readonly retry: number;
  private stopped = false;
  private busy: Promise<void> = Promise.resolve();

  constructor(private readonly o: LeaderElectionOptions) {
    this.duration = o.leaseDurationMs ?? 15_000;
    this.deadline = o.renewDeadlineMs ?? 10_000;
    this.retry = o.retryPeriodMs ?? 2_000;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  private get path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.o.namespace}/leases`;
  }

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.busy = this.tryAcquireOrRenew().finally(() => {
        if (!this.stopped) this.timer = setTimeout(tick, this.retry);
      });
    };
    tick();
  }

  /** Stops campaigning and, if leading, releases the lease so another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.busy;
    if (this.leading) {
      this.setLeading(false);
      try {
        const lease = await this.o.client.get<Lease>(`${this.path}/${this.o.name}`);
        if (lease.spec?.holderIdentity === this.o.identity) {
          await this.o.client.jsonPatch(`${this.path}/${this.o.name}`, [
            { op: 'test', path: '/metadata/resourceVersion', value: lease.metadata.resourceVersion },
            { op: 'replace', path: '/spec/holderIdentity', value: '' },
            { op: 'replace', path: '/spec/leaseDurationSeconds', value: 1 },
            { op: 'replace', path: '/spec/renewTime', value: microTime() },
          ]);
          this.o.log.info('released leader lease', { lease: this.o.name });
        }
      } catch (e) {
        this.o.log.warn('could not release leader lease', { error: errorMessage(e) });
      }
    }
  }

  private setLeading(v: boolean): void {
    if (v === this.leading) return;
    this.leading = v;
    this.o.log.info(v ? 'became leader' : 'stopped leading', { lease: this.o.name, identity: this.o.identity });
    if (v) this.o.onStartedLeading();
    else this.o.onStoppedLeading();
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const now = Date.now();
    try {
      let lease: Lease | undefined;
      try {
        lease = await this.o.client.get<Lease>(`${this.path}/${this.o.name}`, { timeoutMs: this.retry * 2 });
      } catch (e) {
        if (errorStatus(e) !== 404) throw e;
      }
      const seconds = Math.ceil(this.duration / 1000);
      if (!lease) {
        await this.o.client.request('POST', this.path, {
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.o.name, namespace: this.o.namespace },
            spec: {
              holderIdentity: this.o.identity,
              leaseDurationSeconds: seconds,
              acquireTime: microTime(),
              renewTime: microTime(),
              leaseTransitions: 0,
            },
          },
        });
        this.lastRenew = now;
        this.setLeading(true);
        return;
      }
      const spec = lease.spec ?? {};
      const record = JSON.stringify([spec.holderIdentity, spec.renewTime, spec.leaseDurationSeconds]);
      if (!this.observed || this.observed.record !== record) this.observed = { record, at: now };
      const holder = spec.holderIdentity ?? '';
      const heldByMe = holder === this.o.identity;
      const expired = holder === '' || now > this.observed.at + (spec.leaseDurationSeconds ?? seconds) * 1000;
      if (!heldByMe && !expired) {
        this.setLeading(false);
        return;
      }
      const ops: unknown[] = [
        { op: 'test', path: '/metadata/resourceVersion', value: lease.metadata.resourceVersion },
        { op: 'add', path: '/spec/holderIdentity', value: this.o.identity },
        { op: 'add', path: '/spec/leaseDurationSeconds', value: seconds },
        { op: 'add', path: '/spec/renewTime', value: microTime() },
      ];
      if (!heldByMe) {
        ops.push({ op: 'add', path: '/spec/acquireTime', value: microTime() });
        ops.push({ op: 'add', path: '/spec/leaseTransitions', value: (spec.leaseTransitions ?? 0) + 1 });
      }
      await this.o.client.jsonPatch(`${this.path}/${this.o.name}`, ops, { timeoutMs: this.retry * 2 });
      this.lastRenew = now;
      this.setLeading(true);
    } catch (e) {
      this.o.log.debug('lease acquire/renew failed', { error: errorMessage(e) });
      // Step down once renewals have failed for the whole deadline; others wait a full lease duration.
      if (this.leading && now - this.lastRenew > this.deadline) this.setLeading(false);
    }
  }
}
