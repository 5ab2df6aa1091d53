/**
 * The reconciler may create, patch and delete Secrets in the namespaces it serves (its per-cluster private
 * configmeta Secrets); RBAC cannot narrow that to names. The chart's secret-writes ValidatingAdmissionPolicy,
 * enforced by the API server, does: with the reconciler's own token (chart installed with watchNamespaces)
 * it can write its private Secrets and nothing else — no other Secret created, patched or deleted, no
 * private Secret relabelled or re-owned. The policy matches only this release's reconciler account.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { getJson, kdCluster, kubectlOk } from '../support/kd-objects.js';
import { eventually, run } from '../support/processes.js';
import { freePort } from '../controlplane/net.js';
import { CHART, TempDir, randomName, serviceAccountKubeconfig, type Doc } from './chart-support.js';

const env = useTestEnv();
const ns = env.namespace;
const apps = `${ns}-apps`.slice(0, 63);
const release = randomName('kds');
const fullname = `${release}-kd-connections`;
const POLICY = `ValidatingAdmissionPolicy '${fullname}-reconciler-secret-writes'`;
const OF = 'kd-connections.hpe.com/private-configmeta-of';
const dir = new TempDir();
let installed = false;
let kubeconfig: string;
let ownerUid: string;

const privateSecret = (name: string, cluster: string, uid = ownerUid): Doc => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: {
    name,
    labels: { [OF]: cluster },
    ownerReferences: [
      { apiVersion: 'kubedirector.hpe.com/v1beta1', kind: 'KubeDirectorCluster', name: cluster, uid, controller: true },
    ],
  },
  data: { 'priv_configmeta.json': Buffer.from('{}').toString('base64') },
});
const asReconciler = (args: string[], input?: string) =>
  run(env.info.binDir.kubectl, ['--kubeconfig', kubeconfig, '--namespace', apps, ...args], input ? { input } : {});
const create = (o: Doc) => asReconciler(['create', '-f', '-'], JSON.stringify(o));
const patch = (name: string, ops: unknown[]) =>
  asReconciler(['patch', 'secret', name, '--type=json', '-p', JSON.stringify(ops)]);
/** The same write is valid for anyone else: it is the policy that refuses it. */
const adminCan = async (args: string[], input?: string) => {
  const r = await env.kubectl([...args, '--dry-run=server'], { namespace: apps, ...(input ? { input } : {}) });
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
};
const denied = (r: { code: number; stderr: string }, message: string) => {
  expect(r.code).not.toBe(0);
  expect(r.stderr).toContain(POLICY);
  expect(r.stderr).toContain(message);
};

beforeAll(async () => {
  await installCrds(env);
  await env.kc
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: apps, labels: { 'kd-test': 'true' } } } });
  // Before the webhooks exist (they point at a port where nothing listens).
  await kubectlOk(env, ['create', '-f', '-'], { namespace: apps, input: JSON.stringify(kdCluster('steady', 'x')) });
  ownerUid = (await getJson(env, ['kdcluster', 'steady'], apps)).metadata.uid;
  await kubectlOk(env, ['create', 'secret', 'generic', 'foreign', '--from-literal=k=v'], { namespace: apps });
  const values = dir.file(
    'values.json',
    JSON.stringify({
      // The harness applied the CRDs; Helm refuses to adopt CRDs it did not install.
      crds: { install: false },
      webhook: {
        url: `https://127.0.0.1:${await freePort()}`,
        caBundle: Buffer.from(env.info.webhookCaPem).toString('base64'),
        timeoutSeconds: 5,
      },
      watchNamespaces: [apps],
      reconciler: { replicas: 0 },
    }),
  );
  const r = await env.helm(['install', release, CHART, '--namespace', ns, '-f', values]);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  installed = true;
  kubeconfig = await serviceAccountKubeconfig(env, dir, ns, `${fullname}-reconciler`);
  // The API server enforces a new policy once its informer has it: wait for a refusal (a dry run).
  const probe = JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'probe' } });
  await eventually('the policy is enforced', async () =>
    (await asReconciler(['create', '--dry-run=server', '-f', '-'], probe)).stderr.includes(POLICY) ? true : undefined,
  );
}, 120_000);

afterAll(async () => {
  if (installed) await env.helm(['uninstall', release, '--namespace', ns]);
  await env.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: apps })
    .catch(() => undefined);
  dir.remove();
});

describe("the reconciler's Secret writes (ValidatingAdmissionPolicy)", () => {
  it('creates, patches and deletes its private Secret (what delivery needs)', async () => {
    let r = await create(privateSecret('kd-configmeta-private-steady', 'steady'));
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const rv = (await getJson(env, ['secret', 'kd-configmeta-private-steady'], apps)).metadata.resourceVersion;
    r = await patch('kd-configmeta-private-steady', [
      { op: 'test', path: '/metadata/resourceVersion', value: rv },
      { op: 'add', path: '/data', value: { 'priv_configmeta.json': Buffer.from('{"x":1}').toString('base64') } },
      { op: 'add', path: '/metadata/annotations', value: { 'kd-connections.hpe.com/content-mac': 'ab' } },
    ]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    r = await asReconciler(['delete', 'secret', 'kd-configmeta-private-steady']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('cannot create any other Secret', async () => {
    const plain = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'planted' }, data: {} };
    const cases: Doc[] = [
      plain,
      // Named for one cluster, labelled for another.
      privateSecret('kd-configmeta-private-other', 'steady'),
      // Labelled, but owned by nothing.
      {
        ...privateSecret('kd-configmeta-private-steady', 'steady'),
        metadata: { name: 'kd-configmeta-private-steady', labels: { [OF]: 'steady' } },
      },
    ];
    for (const o of cases) {
      denied(await create(o), 'the reconciler may only create its digest key and private configmeta Secrets');
      await adminCan(['create', '-f', '-'], JSON.stringify(o));
    }
  });

  it('cannot patch or delete a Secret that is not its own, nor relabel or re-own its own', async () => {
    const data = [{ op: 'add', path: '/data/k', value: Buffer.from('mine').toString('base64') }];
    denied(
      await patch('foreign', data),
      'the reconciler may only change the content of its private configmeta Secrets',
    );
    await adminCan(['patch', 'secret', 'foreign', '--type=json', '-p', JSON.stringify(data)]);
    denied(
      await asReconciler(['delete', 'secret', 'foreign']),
      'the reconciler may only delete its private configmeta Secrets',
    );

    const created = await create(privateSecret('kd-configmeta-private-steady', 'steady'));
    expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: '' });
    for (const ops of [
      [{ op: 'add', path: `/metadata/labels/${OF.replace('/', '~1')}`, value: 'other' }],
      [{ op: 'remove', path: '/metadata/ownerReferences' }],
      [{ op: 'add', path: '/metadata/labels/extra', value: 'x' }],
    ])
      denied(
        await patch('kd-configmeta-private-steady', ops),
        'the reconciler may only change the content of its private configmeta Secrets',
      );
  });
});
