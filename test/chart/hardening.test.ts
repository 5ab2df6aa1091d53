/**
 * The chart's hardening on the real control plane, installed in url mode (clientConfig.url on 127.0.0.1)
 * with watchNamespaces, its webhooks pointing at a port where nothing listens until the last tests:
 *
 * - an admission outage does not block deletion: a kdcluster with a finalizer finishes deleting, label
 *   and annotation edits go through, spec changes and creates are still refused (matchConditions);
 * - the system catalog (the release namespace by default) is sent to validate-kdapp;
 * - the ValidatingAdmissionPolicy limits the reconciler's token to the configmeta annotations of member
 *   pods (no image, label, other annotation or non-member pod), and it can still deliver;
 * - with watchNamespaces the admission account reads only in those namespaces (plus kdapps in the
 *   system namespace), and the service runs on that alone;
 * - with client-certificate authentication on, the service refuses a connection without the API
 *   server's certificate and the kubelet's probes still answer on the plain probes port.
 *
 * Safety: the webhooks select only this file's apps namespace and the release namespace (system catalog);
 * the policy matches only this release's reconciler account.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import https from 'node:https';
import { CoreV1Api } from '@kubernetes/client-node';
import { createCA } from '@kd-connections/certs';
import { createClientCert } from '../support/test-pki.js';
import { useTestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { installCrds } from '../support/crds.js';
import { getJson, kdApp, kdCluster, kubectlOk, memberPod } from '../support/kd-objects.js';
import { eventually, ok, run, type ServiceProcess } from '../support/processes.js';
import { startAdmission } from '../support/services.js';
import { WEBHOOK_NAMES } from '../support/webhook-configurations.js';
import { freePort } from '../controlplane/net.js';
import {
  CHART,
  TempDir,
  containerArgs,
  grantedBeyondBaseline,
  helmTemplate,
  one,
  randomName,
  serviceAccountKubeconfig,
  startLoopbackAdmission,
  withArgs,
  withoutBootstrapArgs,
  type Doc,
  type LoopbackAdmission,
} from './chart-support.js';

const env = useTestEnv();
const ns = env.namespace;
const apps = `${ns}-apps`.slice(0, 63);
const release = randomName('kdh');
const fullname = `${release}-kd-connections`;
const admissionSA = `${fullname}-admission`;
const reconcilerSA = `${fullname}-reconciler`;
const FAILED_VALIDATE_CLUSTER = `failed calling webhook "${WEBHOOK_NAMES.validateCluster}"`;
const FAILED_VALIDATE_APP = `failed calling webhook "${WEBHOOK_NAMES.validateApp}"`;

const dir = new TempDir();
let port: number;
let valuesFile: string;
let installed = false;
let admission: LoopbackAdmission | undefined;
let authenticated: ServiceProcess | undefined;

beforeAll(async () => {
  await installCrds(env);
  await createNamespace(env.kc, apps);
  port = await freePort();
  valuesFile = dir.file(
    'values.json',
    JSON.stringify({
      webhook: {
        url: `https://127.0.0.1:${port}`,
        caBundle: Buffer.from(env.info.webhookCaPem).toString('base64'),
        timeoutSeconds: 5,
      },
      watchNamespaces: [apps],
      reconciler: { replicas: 0 },
      // The shared control plane's CRDs belong to the harness (every test file uses them).
      crds: { install: false, keep: true },
    }),
  );
  // Made before the webhooks exist: a cluster that will be deleted while admission is down, and one to edit.
  const doomed = kdCluster('doomed', 'some-app');
  (doomed.metadata as Doc).finalizers = ['kd-test.example.com/hold'];
  for (const o of [doomed, kdCluster('steady', 'some-app', {}, ['controller'], 2)])
    await kubectlOk(env, ['create', '-f', '-'], { namespace: apps, input: JSON.stringify(o) });
  const r = await env.helm(['install', release, CHART, '--namespace', ns, '-f', valuesFile]);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  installed = true;
}, 120_000);

afterAll(async () => {
  await admission?.stop();
  await authenticated?.stop();
  // The finalizer test leaves nothing behind; this catches a failed run.
  await env.kubectl(['patch', 'kdcluster', 'doomed', '--type=merge', '-p', '{"metadata":{"finalizers":null}}'], {
    namespace: apps,
  });
  if (installed) await env.helm(['uninstall', release, '--namespace', ns]);
  await env.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: apps })
    .catch(() => undefined);
  dir.remove();
});

/** kubectl with another kubeconfig (a ServiceAccount token). */
const kubectlAs = (kubeconfig: string, args: string[], namespace = apps) =>
  run(env.info.binDir.kubectl, ['--kubeconfig', kubeconfig, '--namespace', namespace, ...args]);

describe('an admission outage does not block deletion (validating webhooks with matchConditions)', () => {
  it('the webhook is down: creates and spec changes are refused', async () => {
    const created = await env.kubectl(['create', '-f', '-'], {
      namespace: apps,
      input: JSON.stringify(kdCluster('new-one', 'some-app')),
    });
    expect(created.code).not.toBe(0);
    expect(created.stderr).toContain(FAILED_VALIDATE_CLUSTER);
    const spec = await env.kubectl(
      ['patch', 'kdcluster', 'steady', '--type=json', '-p', '[{"op":"replace","path":"/spec/app","value":"other"}]'],
      { namespace: apps },
    );
    expect(spec.code).not.toBe(0);
    expect(spec.stderr).toContain(FAILED_VALIDATE_CLUSTER);
  });

  it('labels, annotations and finalizers of a kdcluster can still change (spec unchanged)', async () => {
    await kubectlOk(env, ['label', 'kdcluster', 'steady', 'team=ml'], { namespace: apps });
    await kubectlOk(env, ['annotate', 'kdcluster', 'steady', 'note=outage'], { namespace: apps });
    const c = await getJson(env, ['kdcluster', 'steady'], apps);
    expect(c.metadata.labels.team).toBe('ml');
    expect(c.spec.app).toBe('some-app');
  });

  it('a kdcluster with a finalizer finishes deleting: the finalizer removal is not sent to the webhook', async () => {
    await kubectlOk(env, ['delete', 'kdcluster', 'doomed', '--wait=false'], { namespace: apps });
    const marked = await getJson(env, ['kdcluster', 'doomed'], apps);
    expect(marked.metadata.deletionTimestamp).toEqual(expect.any(String));
    // What a controller does when it is done: remove its finalizer (a JSON Patch with a precondition).
    await kubectlOk(
      env,
      [
        'patch',
        'kdcluster',
        'doomed',
        '--type=json',
        '-p',
        JSON.stringify([
          { op: 'test', path: '/metadata/finalizers/0', value: 'kd-test.example.com/hold' },
          { op: 'remove', path: '/metadata/finalizers' },
        ]),
      ],
      { namespace: apps },
    );
    const gone = await env.kubectl(['get', 'kdcluster', 'doomed'], { namespace: apps });
    expect(gone.stderr).toContain('NotFound');
  });

  it('the system catalog (the release namespace by default) is sent to validate-kdapp', async () => {
    // Before, the release namespace was excluded from every webhook: this create was admitted unchecked.
    const r = await env.kubectl(['create', '-f', '-'], {
      namespace: ns,
      input: JSON.stringify(kdApp('catalog-app')),
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(FAILED_VALIDATE_APP);
    // kdclusters in the release namespace are still not sent (nothing there is a served cluster).
    await kubectlOk(env, ['create', '--dry-run=server', '-f', '-'], {
      namespace: ns,
      input: JSON.stringify(kdCluster('not-served', 'some-app')),
    });
  });
});

describe("the reconciler's pod writes (ValidatingAdmissionPolicy)", () => {
  let kubeconfig: string;
  const patchPod = (pod: string, patch: unknown[]) =>
    kubectlAs(kubeconfig, ['patch', 'pod', pod, '--type=json', '-p', JSON.stringify(patch)]);
  const annotation = (key: string, value: string) => ({
    op: 'add',
    path: `/metadata/annotations/${key.replace('/', '~1')}`,
    value,
  });

  beforeAll(async () => {
    kubeconfig = await serviceAccountKubeconfig(env, dir, ns, reconcilerSA);
    const plain = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'plain', annotations: { x: '1' } } };
    const member = memberPod('member-0', 'steady');
    (member.metadata as Doc).annotations = { 'kubedirector.hpe.com/configmeta': '{}', x: '1' };
    // member-1 has no annotations at all (the pod webhook's mutation adds kubectl's default-container one).
    const bare = memberPod('member-1', 'steady', 'controller', { mutated: false });
    for (const pod of [member, bare, { ...plain, spec: (member as Doc).spec }])
      await kubectlOk(env, ['create', '-f', '-'], { namespace: apps, input: JSON.stringify(pod) });
  });

  it('delivers: the configmeta annotations of a member pod can be patched', async () => {
    const r = await patchPod('member-0', [
      { op: 'test', path: '/metadata/annotations/kubedirector.hpe.com~1configmeta', value: '{}' },
      annotation('kubedirector.hpe.com/configmeta', '{"version":"8"}'),
      annotation('kubedirector.hpe.com/configmeta-generator', '3'),
      annotation('kubedirector.hpe.com/configmeta-hash', 'abc'),
      annotation('kd-connections.hpe.com/configmeta-roster', 'def'),
    ]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const pod = await getJson(env, ['pod', 'member-0'], apps);
    expect(pod.metadata.annotations['kubedirector.hpe.com/configmeta-generator']).toBe('3');
  });

  it('delivers to a member pod that has no annotations yet (its first configmeta)', async () => {
    const r = await patchPod('member-1', [
      {
        op: 'add',
        path: '/metadata/annotations',
        value: { 'kubedirector.hpe.com/configmeta': '{}', 'kubedirector.hpe.com/configmeta-generator': '1' },
      },
    ]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  });

  it.each([
    ['an image', [{ op: 'replace', path: '/spec/containers/0/image', value: 'registry.invalid/evil:1' }]],
    ['a label', [{ op: 'add', path: '/metadata/labels/owned', value: 'yes' }]],
    ['the member label', [{ op: 'replace', path: '/metadata/labels/kubedirector.hpe.com~1kdcluster', value: 'x' }]],
    ['another annotation', [{ op: 'replace', path: '/metadata/annotations/x', value: '2' }]],
    ['the configmeta-volume opt-out', [annotation('kubedirector.hpe.com/configmeta-volume', 'false')]],
    ['a finalizer', [{ op: 'add', path: '/metadata/finalizers', value: ['kd-test.example.com/x'] }]],
  ])('cannot change %s of a member pod', async (_what, patch) => {
    const r = await patchPod('member-0', patch);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      new RegExp(`ValidatingAdmissionPolicy '${fullname}-reconciler-pod-writes' .*denied request: the reconciler may`),
    );
    // The same change is a valid one for anyone else (it is the policy that refuses it, not the API).
    const admin = await env.kubectl(
      ['patch', 'pod', 'member-0', '--type=json', '--dry-run=server', '-p', JSON.stringify(patch)],
      {
        namespace: apps,
      },
    );
    expect({ code: admin.code, stderr: admin.stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('cannot write configmeta into a pod that is not a member', async () => {
    const r = await patchPod('plain', [annotation('kubedirector.hpe.com/configmeta', '{}')]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('the reconciler may only change member pods (label kubedirector.hpe.com/kdcluster)');
  });
});

describe('admission with watchNamespaces: namespaced rights, and the service runs on them', () => {
  it('reads only in the watched namespaces, kdapps also in the system namespace, nothing elsewhere', async () => {
    const read = (r: string) => [`${r} get`, `${r} list`, `${r} watch`];
    const inApps = [
      ...read('configmaps'),
      ...read('kubedirectorapps.kubedirector.hpe.com'),
      ...read('kubedirectorclusters.kubedirector.hpe.com'),
      ...read('secrets'),
    ].sort();
    for (const [where, rights] of [
      [apps, inApps],
      // Plus the KubeDirector guard's one Warning event, in the release namespace.
      [ns, [...read('kubedirectorapps.kubedirector.hpe.com'), 'events.events.k8s.io create']],
      ['default', []],
      ['kube-system', []],
    ] as const) {
      const { extra } = await grantedBeyondBaseline(env, where, ns, admissionSA);
      expect({ where, extra }).toEqual({ where, extra: [...rights].sort() });
    }
    const manifest = ok(await env.helm(['get', 'manifest', release, '--namespace', ns]), 'helm get manifest').stdout;
    expect(manifest).not.toContain('kind: ClusterRoleBinding');
  });

  it('the admission service becomes ready on those rights and validates the system catalog', async () => {
    const kubeconfig = await serviceAccountKubeconfig(env, dir, ns, admissionSA);
    const { docs } = await helmTemplate(env, release, ns, [
      '-f',
      valuesFile,
      ...['--set', 'webhook.url=', '--set', 'webhook.caBundle=', '--set', 'certificates.mode=bootstrap'],
    ]);
    const chartArgs = withoutBootstrapArgs(containerArgs(one(docs, 'Deployment', `${fullname}-admission`)));
    expect(chartArgs).toContain(`--watch-namespaces=${apps}`);
    // Ready = every cache listed with this token (they would be forbidden cluster-wide).
    admission = await startLoopbackAdmission(env, dir, chartArgs, kubeconfig, port);
    expect(admission.output()).not.toMatch(/forbidden/i);
    const bad = kdApp('catalog-bad', { connectable_to: [{ version: 'not a version' }] });
    const r = await env.kubectl(['create', '-f', '-'], { namespace: ns, input: JSON.stringify(bad) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateApp}" denied the request`);
    expect(r.stderr).toContain('spec.connectable_to[0].version');
    await kubectlOk(env, ['create', '-f', '-'], { namespace: ns, input: JSON.stringify(kdApp('catalog-good')) });
  });
});

describe('client-certificate authentication (admission.clientAuth)', () => {
  const clientCa = createCA({ commonName: 'kd-test-apiserver-client-ca' });
  const apiserverClient = createClientCert({ ca: clientCa, commonName: 'kube-apiserver' });

  const get = (url: string, opts: https.RequestOptions = {}) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const mod = url.startsWith('https:') ? https : http;
      mod
        .get(url, { ...opts, agent: false }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        })
        .on('error', reject);
    });

  it('the webhook port wants the API server certificate; probes and metrics answer on the plain port', async () => {
    const { docs } = await helmTemplate(env, release, ns, [
      '-f',
      valuesFile,
      ...['--set', 'webhook.url=', '--set', 'webhook.caBundle=', '--set', 'admission.clientAuth.enabled=true'],
      ...['--set', 'admission.clientAuth.allowedNames={kube-apiserver}'],
      ...['--set-string', `admission.clientAuth.caBundle=${clientCa.certPem}`],
    ]);
    const dep = one(docs, 'Deployment', `${fullname}-admission`);
    const c = dep.spec.template.spec.containers[0];
    const [webhookPort, probePort] = [await freePort(), await freePort()];
    // The CA file the chart mounts from its ConfigMap, and the chart's args, on loopback.
    const cm = one(docs, 'ConfigMap', `${fullname}-admission-client-ca`);
    expect(cm.data['ca.crt'].trim()).toBe(clientCa.certPem.replace(/\r\n/g, '\n').trim());
    const chartArgs = withoutBootstrapArgs(containerArgs(dep));
    expect(chartArgs).toEqual(
      expect.arrayContaining([
        '--client-ca-file=/etc/kd-connections/client-ca/ca.crt',
        '--client-allowed-names=kube-apiserver',
        '--probe-port=8081',
      ]),
    );
    const args = withArgs(chartArgs, {
      port: String(webhookPort),
      'probe-port': String(probePort),
      'bind-address': '127.0.0.1',
      'client-ca-file': dir.file('client-ca.crt', cm.data['ca.crt']),
      'tls-cert-file': dir.file('tls.crt', env.info.webhookServing.certPem),
      'tls-key-file': dir.file('tls.key', env.info.webhookServing.keyPem),
      kubeconfig: await serviceAccountKubeconfig(env, dir, ns, admissionSA),
    });
    // Its /readyz is on the plain probes port, waited for below.
    authenticated = await startAdmission(env, args, { port: webhookPort, certificateFiles: false, waitReady: false });
    await authenticated.waitForLog((l) => l.msg === 'listening');
    // Every kubelet probe is plain HTTP on the probes port, and answers there.
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'])
      expect(c[probe].httpGet).toMatchObject({ scheme: 'HTTP', port: 'probes' });
    await eventually('plain /readyz', async () => (await get(`http://127.0.0.1:${probePort}/readyz`)).status === 200);
    expect((await get(`http://127.0.0.1:${probePort}/healthz`)).status).toBe(200);
    expect((await get(`http://127.0.0.1:${probePort}/metrics`)).body).toContain('kd_admission_requests_total');
    // No review is served there, and the webhook port refuses a caller without the certificate.
    expect((await get(`http://127.0.0.1:${probePort}/validate-kdcluster`)).status).toBe(404);
    await expect(get(`https://127.0.0.1:${webhookPort}/healthz`, { ca: env.info.webhookCaPem })).rejects.toThrow();
    const withCert = await get(`https://127.0.0.1:${webhookPort}/healthz`, {
      ca: env.info.webhookCaPem,
      cert: apiserverClient.certPem,
      key: apiserverClient.keyPem,
    });
    expect(withCert.status).toBe(200);
  });
});
