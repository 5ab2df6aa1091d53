/**
 * The admission RBAC of bootstrap mode, proved on the real control plane without installing bootstrap
 * mode (it renders clientConfig.service, which the API server must never dial here): only the
 * ServiceAccount and RBAC objects are taken out of `helm template` and applied. A token of that account
 * then does what the bootstrap does — create and renew its TLS Secret, put the CA into caBundle of its
 * two webhook configurations (with the certs CLI) — and is refused everything around it.
 *
 * The two webhook configurations the caBundle goes into are registered here in url mode on 127.0.0.1,
 * matching no namespace at all, so no API request is ever sent to them.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { freePort } from '../controlplane/net.js';
import { eventually, ok, repoRoot } from '../support/processes.js';
import { startAdmission } from '../support/services.js';
import {
  TempDir,
  containerArgs,
  grantedBeyondBaseline,
  helmTemplate,
  one,
  randomName,
  serviceAccountKubeconfig,
  withArgs,
  type Doc,
} from './chart-support.js';

const env = useTestEnv();
const ns = env.namespace;
const release = randomName('kdb');
const fullname = `${release}-kd-connections`;
const sa = `${fullname}-admission`;
const tlsSecret = `${fullname}-admission-tls`;
const dir = new TempDir();
let rbac: Doc[] = [];
let saKubeconfig: string;
let bootstrapArgs: string[] = [];

const asSA = (args: string[], input?: string) =>
  env.kubectl(['--kubeconfig', saKubeconfig, ...args], { namespace: ns, input });

/** A webhook configuration no request ever reaches: url on loopback, a namespaceSelector nothing matches. */
function inertConfiguration(kind: 'ValidatingWebhookConfiguration' | 'MutatingWebhookConfiguration', name: string) {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind,
    metadata: { name, labels: { 'kd-test': 'true' } },
    webhooks: [
      {
        name: 'inert.kd-connections.hpe.com',
        clientConfig: { url: 'https://127.0.0.1:9/inert' },
        rules: [
          {
            apiGroups: ['kubedirector.hpe.com'],
            apiVersions: ['v1beta1'],
            operations: ['CREATE'],
            resources: ['kubedirectorclusters'],
          },
        ],
        namespaceSelector: { matchLabels: { 'kd-test-matches-no-namespace': release } },
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
        failurePolicy: 'Ignore',
      },
    ],
  };
}
const configurations = [fullname, `${fullname}-other`].flatMap((name) => [
  inertConfiguration('ValidatingWebhookConfiguration', name),
  inertConfiguration('MutatingWebhookConfiguration', name),
]);

beforeAll(async () => {
  // The service is ready only once its caches of kdclusters and kdapps synced: the CRDs must be there, not
  // left to whichever test file ran before this one (alone, this file waited forever).
  ok(await installCrds(env), 'install CRDs');
  // Secret connections off, so the only Secret rights left are the bootstrap ones. 127.0.0.1 in the
  // certificate lets the test reach the service the way the API server would reach the Service.
  const { docs } = await helmTemplate(env, release, ns, [
    '--set',
    'secretConnections.enabled=false',
    '--set',
    'certificates.extraIPAddresses={127.0.0.1}',
  ]);
  bootstrapArgs = containerArgs(one(docs, 'Deployment', `${fullname}-admission`));
  rbac = docs.filter(
    (d) =>
      ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(d.kind) &&
      d.metadata.labels['app.kubernetes.io/component'] === 'admission',
  );
  expect(rbac.map((d) => `${d.kind}/${d.metadata.name}`).sort()).toEqual([
    `ClusterRole/${fullname}-admission`,
    `ClusterRole/${fullname}-admission-cabundle`,
    `ClusterRoleBinding/${fullname}-admission`,
    `ClusterRoleBinding/${fullname}-admission-cabundle`,
    `Role/${fullname}-admission-certificates`,
    `RoleBinding/${fullname}-admission-certificates`,
    `ServiceAccount/${sa}`,
  ]);
  const list = (items: object[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
  ok(await env.kubectl(['apply', '-f', '-'], { input: list(rbac) }), 'apply RBAC');
  ok(await env.kubectl(['create', '-f', '-'], { input: list(configurations), namespace: false }), 'configurations');
  saKubeconfig = await serviceAccountKubeconfig(env, dir, ns, sa);
}, 120_000);

afterAll(async () => {
  const list = (items: object[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
  await env.kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: list(configurations), namespace: false });
  await env.kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: list(rbac) });
  dir.remove();
});

describe('bootstrap-mode RBAC of the admission service', () => {
  it('can-i --list: its Secret by name, create, events, and the caBundle of its two configurations', async () => {
    const reads = ['configmaps', 'kubedirectorapps.kubedirector.hpe.com', 'kubedirectorclusters.kubedirector.hpe.com']
      .flatMap((r) => ['get', 'list', 'watch'].map((v) => `${r} ${v}`))
      .sort();
    const cabundle = ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'].flatMap((r) =>
      ['get', 'list', 'patch', 'watch'].map((v) => `${r}.admissionregistration.k8s.io[${fullname}] ${v}`),
    );
    const own = [
      'events.events.k8s.io create',
      'secrets create',
      ...['get', 'list', 'patch', 'watch'].map((v) => `secrets[${tlsSecret}] ${v}`),
    ];
    const inRelease = await grantedBeyondBaseline(env, ns, ns, sa);
    expect(inRelease.extra).toEqual([...reads, ...cabundle, ...own].sort());
    const elsewhere = await grantedBeyondBaseline(env, 'default', ns, sa);
    expect(elsewhere.extra).toEqual([...reads, ...cabundle].sort());
  });

  it('a token of the account creates, reads and renews its TLS Secret, and reads no other Secret', async () => {
    const secret = (name: string) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'kubernetes.io/tls',
        metadata: { name },
        data: { 'tls.crt': Buffer.from('cert').toString('base64'), 'tls.key': Buffer.from('key').toString('base64') },
      });
    ok(await asSA(['create', '-f', '-'], secret(tlsSecret)), 'create its Secret');
    ok(await asSA(['get', 'secret', tlsSecret, '-o', 'name']), 'get its Secret');
    ok(
      await asSA([
        'patch',
        'secret',
        tlsSecret,
        '--type=json',
        '-p',
        '[{"op":"add","path":"/metadata/labels","value":{"renewed":"1"}}]',
      ]),
      'patch its Secret',
    );
    ok(await asSA(['get', 'secrets', `--field-selector=metadata.name=${tlsSecret}`, '-o', 'name']), 'list by name');

    // Documented limit: create cannot be restricted by name ...
    ok(await asSA(['create', '-f', '-'], secret(`${fullname}-not-its-own`)), 'create another Secret');
    // ... but nothing else about other Secrets is allowed.
    for (const args of [
      ['get', 'secret', `${fullname}-not-its-own`],
      ['get', 'secrets'],
      ['delete', 'secret', tlsSecret],
      ['get', 'secret', tlsSecret, '--namespace', 'default'],
    ]) {
      const r = await asSA(args);
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({
        args,
        code: 1,
        stderr: expect.stringContaining('Forbidden'),
      });
    }
    ok(await env.kubectl(['delete', 'secret', tlsSecret, `${fullname}-not-its-own`]), 'clean up');
  });

  it('a token of the account puts the CA into caBundle of its two configurations, and of no other', async () => {
    const caFile = dir.file('ca.crt', env.info.webhookCaPem, 0o644);
    const injectCa = (name: string) =>
      spawnSync(
        process.execPath,
        [
          join(repoRoot, 'certs', 'dist', 'cli.js'),
          'inject-ca',
          '--ca-file',
          caFile,
          '--validating',
          name,
          '--mutating',
          name,
          '--kubeconfig',
          saKubeconfig,
        ],
        { encoding: 'utf8', env: { ...process.env, KUBECONFIG: '' } },
      );
    const own = injectCa(fullname);
    expect({ status: own.status, stderr: own.stderr }).toEqual({ status: 0, stderr: '' });
    for (const kind of ['validatingwebhookconfiguration', 'mutatingwebhookconfiguration']) {
      const cfg = JSON.parse(
        ok(await env.kubectl(['get', kind, fullname, '-o', 'json'], { namespace: false }), 'get').stdout,
      );
      expect(Buffer.from(cfg.webhooks[0].clientConfig.caBundle, 'base64').toString()).toContain(
        env.info.webhookCaPem.trim().split(/\r?\n/)[1],
      );
    }
    const other = injectCa(`${fullname}-other`);
    expect(other.status).not.toBe(0);
    expect(other.stderr + other.stdout).toMatch(/forbidden/i);
    const untouched = JSON.parse(
      ok(
        await env.kubectl(['get', 'validatingwebhookconfiguration', `${fullname}-other`, '-o', 'json'], {
          namespace: false,
        }),
        'get other',
      ).stdout,
    );
    expect(untouched.webhooks[0].clientConfig.caBundle).toBeUndefined();
  });

  it("the admission service in bootstrap mode, with the chart's args and only these rights, creates its Secret, publishes its CA to both configurations and becomes ready", async () => {
    expect(bootstrapArgs).toEqual(
      expect.arrayContaining([
        '--tls-mode=bootstrap',
        `--tls-secret-name=${tlsSecret}`,
        `--webhook-configurations=validating/${fullname},mutating/${fullname}`,
        '--extra-ip-addresses=127.0.0.1',
        '--secret-connections=false',
      ]),
    );
    const port = await freePort();
    let caPem = '';
    const proc = await startAdmission(
      env,
      withArgs(bootstrapArgs, { port: String(port), 'bind-address': '127.0.0.1', kubeconfig: saKubeconfig }),
      {
        port,
        certificateFiles: false,
        kubeconfig: saKubeconfig,
        env: { POD_NAMESPACE: ns, POD_NAME: `${fullname}-admission-5c7d8-q2x4z` },
        // Verified with the CA of the Secret it creates, once it has.
        trustedCa: () => caPem,
        waitReady: false,
      },
    );
    try {
      // The Secret it created, with the CA the API server is told to trust.
      const secret = await eventually(
        'TLS Secret created by the service',
        async () => {
          const r = await env.kubectl(['get', 'secret', tlsSecret, '-o', 'json']);
          return r.code === 0 ? (JSON.parse(r.stdout) as Doc) : undefined;
        },
        90_000,
      );
      expect(secret.type).toBe('kubernetes.io/tls');
      caPem = Buffer.from(secret.data['ca.crt'], 'base64').toString();
      // Ready, serving a certificate for 127.0.0.1 signed by that CA.
      await proc.waitReady(90_000);
      // That CA is in caBundle of both of its configurations.
      const caBody = caPem.split(/\r?\n/)[1]!;
      for (const kind of ['validatingwebhookconfiguration', 'mutatingwebhookconfiguration']) {
        await eventually(`caBundle of ${kind}`, async () => {
          const cfg = JSON.parse(
            ok(await env.kubectl(['get', kind, fullname, '-o', 'json'], { namespace: false }), 'get').stdout,
          );
          return Buffer.from(cfg.webhooks[0].clientConfig.caBundle ?? '', 'base64')
            .toString()
            .includes(caBody);
        });
      }
      // And it said so with an event on the Secret.
      await eventually('CACreated event', async () => {
        const events = JSON.parse(
          ok(await env.kubectl(['get', 'events.events.k8s.io', '-o', 'json']), 'events').stdout,
        );
        return events.items.some((e: Doc) => e.regarding?.name === tlsSecret && e.reason === 'CACreated');
      });
      expect(proc.output()).not.toMatch(/forbidden|could not post event/i);
    } finally {
      await proc.stop();
    }
  });
});
