/**
 * The chart installed on the real control plane, in its out-of-cluster `url` mode: the webhooks call an
 * admission service this test runs on 127.0.0.1 (no pod ever runs: there are no nodes), and both services
 * run with TokenRequest tokens of the chart's own ServiceAccounts and the args the chart gives their
 * containers. Then: the examples are enforced through the INSTALLED configurations, `kubectl auth can-i
 * --list` shows exactly the documented rights, `helm upgrade` changes them, `helm uninstall` leaves only
 * the CRDs.
 *
 * Safety: only url mode is installed (clientConfig.url on 127.0.0.1); its namespaceSelector covers only
 * this file's apps namespace (watchNamespaces), so other test files never see these webhooks.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { useTestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { installCrds } from '../support/crds.js';
import { WEBHOOK_NAMES } from '../support/webhook-configurations.js';
import { getJson, kubectlOk, memberPod, podConfigMeta } from '../support/kd-objects.js';
import { eventually, ok } from '../support/processes.js';
import { freePort } from '../controlplane/net.js';
import {
  CHART,
  EXAMPLES,
  TempDir,
  containerArgs,
  grantedBeyondBaseline,
  helmTemplate,
  one,
  parseDocs,
  randomName,
  serviceAccountKubeconfig,
  startLoopbackAdmission,
  startLoopbackReconciler,
  type Doc,
  type LoopbackAdmission,
  type LoopbackReconciler,
} from './chart-support.js';

const env = useTestEnv();
const ns = env.namespace;
const apps = `${ns}-apps`.slice(0, 63);
const release = randomName('kdc');
const fullname = `${release}-kd-connections`;
const admissionSA = `${fullname}-admission`;
const reconcilerSA = `${fullname}-reconciler`;
const lease = `${fullname}-reconciler`;
const DENIED = join(EXAMPLES, 'denied', 'notebook-to-postgres.yaml');

const dir = new TempDir();
let port: number;
let caBundle: string;
let valuesFile: string;
let installed = false;
let admission: LoopbackAdmission | undefined;
let reconciler: LoopbackReconciler | undefined;
let admissionKubeconfig: string;
let reconcilerKubeconfig: string;

/** The values of this install: url mode on loopback, the reconciler Deployment at 0 (nothing runs pods). */
const values = () => ({
  webhook: { url: `https://127.0.0.1:${port}`, caBundle, timeoutSeconds: 10 },
  watchNamespaces: [apps],
  reconciler: { replicas: 0 },
  // The shared control plane's CRDs belong to the harness (every test file uses them).
  crds: { install: false, keep: true },
});

const installedManifest = async (): Promise<Doc[]> =>
  parseDocs(ok(await env.helm(['get', 'manifest', release, '--namespace', ns]), 'helm get manifest').stdout);

/** The admission container args the chart renders for the same values in an in-cluster mode. */
async function admissionChartArgs(extra: string[] = []): Promise<string[]> {
  const { docs } = await helmTemplate(env, release, ns, [
    '-f',
    valuesFile,
    '--set',
    'webhook.url=',
    '--set',
    'certificates.mode=secret',
    '--set',
    'certificates.secret.name=unused',
    ...extra,
  ]);
  return containerArgs(one(docs, 'Deployment', `${fullname}-admission`));
}

async function startServices(extraTemplateArgs: string[] = []): Promise<void> {
  admission = await startLoopbackAdmission(
    env,
    dir,
    await admissionChartArgs(extraTemplateArgs),
    admissionKubeconfig,
    port,
  );
  const recArgs = containerArgs(one(await installedManifest(), 'Deployment', `${fullname}-reconciler`));
  reconciler = await startLoopbackReconciler(env, recArgs, reconcilerKubeconfig, `${fullname}-reconciler-7d9f-x1`);
  await reconciler.waitForLog((l) => l.msg === 'became leader', 60_000);
}

async function stopServices(): Promise<void> {
  await admission?.stop();
  await reconciler?.stop();
  admission = reconciler = undefined;
}

const generator = async (name: string) =>
  (await getJson(env, ['kdcluster', name], apps)).spec?.configMetaGenerator as number | undefined;
const synced = async (name: string) => {
  const c = await getJson(env, ['kdcluster', name], apps);
  const cond = (c.status?.conditions ?? []).find((x: Doc) => x.type === 'ConfigMetaSynced');
  return cond?.status === 'True' && c.status?.lastConfigMetaGenerator === (c.spec?.configMetaGenerator ?? 0);
};
const clusterObject = async (args: string[]): Promise<Doc> =>
  JSON.parse(
    ok(await env.kubectl(['get', ...args, '-o', 'json'], { namespace: false }), `get ${args.join(' ')}`).stdout,
  );
const reviews = (pred: (l: Doc) => boolean) =>
  (admission?.logs() ?? []).filter((l) => l.msg === 'review' && pred(l as Doc));

beforeAll(async () => {
  await installCrds(env);
  await createNamespace(env.kc, apps);
  port = await freePort();
  caBundle = Buffer.from(env.info.webhookCaPem).toString('base64');
  valuesFile = dir.file('values.json', JSON.stringify(values()));
}, 120_000);

afterAll(async () => {
  await stopServices();
  if (installed) await env.helm(['uninstall', release, '--namespace', ns]);
  await env.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: apps })
    .catch(() => undefined);
  dir.remove();
});

describe('the chart installed in url mode', () => {
  it('installs next to CRDs that already exist, with url webhooks on 127.0.0.1 and no admission workload', async () => {
    const crdsBefore = await clusterObject(['crd', 'kubedirectorclusters.kubedirector.hpe.com']);
    const r = await env.helm(['install', release, CHART, '--namespace', ns, '-f', valuesFile]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    installed = true;
    expect(r.stdout).toContain('STATUS: deployed');
    expect(r.stdout).toContain(`OUT-OF-CLUSTER (url mode) at https://127.0.0.1:${port}`);

    // The CRDs were there already: Helm left them as they were (and does not own them, so uninstall keeps them).
    const crdsAfter = await clusterObject(['crd', 'kubedirectorclusters.kubedirector.hpe.com']);
    expect(crdsAfter.metadata.uid).toBe(crdsBefore.metadata.uid);
    expect(crdsAfter.metadata.annotations?.['meta.helm.sh/release-name']).toBeUndefined();

    const manifest = await installedManifest();
    expect(manifest.filter((d) => d.kind === 'Deployment').map((d) => d.metadata.name)).toEqual([
      `${fullname}-reconciler`,
    ]);
    expect(one(manifest, 'Deployment', `${fullname}-reconciler`).spec.replicas).toBe(0);

    // The live configurations: url clientConfig only, the CA given, scoped to the apps namespace.
    const names: string[] = [];
    for (const kind of ['validatingwebhookconfiguration', 'mutatingwebhookconfiguration']) {
      const cfg = await clusterObject([kind, fullname]);
      for (const w of cfg.webhooks) {
        names.push(w.name);
        expect(w.clientConfig).toEqual({
          url: `https://127.0.0.1:${port}/${w.name.split('.')[0]}`,
          caBundle,
        });
        // validate-kdapp also selects the system catalog (here the release namespace).
        const kdapps = w.name.startsWith('validate-kdapp');
        expect(w.namespaceSelector.matchExpressions).toEqual([
          {
            key: 'kubernetes.io/metadata.name',
            operator: 'NotIn',
            values: kdapps ? ['kube-system'] : ['kube-system', ns],
          },
          { key: 'kubernetes.io/metadata.name', operator: 'In', values: kdapps ? [apps, ns] : [apps] },
        ]);
      }
    }
    expect(names.sort()).toEqual(Object.values(WEBHOOK_NAMES).sort());
  });

  it("runs both services with TokenRequest tokens of the chart's ServiceAccounts and the chart's container args", async () => {
    admissionKubeconfig = await serviceAccountKubeconfig(env, dir, ns, admissionSA);
    reconcilerKubeconfig = await serviceAccountKubeconfig(env, dir, ns, reconcilerSA);
    // Ready = TLS loaded and every cache (kdapps, kdclusters, ConfigMaps, Secrets) listed with that token.
    await startServices();
    expect(admission!.args).toEqual(
      expect.arrayContaining([`--system-namespace=${ns}`, '--secret-connections=true', `--port=${port}`]),
    );
    expect(reconciler!.args).toEqual(
      expect.arrayContaining([
        `--watch-namespaces=${apps}`,
        `--leader-elect-resource-name=${lease}`,
        `--leader-elect-resource-namespace=${ns}`,
      ]),
    );
    // The reconciler leads through the chart's Lease (the chart created it; the reconciler filled it in).
    const l = await getJson(env, ['lease', lease], ns);
    expect(l.metadata.labels['app.kubernetes.io/instance']).toBe(release);
    expect(l.spec.holderIdentity).toBe(`${fullname}-reconciler-7d9f-x1`);
    // Nothing was refused on the way.
    expect(admission!.output()).not.toMatch(/forbidden/i);
    expect(reconciler!.output()).not.toMatch(/forbidden/i);
  });

  it('enforces the examples through the installed configurations: admitted, mutated, denied', async () => {
    const applied = await env.kubectl(['apply', '-k', EXAMPLES], { namespace: apps });
    expect({ code: applied.code, stdout: applied.stdout }).toEqual({
      code: 0,
      stdout: expect.stringContaining('created'),
    });
    // Warnings come from the webhook too: connected clusters without ready members yet.
    expect(applied.stderr).toMatch(
      /Warning: spec\.connections\.clusters\[\d\]: cluster "training-cluster" has no ready members yet/,
    );
    // The mutating webhook set the generator of every cluster that has connections.
    expect(await generator('notebook')).toBe(1);
    expect(await generator('kafka-events')).toBeUndefined();
    expect(
      reviews((l) => l.namespace === apps && l.webhook === 'mutate-kdcluster' && l.decision === 'patched'),
    ).not.toHaveLength(0);

    const denied = await env.kubectl(['apply', '-f', DENIED], { namespace: apps });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    expect(denied.stderr).toMatch(/spec\.connections\.clusters\[0\].*pg-main/);
    // ... answered by this process, through this release's configuration (nothing else covers `apps`).
    expect(
      reviews((l) => l.namespace === apps && l.name === 'notebook-sql' && l.decision === 'denied'),
    ).not.toHaveLength(0);

    // The release namespace is not sent to the webhooks: the same manifest passes a server dry run there.
    const inRelease = await env.kubectl(['apply', '--dry-run=server', '-f', DENIED], { namespace: ns });
    expect({ code: inRelease.code, stdout: inRelease.stdout }).toEqual({
      code: 0,
      stdout: expect.stringContaining('(server dry run)'),
    });
    expect(reviews((l) => l.namespace === ns)).toHaveLength(0);

    // A member pod gets the configmeta volume from the pod webhook, then its configmeta from the reconciler.
    // Every seat of both clusters (one StatefulSet per role: one ordinal run each), so no first delivery waits.
    for (const [pod, cluster, role] of [
      ['notebook-0', 'notebook', 'controller'],
      ['training-cluster-0', 'training-cluster', 'RESTServer'],
      ['training-cluster-1', 'training-cluster', 'RESTServer'],
      ['training-cluster-lb-0', 'training-cluster', 'LoadBalancer'],
    ] as const) {
      const created = JSON.parse(
        await kubectlOk(env, ['create', '-f', '-', '-o', 'json'], {
          namespace: apps,
          input: JSON.stringify(memberPod(pod, cluster, role, { mutated: false })),
        }),
      );
      expect(created.spec.volumes.map((v: Doc) => v.name)).toContain('kd-configmeta');
    }
    await eventually(
      'notebook and training-cluster synced',
      async () => (await synced('notebook')) && synced('training-cluster'),
    );
    const cm = await eventually('notebook-0 has configmeta', () => podConfigMeta(env, 'notebook-0', apps));
    // (The generator may be past 1: training-cluster's own configmeta changed when its member appeared.)
    expect(cm.generator).toBe(String(await generator('notebook')));
    expect(Object.keys(cm.doc.connections.clusters).sort()).toEqual(['spark-logs-nightly', 'training-cluster']);
    expect(cm.doc.connections.secrets['source-control'][0]).toMatchObject({ redacted: true, data: { token: '' } });
  });

  it('kubectl auth can-i --list shows exactly what the chart documents, nothing more', async () => {
    // watchNamespaces: admission reads in those namespaces only, plus kdapps of the system catalog.
    const admissionInApps = [
      'configmaps get',
      'configmaps list',
      'configmaps watch',
      'kubedirectorapps.kubedirector.hpe.com get',
      'kubedirectorapps.kubedirector.hpe.com list',
      'kubedirectorapps.kubedirector.hpe.com watch',
      'kubedirectorclusters.kubedirector.hpe.com get',
      'kubedirectorclusters.kubedirector.hpe.com list',
      'kubedirectorclusters.kubedirector.hpe.com watch',
      'secrets get',
      'secrets list',
      'secrets watch',
    ];
    const reconcilerInApps = [
      'configmaps get',
      'configmaps list',
      'configmaps watch',
      'events.events.k8s.io create',
      'kubedirectorapps.kubedirector.hpe.com get',
      'kubedirectorapps.kubedirector.hpe.com list',
      'kubedirectorapps.kubedirector.hpe.com watch',
      'kubedirectorclusters.kubedirector.hpe.com get',
      'kubedirectorclusters.kubedirector.hpe.com list',
      'kubedirectorclusters.kubedirector.hpe.com patch',
      'kubedirectorclusters.kubedirector.hpe.com watch',
      'kubedirectorclusters.kubedirector.hpe.com/status patch',
      'pods get',
      'pods list',
      'pods patch',
      'pods watch',
      // The private configmeta Secret of each cluster with Secret connections.
      'secrets create',
      'secrets delete',
      'secrets get',
      'secrets list',
      'secrets patch',
      'secrets watch',
    ];
    const reconcilerInRelease = [
      'kubedirectorapps.kubedirector.hpe.com get',
      'kubedirectorapps.kubedirector.hpe.com list',
      'kubedirectorapps.kubedirector.hpe.com watch',
      'leases.coordination.k8s.io create',
      `leases.coordination.k8s.io[${lease}] get`,
      `leases.coordination.k8s.io[${lease}] patch`,
      // The digest key of the MAC over connected Secrets (created once, then read).
      'secrets create',
      'secrets[kd-connections-digest-key] get',
    ];
    const guardEvents = 'events.events.k8s.io create';
    const expected: [string, string, string[]][] = [
      [admissionSA, apps, admissionInApps],
      // The KubeDirector guard's one Warning event, in the release namespace.
      [admissionSA, ns, [...admissionInApps.filter((p) => p.startsWith('kubedirectorapps')), guardEvents]],
      [admissionSA, 'default', []],
      [reconcilerSA, apps, reconcilerInApps],
      [reconcilerSA, ns, [...reconcilerInRelease, guardEvents]],
      [reconcilerSA, 'default', []],
    ];
    for (const [sa, where, rights] of expected) {
      const { extra, rows } = await grantedBeyondBaseline(env, where, ns, sa);
      expect({ sa, where, extra }).toEqual({ sa, where, extra: [...rights].sort() });
      for (const r of rows) {
        expect({ sa, r, wildcard: r.verbs.includes('*') || r.resource.includes('*') }).toEqual({
          sa,
          r,
          wildcard: false,
        });
        for (const v of ['escalate', 'bind', 'impersonate']) expect(r.verbs).not.toContain(v);
      }
    }
  });

  it('helm upgrade with Secret connections off removes every Secret right, and both services keep working', async () => {
    await stopServices();
    const r = await env.helm([
      'upgrade',
      release,
      CHART,
      '--namespace',
      ns,
      '-f',
      valuesFile,
      '--set',
      'secretConnections.enabled=false',
    ]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(r.stdout).toMatch(/REVISION: 2/);
    expect(r.stdout).toContain('Secret connections are DISABLED');

    for (const [sa, where] of [
      [admissionSA, apps],
      [admissionSA, ns],
      [reconcilerSA, apps],
      [reconcilerSA, ns],
    ] as const) {
      const { extra } = await grantedBeyondBaseline(env, where, ns, sa);
      expect({ sa, where, secrets: extra.filter((p) => p.startsWith('secrets')) }).toEqual({ sa, where, secrets: [] });
      expect(extra.length).toBeGreaterThan(0);
    }
    // The webhook configurations kept their url and CA through the upgrade.
    const cfg = await clusterObject(['validatingwebhookconfiguration', fullname]);
    expect(cfg.webhooks[0].clientConfig).toEqual({ url: `https://127.0.0.1:${port}/validate-kdcluster`, caBundle });

    await startServices(['--set', 'secretConnections.enabled=false']);
    expect(admission!.args).toContain('--secret-connections=false');
    expect(reconciler!.args).toContain('--secret-connections=false');

    // The reconciler (no Secret rights now) still delivers: a ConfigMap edit reaches the connected pod.
    const before = (await generator('training-cluster')) ?? 0;
    await kubectlOk(
      env,
      ['patch', 'configmap', 'model-prediction', '--type=merge', '-p', '{"data":{"path":"/models/v2"}}'],
      {
        namespace: apps,
      },
    );
    await eventually(
      'training-cluster regenerated',
      async () => ((await generator('training-cluster')) ?? 0) > before && synced('training-cluster'),
      60_000,
    );
    const cm = await podConfigMeta(env, 'training-cluster-0', apps);
    expect(cm?.doc.connections.configmaps.model[0].data.path).toBe('/models/v2');

    // The admission service (no Secret rights now) still enforces, and refuses new Secret connections.
    const denied = await env.kubectl(['apply', '-f', DENIED], { namespace: apps });
    expect(denied.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    const secretConn = await env.kubectl(['apply', '--dry-run=server', '-f', '-'], {
      namespace: apps,
      input: JSON.stringify({
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        metadata: { name: 'pg-with-secret' },
        spec: { app: 'postgres', roles: [{ id: 'primary', members: 1 }], connections: { secrets: ['scm-creds'] } },
      }),
    });
    expect(secretConn.code).not.toBe(0);
    expect(secretConn.stderr).toContain('secret connections are disabled in this installation');
    expect(admission!.output()).not.toMatch(/forbidden/i);
    expect(reconciler!.output()).not.toMatch(/forbidden/i);
  });

  it('helm uninstall leaves nothing behind but the CRDs (and the objects made with them)', async () => {
    await stopServices();
    const r = await env.helm(['uninstall', release, '--namespace', ns]);
    expect(r.code).toBe(0);
    installed = false;

    const types = async (namespaced: boolean) =>
      ok(
        await env.kubectl(['api-resources', '--verbs=list', `--namespaced=${namespaced}`, '-o', 'name'], {
          namespace: false,
        }),
        'api-resources',
      )
        .stdout.trim()
        .split('\n');
    const namespacedTypes = (await types(true)).join(',');
    // The release namespace is empty: no workload, RBAC, Lease, Service, ServiceAccount or release record.
    // Kubernetes keeps its own two objects in every namespace (the default ServiceAccount, the CA bundle).
    const leftInNamespace = async () =>
      ok(await env.kubectl(['get', namespacedTypes, '-o', 'name', '--ignore-not-found']), 'get all')
        .stdout.trim()
        .split('\n')
        .filter((l) => l && l !== 'serviceaccount/default' && l !== 'configmap/kube-root-ca.crt')
        .join('\n');
    // But the reconciler's digest key, made at run time (NOTES.txt says to delete it after an uninstall).
    expect(await leftInNamespace()).toBe('secret/kd-connections-digest-key');
    ok(await env.kubectl(['delete', 'secret', 'kd-connections-digest-key']), 'delete the digest key');
    expect(await leftInNamespace()).toBe('');
    // Nothing labelled with the release anywhere else, namespaced or cluster-scoped.
    const byLabel = `app.kubernetes.io/instance=${release}`;
    const elsewhere = ok(
      await env.kubectl(['get', namespacedTypes, '-A', '-l', byLabel, '-o', 'name'], { namespace: false }),
      'get -A',
    );
    expect(elsewhere.stdout.trim()).toBe('');
    const cluster = ok(
      await env.kubectl(['get', (await types(false)).join(','), '-l', byLabel, '-o', 'name'], { namespace: false }),
      'get cluster-scoped',
    );
    expect(cluster.stdout.trim()).toBe('');
    for (const [kind, name] of [
      ['validatingwebhookconfiguration', fullname],
      ['mutatingwebhookconfiguration', fullname],
      ['clusterrole', `${fullname}-admission`],
      ['clusterrole', `${fullname}-reconciler`],
    ] as const) {
      const got = await env.kubectl(['get', kind, name], { namespace: false });
      expect({ kind, name, stderr: got.stderr }).toEqual({ kind, name, stderr: expect.stringContaining('NotFound') });
    }

    // The CRDs stay, and so do the kdclusters and kdapps made with them.
    await clusterObject(['crd', 'kubedirectorclusters.kubedirector.hpe.com']);
    await clusterObject(['crd', 'kubedirectorapps.kubedirector.hpe.com']);
    expect((await getJson(env, ['kdcluster'], apps)).items).toHaveLength(5);
    // With the configurations gone nothing calls the webhook: the denied manifest now passes a dry run.
    const dry = await env.kubectl(['apply', '--dry-run=server', '-f', DENIED], { namespace: apps });
    expect(dry.code).toBe(0);
  });
});
