/**
 * `kd-connections-certs inject-ca` against the real API server: it sets webhooks[*].clientConfig.caBundle
 * of Validating and Mutating configurations and nothing else, the API server then trusts the webhook
 * server with that CA, and a configuration reordered or renamed between read and write is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createCA,
  createServingCert,
  main,
  webhookConfigurationClient,
  type CertPair,
  type CliIO,
  type WebhookConfigurationClient,
  type WebhookConfigurationKind,
} from '@kd-connections/certs';
import { KubeClient } from '@kd-connections/shared/runtime';
import { useTestEnv } from '../support/cluster.js';
import {
  markerWebhook,
  startTestWebhookServer,
  waitForMarkerDenied,
  type TestWebhookServer,
} from '../support/webhooks.js';

const env = useTestEnv();

let dir: string;
let caFile: string;
let ca: CertPair;
let staleCa: CertPair;
let server: TestWebhookServer;
let kube: KubeClient;
const created: [WebhookConfigurationKind, string][] = [];

const b64 = (pem: string) => Buffer.from(pem.replace(/\r\n/g, '\n')).toString('base64');
const resource = (kind: WebhookConfigurationKind) =>
  kind === 'validating' ? 'validatingwebhookconfiguration' : 'mutatingwebhookconfiguration';

beforeAll(async () => {
  kube = new KubeClient(env.kc, 'kd-connections-certs-test');
  dir = mkdtempSync(join(tmpdir(), 'kd-certs-inject-'));
  ca = createCA();
  staleCa = createCA();
  caFile = join(dir, 'ca.crt');
  writeFileSync(caFile, ca.certPem);
  const serving = createServingCert({ ca, ipAddresses: ['127.0.0.1'] });
  server = await startTestWebhookServer(serving, (call) =>
    call.path === '/marker' ? { allowed: false, message: 'marker' } : { allowed: true },
  );
});

afterAll(async () => {
  for (const [kind, name] of created)
    await env.kubectl(['delete', resource(kind), name, '--ignore-not-found'], { namespace: false });
  await server?.close();
  kube?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A webhook the API server never calls (its objectSelector matches nothing): only its fields matter. */
function idleWebhook(name: string, extra: Record<string, unknown> = {}) {
  return {
    name,
    clientConfig: { url: server.url(`/${name}`) },
    rules: [
      { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'], scope: 'Namespaced' },
    ],
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
    objectSelector: { matchLabels: { 'kd-certs-test': 'never' } },
    failurePolicy: 'Ignore',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 5,
    ...extra,
  };
}

async function createConfiguration(kind: WebhookConfigurationKind, name: string, webhooks: object[]): Promise<void> {
  const body = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: kind === 'validating' ? 'ValidatingWebhookConfiguration' : 'MutatingWebhookConfiguration',
    metadata: { name, labels: { 'kd-test': 'true' } },
    webhooks,
  };
  const r = await env.kubectl(['create', '-f', '-'], { input: JSON.stringify(body), namespace: false });
  expect(r.stderr).toBe('');
  created.push([kind, name]);
}

interface Stored {
  metadata: { resourceVersion: string; generation: number; managedFields?: unknown };
  webhooks: { name: string; clientConfig: { caBundle?: string } }[];
}

async function get(kind: WebhookConfigurationKind, name: string): Promise<Stored> {
  const r = await env.kubectl(['get', resource(kind), name, '-o', 'json'], { namespace: false });
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Stored;
}

/** The object minus caBundle and what the API server changes on any write. */
function withoutCaBundle(o: Stored): unknown {
  const c = structuredClone(o) as Stored;
  delete (c.metadata as Partial<Stored['metadata']>).resourceVersion;
  delete (c.metadata as Partial<Stored['metadata']>).generation;
  delete c.metadata.managedFields;
  for (const w of c.webhooks) delete w.clientConfig.caBundle;
  return c;
}

async function cli(argv: string[], extra: Partial<CliIO> = {}) {
  const out = { stdout: '', stderr: '' };
  const code = await main(argv, { stdout: (t) => (out.stdout += t), stderr: (t) => (out.stderr += t), ...extra });
  return { code, ...out };
}

describe('inject-ca on a real API server', () => {
  it('sets only caBundle, in both kinds of configuration, and the API server then trusts the webhook', async () => {
    const v = `${env.namespace}-v`;
    const m = `${env.namespace}-m`;
    const marker = markerWebhook({
      name: 'marker.certs.kd.test',
      url: server.url('/marker'),
      caBundle: '',
      namespace: env.namespace,
      marker: env.namespace,
    });
    delete (marker.clientConfig as { caBundle?: string }).caBundle;
    await createConfiguration('validating', v, [
      idleWebhook('a.certs.kd.test', { clientConfig: { url: server.url('/a'), caBundle: b64(staleCa.certPem) } }),
      marker,
      idleWebhook('b.certs.kd.test', { matchPolicy: 'Exact' }),
    ]);
    await createConfiguration('mutating', m, [idleWebhook('m.certs.kd.test', { reinvocationPolicy: 'IfNeeded' })]);
    const before = { v: await get('validating', v), m: await get('mutating', m) };

    const argv = [
      'inject-ca',
      '--ca-file',
      caFile,
      '--validating',
      v,
      '--mutating',
      m,
      '--kubeconfig',
      env.info.kubeconfigPath,
    ];
    const r = await cli(argv);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      `ValidatingWebhookConfiguration ${v}: caBundle set on a.certs.kd.test, marker.certs.kd.test, b.certs.kd.test\n` +
        `MutatingWebhookConfiguration ${m}: caBundle set on m.certs.kd.test\n`,
    );

    const after = { v: await get('validating', v), m: await get('mutating', m) };
    for (const o of [after.v, after.m])
      for (const w of o.webhooks) expect(w.clientConfig.caBundle).toBe(b64(ca.certPem));
    expect(withoutCaBundle(after.v)).toEqual(withoutCaBundle(before.v));
    expect(withoutCaBundle(after.m)).toEqual(withoutCaBundle(before.m));
    // One write per configuration.
    expect(after.v.metadata.generation).toBe(before.v.metadata.generation + 1);
    expect(after.m.metadata.generation).toBe(before.m.metadata.generation + 1);

    // The API server can now call the marker webhook over TLS verified with the injected CA.
    await waitForMarkerDenied(env.kc, env.namespace, env.namespace);
    expect(server.calls.some((c) => c.path === '/marker')).toBe(true);

    // Again: nothing to do, and no write.
    const again = await cli(argv);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(
      `ValidatingWebhookConfiguration ${v}: caBundle already up to date\nMutatingWebhookConfiguration ${m}: caBundle already up to date\n`,
    );
    expect((await get('validating', v)).metadata.resourceVersion).toBe(after.v.metadata.resourceVersion);
  });

  it.each([
    [
      'validating' as const,
      'reordered',
      { op: 'move', from: '/webhooks/1', path: '/webhooks/0' },
      ['y.certs.kd.test', 'x.certs.kd.test'],
    ],
    [
      'mutating' as const,
      'renamed',
      { op: 'replace', path: '/webhooks/0/name', value: 'z.certs.kd.test' },
      ['z.certs.kd.test', 'y.certs.kd.test'],
    ],
  ])('writes a %s configuration %s between read and write from a fresh read', async (kind, what, change, names) => {
    const name = `${env.namespace}-${what}`;
    await createConfiguration(kind, name, [idleWebhook('x.certs.kd.test'), idleWebhook('y.certs.kd.test')]);
    const real = webhookConfigurationClient(kube);
    let interfered = false;
    // Another writer changes the configuration right after inject-ca has read it.
    const racing: WebhookConfigurationClient = {
      async read(ref) {
        const got = await real.read(ref);
        if (!interfered) {
          interfered = true;
          const p = await env.kubectl(['patch', resource(kind), name, '--type=json', '-p', JSON.stringify([change])], {
            namespace: false,
          });
          expect(p.code).toBe(0);
        }
        return got;
      },
      patch: (ref, ops) => {
        patches.push(ops.filter((o) => o.path.endsWith('/name')).map((o) => o.value));
        return real.patch(ref, ops);
      },
    };
    const patches: unknown[][] = [];
    const r = await cli(['inject-ca', '--ca-file', caFile, `--${kind}`, name], { webhookClient: () => racing });
    expect(r).toMatchObject({ code: 0, stderr: '' });
    // The API server refused the first write (its tests name the webhooks as first read); the second, from a
    // fresh read, set the bundle on the webhooks as they are now.
    expect(patches).toEqual([['x.certs.kd.test', 'y.certs.kd.test'], names]);
    const now = await get(kind, name);
    expect(now.webhooks.map((w) => w.name)).toEqual(names);
    expect(now.webhooks.map((w) => w.clientConfig.caBundle)).toEqual([b64(ca.certPem), b64(ca.certPem)]);
  });

  it('says which configuration does not exist', async () => {
    const r = await cli([
      'inject-ca',
      '--ca-file',
      caFile,
      '--validating',
      `${env.namespace}-absent`,
      '--kubeconfig',
      env.info.kubeconfigPath,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error: ValidatingWebhookConfiguration ${env.namespace}-absent not found\n`);
  });
});
