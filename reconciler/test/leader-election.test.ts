/**
 * The leader elector's timing on a fake clock: renewals, expiry as a standby sees it, and step-down —
 * which must come at the renew deadline counted from the last successful renewal, before anyone else
 * may take over, whether the API server refuses requests or leaves them hanging.
 */
import { describe, expect, it } from '@jest/globals';
import { silentLogger } from '@kd-connections/shared/runtime';
import { LeaderElector, type Leadership } from '../src/leader-election.js';
import { FakeClock } from '../../shared/test/fake-clock.js';
import { FakeLeaseApi, type FakeLeaseClient } from './fake-lease-api.js';

interface Timing {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}
const DEFAULTS: Timing = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
// The short timings the cluster tests use.
const SHORT: Timing = { leaseDurationMs: 5_000, renewDeadlineMs: 3_000, retryPeriodMs: 1_000 };

interface Replica {
  elector: LeaderElector;
  client: FakeLeaseClient;
  terms: Leadership[];
  /** Fake times at which it started and stopped leading. */
  started: number[];
  stopped: number[];
}

function replica(api: FakeLeaseApi, identity: string, timing: Timing = DEFAULTS): Replica {
  const client = api.client(identity);
  const r = { client, terms: [], started: [], stopped: [] } as Omit<Replica, 'elector'> as Replica;
  r.elector = new LeaderElector({
    client,
    namespace: 'ns',
    name: 'lease',
    identity,
    ...timing,
    log: silentLogger,
    clock: api.clock,
    onStartedLeading: (l) => {
      r.terms.push(l);
      r.started.push(api.clock.now());
    },
    onStoppedLeading: () => r.stopped.push(api.clock.now()),
  });
  return r;
}

/** A leads (acquired at the start), B stands by; both campaigning. */
async function leaderAndStandby(timing: Timing = DEFAULTS) {
  const clock = new FakeClock();
  const api = new FakeLeaseApi(clock);
  const a = replica(api, 'a', timing);
  const b = replica(api, 'b', timing);
  a.elector.start();
  await clock.advance(0);
  b.elector.start();
  await clock.advance(0);
  expect(a.elector.isLeader).toBe(true);
  expect(b.elector.isLeader).toBe(false);
  return { clock, api, a, b };
}

describe('LeaderElector', () => {
  it('acquires a free lease, renews it every retry period and keeps it; a standby never takes it', async () => {
    const { clock, api, a, b } = await leaderAndStandby();
    await clock.advance(120_000);
    expect(a.elector.isLeader).toBe(true);
    expect(a.terms).toHaveLength(1);
    expect(a.terms[0]!.signal.aborted).toBe(false);
    expect(a.stopped).toEqual([]);
    expect(b.started).toEqual([]);
    // One renewal per retry period (the first write was the create).
    const renewals = api.writes.filter((w) => w.by === 'a');
    expect(renewals.length).toBe(1 + 120_000 / DEFAULTS.retryPeriodMs);
    const gaps = renewals.slice(1).map((w, i) => w.at - renewals[i]!.at);
    expect(new Set(gaps)).toEqual(new Set([DEFAULTS.retryPeriodMs]));
    expect(api.lease!.spec.holderIdentity).toBe('a');
  });

  it.each([
    ['default', DEFAULTS],
    ['short', SHORT],
  ])(
    'expiry (%s timings): a standby takes over a full lease duration after the last renewal it saw, and the old leader has stepped down by then',
    async (_name, timing) => {
      const { clock, api, a, b } = await leaderAndStandby(timing);
      await clock.advance(timing.retryPeriodMs * 3);
      a.client.mode = 'fail';
      const lastRenew = api.lastRenewBy('a')!;
      const took = await clock.until(() => b.elector.isLeader, 60_000);
      const takeover = b.started[0]!;
      expect(takeover - lastRenew).toBeGreaterThanOrEqual(timing.leaseDurationMs);
      expect(takeover - lastRenew).toBeLessThanOrEqual(timing.leaseDurationMs + timing.retryPeriodMs);
      expect(took).toBeGreaterThan(0);
      // The old leader stopped exactly at its renew deadline, before the takeover.
      expect(a.stopped).toEqual([lastRenew + timing.renewDeadlineMs]);
      expect(a.terms[0]!.signal.aborted).toBe(true);
      expect(a.stopped[0]!).toBeLessThan(takeover);
      expect(api.lease!.spec.holderIdentity).toBe('b');
    },
  );

  it.each([
    ['default', DEFAULTS],
    ['short', SHORT],
  ])(
    'step-down with hanging requests (%s timings): at the renew deadline after the last renewal, every request cut, before the lease expires for the standby',
    async (_name, timing) => {
      const { clock, api, a, b } = await leaderAndStandby(timing);
      await clock.advance(timing.retryPeriodMs * 2 + 123);
      a.client.mode = 'hang';
      const lastRenew = api.lastRenewBy('a')!;
      await clock.until(() => !a.elector.isLeader, 60_000, 1);
      expect(a.stopped).toEqual([lastRenew + timing.renewDeadlineMs]);
      expect(a.terms[0]!.signal.aborted).toBe(true);
      // No request hung longer than its bound (twice the retry period, never past the deadline).
      expect(a.client.aborted.length).toBeGreaterThan(0);
      for (const ms of a.client.aborted) expect(ms).toBeLessThanOrEqual(timing.retryPeriodMs * 2);
      expect(a.client.pending).toBe(0);
      await clock.until(() => b.elector.isLeader, 60_000);
      expect(b.started[0]! - lastRenew).toBeGreaterThanOrEqual(timing.leaseDurationMs);
      expect(b.started[0]! - a.stopped[0]!).toBeGreaterThanOrEqual(timing.leaseDurationMs - timing.renewDeadlineMs);
      // The API server answers again: the former leader sees the new holder and stays a follower.
      a.client.mode = 'ok';
      await clock.advance(timing.leaseDurationMs * 3);
      expect(a.elector.isLeader).toBe(false);
      expect(a.started).toHaveLength(1);
      expect(b.stopped).toEqual([]);
    },
  );

  it('counts the deadline from the last successful renewal, not from failed or hanging attempts', async () => {
    const { clock, api, a } = await leaderAndStandby();
    a.client.mode = 'fail';
    await clock.advance(7_000); // attempts fail; 3 s before the deadline
    expect(a.elector.isLeader).toBe(true);
    a.client.mode = 'ok';
    await clock.advance(DEFAULTS.retryPeriodMs);
    const renewed = api.lastRenewBy('a')!;
    expect(renewed).toBeGreaterThan(clock.now() - DEFAULTS.retryPeriodMs - 1);
    a.client.mode = 'hang';
    await clock.until(() => !a.elector.isLeader, 60_000, 1);
    expect(a.stopped).toEqual([renewed + DEFAULTS.renewDeadlineMs]);
  });

  it('check() ends the term at once when the deadline passed before its timer could run (a paused process)', async () => {
    const { clock, api, a } = await leaderAndStandby();
    const term = a.terms[0]!;
    term.check();
    expect(a.elector.isLeader).toBe(true);
    clock.jump(DEFAULTS.renewDeadlineMs - 1 - (clock.now() - api.lastRenewBy('a')!));
    term.check();
    expect(a.elector.isLeader).toBe(true);
    clock.jump(1);
    term.check(); // synchronous: no timer has fired
    expect(term.signal.aborted).toBe(true);
    expect(a.elector.isLeader).toBe(false);
    expect(a.stopped).toEqual([clock.now()]);
  });

  it('a leader that finds another holder steps down at once; a standby does not take a live lease', async () => {
    const { clock, api, a, b } = await leaderAndStandby();
    // Someone else took the lease (a lease edited by hand, or a replica whose clock ran fast).
    api.patch('c', [{ op: 'replace', path: '/spec/holderIdentity', value: 'c' }]);
    await clock.advance(DEFAULTS.retryPeriodMs);
    expect(a.elector.isLeader).toBe(false);
    expect(a.terms[0]!.signal.aborted).toBe(true);
    expect(a.stopped[0]! - api.writes.at(-1)!.at).toBeLessThanOrEqual(DEFAULTS.retryPeriodMs);
    await clock.advance(DEFAULTS.leaseDurationMs - DEFAULTS.retryPeriodMs * 2);
    expect(b.elector.isLeader).toBe(false);
  });

  it('stop() ends the term and releases the lease, so the standby takes over on its next attempt', async () => {
    const { clock, api, a, b } = await leaderAndStandby();
    await clock.advance(5_000);
    await a.elector.stop();
    expect(a.terms[0]!.signal.aborted).toBe(true);
    expect(api.lease!.spec.holderIdentity).toBe('');
    const waited = await clock.until(() => b.elector.isLeader, 60_000);
    expect(waited).toBeLessThanOrEqual(DEFAULTS.retryPeriodMs);
    await clock.advance(60_000);
    expect(api.writes.filter((w) => w.by === 'a').at(-1)!.holder).toBe('');
  });

  it('stop() with a hanging API server returns within its bound and leaves no request hanging', async () => {
    const { clock, a } = await leaderAndStandby();
    a.client.mode = 'hang';
    let done = false;
    const stopping = a.elector.stop().then(() => (done = true));
    await clock.until(() => done, 3 * DEFAULTS.retryPeriodMs);
    await stopping;
    expect(a.terms[0]!.signal.aborted).toBe(true);
    expect(a.client.pending).toBe(0);
  });
});
