/**
 * What each ServiceAccount can read and write, proved with its own TokenRequest token on the real
 * control plane: the ServiceAccounts, RBAC and ValidatingAdmissionPolicies are taken out of `helm
 * template` and applied (no Deployment runs; the webhooks are not installed).
 *
 * The install lists namespaces (watchNamespaces: the apps namespace, one the webhooks exclude, and the
 * release namespace itself), so Secret reads must follow what each service serves: the admission service
 * only where the webhooks send reviews (never the release namespace, where the reconciler's MAC key
 * lives, nor webhook.excludeNamespaces), the reconciler where it reconciles, plus its key by name. With
 * the pod write policy switched off, the Secret write policy still holds. An install without a list
 * reads Secrets cluster-wide — documented in docs/security.md, and pinned here so it is never a surprise.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { useTestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { installCrds } from '../support/crds.js';
import { eventually, ok } from '../support/processes.js';
import { TempDir, helmTemplate, randomName, serviceAccountKubeconfig, type Doc } from './chart-support.js';

const env = useTestEnv();
const ns = env.namespace;
const apps = `${ns}-apps`.slice(0, 63);
const excluded = `${ns}-excl`.slice(0, 63);
const unlisted = `${ns}-unl`.slice(0, 63);
const DIGEST_KEY = 'kd-connections-digest-key';
const release = randomName('kdl');
const fullname = `${release}-kd-connections`;
const wide = randomName('kdw');
const wideName = `${wide}-kd-connections`;
const dir = new TempDir();
const applied: Doc[] = [];
const kubeconfigs: Record<string, string> = {};

const KINDS = [
  'ServiceAccount',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
];
const list = (items: object[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });

/** The SAs, RBAC and policies of a render (no Deployment, no webhook, no CRD). */
async function applyAccessObjects(name: string, args: string[]): Promise<Doc[]> {
  const { docs } = await helmTemplate(env, name, ns, ['--set', 'crds.install=false', ...args]);
  const picked = docs.filter((d) => KINDS.includes(d.kind));
  for (const d of picked) if (['ServiceAccount', 'Role', 'RoleBinding'].includes(d.kind)) d.metadata.namespace ??= ns;
  ok(await env.kubectl(['apply', '-f', '-'], { input: list(picked), namespace: false }), `apply ${name}`);
  applied.push(...picked);
  return picked;
}

const as = (sa: string, args: string[], namespace: string, input?: string) =>
  env.kubectl(['--kubeconfig', kubeconfigs[sa]!, ...args], { namespace, ...(input ? { input } : {}) });

async function can(sa: string, args: string[], namespace: string): Promise<boolean> {
  const r = await as(sa, args, namespace);
  if (r.code === 0) return true;
  expect({ args, namespace, stderr: r.stderr }).toEqual({
    args,
    namespace,
    stderr: expect.stringMatching(/forbidden/i),
  });
  return false;
}

beforeAll(async () => {
  await installCrds(env);
  for (const n of [apps, excluded, unlisted]) await createNamespace(env.kc, n, { 'kd-test': 'true' });
  for (const n of [ns, apps, excluded, unlisted])
    ok(await env.kubectl(['create', 'secret', 'generic', 'probe', '--from-literal=k=v'], { namespace: n }), 'probe');
  ok(
    await env.kubectl(['create', 'secret', 'generic', DIGEST_KEY, '--from-literal=key=0123456789abcdef'], {
      namespace: ns,
    }),
    'digest key',
  );
  await applyAccessObjects(release, [
    '--set',
    `watchNamespaces={${apps},${excluded},${ns}}`,
    '--set',
    `webhook.excludeNamespaces={${excluded}}`,
    '--set',
    'reconciler.podWritePolicy.enabled=false',
  ]);
  await applyAccessObjects(wide, []);
  for (const sa of [
    `${fullname}-admission`,
    `${fullname}-reconciler`,
    `${wideName}-admission`,
    `${wideName}-reconciler`,
  ])
    kubeconfigs[sa] = await serviceAccountKubeconfig(env, dir, ns, sa);
}, 120_000);

afterAll(async () => {
  await env.kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: list(applied), namespace: false });
  for (const n of [apps, excluded, unlisted])
    await env.kubectl(['delete', 'namespace', n, '--wait=false'], { namespace: false });
  dir.remove();
});

describe('Secret reads with watchNamespaces', () => {
  it("the admission account reads Secrets only where the webhooks send reviews, and never the reconciler's key", async () => {
    const sa = `${fullname}-admission`;
    const reads = {
      apps: await can(sa, ['get', 'secret', 'probe'], apps),
      appsList: await can(sa, ['get', 'secrets'], apps),
      excluded: await can(sa, ['get', 'secret', 'probe'], excluded),
      release: await can(sa, ['get', 'secret', 'probe'], ns),
      digestKey: await can(sa, ['get', 'secret', DIGEST_KEY], ns),
      unlisted: await can(sa, ['get', 'secret', 'probe'], unlisted),
      clusterWide: await can(sa, ['get', 'secrets', '--all-namespaces'], ns),
    };
    expect(reads).toEqual({
      apps: true,
      appsList: true,
      excluded: false,
      release: false,
      digestKey: false,
      unlisted: false,
      clusterWide: false,
    });
  });

  it('the reconciler account reads Secrets where it reconciles, and its key by name', async () => {
    const sa = `${fullname}-reconciler`;
    const reads = {
      apps: await can(sa, ['get', 'secret', 'probe'], apps),
      excluded: await can(sa, ['get', 'secret', 'probe'], excluded),
      digestKey: await can(sa, ['get', 'secret', DIGEST_KEY], ns),
      unlisted: await can(sa, ['get', 'secret', 'probe'], unlisted),
      clusterWide: await can(sa, ['get', 'secrets', '--all-namespaces'], ns),
    };
    // The release namespace is listed: the reconciler serves it, so it reads its Secrets there too.
    expect(reads).toEqual({ apps: true, excluded: true, digestKey: true, unlisted: false, clusterWide: false });
  });

  it('the RBAC is namespaced Roles: no ClusterRole or ClusterRoleBinding grants a Secret right', () => {
    const ours = applied.filter((d) => d.metadata.name.startsWith(fullname));
    const clusterWide = ours.filter(
      (d) =>
        d.kind === 'ClusterRole' &&
        (d.rules ?? []).some((r: { resources?: string[] }) => (r.resources ?? []).includes('secrets')),
    );
    expect(clusterWide.map((d) => d.metadata.name)).toEqual([]);
    // Only bootstrap mode's caBundle publisher, limited to this release's two webhook configurations.
    expect(ours.filter((d) => d.kind === 'ClusterRoleBinding').map((d) => d.metadata.name)).toEqual([
      `${fullname}-admission-cabundle`,
    ]);
  });
});

describe('Secret writes with the pod write policy off', () => {
  it('the Secret write policy still refuses any Secret but its own', async () => {
    const policies = applied.filter(
      (d) => d.kind === 'ValidatingAdmissionPolicy' && d.metadata.name.startsWith(fullname),
    );
    expect(policies.map((d) => d.metadata.name)).toEqual([`${fullname}-reconciler-secret-writes`]);
    const sa = `${fullname}-reconciler`;
    const planted = JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'planted' } });
    const r = await eventually('the policy is enforced', async () => {
      const x = await as(sa, ['create', '--dry-run=server', '-f', '-'], apps, planted);
      return x.stderr.includes(`${fullname}-reconciler-secret-writes`) ? x : undefined;
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('the reconciler may only create its digest key and private configmeta Secrets');
  });
});

describe('without watchNamespaces (documented: cluster-wide)', () => {
  it('both accounts read Secrets in every namespace, the reconciler key included', async () => {
    const reads: Record<string, boolean> = {};
    for (const sa of [`${wideName}-admission`, `${wideName}-reconciler`]) {
      reads[`${sa} kube-system`] = await can(sa, ['get', 'secrets'], 'kube-system');
      reads[`${sa} key`] = await can(sa, ['get', 'secret', DIGEST_KEY], ns);
    }
    expect(Object.values(reads)).toEqual([true, true, true, true]);
  });
});
