/**
 * The chart as rendered (no install): `helm lint --strict` and `helm template` for every certificate mode
 * and for url mode, what each mode must and must not contain, and values.schema.json (plus the chart's
 * cross-value checks) rejecting bad values with a message that names the value.
 */
import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useTestEnv } from '../support/cluster.js';
import { WEBHOOK_NAMES } from '../support/webhook-configurations.js';
import {
  CHART,
  containerArgs,
  expectServerDryRunClean,
  find,
  helmTemplate,
  one,
  sets,
  type Doc,
} from './chart-support.js';

const env = useTestEnv();
const NS = 'kd-system';
const REL = 'kd';
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';
const CA_B64 = Buffer.from(CA_PEM).toString('base64');

/** Each install shape the chart supports, as --set arguments. */
const MODES: Record<string, string[]> = {
  bootstrap: [],
  certManager: sets({ 'certificates.mode': 'certManager' }),
  certManagerIssuer: [
    ...sets({ 'certificates.mode': 'certManager' }),
    ...sets({ 'certificates.certManager.issuerRef.kind': 'ClusterIssuer' }),
    ...sets({ 'certificates.certManager.issuerRef.name': 'corp-ca' }),
  ],
  secret: sets({ 'certificates.mode': 'secret', 'certificates.secret.name': 'my-tls', 'webhook.caBundle': CA_B64 }),
  url: sets({ 'webhook.url': 'https://127.0.0.1:9443', 'webhook.caBundle': CA_B64 }),
  urlNoCaBundle: sets({ 'webhook.url': 'https://webhooks.example.com/kd/' }),
  clientAuth: [
    ...sets({ 'admission.clientAuth.enabled': true }),
    '--set-string',
    `admission.clientAuth.caBundle=${CA_PEM}`,
  ],
};

/** For a dry-run install on the shared control plane, whose CRDs belong to the harness (helm refuses them). */
const NO_CRDS = sets({ 'crds.install': false });
const render = (mode: string, extra: string[] = []) => helmTemplate(env, REL, NS, [...MODES[mode]!, ...extra]);
const webhooksOf = (docs: Doc[]) => [
  ...one(docs, 'ValidatingWebhookConfiguration').webhooks,
  ...one(docs, 'MutatingWebhookConfiguration').webhooks,
];
const allRules = (docs: Doc[]) =>
  docs.filter((d) => d.kind === 'ClusterRole' || d.kind === 'Role').flatMap((d) => d.rules as Doc[]);

describe('helm lint and helm template', () => {
  it.each(Object.keys(MODES))('%s mode passes helm lint --strict and renders', async (mode) => {
    const lint = await env.helm(['lint', '--strict', CHART, '--namespace', NS, ...MODES[mode]!]);
    expect({ code: lint.code, out: lint.stdout + lint.stderr }).toEqual({
      code: 0,
      out: expect.stringContaining('0 chart(s) failed'),
    });
    const { docs } = await render(mode);
    expect(docs.length).toBeGreaterThan(10);
    // Every object is labelled with the release (what `helm uninstall` and the tests find them by).
    for (const d of docs) expect(d.metadata.labels['app.kubernetes.io/instance']).toBe(REL);
  });

  it.each(['bootstrap', 'secret', 'url', 'clientAuth'])(
    '%s mode: every object is valid for the real API server (server-side dry run, strict field validation)',
    async (mode) => {
      // Nothing is persisted by a dry run, so the service-mode webhook configurations are never registered.
      // cert-manager and Prometheus Operator kinds are not installed on the test control plane.
      const { docs } = await helmTemplate(env, REL, env.namespace, MODES[mode]!);
      await expectServerDryRunClean(env, docs);
    },
  );

  it('renders the same bytes twice (no genCA, lookup or random values)', async () => {
    for (const mode of Object.keys(MODES)) {
      const [a, b] = [await render(mode), await render(mode)];
      expect(a.text).toBe(b.text);
    }
    const templates = readdirSync(join(CHART, 'templates'), { recursive: true, withFileTypes: true })
      .filter((f) => f.isFile())
      .map((f) => readFileSync(join(f.parentPath, f.name), 'utf8'))
      .join('\n');
    for (const forbidden of ['genCA', 'genSelfSignedCert', 'genSignedCert', 'lookup', 'randAlpha', 'uuidv4', 'now'])
      expect(templates).not.toMatch(new RegExp(`\\b${forbidden}\\b`));
  });

  it('bootstrap mode: no caBundle and no path (both set at run time), flags that name the Secret, Service and both configurations', async () => {
    const { docs } = await render('bootstrap');
    const fullname = `${REL}-kd-connections`;
    for (const w of webhooksOf(docs)) {
      expect(w.clientConfig.caBundle).toBeUndefined();
      expect(w.clientConfig.url).toBeUndefined();
      // The service publishes /t/<token>/<webhook> as the path (certificates.bootstrap.webhookPathToken).
      expect(w.clientConfig.service).toEqual({ name: `${fullname}-admission`, namespace: NS, port: 443 });
    }
    const args = containerArgs(one(docs, 'Deployment', `${fullname}-admission`));
    expect(args).toEqual(
      expect.arrayContaining([
        '--tls-mode=bootstrap',
        `--tls-secret-name=${fullname}-admission-tls`,
        `--tls-secret-namespace=${NS}`,
        `--service-name=${fullname}-admission`,
        `--service-namespace=${NS}`,
        `--webhook-configurations=validating/${fullname},mutating/${fullname}`,
        '--webhook-path-token=true',
      ]),
    );
    // Without the token the chart renders the bare paths, and the service serves them.
    const bare = (await render('bootstrap', sets({ 'certificates.bootstrap.webhookPathToken': false }))).docs;
    for (const w of webhooksOf(bare)) expect(w.clientConfig.service.path).toBe(`/${w.name.split('.')[0]}`);
    expect(containerArgs(one(bare, 'Deployment', `${fullname}-admission`)).join(' ')).not.toContain('path-token');
    // `helm upgrade --reuse-values` from a chart without the value renders it unset: the token stays on.
    const reused = (await render('bootstrap', ['--set', 'certificates.bootstrap.webhookPathToken=null'])).docs;
    for (const w of webhooksOf(reused)) expect(w.clientConfig.service.path).toBeUndefined();
    expect(containerArgs(one(reused, 'Deployment', `${fullname}-admission`))).toContain('--webhook-path-token=true');
    // Other modes publish nothing at run time: the chart renders the paths.
    const certManager = (await render('certManager')).docs;
    for (const w of webhooksOf(certManager)) expect(w.clientConfig.service.path).toBe(`/${w.name.split('.')[0]}`);
    expect(containerArgs(one(certManager, 'Deployment', `${fullname}-admission`)).join(' ')).not.toContain(
      'path-token',
    );
    // The names in those flags are the objects the chart renders.
    one(docs, 'Service', `${fullname}-admission`);
    one(docs, 'ValidatingWebhookConfiguration', fullname);
    one(docs, 'MutatingWebhookConfiguration', fullname);
    // The service may touch exactly that Secret and those two configurations (create is not nameable).
    const role = one(docs, 'Role', `${fullname}-admission-certificates`);
    expect(role.rules).toEqual([
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [`${fullname}-admission-tls`],
        verbs: ['get', 'list', 'watch', 'patch'],
      },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] },
    ]);
    expect(one(docs, 'ClusterRole', `${fullname}-admission-cabundle`).rules).toEqual([
      {
        apiGroups: ['admissionregistration.k8s.io'],
        resources: ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations'],
        resourceNames: [fullname],
        verbs: ['get', 'list', 'watch', 'patch'],
      },
    ]);
    // No Secret volume: the service reads and writes the Secret through the API.
    const pod = one(docs, 'Deployment', `${fullname}-admission`).spec.template.spec;
    expect(pod.volumes.map((v: Doc) => v.name)).toEqual(['tmp']);
    expect(find(docs, 'Certificate')).toHaveLength(0);
  });

  it('certManager mode: Issuer chain, Certificate with the Service names, inject-ca-from on both configurations', async () => {
    const { docs } = await render('certManager');
    const fullname = `${REL}-kd-connections`;
    const cert = one(docs, 'Certificate', `${fullname}-admission`);
    expect(cert.spec.secretName).toBe(`${fullname}-admission-tls`);
    expect(cert.spec.dnsNames).toEqual([
      `${fullname}-admission`,
      `${fullname}-admission.${NS}`,
      `${fullname}-admission.${NS}.svc`,
      `${fullname}-admission.${NS}.svc.cluster.local`,
    ]);
    expect(cert.spec.issuerRef).toEqual({ kind: 'Issuer', name: `${fullname}-ca` });
    expect(one(docs, 'Certificate', `${fullname}-ca`).spec.isCA).toBe(true);
    expect(find(docs, 'Issuer').map((i) => i.metadata.name)).toEqual(
      expect.arrayContaining([`${fullname}-selfsigned`, `${fullname}-ca`]),
    );
    for (const kind of ['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration'])
      expect(one(docs, kind).metadata.annotations['cert-manager.io/inject-ca-from']).toBe(
        `${NS}/${fullname}-admission`,
      );
    for (const w of webhooksOf(docs)) expect(w.clientConfig.caBundle).toBeUndefined();
    const dep = one(docs, 'Deployment', `${fullname}-admission`);
    expect(containerArgs(dep)).not.toContain('--tls-mode=bootstrap');
    expect(dep.spec.template.spec.volumes).toContainEqual(
      expect.objectContaining({
        name: 'tls',
        secret: expect.objectContaining({ secretName: `${fullname}-admission-tls` }),
      }),
    );
    // No bootstrap rights: nothing may write Secrets or webhook configurations.
    expect(find(docs, 'Role', `${fullname}-admission-certificates`)).toHaveLength(0);
    expect(find(docs, 'ClusterRole', `${fullname}-admission-cabundle`)).toHaveLength(0);

    const issuer = await render('certManagerIssuer');
    expect(one(issuer.docs, 'Certificate').spec.issuerRef).toEqual({ kind: 'ClusterIssuer', name: 'corp-ca' });
    expect(find(issuer.docs, 'Issuer')).toHaveLength(0);
  });

  it('secret mode: the user Secret is mounted and the user caBundle is in every webhook', async () => {
    const { docs } = await render('secret');
    const dep = one(docs, 'Deployment', `${REL}-kd-connections-admission`);
    expect(dep.spec.template.spec.volumes).toContainEqual(
      expect.objectContaining({ name: 'tls', secret: expect.objectContaining({ secretName: 'my-tls' }) }),
    );
    for (const w of webhooksOf(docs)) expect(w.clientConfig.caBundle).toBe(CA_B64);
    // A PEM given as is ends up base64-encoded, the way the API wants it.
    const pem = await helmTemplate(env, REL, NS, [
      ...sets({ 'certificates.mode': 'secret', 'certificates.secret.name': 'my-tls' }),
      '--set-string',
      `webhook.caBundle=${CA_PEM}`,
    ]);
    for (const w of webhooksOf(pem.docs)) expect(w.clientConfig.caBundle).toBe(CA_B64);
  });

  it('url mode: clientConfig.url under the base URL, no admission workload, the account and its read RBAC kept', async () => {
    const { docs } = await render('url');
    const fullname = `${REL}-kd-connections`;
    expect(find(docs, 'Deployment').map((d) => d.metadata.name)).toEqual([`${fullname}-reconciler`]);
    expect(find(docs, 'Service').map((d) => d.metadata.name)).toEqual([`${fullname}-reconciler-metrics`]);
    expect(find(docs, 'PodDisruptionBudget').map((d) => d.metadata.name)).toEqual([`${fullname}-reconciler`]);
    expect(find(docs, 'Certificate')).toHaveLength(0);
    one(docs, 'ServiceAccount', `${fullname}-admission`);
    one(docs, 'ClusterRole', `${fullname}-admission`);
    for (const w of webhooksOf(docs)) {
      expect(w.clientConfig).toEqual({ url: `https://127.0.0.1:9443/${w.name.split('.')[0]}`, caBundle: CA_B64 });
    }
    // A trailing slash in the base URL does not double; no caBundle means none is rendered.
    const noCa = await render('urlNoCaBundle');
    for (const w of webhooksOf(noCa.docs))
      expect(w.clientConfig).toEqual({ url: `https://webhooks.example.com/kd/${w.name.split('.')[0]}` });
  });

  it('webhook configurations: rules, policies, selectors and paths as the admission service serves them', async () => {
    // certManager: the mode whose paths the chart renders (bootstrap's are published at run time).
    const { docs } = await render('certManager');
    const served = readFileSync(join(CHART, '..', '..', 'admission', 'src', 'webhooks', 'index.ts'), 'utf8');
    expect(served).toMatch(/validateKdCluster, mutateKdCluster, validateKdApp, mutatePod/);
    const byName: Record<string, Doc> = Object.fromEntries(webhooksOf(docs).map((w: Doc) => [w.name, w]));
    expect(Object.keys(byName).sort()).toEqual(Object.values(WEBHOOK_NAMES).sort());
    for (const [name, w] of Object.entries(byName)) {
      // The path is the one admission/src/webhooks/<file>.ts serves.
      const path = w.clientConfig.service.path as string;
      const file = readFileSync(join(CHART, '..', '..', 'admission', 'src', 'webhooks', `${path.slice(1)}.ts`), 'utf8');
      expect(file).toContain(`path: '${path}'`);
      expect(w).toMatchObject({
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        matchPolicy: 'Equivalent',
        timeoutSeconds: 3,
        // validate-kdapp also takes in the system namespace (here the release namespace).
        namespaceSelector: {
          matchExpressions: [
            {
              key: 'kubernetes.io/metadata.name',
              operator: 'NotIn',
              values: name.startsWith('validate-kdapp') ? ['kube-system'] : ['kube-system', NS],
            },
          ],
        },
      });
      expect(w.failurePolicy).toBe(name.startsWith('validate-') ? 'Fail' : 'Ignore');
      for (const rule of w.rules) expect(rule.operations).not.toContain('DELETE');
    }
    expect(byName[WEBHOOK_NAMES.validateCluster]!.rules).toEqual([
      {
        apiGroups: ['kubedirector.hpe.com'],
        apiVersions: ['v1beta1'],
        operations: ['CREATE', 'UPDATE'],
        resources: ['kubedirectorclusters'],
        scope: 'Namespaced',
      },
    ]);
    expect(byName[WEBHOOK_NAMES.validateApp]!.rules[0].resources).toEqual(['kubedirectorapps']);
    expect(byName[WEBHOOK_NAMES.mutateCluster]!.rules[0].resources).toEqual(['kubedirectorclusters']);
    const pod = byName[WEBHOOK_NAMES.mutatePod]!;
    expect(pod.rules).toEqual([
      { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' },
    ]);
    expect(pod.objectSelector).toEqual({
      matchExpressions: [{ key: 'kubedirector.hpe.com/kdcluster', operator: 'Exists' }],
    });

    // watchNamespaces narrows every webhook to those namespaces; excludeNamespaces adds to the NotIn list.
    const scoped = await helmTemplate(env, REL, NS, [
      '--set',
      'watchNamespaces={team-a,team-b}',
      '--set',
      'webhook.excludeNamespaces={legacy}',
    ]);
    for (const w of webhooksOf(scoped.docs)) {
      const kdapps = w.name.startsWith('validate-kdapp');
      expect(w.namespaceSelector.matchExpressions).toEqual([
        {
          key: 'kubernetes.io/metadata.name',
          operator: 'NotIn',
          values: kdapps ? ['kube-system', 'legacy'] : ['kube-system', NS, 'legacy'],
        },
        {
          key: 'kubernetes.io/metadata.name',
          operator: 'In',
          values: kdapps ? ['team-a', 'team-b', NS] : ['team-a', 'team-b'],
        },
      ]);
    }
  });

  it('Argo CD sync waves: RBAC and certificates first, then workloads and Services, then the webhooks', async () => {
    const { docs } = await render('certManager', [
      ...sets({ 'networkPolicy.enabled': true, 'serviceMonitor.enabled': true }),
    ]);
    const wave = (d: Doc) => Number(d.metadata.annotations?.['argocd.argoproj.io/sync-wave']);
    const expected: Record<string, number> = {
      // The CRDs before everything (kdapps and kdclusters of other Applications may sync with the chart).
      CustomResourceDefinition: -2,
      ServiceAccount: -1,
      ClusterRole: -1,
      ClusterRoleBinding: -1,
      Role: -1,
      RoleBinding: -1,
      Lease: -1,
      Issuer: -1,
      Certificate: -1,
      Deployment: 0,
      Service: 0,
      PodDisruptionBudget: 0,
      NetworkPolicy: 0,
      ServiceMonitor: 0,
      ValidatingWebhookConfiguration: 1,
      MutatingWebhookConfiguration: 1,
      ValidatingAdmissionPolicy: -1,
      ValidatingAdmissionPolicyBinding: -1,
    };
    expect([...new Set(docs.map((d) => d.kind))].sort()).toEqual(Object.keys(expected).sort());
    for (const d of docs)
      expect([d.kind, d.metadata.name, wave(d)]).toEqual([d.kind, d.metadata.name, expected[d.kind]]);
  });

  it("Deployments: replicas, rollout, PDB, anti-affinity, the images' architectures, preStop, probes and the restricted security context", async () => {
    const { docs } = await render('bootstrap');
    const fullname = `${REL}-kd-connections`;
    for (const component of ['admission', 'reconciler']) {
      const dep = one(docs, 'Deployment', `${fullname}-${component}`);
      const pod = dep.spec.template.spec;
      const c = pod.containers[0];
      expect(dep.spec.replicas).toBe(2);
      expect(dep.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
      expect(one(docs, 'PodDisruptionBudget', `${fullname}-${component}`).spec).toEqual({
        minAvailable: 1,
        selector: dep.spec.selector,
      });
      expect(pod.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm).toEqual({
        topologyKey: 'kubernetes.io/hostname',
        labelSelector: dep.spec.selector,
      });
      // The architectures the images are built for (npm run images), and no other.
      expect(pod.affinity.nodeAffinity).toEqual({
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64'] }] },
          ],
        },
      });
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      expect(c.securityContext).toMatchObject({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        privileged: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(c.resources.limits.memory).toBeDefined();
      expect(c.resources.limits.cpu).toBeUndefined();
      expect(pod.automountServiceAccountToken).toBe(true);
      expect(one(docs, 'ServiceAccount', `${fullname}-${component}`).automountServiceAccountToken).toBe(false);
    }
    const adm = one(docs, 'Deployment', `${fullname}-admission`).spec.template.spec.containers[0];
    expect(adm.lifecycle.preStop).toEqual({ sleep: { seconds: 10 } });
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'])
      expect(adm[probe].httpGet).toMatchObject({ scheme: 'HTTPS', port: 'https' });
    expect(adm.readinessProbe.httpGet.path).toBe('/readyz');
    expect(adm.livenessProbe.httpGet.path).toBe('/healthz');
    const rec = one(docs, 'Deployment', `${fullname}-reconciler`).spec.template.spec.containers[0];
    expect(rec.args).toEqual(
      expect.arrayContaining([
        '--leader-elect=true',
        `--leader-elect-resource-name=${fullname}-reconciler`,
        `--leader-elect-resource-namespace=${NS}`,
        '--leader-elect-lease-duration=15s',
        '--leader-elect-renew-deadline=10s',
        '--leader-elect-retry-period=2s',
        `--system-namespace=${NS}`,
      ]),
    );
    expect(rec.readinessProbe.httpGet).toMatchObject({ path: '/readyz', port: 'metrics' });
    // The Lease the reconciler elects through is the chart's own (so uninstall removes it), with no spec.
    expect(one(docs, 'Lease', `${fullname}-reconciler`).spec).toBeUndefined();
  });

  it('RBAC: no wildcards, no escalate/bind/impersonate, Secrets only with secretConnections.enabled', async () => {
    const forbiddenVerbs = ['*', 'escalate', 'bind', 'impersonate', 'update', 'deletecollection'];
    for (const mode of Object.keys(MODES)) {
      for (const enabled of [true, false]) {
        const { docs } = await render(mode, sets({ 'secretConnections.enabled': enabled }));
        const serviceRoles = docs.filter(
          (d) => (d.kind === 'ClusterRole' || d.kind === 'Role') && !/-(edit|view)$/.test(d.metadata.name),
        );
        for (const rule of serviceRoles.flatMap((d) => d.rules as Doc[])) {
          for (const field of ['apiGroups', 'resources', 'verbs'])
            expect({ rule, star: (rule[field] as string[]).includes('*') }).toEqual({ rule, star: false });
          for (const v of forbiddenVerbs)
            expect({ rule, verb: (rule.verbs as string[]).includes(v) }).toEqual({ rule, verb: false });
          // The one delete: the reconciler's private configmeta Secrets, only with Secret connections.
          if ((rule.verbs as string[]).includes('delete'))
            expect({ enabled, rule: { resources: rule.resources, verbs: rule.verbs } }).toEqual({
              enabled: true,
              rule: { resources: ['secrets'], verbs: ['create', 'patch', 'delete'] },
            });
        }
        const secretRules = allRules(docs).filter(
          (r) => (r.resources as string[]).includes('secrets') && !r.resourceNames && !r.verbs.includes('create'),
        );
        expect({ mode, enabled, secretReaders: secretRules.length }).toEqual({
          mode,
          enabled,
          secretReaders: enabled ? 2 : 0,
        });
      }
    }
  });

  it('watchNamespaces: the reconciler is bound per namespace, plus kdapps in the system namespace', async () => {
    const { docs } = await helmTemplate(env, REL, NS, [
      '--set',
      'watchNamespaces={team-a,team-b}',
      '--set',
      'systemNamespace=kd-catalog',
    ]);
    const fullname = `${REL}-kd-connections`;
    expect(find(docs, 'ClusterRoleBinding', `${fullname}-reconciler`)).toHaveLength(0);
    expect(find(docs, 'ClusterRole', `${fullname}-reconciler`)).toHaveLength(0);
    expect(
      find(docs, 'RoleBinding')
        .filter((b) => b.roleRef.name === `${fullname}-reconciler`)
        .map((b) => [b.metadata.namespace, b.roleRef.kind]),
    ).toEqual([
      ['team-a', 'Role'],
      ['team-b', 'Role'],
    ]);
    expect(find(docs, 'Role', `${fullname}-reconciler`).map((r) => r.metadata.namespace)).toEqual(['team-a', 'team-b']);
    expect(one(docs, 'Role', `${fullname}-reconciler-system-catalog`)).toMatchObject({
      metadata: { namespace: 'kd-catalog' },
      rules: [
        { apiGroups: ['kubedirector.hpe.com'], resources: ['kubedirectorapps'], verbs: ['get', 'list', 'watch'] },
      ],
    });
    expect(containerArgs(one(docs, 'Deployment', `${fullname}-reconciler`))).toEqual(
      expect.arrayContaining(['--watch-namespaces=team-a,team-b', '--system-namespace=kd-catalog']),
    );
    expect(containerArgs(one(docs, 'Deployment', `${fullname}-admission`))).toContain('--system-namespace=kd-catalog');
  });

  it("the admission service is told the namespaces the webhooks' namespaceSelector selects", async () => {
    const fullname = `${REL}-kd-connections`;
    const admissionArgs = async (sets: string[]) =>
      containerArgs(one((await helmTemplate(env, REL, NS, sets)).docs, 'Deployment', `${fullname}-admission`));
    const selector = async (sets: string[]) =>
      webhooksOf((await helmTemplate(env, REL, NS, sets)).docs).map((w) => ({
        name: w.name as string,
        ...w.namespaceSelector,
      }));
    const narrowed = ['--set', 'watchNamespaces={team-a,team-b}', '--set', 'webhook.excludeNamespaces={legacy}'];
    expect(await admissionArgs(narrowed)).toEqual(
      expect.arrayContaining(['--watch-namespaces=team-a,team-b', `--excluded-namespaces=kube-system,${NS},legacy`]),
    );
    for (const s of await selector(narrowed)) {
      // validate-kdapp also selects the system catalog (here the release namespace); the service keeps
      // serving kdapp reviews there (its --system-namespace).
      const systemCatalog = s.name.startsWith('validate-kdapp');
      expect(s.matchExpressions).toEqual([
        {
          key: 'kubernetes.io/metadata.name',
          operator: 'NotIn',
          values: systemCatalog ? ['kube-system', 'legacy'] : ['kube-system', NS, 'legacy'],
        },
        {
          key: 'kubernetes.io/metadata.name',
          operator: 'In',
          values: systemCatalog ? ['team-a', 'team-b', NS] : ['team-a', 'team-b'],
        },
      ]);
    }
    const all = await admissionArgs([]);
    expect(all).toContain(`--excluded-namespaces=kube-system,${NS}`);
    expect(all.some((a) => a.startsWith('--watch-namespaces'))).toBe(false);
    // A custom selector cannot be mirrored as lists: every namespace is served.
    const custom = await admissionArgs(['--set', 'webhook.namespaceSelector.matchLabels.kd=on']);
    expect(custom).toContain('--excluded-namespaces=');
    expect(custom.some((a) => a.startsWith('--watch-namespaces'))).toBe(false);
    // url mode runs no Deployment: NOTES.txt gives the same flags for the service started by hand.
    const r = await env.helm([
      'install',
      REL,
      CHART,
      '--namespace',
      NS,
      '--dry-run=client',
      ...NO_CRDS,
      ...MODES.url!,
      ...narrowed,
    ]);
    expect(r.stdout.slice(r.stdout.indexOf('NOTES:'))).toContain(
      `--watch-namespaces=team-a,team-b --excluded-namespaces=kube-system,${NS},legacy`,
    );
  });

  it('webhook.podWebhook.secretDelivery reaches the admission service (default document)', async () => {
    const fullname = `${REL}-kd-connections`;
    const def = await render('bootstrap');
    expect(containerArgs(one(def.docs, 'Deployment', `${fullname}-admission`))).toContain('--secret-delivery=document');
    const strict = await render('bootstrap', sets({ 'webhook.podWebhook.secretDelivery': 'private-file' }));
    expect(containerArgs(one(strict.docs, 'Deployment', `${fullname}-admission`))).toContain(
      '--secret-delivery=private-file',
    );
  });

  it('secretConnections reaches both services; NetworkPolicy and ServiceMonitor render when enabled', async () => {
    const off = await render('bootstrap', sets({ 'secretConnections.enabled': false }));
    const fullname = `${REL}-kd-connections`;
    expect(containerArgs(one(off.docs, 'Deployment', `${fullname}-admission`))).toContain('--secret-connections=false');
    expect(containerArgs(one(off.docs, 'Deployment', `${fullname}-reconciler`))).toContain(
      '--secret-connections=false',
    );
    // Secret values never go into configmeta: the inlining mode is gone, flag and value alike.
    const on = await render('bootstrap', []);
    expect(containerArgs(one(on.docs, 'Deployment', `${fullname}-reconciler`)).join(' ')).not.toContain('inline');
    const r = await env.helm([
      'template',
      REL,
      CHART,
      '--namespace',
      NS,
      ...sets({ 'secretConnections.inlineValues': true }),
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/inlineValues/);

    const extras = await render(
      'bootstrap',
      sets({
        'networkPolicy.enabled': true,
        'serviceMonitor.enabled': true,
        'networkPolicy.apiServerCIDRs[0]': '10.0.0.1/32',
      }),
    );
    const np = one(extras.docs, 'NetworkPolicy', `${fullname}-admission`).spec;
    expect(np.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 9443 }] }]);
    expect(np.egress[0].to).toEqual([{ ipBlock: { cidr: '10.0.0.1/32' } }]);
    expect(one(extras.docs, 'ServiceMonitor', `${fullname}-admission`).spec.endpoints[0]).toMatchObject({
      port: 'https',
      scheme: 'https',
      tlsConfig: { serverName: `${fullname}-admission.${NS}.svc` },
    });
    one(extras.docs, 'ServiceMonitor', `${fullname}-reconciler`);
    // url mode: no admission pods, so no admission NetworkPolicy or ServiceMonitor either.
    const url = await render('url', sets({ 'networkPolicy.enabled': true, 'serviceMonitor.enabled': true }));
    expect(find(url.docs, 'NetworkPolicy').map((d) => d.metadata.name)).toEqual([`${fullname}-reconciler`]);
    expect(find(url.docs, 'ServiceMonitor').map((d) => d.metadata.name)).toEqual([`${fullname}-reconciler`]);
  });

  it('NOTES.txt says where Secret values go and how to reach an out-of-cluster webhook', async () => {
    // helm template does not render NOTES.txt; a dry-run install does (nothing is sent to the cluster).
    const notes = async (args: string[]) => {
      // Even a client dry run checks ownership of existing objects: the shared control plane's CRDs are the harness's.
      const r = await env.helm(['install', REL, CHART, '--namespace', NS, '--dry-run=client', ...NO_CRDS, ...args]);
      expect(r.code).toBe(0);
      return r.stdout.slice(r.stdout.indexOf('NOTES:'));
    };
    expect(await notes([])).toMatch(/the values reach only root in the member pods, never configmeta/);
    const url = await notes(MODES.url!);
    expect(url).toContain('OUT-OF-CLUSTER (url mode) at https://127.0.0.1:9443');
    expect(url).toContain(`kubectl -n ${NS} create token ${REL}-kd-connections-admission`);
    expect(await notes([])).toContain(`delete secret ${REL}-kd-connections-admission-tls`);
  });
});

describe('hardening: outage-proof validation, the system catalog, narrow RBAC, client certificates', () => {
  const fullname = `${REL}-kd-connections`;
  const selectorOf = (docs: Doc[], name: string) =>
    webhooksOf(docs).find((w: Doc) => w.name === name)!.namespaceSelector.matchExpressions;
  const NOT_DELETED = { name: 'not-being-deleted', expression: '!has(object.metadata.deletionTimestamp)' };
  const SPEC_CHANGED = {
    name: 'spec-changed',
    expression:
      "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec",
  };

  it('validating webhooks skip deletes in progress and spec-unchanged updates; mutating ones are unchanged', async () => {
    for (const mode of Object.keys(MODES)) {
      const { docs } = await render(mode);
      for (const w of one(docs, 'ValidatingWebhookConfiguration').webhooks)
        expect({ mode, name: w.name, matchConditions: w.matchConditions }).toEqual({
          mode,
          name: w.name,
          matchConditions: [NOT_DELETED, SPEC_CHANGED],
        });
      for (const w of one(docs, 'MutatingWebhookConfiguration').webhooks) expect(w.matchConditions).toBeUndefined();
    }
  });

  it('validate-kdapp also selects the system namespace (the release namespace by default); the others do not', async () => {
    const { docs } = await render('bootstrap');
    expect(selectorOf(docs, 'validate-kdapp.kd-connections.hpe.com')).toEqual([
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] },
    ]);
    expect(selectorOf(docs, 'validate-kdcluster.kd-connections.hpe.com')).toEqual([
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', NS] },
    ]);
    const scoped = await helmTemplate(env, REL, NS, [
      ...['--set', 'watchNamespaces={team-a}', '--set', 'systemNamespace=kd-catalog'],
      ...['--set', 'webhook.excludeNamespaces={kd-catalog,legacy}'],
    ]);
    expect(selectorOf(scoped.docs, 'validate-kdapp.kd-connections.hpe.com')).toEqual([
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', NS, 'legacy'] },
      { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a', 'kd-catalog'] },
    ]);
    expect(selectorOf(scoped.docs, 'mutate-kdcluster.kd-connections.hpe.com')).toEqual([
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', NS, 'kd-catalog', 'legacy'] },
      { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a'] },
    ]);
  });

  it('watchNamespaces: admission is bound per namespace too, reads kdapps in the system namespace, watches only those', async () => {
    const { docs } = await helmTemplate(env, REL, NS, [
      ...['--set', 'watchNamespaces={team-a,team-b}', '--set', 'systemNamespace=kd-catalog'],
    ]);
    expect(find(docs, 'ClusterRoleBinding', `${fullname}-admission`)).toHaveLength(0);
    expect(find(docs, 'ClusterRole', `${fullname}-admission`)).toHaveLength(0);
    expect(
      find(docs, 'RoleBinding')
        .filter((b) => b.roleRef.name === `${fullname}-admission`)
        .map((b) => [b.metadata.namespace, b.roleRef.kind]),
    ).toEqual([
      ['team-a', 'Role'],
      ['team-b', 'Role'],
    ]);
    expect(one(docs, 'Role', `${fullname}-admission-system-catalog`)).toMatchObject({
      metadata: { namespace: 'kd-catalog' },
      rules: [
        { apiGroups: ['kubedirector.hpe.com'], resources: ['kubedirectorapps'], verbs: ['get', 'list', 'watch'] },
      ],
    });
    expect(containerArgs(one(docs, 'Deployment', `${fullname}-admission`))).toEqual(
      expect.arrayContaining(['--watch-namespaces=team-a,team-b', '--system-namespace=kd-catalog']),
    );
    // Namespaces the webhooks never serve get no admission Role and are not watched: the release namespace
    // (where the reconciler keeps its MAC key), kube-system and webhook.excludeNamespaces.
    const listed = await helmTemplate(env, REL, NS, [
      ...['--set', `watchNamespaces={team-a,legacy,${NS},kube-system}`, '--set', 'webhook.excludeNamespaces={legacy}'],
    ]);
    expect(find(listed.docs, 'Role', `${fullname}-admission`).map((r) => r.metadata.namespace)).toEqual(['team-a']);
    expect(find(listed.docs, 'Role', `${fullname}-reconciler`).map((r) => r.metadata.namespace)).toEqual([
      'team-a',
      'legacy',
      NS,
      'kube-system',
    ]);
    expect(containerArgs(one(listed.docs, 'Deployment', `${fullname}-admission`))).toContain(
      '--watch-namespaces=team-a',
    );
    // A list the webhooks serve none of is refused.
    const none = await env.helm(['template', REL, CHART, '--namespace', NS, '--set', `watchNamespaces={${NS}}`]);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain(`watchNamespaces ["${NS}"]: the webhooks serve none of these`);
    // Without watchNamespaces: one ClusterRoleBinding, no --watch-namespaces.
    const all = await render('bootstrap');
    one(all.docs, 'ClusterRoleBinding', `${fullname}-admission`);
    expect(containerArgs(one(all.docs, 'Deployment', `${fullname}-admission`)).join(' ')).not.toContain(
      '--watch-namespaces',
    );
  });

  it("a ValidatingAdmissionPolicy confines the reconciler's account to configmeta annotations of member pods", async () => {
    for (const mode of Object.keys(MODES)) {
      const { docs } = await render(mode);
      const policy = one(docs, 'ValidatingAdmissionPolicy', `${fullname}-reconciler-pod-writes`);
      expect(policy.spec.failurePolicy).toBe('Fail');
      expect(policy.spec.matchConditions).toEqual([
        {
          name: 'reconciler',
          expression: `request.userInfo.username == 'system:serviceaccount:${NS}:${fullname}-reconciler'`,
        },
      ]);
      expect(policy.spec.matchConstraints.resourceRules[0].resources).toEqual(['pods', 'pods/*']);
      expect(one(docs, 'ValidatingAdmissionPolicyBinding', `${fullname}-reconciler-pod-writes`).spec).toEqual({
        policyName: `${fullname}-reconciler-pod-writes`,
        validationActions: ['Deny'],
      });
    }
    const own = await render('bootstrap', [
      ...sets({ 'reconciler.serviceAccount.create': false, 'reconciler.serviceAccount.name': 'my-reconciler' }),
    ]);
    for (const policy of ['pod-writes', 'secret-writes'])
      expect(
        one(own.docs, 'ValidatingAdmissionPolicy', `${fullname}-reconciler-${policy}`).spec.matchConditions[0]
          .expression,
      ).toBe(`request.userInfo.username == 'system:serviceaccount:${NS}:my-reconciler'`);
    // The Secret-writes policy exists only where the reconciler may write Secrets.
    const secretsOff = await render('bootstrap', sets({ 'secretConnections.enabled': false }));
    expect(find(secretsOff.docs, 'ValidatingAdmissionPolicy').map((d) => d.metadata.name)).toEqual([
      `${fullname}-reconciler-pod-writes`,
    ]);
    // One switch per policy.
    const names = (docs: Doc[], kind: string) => find(docs, kind).map((d) => d.metadata.name);
    const podOff = await render('bootstrap', sets({ 'reconciler.podWritePolicy.enabled': false }));
    const secretOff = await render('bootstrap', sets({ 'reconciler.secretWritePolicy.enabled': false }));
    for (const kind of ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']) {
      expect(names(podOff.docs, kind)).toEqual([`${fullname}-reconciler-secret-writes`]);
      expect(names(secretOff.docs, kind)).toEqual([`${fullname}-reconciler-pod-writes`]);
    }
    const bothOff = await render(
      'bootstrap',
      sets({ 'reconciler.podWritePolicy.enabled': false, 'reconciler.secretWritePolicy.enabled': false }),
    );
    expect(find(bothOff.docs, 'ValidatingAdmissionPolicy')).toHaveLength(0);
    expect(find(bothOff.docs, 'ValidatingAdmissionPolicyBinding')).toHaveLength(0);
  });

  it('admission.clientAuth: client CA mounted, allowed names, plain probes port for probes, metrics and the NetworkPolicy', async () => {
    const { docs } = await render('bootstrap', [
      ...sets({ 'admission.clientAuth.enabled': true, 'networkPolicy.enabled': true, 'serviceMonitor.enabled': true }),
      ...['--set-string', `admission.clientAuth.caBundle=${CA_PEM}`],
      ...['--set', 'admission.clientAuth.allowedNames={kube-apiserver}'],
      ...['--set', 'networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.10/32'],
      ...['--set', 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=obs'],
    ]);
    const dep = one(docs, 'Deployment', `${fullname}-admission`);
    const pod = dep.spec.template.spec;
    const c = pod.containers[0];
    expect(c.args).toEqual(
      expect.arrayContaining([
        '--client-ca-file=/etc/kd-connections/client-ca/ca.crt',
        '--client-allowed-names=kube-apiserver',
        '--probe-port=8081',
      ]),
    );
    expect(c.ports).toEqual([
      { name: 'https', containerPort: 9443, protocol: 'TCP' },
      { name: 'probes', containerPort: 8081, protocol: 'TCP' },
    ]);
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'])
      expect(c[probe].httpGet).toMatchObject({ scheme: 'HTTP', port: 'probes' });
    expect(c.volumeMounts).toContainEqual({
      name: 'client-ca',
      mountPath: '/etc/kd-connections/client-ca',
      readOnly: true,
    });
    expect(pod.volumes).toContainEqual({
      name: 'client-ca',
      configMap: { name: `${fullname}-admission-client-ca` },
    });
    expect(one(docs, 'ConfigMap', `${fullname}-admission-client-ca`).data['ca.crt']).toBe(CA_PEM);
    // A new CA rolls the pods (the service reads the file once).
    expect(dep.spec.template.metadata.annotations['kd-connections.hpe.com/client-ca-checksum']).toMatch(
      /^[0-9a-f]{64}$/,
    );
    expect(one(docs, 'Service', `${fullname}-admission`).spec.ports.map((p: Doc) => p.name)).toEqual([
      'https',
      'probes',
    ]);
    expect(one(docs, 'ServiceMonitor', `${fullname}-admission`).spec.endpoints).toEqual([
      { port: 'probes', scheme: 'http', path: '/metrics', interval: '30s' },
    ]);
    // The webhook port: only webhookFrom (scrapers go to the probes port, which only metricsFrom may reach).
    expect(one(docs, 'NetworkPolicy', `${fullname}-admission`).spec.ingress).toEqual([
      { ports: [{ protocol: 'TCP', port: 9443 }], from: [{ ipBlock: { cidr: '10.0.0.10/32' } }] },
      {
        ports: [{ protocol: 'TCP', port: 8081 }],
        from: [{ namespaceSelector: { matchLabels: { team: 'obs' } } }],
      },
    ]);
    // Without clientAuth: no probes port, and metricsFrom shares the webhook port (it serves /metrics).
    const plain = await render('bootstrap', [
      ...sets({ 'networkPolicy.enabled': true }),
      ...['--set', 'networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.10/32'],
      ...['--set', 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=obs'],
    ]);
    expect(one(plain.docs, 'NetworkPolicy', `${fullname}-admission`).spec.ingress).toEqual([
      {
        ports: [{ protocol: 'TCP', port: 9443 }],
        from: [{ ipBlock: { cidr: '10.0.0.10/32' } }, { namespaceSelector: { matchLabels: { team: 'obs' } } }],
      },
    ]);
    expect(find(plain.docs, 'ConfigMap')).toHaveLength(0);
  });

  it.each([
    [
      'clientAuth without a CA',
      sets({ 'admission.clientAuth.enabled': true }),
      /admission\.clientAuth\.enabled=true needs admission\.clientAuth\.caBundle/,
    ],
    [
      'clientAuth in url mode',
      [...MODES.url!, ...sets({ 'admission.clientAuth.enabled': true })],
      /with webhook\.url run the outside service with --client-ca-file/,
    ],
    [
      'a probes port equal to the webhook port',
      [
        ...sets({ 'admission.clientAuth.enabled': true, 'admission.clientAuth.probePort': 9443 }),
        ...['--set-string', `admission.clientAuth.caBundle=${CA_PEM}`],
      ],
      /admission\.clientAuth\.probePort must differ from admission\.port \(both 9443\)/,
    ],
  ])('refuses %s with a sentence that says what to set', async (_what, args, message) => {
    const r = await env.helm(['template', REL, CHART, '--namespace', NS, ...args]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });
});

describe('values.schema.json rejects bad values with a clear message', () => {
  // [what, --set args, the schema's message (helm lint, template, install), the chart's own sentence for
  // the combinations, which a render with --skip-schema-validation still refuses]
  const cases: [string, string[], RegExp, RegExp?][] = [
    [
      'unknown certificate mode',
      sets({ 'certificates.mode': 'selfsigned' }),
      /at '\/certificates\/mode': value must be one of 'bootstrap', 'certManager', 'secret'/,
    ],
    [
      'a typo in a key',
      sets({ 'secretConection.enabled': true }),
      /additional properties 'secretConection' not allowed/,
    ],
    [
      'a string for a boolean',
      ['--set-string', 'secretConnections.enabled=yes'],
      /at '\/secretConnections\/enabled': got string, want boolean/,
    ],
    ['negative replicas', sets({ 'admission.replicas': -1 }), /at '\/admission\/replicas': minimum: got -1, want 0/],
    [
      'a webhook timeout over 30 s',
      sets({ 'webhook.timeoutSeconds': 31 }),
      /at '\/webhook\/timeoutSeconds': maximum: got 31, want 30/,
    ],
    [
      'an http:// webhook URL',
      sets({ 'webhook.url': 'http://127.0.0.1:9443' }),
      /at '\/webhook\/url': 'http:\/\/127\.0\.0\.1:9443' does not match pattern '\^\$\|\^https:/,
    ],
    [
      'an unknown failurePolicy',
      sets({ 'webhook.failurePolicy.validating': 'Deny' }),
      /at '\/webhook\/failurePolicy\/validating': value must be one of 'Fail', 'Ignore'/,
    ],
    [
      'a namespace name with capitals',
      ['--set', 'watchNamespaces={Team-A}'],
      /at '\/watchNamespaces\/0': 'Team-A' does not match pattern/,
    ],
    [
      'a caBundle that is neither PEM nor base64',
      sets({ 'webhook.url': 'https://127.0.0.1:1', 'webhook.caBundle': 'not*base64' }),
      /at '\/webhook\/caBundle': 'not\*base64' does not match pattern/,
    ],
    [
      'a log level that does not exist',
      sets({ 'reconciler.logLevel': 'verbose' }),
      /at '\/reconciler\/logLevel': value must be one of 'debug', 'info', 'warn', 'error'/,
    ],
    [
      'secret mode without a Secret name',
      sets({ 'certificates.mode': 'secret', 'webhook.caBundle': CA_B64 }),
      /at '\/certificates\/secret\/name': minLength: got 0, want 1/,
      /certificates\.mode=secret needs certificates\.secret\.name: the name of an existing kubernetes\.io\/tls Secret/,
    ],
    [
      'secret mode without a caBundle',
      sets({ 'certificates.mode': 'secret', 'certificates.secret.name': 'tls' }),
      /at '\/webhook\/caBundle': minLength: got 0, want 1/,
      /certificates\.mode=secret needs webhook\.caBundle: the CA \(PEM or base64 of PEM\)/,
    ],
    [
      'a caBundle in bootstrap mode (it is injected at run time)',
      sets({ 'webhook.caBundle': CA_B64 }),
      /at '\/webhook\/caBundle': value must be ''/,
      /webhook\.caBundle is only used with webhook\.url or certificates\.mode=secret/,
    ],
    [
      'secretConnections.inlineValues (removed: Secret values never go into configmeta)',
      sets({ 'secretConnections.inlineValues': true }),
      /at '\/secretConnections': additional properties 'inlineValues' not allowed/,
    ],
    [
      'a lease duration without a unit',
      sets({ 'reconciler.leaderElection.leaseDuration': '15 seconds' }),
      /at '\/reconciler\/leaderElection\/leaseDuration': '15 seconds' does not match pattern/,
    ],
    [
      'two reconcilers without leader election',
      sets({ 'reconciler.leaderElection.enabled': false }),
      /at '\/reconciler\/leaderElection\/enabled': value must be true/,
      /reconciler\.replicas > 1 needs reconciler\.leaderElection\.enabled=true: two reconcilers without a Lease/,
    ],
  ];
  const rows = cases.map(([what, args, schemaMessage, chartMessage]) => ({ what, args, schemaMessage, chartMessage }));
  it.each(rows)('$what', async ({ args, schemaMessage, chartMessage }) => {
    for (const command of [
      ['template', REL],
      ['lint', '--strict'],
    ]) {
      const r = await env.helm([...command, CHART, '--namespace', NS, ...args]);
      expect(r.code).not.toBe(0);
      expect(r.stdout + r.stderr).toMatch(schemaMessage);
    }
    if (chartMessage) {
      const r = await env.helm(['template', REL, CHART, '--namespace', NS, '--skip-schema-validation', ...args]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(chartMessage);
    }
  });

  it('helm install, end to end against the API server: refused with the same sentence, before anything exists', async () => {
    const release = `bad-${env.namespace}`.slice(0, 53);
    const r = await env.helm([
      'install',
      release,
      CHART,
      '--namespace',
      env.namespace,
      ...sets({ 'certificates.mode': 'selfsigned', 'crds.install': false }),
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/at '\/certificates\/mode': value must be one of 'bootstrap', 'certManager', 'secret'/);
    // No release recorded, nothing of it created.
    const releases = await env.helm(['list', '--namespace', env.namespace, '--all', '--short']);
    expect(releases.code).toBe(0);
    expect(releases.stdout).not.toContain(release);
    const objects = await env.kubectl(['get', 'deploy,svc,sa,secret', '-o', 'name']);
    expect(objects.stdout).not.toContain(release);
  });

  it('accepts the corrected values', async () => {
    for (const args of [
      sets({ 'reconciler.leaderElection.enabled': false, 'reconciler.replicas': 1 }),
      sets({ 'secretConnections.enabled': false }),
      ['--set', 'watchNamespaces={team-a}'],
      sets({ 'webhook.timeoutSeconds': 30, 'admission.replicas': 0 }),
      sets({ 'webhook.url': 'https://127.0.0.1:1', 'certificates.mode': 'secret' }),
    ])
      expect((await env.helm(['template', REL, CHART, '--namespace', NS, ...args])).code).toBe(0);
  });
});
