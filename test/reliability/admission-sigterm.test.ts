/**
 * SIGTERM of an admission replica during steady load through the API server, then a rolling update —
 * zero failed admissions. Two replicas (admission/dist/main.js) behind the loopback TCP balancer of
 * admission-certs-support.ts, which only opens NEW connections to replicas whose /readyz answers 200
 * (routeByReadiness: endpoint removal). The webhooks are registered in url mode at the balancer. Two
 * loops of server-side dry-run kdcluster creates (one allowed and mutated, one denied, alternately:
 * startLoad) run throughout and count every failed admission.
 *
 * The terminated replica runs with --shutdown-delay=3 (the endpoint-propagation window the chart's
 * preStop sleep gives a pod): it turns unready at once, keeps answering with `Connection: close`, then
 * closes its listener, finishes what is in flight and exits 0.
 *
 * It also holds a spare connection: past the TLS handshake, never a request. The API server's Go
 * transport leaves such connections in its pool when it dialed for a request that another connection
 * then carried (it did so now and then at the moment of SIGTERM, when answers with `Connection: close`
 * make it dial more). Node counts one as a request in progress, so the drain once waited for it until
 * its timeout ("read 1565 B, written 1947 B": a Go ClientHello and the server's handshake, nothing else).
 * Opened here on purpose, the drain must close it without waiting, every run.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import https from 'node:https';
import tls from 'node:tls';
import { useTestEnv } from '../support/cluster.js';
import { eventually } from '../support/processes.js';
import { startBalancer, startLoad, type Balancer, type Load } from '../e2e/admission-certs-support.js';
import { routeByReadiness, type ReadinessRouting } from './admission-support.js';
import { httpsGet, type RunningAdmission, startAdmission } from '../support/services.js';
import { installCrds } from '../support/crds.js';
import { registerWebhooks, type Registration, waitUntilLive } from '../support/webhook-configurations.js';

const env = useTestEnv();
const SHUTDOWN_DELAY_S = 3;
const ARGS = [`--shutdown-delay=${SHUTDOWN_DELAY_S}`, '--shutdown-timeout=10'];
let balancer: Balancer;
let routing: ReadinessRouting | undefined;
let hooks: Registration | undefined;
const replicas: RunningAdmission[] = [];
let loads: Load[] = [];

const ca = () => env.info.webhookCaPem;
const start = async () => {
  const r = await startAdmission(env, ARGS);
  replicas.push(r);
  return r;
};
/** Reviews a replica answered (any webhook, any result). */
const reviews = (r: RunningAdmission) => r.logs().filter((l) => l.msg === 'review').length;

beforeAll(async () => {
  await installCrds(env);
  balancer = await startBalancer();
  const [a, b] = await Promise.all([start(), start()]);
  routing = routeByReadiness(balancer, [a!.port, b!.port], ca());
  hooks = await registerWebhooks(env, { url: (path) => `https://127.0.0.1:${balancer.port}${path}` });
  await waitUntilLive(env);
}, 90_000);

afterAll(async () => {
  await Promise.all(loads.map((l) => l.stop()));
  routing?.stop();
  await hooks?.remove();
  await Promise.all(replicas.map((r) => r.stop()));
  await balancer?.close();
});

const UID = 'c0ffee00-0000-4000-8000-00000000000a';

/** A review sent straight to one replica whose body is held back until `finish()`: in flight. */
async function heldReview(port: number) {
  const body = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: UID,
      kind: { group: 'kubedirector.hpe.com', version: 'v1beta1', kind: 'KubeDirectorCluster' },
      operation: 'CREATE',
      namespace: env.namespace,
      name: 'held',
      object: { metadata: { name: 'held', namespace: env.namespace }, spec: { app: 'no-such-app' } },
    },
  });
  const req = https.request({
    host: '127.0.0.1',
    port,
    path: '/validate-kdcluster',
    method: 'POST',
    ca: ca(),
    agent: false,
    headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Expect: '100-continue' },
  });
  const answer = new Promise<{ status: number; connection?: string; body: string }>((ok, fail) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => ok({ status: res.statusCode ?? 0, connection: res.headers.connection, body: text }));
    });
    req.on('error', fail);
  });
  // "100 Continue" proves the replica holds the request: it is in flight, not an idle connection.
  const continued = new Promise<void>((r) => req.once('continue', () => r()));
  req.flushHeaders();
  await continued;
  req.write(body.slice(0, 40));
  return {
    finish: () => {
      req.end(body.slice(40));
      return answer;
    },
  };
}

/** A connection to one replica that completes the TLS handshake and never sends a request. */
async function spareConnection(port: number): Promise<{ closed: Promise<void> }> {
  const s = tls.connect({ host: '127.0.0.1', port, ca: ca() });
  s.on('error', () => {});
  const closed = new Promise<void>((r) => s.once('close', () => r()));
  await new Promise<void>((ok, fail) => {
    s.once('secureConnect', () => ok());
    s.once('error', fail);
  });
  return { closed };
}

const refused = (port: number) =>
  httpsGet(`https://127.0.0.1:${port}/healthz`, ca()).then(
    () => false,
    (e: NodeJS.ErrnoException) => e.code === 'ECONNREFUSED',
  );

describe('SIGTERM under load through the API server', () => {
  it('drains the terminated replica (exit 0), the other takes over, a rolling update follows: 0 failed admissions', async () => {
    const [first, second] = replicas as [RunningAdmission, RunningAdmission];
    // Bounded well past what the test takes on a loaded machine: the loads must end by stop(), not by time.
    loads = [0, 1].map(() => startLoad(env, { maxRequests: 6000, maxMs: 170_000, pauseMs: 10 }));
    const sentSoFar = () => loads.reduce((n, l) => n + l.sent(), 0);
    await eventually('the API server calls the replicas', () => reviews(first) + reviews(second) > 20, 60_000);
    // The victim is a replica the API server is sending to right now (its kept-alive connections may
    // all have landed on one of the two), judged over a number of reviews rather than a time: on a
    // loaded machine a second may see none.
    const [f0, s0] = [reviews(first), reviews(second)];
    await eventually('recent reviews', () => reviews(first) - f0 + reviews(second) - s0 >= 6, 60_000, 20);
    const [a, b] = reviews(first) - f0 >= reviews(second) - s0 ? [first, second] : [second, first];

    // --- SIGTERM replica a while it carries load and holds an in-flight review.
    const held = await heldReview(a.port);
    const spare = await spareConnection(a.port);
    const beforeTerm = reviews(a);
    const sentBeforeA = sentSoFar();
    a.signal('SIGTERM');
    await eventually(
      'a is dropped from the endpoints (readiness false)',
      () => !routing!.routed().includes(a.port),
      10_000,
      20,
    );
    await eventually('a closes its listener after the shutdown delay', () => refused(a.port), 20_000, 50);
    const servedWhileDraining = reviews(a) - beforeTerm;
    const done = await held.finish();
    expect(done.status).toBe(200);
    expect(done.connection).toBe('close');
    expect(JSON.parse(done.body).response).toMatchObject({ uid: UID, allowed: false });
    expect(await a.exit).toEqual({ code: 0, signal: null });
    await spare.closed;
    // Nothing was left for the drain timeout to cut (its warning says how many connections were open).
    expect(a.logs().filter((l) => l.level === 'warn')).toEqual([]);
    expect(a.logs().find((l) => l.msg === 'stopped')).toMatchObject({ forced: false });
    // The API server kept sending to a while it drained (its kept-alive connections), and was told to close them.
    expect(servedWhileDraining).toBeGreaterThan(0);

    // --- The replacements (the rollout's new pods), then the second old replica goes the same way.
    // (The API server keeps using its open connections to b: new pods get traffic when those close.)
    const [c, d] = [await start(), await start()];
    routing!.add(c.port);
    routing!.add(d.port);
    await eventually('the replacements are routed to', () => routing!.routed().length === 3, 30_000, 50);
    const bBeforeTerm = reviews(b);
    const sentBeforeB = sentSoFar();
    b.signal('SIGTERM');
    expect(await b.exit).toEqual({ code: 0, signal: null });
    expect(b.logs().filter((l) => l.level === 'warn')).toEqual([]);
    expect(b.logs().find((l) => l.msg === 'stopped')).toMatchObject({ forced: false });
    const bWhileDraining = reviews(b) - bBeforeTerm;
    expect(bWhileDraining).toBeGreaterThan(0);
    const sentAfterB = sentSoFar();
    const newBefore = reviews(c) + reviews(d);
    await eventually('the new replicas carry the load', () => reviews(c) + reviews(d) > newBefore + 20, 60_000);

    const results = await Promise.all(loads.map((l) => l.stop()));
    const sent = results.reduce((n, r) => n + r.sent, 0);
    const failures = results.flatMap((r) => r.failures);
    console.log(
      `SIGTERM under load: ${sent} admissions through the API server (${results.map((r) => r.endedBy).join(', ')}), ` +
        `${failures.length} failed; reviews answered by a=${reviews(a)} (${servedWhileDraining} while draining) ` +
        `b=${reviews(b)} (${bWhileDraining} while draining) c=${reviews(c)} d=${reviews(d)}`,
    );
    expect(failures).toEqual([]);
    expect(results.every((r) => r.endedBy === 'stop')).toBe(true);
    // The load ran through both drains and after them (how much it sent depends on the machine).
    expect({ duringA: sentBeforeB > sentBeforeA, duringB: sentAfterB > sentBeforeB, after: sent > sentAfterB }).toEqual(
      {
        duringA: true,
        duringB: true,
        after: true,
      },
    );
    for (const r of replicas) expect(r.logs().filter((l) => l.level === 'error')).toEqual([]);
  }, 200_000);
});
