/**
 * Leader election through a coordination.k8s.io/v1 Lease, with client-go's timing (15 s lease,
 * 10 s renew deadline, 2 s retry). Expiry is judged by when *this* process last saw the lease change,
 * not by the timestamps in it, so clock skew between replicas does not matter. Every write is a JSON
 * Patch guarded by the lease's resourceVersion; a lost race just waits for the next retry.
 *
 * Step-down precedes anyone else's takeover. The leader counts its renew deadline from the start of its
 * last successful renewal (no later than the moment the lease changed); a standby counts the lease
 * duration from when its read of the changed lease answered (no earlier). A timer steps down at the
 * deadline whatever the requests in flight are doing, and each attempt is bounded (twice the retry
 * period), so a hanging API server delays neither step-down nor the next attempt. Each term of leadership carries an AbortSignal, fired on
 * step-down, and a check() that steps down at once when the deadline has passed but its timer has not
 * run yet (a process paused and resumed): writes made under the term stop with it.
 * On graceful shutdown the lease is released at once.
 */
import { errorMessage, errorStatus, microTime, type KubeClient, type Logger } from '@kd-connections/shared/runtime';
import { systemClock, type Clock, type TimerHandle } from '@kd-connections/shared/runtime';

/** What a leader gets for the length of its term. */
export interface Leadership {
  /** Fires when this term ends. */
  readonly signal: AbortSignal;
  /** Ends the term at once when the renew deadline has passed; call before each write. */
  check(): void;
}

export type LeaseClient = Pick<KubeClient, 'get' | 'request' | 'jsonPatch'>;

export interface LeaderElectionOptions {
  client: LeaseClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log: Logger;
  clock?: Clock;
  onStartedLeading: (leadership: Leadership) => void;
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
  /** Set while leading; aborted on step-down. */
  private term: AbortController | undefined;
  private lastRenew = 0;
  private observed: { record: string; at: number } | undefined;
  private readonly duration: number;
  private readonly deadline: number;
  private readonly retry: number;
  private readonly clock: Clock;
  private stopped = false;
  private busy: Promise<void> = Promise.resolve();
  private retryTimer: TimerHandle | undefined;
  private deadlineTimer: TimerHandle | undefined;
  /** The acquire/renew attempt in flight; aborted when it runs out of time or leadership ends. */
  private attempt: { abort(): void } | undefined;

  constructor(private readonly o: LeaderElectionOptions) {
    this.duration = o.leaseDurationMs ?? 15_000;
    this.deadline = o.renewDeadlineMs ?? 10_000;
    this.retry = o.retryPeriodMs ?? 2_000;
    this.clock = o.clock ?? systemClock;
  }

  get isLeader(): boolean {
    return this.term !== undefined;
  }

  private get path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.o.namespace}/leases`;
  }

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.busy = this.attemptBounded().finally(() => {
        if (!this.stopped) this.retryTimer = this.clock.setTimeout(tick, this.retry);
      });
    };
    tick();
  }

  /** Stops campaigning and, if leading, releases the lease so another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.clock.clearTimeout(this.retryTimer);
    this.attempt?.abort();
    await this.busy;
    if (!this.term) return;
    this.stepDown('shutting down');
    const bound = this.bound(this.retry * 2);
    try {
      const lease = await this.o.client.get<Lease>(`${this.path}/${this.o.name}`, { signal: bound.signal });
      if (lease.spec?.holderIdentity === this.o.identity) {
        await this.o.client.jsonPatch(
          `${this.path}/${this.o.name}`,
          [
            { op: 'test', path: '/metadata/resourceVersion', value: lease.metadata.resourceVersion },
            { op: 'replace', path: '/spec/holderIdentity', value: '' },
            { op: 'replace', path: '/spec/leaseDurationSeconds', value: 1 },
            { op: 'replace', path: '/spec/renewTime', value: this.stamp() },
          ],
          { signal: bound.signal },
        );
        this.o.log.info('released leader lease', { lease: this.o.name });
      }
    } catch (e) {
      this.o.log.warn('could not release leader lease', { error: errorMessage(e) });
    } finally {
      bound.done();
    }
  }

  /** A Lease time (acquireTime, renewTime) on this elector's clock. */
  private stamp(): string {
    return microTime(new Date(this.clock.now()));
  }

  /** An AbortController that fires after `ms` (on this elector's clock) unless done() first. */
  private bound(ms: number): { signal: AbortSignal; abort: () => void; done: () => void } {
    const c = new AbortController();
    const t = this.clock.setTimeout(() => c.abort(), ms);
    return { signal: c.signal, abort: () => c.abort(), done: () => this.clock.clearTimeout(t) };
  }

  private startLeading(): void {
    if (!this.term) {
      const term = new AbortController();
      this.term = term;
      this.o.log.info('became leader', { lease: this.o.name, identity: this.o.identity });
      this.o.onStartedLeading({
        signal: term.signal,
        check: () => {
          if (this.term === term && this.clock.now() >= this.lastRenew + this.deadline)
            this.stepDown('renew deadline passed');
        },
      });
    }
    this.clock.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = this.clock.setTimeout(
      () => this.stepDown('renew deadline passed'),
      this.lastRenew + this.deadline - this.clock.now(),
    );
  }

  private stepDown(why: string): void {
    const term = this.term;
    if (!term) return;
    this.term = undefined;
    this.clock.clearTimeout(this.deadlineTimer);
    this.attempt?.abort();
    this.o.log.info('stopped leading', {
      lease: this.o.name,
      identity: this.o.identity,
      reason: why,
      sinceLastRenewMs: this.clock.now() - this.lastRenew,
    });
    term.abort();
    this.o.onStoppedLeading();
  }

  private async attemptBounded(): Promise<void> {
    // Twice the retry period, never past the deadline: a hung request gives way to the next attempt.
    const bound = this.bound(Math.min(this.retry * 2, this.deadline));
    this.attempt = bound;
    try {
      await this.tryAcquireOrRenew(bound.signal);
    } catch (e) {
      this.o.log.debug('lease acquire/renew failed', { error: errorMessage(e) });
    } finally {
      bound.done();
      if (this.attempt === bound) this.attempt = undefined;
    }
  }

  private async tryAcquireOrRenew(signal: AbortSignal): Promise<void> {
    const started = this.clock.now();
    const seconds = Math.ceil(this.duration / 1000);
    let lease: Lease | undefined;
    try {
      lease = await this.o.client.get<Lease>(`${this.path}/${this.o.name}`, { signal });
    } catch (e) {
      if (errorStatus(e) !== 404) throw e;
    }
    if (!lease) {
      await this.o.client.request('POST', this.path, {
        signal,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.o.name, namespace: this.o.namespace },
          spec: {
            holderIdentity: this.o.identity,
            leaseDurationSeconds: seconds,
            acquireTime: this.stamp(),
            renewTime: this.stamp(),
            leaseTransitions: 0,
          },
        },
      });
      return this.renewed(started, signal);
    }
    const spec = lease.spec ?? {};
    // Any write to the lease is a sign of life: its resourceVersion changes even if renewTime would not.
    const record = JSON.stringify([
      lease.metadata.resourceVersion,
      spec.holderIdentity,
      spec.renewTime,
      spec.leaseDurationSeconds,
    ]);
    const seenAt = this.clock.now();
    if (!this.observed || this.observed.record !== record) this.observed = { record, at: seenAt };
    const holder = spec.holderIdentity ?? '';
    const heldByMe = holder === this.o.identity;
    const expired = holder === '' || seenAt > this.observed.at + (spec.leaseDurationSeconds ?? seconds) * 1000;
    if (!heldByMe && !expired) {
      this.stepDown(`lease held by ${holder}`);
      return;
    }
    const ops: unknown[] = [
      { op: 'test', path: '/metadata/resourceVersion', value: lease.metadata.resourceVersion },
      { op: 'add', path: '/spec/holderIdentity', value: this.o.identity },
      { op: 'add', path: '/spec/leaseDurationSeconds', value: seconds },
      { op: 'add', path: '/spec/renewTime', value: this.stamp() },
    ];
    if (!heldByMe) {
      ops.push({ op: 'add', path: '/spec/acquireTime', value: this.stamp() });
      ops.push({ op: 'add', path: '/spec/leaseTransitions', value: (spec.leaseTransitions ?? 0) + 1 });
    }
    await this.o.client.jsonPatch(`${this.path}/${this.o.name}`, ops, { signal });
    this.renewed(started, signal);
  }

  /** A write that set us as holder succeeded; it was made no earlier than `started`. */
  private renewed(started: number, signal: AbortSignal): void {
    // An answer that arrives after the attempt was cut (deadline, shutdown) is not trusted.
    if (signal.aborted || this.stopped) return;
    this.lastRenew = started;
    this.startLeading();
  }
}
