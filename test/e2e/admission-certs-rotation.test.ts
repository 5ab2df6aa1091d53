/**
 * Certificate rotation without downtime, on the real control plane: two dynamic-serving replicas behind
 * a loopback balancer, 45 s leaves (each replica renews its own after ~33 s), and a client that keeps
 * sending admissions through the API server while the leaves and then the CA are replaced. Every
 * admission must succeed.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createSigningKey } from '../support/test-pki.js';
import { useTestEnv } from '../support/cluster.js';
import { writes } from '../support/audit.js';
import { eventually, ok } from '../support/processes.js';
import {
  caBundles,
  counterSum,
  readTlsSecret,
  served,
  servesLeafOf,
  startBalancer,
  startBootstrapReplicas,
  startLoad,
  type Balancer,
} from './admission-certs-support.js';
import { installCrds } from '../support/crds.js';
import { registerWebhooks, type Registration, waitUntilLive } from '../support/webhook-configurations.js';
import { type RunningAdmission } from '../support/services.js';

const env = useTestEnv();
const SECRET = 'rotating-tls';
let balancer: Balancer;
let hooks: Registration | undefined;
let replicas: RunningAdmission[] = [];

beforeAll(async () => {
  await installCrds(env);
  balancer = await startBalancer();
  hooks = await registerWebhooks(env, { url: (p) => `https://127.0.0.1:${balancer.port}${p}` }, { caBundle: false });
  replicas = await startBootstrapReplicas(env, 2, {
    secretName: SECRET,
    configuration: hooks.name,
    servingLifetime: '45s',
  });
  balancer.setBackends(replicas.map((r) => r.port));
  const { ca } = await readTlsSecret(env, SECRET);
  await eventually(
    'caBundle is the Secret CA',
    async () => (await caBundles(env, hooks!.name)).every((b) => b.length === 1 && b[0] === ca),
    60_000,
  );
  await waitUntilLive(env);
}, 120_000);

afterAll(async () => {
  await hooks?.remove();
  await Promise.all(replicas.map((r) => r.stop()));
  await balancer?.close();
});

const RECYCLED = 'kd_admission_tls_connections_recycled_total';

describe('rotation under load', () => {
  it("renews each replica's leaf before it expires with zero failed admissions and no API write", async () => {
    const before = await readTlsSecret(env, SECRET);
    const since = new Date();
    const recycledBefore = await counterSum(replicas, RECYCLED);
    const load = startLoad(env, { maxRequests: 4000, maxMs: 150_000, pauseMs: 20 });
    const first = await Promise.all(replicas.map((r) => served(r.port).then((x) => x.fingerprint)));
    await eventually(
      'both replicas serving a renewed leaf',
      async () => {
        const now = await Promise.all(replicas.map((r) => served(r.port).then((x) => x.fingerprint)));
        return now.every((f, i) => f !== first[i]);
      },
      90_000,
      500,
    );
    const until = new Date();
    const mark = load.sent();
    await eventually('admissions after the renewal', () => load.sent() >= mark + 40, 60_000, 50);
    const result = await load.stop();
    expect(result.failures).toEqual([]);
    expect(result.endedBy).toBe('stop');
    expect(result.sent).toBeGreaterThan(40);
    // Same CA, nothing written: a leaf lives only in its replica's memory.
    expect((await readTlsSecret(env, SECRET)).resourceVersion).toBe(before.resourceVersion);
    expect(await Promise.all(replicas.map((r) => servesLeafOf(r.port, before.caPem)))).toEqual([true, true]);
    const secretWrites = writes(env.info.auditLogPath, { namespace: env.namespace, since, succeeded: true }).filter(
      (e) =>
        e.objectRef?.resource === 'secrets' &&
        e.objectRef.name === SECRET &&
        new Date(e.requestReceivedTimestamp) < until,
    );
    expect(secretWrites).toEqual([]);
    // The API server's kept-alive connections were told to reconnect, so it verified the new leaves.
    expect(await counterSum(replicas, RECYCLED)).toBeGreaterThan(recycledBefore);
  }, 180_000);

  it('replaces the CA with zero failed admissions, publishing old and new CA until no old leaf can be served', async () => {
    const before = await readTlsSecret(env, SECRET);
    const load = startLoad(env, { maxRequests: 9000, maxMs: 230_000, pauseMs: 20 });
    await eventually('load running', () => load.sent() >= 10, 30_000, 50);
    // A CA key that is not the CA's forces a new CA; the leaves in use are signed by the old one.
    const wrongKey = Buffer.from(createSigningKey(2048).privateKeyPem).toString('base64');
    ok(
      await env.kubectl([
        'patch',
        'secret',
        SECRET,
        '--type=json',
        '-p',
        JSON.stringify([{ op: 'replace', path: '/data/ca.key', value: wrongKey }]),
      ]),
      'replace the CA key',
    );
    const rotated = await eventually(
      'new CA in the Secret, old and new in every caBundle, new leaves served by both replicas',
      async () => {
        const s = await readTlsSecret(env, SECRET);
        if (!s.ca || s.ca === before.ca) return undefined;
        const bundles = await caBundles(env, hooks!.name);
        if (!bundles.every((b) => b[0] === s.ca && b.includes(before.ca!))) return undefined;
        const leaves = await Promise.all(replicas.map((r) => servesLeafOf(r.port, s.caPem)));
        return leaves.every(Boolean) ? s : undefined;
      },
      60_000,
      300,
    );
    expect(rotated.previousCAs).toEqual([before.ca]);
    // One serving lifetime (45 s) and 30 s of slack after the rotation no old leaf can be valid; 20 s after
    // that the old CA leaves.
    await eventually(
      'old CA gone from every caBundle',
      async () => (await caBundles(env, hooks!.name)).every((b) => b.length === 1 && b[0] === rotated.ca),
      160_000,
      500,
    );
    const mark = load.sent();
    await eventually('admissions after the old CA was dropped', () => load.sent() >= mark + 40, 60_000, 50);
    const result = await load.stop();
    expect(result.failures).toEqual([]);
    expect(result.endedBy).toBe('stop');
    const after = await readTlsSecret(env, SECRET);
    expect(after.ca).toBe(rotated.ca);
    const fps = await Promise.all(replicas.map((r) => servesLeafOf(r.port, after.caPem)));
    expect(fps).toEqual([true, true]);
  }, 300_000);
});
