/**
 * The chart's CRDs as templates (crds.install / crds.keep) and its KubeDirector mode, as rendered:
 * `helm template --set kubedirector.enabled=true` renders no CRD, no mutating webhook (so no pod webhook)
 * and no reconciler, and what it does render is valid for the real API server (a server-side dry run
 * compiles the matchConditions' CEL).
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { useTestEnv } from '../support/cluster.js';
import { CRD_DIR, installCrds } from '../support/crds.js';
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
const fullname = `${REL}-kd-connections`;
const CRD_FILES = ['kubedirector.hpe.com_kubedirectorapps.yaml', 'kubedirector.hpe.com_kubedirectorclusters.yaml'];

describe('CRDs as templates', () => {
  it('renders both CRDs from files/crds unchanged, labelled, kept on uninstall, in the earliest sync wave', async () => {
    const { docs } = await helmTemplate(env, REL, NS);
    const crds = find(docs, 'CustomResourceDefinition');
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([
      'kubedirectorapps.kubedirector.hpe.com',
      'kubedirectorclusters.kubedirector.hpe.com',
    ]);
    for (const file of CRD_FILES) {
      const source = parse(readFileSync(join(CRD_DIR, file), 'utf8')) as Doc;
      const rendered = one(docs, 'CustomResourceDefinition', source.metadata.name);
      // The single copy: what the harness and `npm start` apply is what Helm installs.
      expect(rendered.spec).toEqual(source.spec);
      expect(rendered.metadata.annotations).toEqual({
        'helm.sh/resource-policy': 'keep',
        'argocd.argoproj.io/sync-wave': '-2',
      });
      expect(rendered.metadata.labels).toMatchObject({
        'app.kubernetes.io/instance': REL,
        'app.kubernetes.io/managed-by': 'Helm',
      });
    }
    const notKept = find(
      (await helmTemplate(env, REL, NS, sets({ 'crds.keep': false }))).docs,
      'CustomResourceDefinition',
    );
    expect(notKept).toHaveLength(2);
    for (const c of notKept) expect(c.metadata.annotations['helm.sh/resource-policy']).toBeUndefined();
    expect(
      find((await helmTemplate(env, REL, NS, sets({ 'crds.install': false }))).docs, 'CustomResourceDefinition'),
    ).toEqual([]);
  });

  it("helm refuses to take over CRDs it does not own (here the harness's, applied by kubectl)", async () => {
    await installCrds(env);
    const r = await env.helm(['install', 'kd-adopt', CHART, '--namespace', env.namespace, '--dry-run=server']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /CustomResourceDefinition "kubedirector(apps|clusters)\.kubedirector\.hpe\.com" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata/,
    );
  });

  it('Chart.yaml states the Kubernetes floor; the schema refuses unknown crds.* and kubedirector.* keys', async () => {
    expect(parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')).kubeVersion).toBe('>=1.30.0-0');
    const old = await env.helm(['template', REL, CHART, '--namespace', NS, '--kube-version', '1.29.0']);
    expect(old.code).not.toBe(0);
    expect(old.stderr).toContain('chart requires kubeVersion: >=1.30.0-0');
    for (const bad of ['crds.instal=true', 'kubedirector.enable=true', 'crds.keep=yes']) {
      const r = await env.helm(['template', REL, CHART, '--namespace', NS, '--set', bad]);
      expect({ bad, code: r.code }).toEqual({ bad, code: 1 });
    }
  });
});

describe('kubedirector.enabled=true', () => {
  const kd = sets({ 'kubedirector.enabled': true });

  it('passes helm lint --strict', async () => {
    const lint = await env.helm(['lint', '--strict', CHART, '--namespace', NS, ...kd]);
    expect({ code: lint.code, out: lint.stdout + lint.stderr }).toEqual({
      code: 0,
      out: expect.stringContaining('0 chart(s) failed'),
    });
  });

  it('renders no CRD, no mutating webhook, no pod webhook and no reconciler; admission validates only', async () => {
    const { docs, text } = await helmTemplate(env, REL, NS, kd);
    expect(find(docs, 'CustomResourceDefinition')).toEqual([]);
    // crds.install=true is ignored next to KubeDirector: its CRDs stay as they are.
    expect(
      find(
        (await helmTemplate(env, REL, NS, [...kd, ...sets({ 'crds.install': true })])).docs,
        'CustomResourceDefinition',
      ),
    ).toEqual([]);
    expect(find(docs, 'MutatingWebhookConfiguration')).toEqual([]);
    expect(text).not.toContain('mutate-pod');
    expect(text).not.toContain('/mutate-kdcluster');
    expect(docs.filter((d) => d.metadata.name.startsWith(`${fullname}-reconciler`))).toEqual([]);
    expect(find(docs, 'Lease')).toEqual([]);
    expect(find(docs, 'ValidatingAdmissionPolicy')).toEqual([]);
    const args = containerArgs(one(docs, 'Deployment', `${fullname}-admission`));
    expect(args).toContain('--kubedirector-mode=true');
    expect(args).toContain(`--webhook-configurations=validating/${fullname}`);

    const validating = one(docs, 'ValidatingWebhookConfiguration', fullname).webhooks as Doc[];
    expect(validating.map((w) => w.name)).toEqual([
      'validate-kdcluster.kd-connections.hpe.com',
      'validate-kdapp.kd-connections.hpe.com',
    ]);
    const [cluster, app] = validating;
    expect(cluster!.failurePolicy).toBe('Fail');
    expect(cluster!.matchConditions.map((c: Doc) => c.name)).toEqual([
      'not-being-deleted',
      'app-or-connections-changed',
    ]);
    expect(app!.matchConditions.map((c: Doc) => c.name)).toEqual(['not-being-deleted', 'spec-changed']);
    // No guard in this mode, so no guard event rights either.
    expect(find(docs, 'Role', `${fullname}-guard-events`)).toEqual([]);
    expect(find(docs, 'ClusterRole', `${fullname}-kubedirector-guard`)).toEqual([]);
  });

  it('the default mode renders the guard event rights, the mutating webhooks and no --kubedirector-mode', async () => {
    const { docs } = await helmTemplate(env, REL, NS);
    expect(one(docs, 'Role', `${fullname}-guard-events`).rules).toEqual([
      { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] },
    ]);
    expect(one(docs, 'RoleBinding', `${fullname}-guard-events`).subjects.map((s: Doc) => s.name)).toEqual([
      `${fullname}-admission`,
      `${fullname}-reconciler`,
    ]);
    // Finding the operator by name: its Deployment and its webhook configuration, those two names only.
    expect(one(docs, 'ClusterRole', `${fullname}-kubedirector-guard`).rules).toEqual([
      { apiGroups: ['apps'], resources: ['deployments'], resourceNames: ['kubedirector'], verbs: ['get'] },
      {
        apiGroups: ['admissionregistration.k8s.io'],
        resources: ['mutatingwebhookconfigurations'],
        resourceNames: ['kubedirector-webhook'],
        verbs: ['get'],
      },
    ]);
    expect(one(docs, 'ClusterRoleBinding', `${fullname}-kubedirector-guard`).subjects.map((s: Doc) => s.name)).toEqual([
      `${fullname}-admission`,
      `${fullname}-reconciler`,
    ]);
    expect(one(docs, 'MutatingWebhookConfiguration').webhooks).toHaveLength(2);
    expect(containerArgs(one(docs, 'Deployment', `${fullname}-admission`)).join(' ')).not.toContain('kubedirector');
  });

  it('every object is valid for the real API server, matchConditions included (server-side dry run)', async () => {
    await expectServerDryRunClean(env, (await helmTemplate(env, REL, env.namespace, kd)).docs);
  });

  it('NOTES.txt says what this mode does and gives the flag for an out-of-cluster service', async () => {
    const r = await env.helm([
      'install',
      REL,
      CHART,
      '--namespace',
      NS,
      '--dry-run=client',
      ...kd,
      ...sets({ 'webhook.url': 'https://127.0.0.1:9443' }),
    ]);
    expect(r.code).toBe(0);
    const notes = r.stdout.slice(r.stdout.indexOf('NOTES:'));
    expect(notes).toContain('KUBEDIRECTOR MODE');
    expect(notes).toContain('--kubedirector-mode=true');
    expect(notes).not.toContain('Reconciler:');
  });
});
