/**
 * Dynamic serving on the real control plane: two replicas race to create the CA Secret, publish the CA in
 * the webhook configurations (url mode on 127.0.0.1, no caBundle registered), each serve a leaf of their
 * own, and repair what goes wrong with the Secret. Webhooks reach the replicas through a loopback TCP
 * balancer.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { isIssuedBy } from '../support/certificate-facts.js';
import { useTestEnv } from '../support/cluster.js';
import { writes } from '../support/audit.js';
import { eventually, ok } from '../support/processes.js';
import {
  caBundles,
  readTlsSecret,
  fingerprint,
  readyz,
  secretEvents,
  served,
  servedPem,
  servesLeafOf,
  startBalancer,
  startBootstrapReplicas,
  startLoad,
  type Balancer,
} from './admission-certs-support.js';
import { installCrds } from '../support/crds.js';
import {
  registerWebhooks,
  type Registration,
  waitUntilLive,
  WEBHOOK_NAMES,
} from '../support/webhook-configurations.js';
import { type RunningAdmission } from '../support/services.js';

const env = useTestEnv();
const SECRET = 'admission-tls';
let balancer: Balancer;
let hooks: Registration | undefined;
let replicas: RunningAdmission[] = [];
const startedAt = new Date();

beforeAll(async () => {
  await installCrds(env);
  balancer = await startBalancer();
  hooks = await registerWebhooks(env, { url: (p) => `https://127.0.0.1:${balancer.port}${p}` }, { caBundle: false });
  // The same instant: both find no Secret and try to create it.
  replicas = await startBootstrapReplicas(env, 2, { secretName: SECRET, configuration: hooks.name });
  balancer.setBackends(replicas.map((r) => r.port));
}, 120_000);

afterAll(async () => {
  await hooks?.remove();
  await Promise.all(replicas.map((r) => r.stop()));
  await balancer?.close();
});

const logs = (msg: string) => replicas.flatMap((r) => r.logs().filter((l) => l.msg === msg));

describe('bootstrap', () => {
  it('two replicas racing create one CA Secret and each serve a leaf of its own from it', async () => {
    const creates = writes(env.info.auditLogPath, { namespace: env.namespace, since: startedAt }).filter(
      (e) => e.verb === 'create' && e.objectRef?.resource === 'secrets' && e.objectRef.name === SECRET,
    );
    // One create succeeded; any other attempt was refused as AlreadyExists, not retried or overwritten.
    expect(creates.filter((e) => e.responseStatus?.code === 201)).toHaveLength(1);
    expect(creates.every((e) => [201, 409].includes(e.responseStatus?.code ?? 0))).toBe(true);
    expect(creates.every((e) => e.userAgent?.startsWith('kd-connections-tls-bootstrap/'))).toBe(true);
    expect(logs('created the CA Secret')).toHaveLength(1);
    const secret = await readTlsSecret(env, SECRET);
    expect(secret.ca).toBeDefined();
    const leaves = await Promise.all(replicas.map((r) => servedPem(r.port)));
    expect(leaves.map((pem) => isIssuedBy(pem, secret.caPem))).toEqual([true, true]);
    expect(new Set(leaves.map(fingerprint)).size).toBe(2);
    // The Secret holds the CA only: no serving key ever leaves a replica.
    const stored = await env.kc
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: SECRET, namespace: env.namespace });
    expect(Object.keys(stored.data ?? {}).sort()).toEqual([
      'ca.crt',
      'ca.key',
      'tls.crt',
      'tls.key',
      'webhook-path-key',
      'webhook-path-key-created',
    ]);
    expect(stored.data!['tls.crt']).toBe(stored.data!['ca.crt']);
    expect(logs('serving certificate signed')).toHaveLength(2);
  });

  it('publishes the CA in both configurations, and the API server calls the webhooks with it', async () => {
    const secret = await readTlsSecret(env, SECRET);
    // Every webhook of both configurations carries exactly the Secret's CA.
    await eventually(
      'caBundle of every webhook is exactly the Secret CA',
      async () => (await caBundles(env, hooks!.name)).every((b) => b.length === 1 && b[0] === secret.ca),
      60_000,
    );
    expect((await caBundles(env, hooks!.name)).length).toBe(4);
    await waitUntilLive(env);
    const cluster = (name: string, app: string) => `apiVersion: kubedirector.hpe.com/v1beta1
kind: KubeDirectorCluster
metadata:
  name: ${name}
spec:
  app: ${app}
  roles:
    - id: a
      members: 1
  connections:
    configmaps: [marker-cm]
`;
    const admitted = ok(await env.kubectl(['apply', '-f', '-'], { input: cluster('admitted', 'marker-app') }), 'apply');
    expect(admitted.stdout).toContain('kubedirectorcluster.kubedirector.hpe.com/admitted created');
    const got = JSON.parse(ok(await env.kubectl(['get', 'kdcluster', 'admitted', '-o', 'json']), 'get').stdout);
    expect(got.spec.configMetaGenerator).toBe(1); // set by the mutating webhook
    const denied = await env.kubectl(['apply', '-f', '-'], { input: cluster('denied', 'no-such-app') });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    expect(denied.stderr).toContain('app "no-such-app" not found');
  });

  it('reports a corrupted Secret (event, log) and repairs it with a new CA while requests keep succeeding', async () => {
    const before = await readTlsSecret(env, SECRET);
    const load = startLoad(env, { maxRequests: 1500, maxMs: 90_000, pauseMs: 20 });
    await eventually('load running', () => load.sent() >= 10, 30_000, 50);
    const garbage = Buffer.from('-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
    ok(
      await env.kubectl([
        'patch',
        'secret',
        SECRET,
        '--type=json',
        '-p',
        JSON.stringify([{ op: 'replace', path: '/data/ca.crt', value: garbage.toString('base64') }]),
      ]),
      'corrupt ca.crt',
    );
    // Repaired: a new CA (the key alone cannot vouch for a certificate), both replicas serving leaves of it.
    const repaired = await eventually(
      'Secret repaired and both replicas serving leaves of the new CA',
      async () => {
        const s = await readTlsSecret(env, SECRET);
        if (!s.ca || s.ca === before.ca) return undefined;
        const all = await Promise.all(replicas.map((r) => servesLeafOf(r.port, s.caPem)));
        return all.every(Boolean) ? s : undefined;
      },
      60_000,
    );
    const sentAtRepair = load.sent();
    await eventually('requests after the repair', () => load.sent() >= sentAtRepair + 20, 30_000, 50);
    const result = await load.stop();
    expect(result.failures).toEqual([]);
    expect(result.endedBy).toBe('stop');
    // The old CA, still in tls.crt, stays trusted while leaves it signed may be served.
    expect(repaired.previousCAs).toEqual([before.ca]);
    // Reported clearly: a Warning on the Secret naming the problem, and a structured log line.
    const warnings = await eventually('Warning event on the Secret', async () => {
      const ev = await secretEvents(env, SECRET, 'CertificateSecretInvalid');
      return ev.length > 0 ? ev : undefined;
    });
    expect(warnings[0]!.type).toBe('Warning');
    expect(warnings[0]!.note).toMatch(/ca\.crt: cannot parse certificate/);
    expect(warnings[0]!.note).toContain('writing a new CA');
    const lines = logs('CA Secret is invalid; repairing it');
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines[0]).toMatchObject({ level: 'warn' });
    for (const r of replicas) expect((await readyz(r.port)).status).toBe(200);
    expect((await secretEvents(env, SECRET, 'CARepaired')).length).toBeGreaterThanOrEqual(1);
  }, 120_000);
});

describe('a Secret that cannot be repaired', () => {
  const NAME = 'unrepairable-tls';
  let replica: RunningAdmission | undefined;
  afterAll(async () => {
    await replica?.stop();
  });

  it('is reported, /readyz turns false once the served certificate expires, and recovers when the Secret is deleted', async () => {
    // No webhooks: this replica only manages its Secret. 20 s leaves: renewal is due after ~13 s.
    [replica] = await startBootstrapReplicas(env, 1, { secretName: NAME, servingLifetime: '20s' });
    const port = replica!.port;
    const first = await served(port);
    // Broken and immutable in one write: renewal is needed and impossible.
    const garbage = Buffer.from('garbage').toString('base64');
    ok(
      await env.kubectl([
        'patch',
        'secret',
        NAME,
        '--type=merge',
        '-p',
        JSON.stringify({ immutable: true, data: { 'ca.crt': garbage } }),
      ]),
      'corrupt and freeze the Secret',
    );
    const failed = await eventually(
      'bootstrap failure logged',
      () =>
        replica!
          .logs()
          .find((l) => l.msg === 'certificate bootstrap failed; retrying' && String(l.error).includes('immutable')),
      30_000,
    );
    expect(failed).toMatchObject({ level: 'error' });
    expect(failed.retryInMs).toBeGreaterThan(0);
    const events = await eventually('Warning events on the Secret', async () => {
      const ev = await secretEvents(env, NAME);
      const invalid = ev.find((e) => e.reason === 'CertificateSecretInvalid');
      const failedEv = ev.find((e) => e.reason === 'CertificateBootstrapFailed');
      return invalid && failedEv ? { invalid, failedEv } : undefined;
    });
    expect(events.invalid.note).toContain('the Secret is immutable');
    expect(events.failedEv.type).toBe('Warning');
    expect(events.failedEv.note).toContain('delete it and it is created again');
    // The leaf in use is served until it expires (no CA to sign another), then the replica is not ready.
    expect((await served(port)).fingerprint).toBe(first.fingerprint);
    const notReady = await eventually(
      '/readyz false after the certificate expired',
      async () => {
        const r = await readyz(port);
        return r.status === 503 ? r : undefined;
      },
      40_000,
      500,
    );
    expect(notReady.body).toContain('serving certificate expired at');
    expect(notReady.body).toContain('immutable');
    // The documented way out: delete the Secret; the replica creates a new one and is ready again.
    await env.kc.makeApiClient(CoreV1Api).deleteNamespacedSecret({ name: NAME, namespace: env.namespace });
    const recreated = await eventually(
      'Secret recreated, served, ready',
      async () => {
        const s = await readTlsSecret(env, NAME).catch(() => undefined);
        if (!s?.ca || s.immutable || !(await servesLeafOf(port, s.caPem))) return undefined;
        return (await readyz(port)).status === 200 ? s : undefined;
      },
      30_000,
    );
    expect((await served(port)).fingerprint).not.toBe(first.fingerprint);
    expect(recreated.previousCAs).toEqual([]);
    expect(replica!.logs().some((l) => l.msg === 'certificate bootstrap recovered')).toBe(true);
  }, 120_000);
});
