/**
 * `kubectl kd-connections` against a real API server, installed as a user installs it — the package
 * tarball `npm run pack:kubectl-plugin` makes, by `npm install` without a registry — and found by kubectl
 * itself on PATH as `kubectl-kd_connections`: `graph` of the examples agrees, edge by edge, with what the running
 * reconciler (another process, the same classifier) records in each cluster's status; a user with only
 * `view` (and read on the kd kinds) gets Unknown where they may not read, never a guess; `explain` names
 * each member's generator and which lag; mistakes get a clear error and the right exit code.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { packKubectlPlugin, PLUGIN_BIN } from '@kd-connections/images';
import { TempDir, serviceAccountKubeconfig } from '../chart/chart-support.js';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { getJson, kubectlOk, memberPod, apply } from '../support/kd-objects.js';
import { eventually, repoPath, run } from '../support/processes.js';
import { startReconciler, type ReconcilerProcess } from '../support/services.js';

const env = useTestEnv();
const ns = env.namespace;
const dir = new TempDir();
let rec: ReconcilerProcess | undefined;
const CLUSTERS = ['kafka-events', 'training-cluster', 'spark-logs-nightly', 'notebook', 'pg-main'];

type Obj = Record<string, any>;

const installed = join(dir.path, 'prefix');
/**
 * Runs `kubectl kd-connections ARGS` as the user of `kubeconfig`, the installed plugin found on PATH by
 * kubectl (this Node first on PATH: the bin runs with `env node`).
 */
const plugin = (args: string[], kubeconfig = env.info.kubeconfigPath) =>
  run(env.info.binDir.kubectl, ['kd-connections', ...args], {
    env: {
      PATH: `${dirname(process.execPath)}:${join(installed, 'node_modules', '.bin')}:${process.env.PATH}`,
      KUBECONFIG: kubeconfig,
    },
  });

beforeAll(async () => {
  await installCrds(env);
  for (const f of ['10-apps.yaml', '20-configmaps.yaml', '30-secrets.yaml', '40-clusters.yaml'])
    await kubectlOk(env, ['apply', '-f', repoPath(`examples/${f}`)]);
  await apply(env, [memberPod('notebook-0', 'notebook')]);
  // The package as `npm publish` would upload it, installed offline (its dependencies are bundled).
  const tarball = packKubectlPlugin(repoPath('.'), dir.path);
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--prefix', installed, tarball], {
    env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` },
    stdio: 'pipe',
  });
  expect(
    execFileSync('readlink', [join(installed, 'node_modules', '.bin', PLUGIN_BIN)], { encoding: 'utf8' }),
  ).toContain('kubectl-kd-connections/dist/main.js');
  rec = await startReconciler(env, { args: [`--watch-namespaces=${ns}`] });
  await eventually('every example cluster has its connections recorded', async () => {
    const list = await getJson(env, ['kubedirectorclusters']);
    return list.items.length === CLUSTERS.length && list.items.every((c: Obj) => c.status?.connections)
      ? true
      : undefined;
  });
}, 300_000);

afterAll(async () => {
  await rec?.stop();
  dir.remove();
});

describe('kubectl kd-connections graph', () => {
  it('kubectl finds the plugin; every edge has the state the reconciler recorded, with its reason', async () => {
    const r = await plugin(['graph', '-n', ns]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    console.log(`kubectl kd-connections graph of the examples:\n${r.stdout}`);
    const word = { Cluster: 'kdcluster', ConfigMap: 'configmap', Secret: 'secret' } as Record<string, string>;
    for (const c of (await getJson(env, ['kubedirectorclusters'])).items as Obj[]) {
      expect(r.stdout).toContain(`kdcluster ${c.metadata.name} (app ${c.spec.app})\n`);
      for (const s of c.status.connections as Obj[]) {
        const line = `  -> ${word[s.kind]} ${s.name}: ${s.state}${s.message ? `: ${s.message}` : ''}`;
        expect(r.stdout).toContain(line);
      }
    }
    // The examples' one refused-looking edge would be a bug: the webhook admitted them all.
    expect(r.stdout).not.toMatch(/: (Missing|NotConnectable|Unlabeled|Unknown)/);
  });

  it('mermaid and dot: a node per object, an edge per connection', async () => {
    const connections = ((await getJson(env, ['kubedirectorclusters'])).items as Obj[]).flatMap(
      (c) => c.status.connections,
    );
    const m = await plugin(['graph', '-n', ns, '-o', 'mermaid']);
    expect(m.code).toBe(0);
    expect(m.stdout.split('\n').filter((l) => l.includes('-->') || l.includes('-.->'))).toHaveLength(
      connections.length,
    );
    const d = await plugin(['graph', `--namespace=${ns}`, '--output=dot']);
    expect(d.code).toBe(0);
    expect(d.stdout.split('\n').filter((l) => / -> /.test(l))).toHaveLength(connections.length);
    expect(d.stdout).toMatch(/^digraph "kd-connections [^"]+" \{\n {2}rankdir=LR;\n/);
  });

  it('a user with view only: Unknown where they may not read (Secrets), and no value anywhere', async () => {
    const sa = 'plugin-viewer';
    await kubectlOk(env, ['create', 'serviceaccount', sa]);
    await kubectlOk(env, ['create', 'rolebinding', `${sa}-view`, '--clusterrole=view', `--serviceaccount=${ns}:${sa}`]);
    await kubectlOk(env, [
      'create',
      'role',
      `${sa}-kd`,
      '--verb=get,list',
      '--resource=kubedirectorclusters.kubedirector.hpe.com,kubedirectorapps.kubedirector.hpe.com',
    ]);
    await kubectlOk(env, ['create', 'rolebinding', `${sa}-kd`, `--role=${sa}-kd`, `--serviceaccount=${ns}:${sa}`]);
    const kubeconfig = await serviceAccountKubeconfig(env, dir, ns, sa);
    const r = await plugin(['graph'], kubeconfig);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout.split('\n')[0]).toBe(`namespace ${ns}`);
    expect(r.stdout).toMatch(
      / {2}-> secret scm-creds: Unknown: cannot list secrets with your credentials: .*forbidden/,
    );
    expect(r.stdout).toMatch(/note: cannot list kubedirectorapps with your credentials: .*kd-system/);
    // ConfigMaps are readable with view: still judged.
    expect(r.stdout).toContain('  -> configmap model-prediction: Connected');
    const secret = await getJson(env, ['secret', 'scm-creds']);
    for (const v of Object.values(secret.data as Record<string, string>)) {
      expect(r.stdout).not.toContain(v);
      expect(r.stdout).not.toContain(Buffer.from(v, 'base64').toString());
    }
  });
});

describe('kubectl kd-connections explain', () => {
  it("each connection's state and why, each member's generator, and a member that lags", async () => {
    const current = await eventually('notebook-0 holds the current generator', async () => {
      const c = await getJson(env, ['kdcluster', 'notebook']);
      const p = await getJson(env, ['pod', 'notebook-0']);
      const g = p.metadata.annotations?.['kubedirector.hpe.com/configmeta-generator'];
      // Unset until a connection changes: generator 0.
      if (g !== undefined && Number(g) === (c.spec.configMetaGenerator ?? 0)) return Number(g);
      throw new Error(`the pod holds ${g}, the cluster is at ${c.spec.configMetaGenerator}`);
    });
    const r = await plugin(['explain', 'notebook', '-n', ns]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout).toContain(`kdcluster ${ns}/notebook\n  app: jupyter-notebook, found in namespace ${ns}\n`);
    expect(r.stdout).toContain('  cluster training-cluster: Connected');
    expect(r.stdout).toContain('  secret scm-creds: Connected');
    expect(r.stdout).toContain(`  notebook-0 (role controller, node id 1): generator ${current}, current\n`);
    expect(r.stdout).toContain('  every member present holds the current generator\n');
    expect(r.stdout).toMatch(/\n {2}Ready=\w+ /);

    // With the reconciler stopped, a new generator cannot reach the pod: explain says it lags.
    await rec!.stop();
    rec = undefined;
    await kubectlOk(env, [
      'patch',
      'kdcluster',
      'notebook',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { configMetaGenerator: current + 1 } }),
    ]);
    const lag = await plugin(['explain', 'notebook', '-n', ns]);
    expect(lag.stdout).toContain(
      `  notebook-0 (role controller, node id 1): generator ${current}, LAGS (the cluster is at ${current + 1})\n`,
    );
    expect(lag.stdout).toContain('  behind: notebook-0\n');
  });

  it('a cluster that does not exist, and a mistake in the command line, say what is wrong', async () => {
    const missing = await plugin(['explain', 'nope', '-n', ns]);
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toBe(`kubectl kd-connections: kdcluster "nope" not found in namespace "${ns}"\n`);
    const typo = await plugin(['graph', '-o', 'svg']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('kubectl kd-connections: -o svg: not one of text, mermaid, dot\n\nUsage:');
  });
});
