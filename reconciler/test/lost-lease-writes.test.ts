/**
 * A replica that lost its lease makes no further write. The pieces the reconciler wires together — the
 * leader elector (fake clock, fake Lease endpoint), the work queue, and the project's KubeClient scoped
 * to the term of leadership — run a reconcile that patches five pods one after another against a local
 * HTTP endpoint that records what reaches it. The cluster-level counterpart is
 * test/reliability/reconciler-lost-lease.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient, silentLogger } from '@kd-connections/shared/runtime';
import { LeaderElector, type Leadership } from '../src/leader-election.js';
import { WorkQueue, type RunOutcome } from '@kd-connections/shared/runtime';
import { FakeClock } from '../../shared/test/fake-clock.js';
import { FakeLeaseApi } from './fake-lease-api.js';

const TIMING = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Received {
  path: string;
  /** The client went away before an answer (the request was cut). */
  cut: boolean;
}

let server: http.Server;
let received: Received[];
/** Paths the endpoint does not answer until released (a slow API server). */
let hold: Set<string>;
let held: (() => void)[];
let kube: KubeClient;

beforeEach(async () => {
  received = [];
  hold = new Set();
  held = [];
  server = http.createServer((req, res) => {
    const r: Received = { path: req.url ?? '', cut: false };
    received.push(r);
    req.resume();
    const answer = () =>
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"metadata":{"resourceVersion":"1"}}');
    req.on('end', () => {
      if (!hold.has(r.path)) return answer();
      res.on('close', () => (r.cut = !res.writableEnded));
      held.push(() => !res.destroyed && answer());
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'local',
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        // client-node refuses plain HTTP unless told not to verify TLS; there is no TLS here.
        skipTLSVerify: true,
      },
    ],
    users: [{ name: 'u' }],
    contexts: [{ name: 'c', cluster: 'local', user: 'u' }],
    currentContext: 'c',
  });
  kube = new KubeClient(kc, 'lost-lease-test');
});

afterEach(async () => {
  kube.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** A leader wired like the reconciler: each term starts the queue, whose runs write through a scoped client. */
function wiredReplica(beforeFirstWrite?: Promise<void>) {
  const clock = new FakeClock();
  const api = new FakeLeaseApi(clock);
  const leaseClient = api.client('a');
  const outcomes: string[] = [];
  let term: { signal: AbortSignal; client: KubeClient } | undefined;
  const queue = new WorkQueue(
    async (_key, signal) => {
      const writer = term!.client;
      expect(term!.signal).toBe(signal);
      await beforeFirstWrite;
      for (let i = 0; i < 5; i++)
        await writer.jsonPatch(`/api/v1/namespaces/ns/pods/p${i}`, [{ op: 'test', path: '/metadata/uid', value: 'u' }]);
    },
    { concurrency: 1, clock, onResult: (k, o: RunOutcome) => outcomes.push(`${k}:${o}`) },
  );
  const elector = new LeaderElector({
    client: leaseClient,
    namespace: 'ns',
    name: 'lease',
    identity: 'a',
    ...TIMING,
    log: silentLogger,
    clock,
    onStartedLeading: (l: Leadership) => {
      term = { signal: l.signal, client: kube.scoped({ signal: l.signal, guard: l.check }) };
      queue.start(l.signal);
    },
    onStoppedLeading: () => void queue.stop(),
  });
  return { clock, leaseClient, queue, elector, outcomes };
}

/** `p`, or an error when it takes longer than `ms` of real time. */
function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  return Promise.race([
    p,
    sleep(ms).then(() => {
      throw new Error(`timed out waiting for ${what}`);
    }),
  ]);
}

async function waitFor(what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await sleep(10);
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

describe('a reconciler that lost its lease', () => {
  it('cuts the write in flight at step-down and sends nothing more, now or later', async () => {
    hold.add('/api/v1/namespaces/ns/pods/p2');
    const { clock, leaseClient, queue, elector, outcomes } = wiredReplica();
    elector.start();
    await clock.advance(0);
    expect(elector.isLeader).toBe(true);
    queue.add('ns/c');
    await waitFor('the third patch to reach the endpoint', () => received.length === 3);

    // The API server stops answering lease requests: the leader steps down at its renew deadline.
    leaseClient.mode = 'hang';
    await clock.until(() => !elector.isLeader, 2 * TIMING.renewDeadlineMs, 100);
    // At once, not when the request would have timed out on its own.
    await within(2000, queue.whenIdle(), 'the reconcile in flight to end');
    expect(outcomes).toEqual(['ns/c:aborted']);
    await waitFor('the held patch to be cut', () => received[2]!.cut);
    // The slow answer comes now; had the write not been cut, the reconcile would go on to p3.
    for (const h of held) h();

    // Long after: no retry, nothing else sent.
    await clock.advance(10 * 60_000);
    await sleep(200);
    expect(received.map((r) => r.path.replace('/api/v1/namespaces/ns/pods/', ''))).toEqual(['p0', 'p1', 'p2']);
    expect(received.map((r) => r.cut)).toEqual([false, false, true]);
    await elector.stop();
  });

  it('sends nothing once the renew deadline has passed, even before the step-down timer has run', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { clock, queue, elector, outcomes } = wiredReplica(gate);
    elector.start();
    await clock.advance(0);
    queue.add('ns/c');
    await sleep(20);
    // The process was paused past its deadline: time moved, no timer has run yet.
    clock.jump(TIMING.renewDeadlineMs + 1);
    expect(elector.isLeader).toBe(true);
    release();
    await queue.whenIdle();
    expect(elector.isLeader).toBe(false);
    expect(outcomes).toEqual(['ns/c:aborted']);
    await sleep(100);
    expect(received).toEqual([]);
    await elector.stop();
  });
});
