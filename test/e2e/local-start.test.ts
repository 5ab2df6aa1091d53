/**
 * `npm start` as a new user meets it: the command brings up the local environment and prints a tour;
 * the test runs the tour's commands exactly as printed and checks what they print; Ctrl-C removes
 * everything. Then the --kubeconfig mode against this run's control plane.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { useTestEnv } from '../support/cluster.js';
import { eventually } from '../support/processes.js';
import { installCrds } from '../support/crds.js';
import { WEBHOOK_NAMES } from '../support/webhook-configurations.js';

const env = useTestEnv();
const startJs = join(dirname(fileURLToPath(import.meta.url)), '../dist/local/start.js');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

function launch(args: string[]): { child: ChildProcess; out: () => string; exit: Promise<number | null> } {
  const e = { ...process.env };
  delete e.KD_TEST_CONTROLPLANE;
  const child = spawn(process.execPath, [startJs, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: e });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  return { child, out: () => out, exit: new Promise((r) => child.once('exit', (code) => r(code))) };
}

function sh(command: string, exports: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((ok) =>
    execFile('sh', ['-c', `${exports}\n${command}`], { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      ok({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

describe('npm start', () => {
  it('brings up a local environment whose printed tour works, and Ctrl-C removes it', async () => {
    const p = launch([]);
    await eventually(
      'the tour is printed',
      () => p.out().includes('Press Ctrl-C to stop everything.') || p.child.exitCode !== null,
      240_000,
      500,
    ).catch((e: Error) => {
      throw new Error(`${e.message}; output so far:\n${p.out()}`);
    });
    const out = p.out();
    expect(out).toContain('kd-connections is running.');
    const exports = out
      .split('\n')
      .filter((l) => /^\s+export (KUBECONFIG|PATH)=/.test(l))
      .map((l) => l.trim().replace(/\s+#.*$/, ''))
      .join('\n');
    expect(exports).toMatch(/export KUBECONFIG=\/.+kubeconfig/);
    const commands = out
      .split('\n')
      .filter((l) => /^\s{5}kubectl /.test(l))
      .map((l) => l.trim());
    const [denied, patch, list, read, ...secretSteps] = commands as [string, string, string, string, ...string[]];
    // npm start runs a node unless another one holds this machine (the suite's own, unless KD_TEST_NODE=0):
    // then its step 3 reads the file in the container and step 4 reads the private file there.
    const withNode = / exec /.test(read);
    expect(commands).toHaveLength(withNode ? 7 : 5);

    // 1. The denied connection.
    const d = await sh(denied, exports);
    expect(d.code).not.toBe(0);
    expect(d.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    expect(d.stderr).toContain('cluster "pg-main" uses app "postgres" (category "database"');
    expect(d.stderr).toContain('allowed: {category: "training"}, {category: "streaming", version: ">=2.4 <3"}');

    // 2. The ConfigMap edit raises the generator of the clusters that use it.
    const gen = async () =>
      Number(
        (await sh('kubectl -n kd-demo get kdcluster notebook -o jsonpath={.spec.configMetaGenerator}', exports)).stdout,
      );
    const before = await gen();
    const pr = await sh(patch, exports);
    expect(pr.stdout).toContain('configmap/model-prediction patched');
    await eventually('notebook regenerated', async () => (await gen()) === before + 1);
    const table = await sh(list, exports);
    expect(table.stdout.split('\n')[0]).toMatch(/^NAME\s+APP\s+CONNECTIONS\s+GENERATOR\s+SYNCED\s+READY\s+AGE/);
    expect(table.stdout).toMatch(new RegExp(`notebook\\s+jupyter-notebook\\s+4/4\\s+${before + 1}\\s`));

    // 3. The pod's configmeta carries the edit.
    const doc = await eventually('configmeta updated', async () => {
      const r = await sh(read, exports);
      const d = r.code === 0 ? JSON.parse(r.stdout) : undefined;
      return d?.connections?.configmaps?.model?.[0]?.data?.path === '/models/resnet50/4' ? d : undefined;
    });
    expect(doc.node.role_id).toBe('controller');
    expect(Object.keys(doc.connections.clusters).sort()).toEqual(['spark-logs-nightly', 'training-cluster']);
    expect(doc.connections.secrets['source-control'][0]).toMatchObject({
      redacted: true,
      data: { token: '', username: '' },
    });

    // 4. The connected Secret's value: readable by root in the container, nowhere a user lists.
    const b64 = Buffer.from('replace-me').toString('base64');
    const tokenIn = (privText: string) =>
      (JSON.parse(privText) as any).connections.secrets['source-control'][0].data.token as string;
    if (withNode) {
      const [asRoot, asNobody] = secretSteps as [string, string, string];
      const token = await eventually('the private file as root in the container', async () => {
        const r = await sh(asRoot, exports);
        return r.code === 0 ? tokenIn(r.stdout) : undefined;
      });
      expect(token).toBe(b64);
      const n = await sh(asNobody, exports);
      expect(n.code).not.toBe(0);
      expect(n.stderr).toContain('Permission denied');
    } else {
      // Without a node, the API side only: the value sits in the private Secret the member pods mount.
      const s = await sh(
        "kubectl -n kd-demo get secret kd-configmeta-private-notebook -o jsonpath='{.data.priv_configmeta\\.json}'",
        exports,
      );
      expect(tokenIn(Buffer.from(s.stdout, 'base64').toString())).toBe(b64);
    }
    const grep = secretSteps.at(-1)!;
    expect(grep).toContain('get pods,kdcluster,events,configmaps -o json | grep -c');
    const found = await sh(grep, exports);
    expect(found.stdout).toBe('0\n');
    // The same search over the Secrets finds it: the pattern can match.
    const inSecrets = await sh(grep.replace('pods,kdcluster,events,configmaps', 'secrets'), exports);
    expect(Number(inSecrets.stdout)).toBeGreaterThan(0);

    const dirs = [...out.matchAll(/(\/[^\s]*kd-(?:local|controlplane)-[^/\s]+)\//g)].map((m) => m[1]!);
    expect(dirs.length).toBeGreaterThanOrEqual(2);
    for (const dir of dirs) expect(existsSync(dir)).toBe(true);
    p.child.kill('SIGINT');
    expect(await p.exit).toBe(0);
    expect(p.out()).toContain('Stopped; temporary files removed.');
    for (const dir of dirs) expect(existsSync(dir)).toBe(false);
  }, 300_000);

  it('--kubeconfig runs both services against an existing cluster', async () => {
    await installCrds(env);
    const p = launch(['--kubeconfig', env.info.kubeconfigPath, '--watch-namespaces', env.namespace]);
    await eventually(
      'running',
      () => p.out().includes('Press Ctrl-C to stop everything.') || p.child.exitCode !== null,
      120_000,
      500,
    ).catch((e: Error) => {
      throw new Error(`${e.message}; output so far:\n${p.out()}`);
    });
    expect(p.out()).toContain('Both services run against the cluster of the given kubeconfig.');
    expect(p.out()).not.toContain('Starting etcd');
    p.child.kill('SIGINT');
    expect(await p.exit).toBe(0);
  }, 180_000);
});
