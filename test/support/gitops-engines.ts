/**
 * Real GitOps engines as processes against the test control plane: Flux's source-controller and
 * kustomize-controller, and Argo CD's application-controller and repo-server with a Redis
 * (Debian's redis-server). Built by test/controlplane/build-gitops-bins.sh into the binary cache, with
 * their CRDs from the same modules. Everything listens on 127.0.0.1, except the Argo CD
 * application-controller's metrics port, which that release binds on all interfaces (no flag moves it);
 * nothing here connects to it from elsewhere.
 *
 * Each engine runs in a namespace of its own, watches only that namespace (Flux: RUNTIME_NAMESPACE with
 * --watch-all-namespaces=false; Argo CD: its control namespace) and runs without leader election.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { binCacheDir } from '../controlplane/binaries.js';
import { listeningAddresses } from '../controlplane/listening-sockets.js';
import { freePort } from '../controlplane/net.js';
import { ok, repoRoot, sleep, type RunResult } from './processes.js';
import { waitEstablished } from './crds.js';

export type GitopsBinary = 'source-controller' | 'kustomize-controller' | 'argocd';

/** Versions the pinning modules name (test/controlplane/bins/flux-*, bins/argocd). */
export const ENGINE_VERSIONS = { flux: 'source-controller v1.9.6, kustomize-controller v1.9.6', argocd: 'v2.14.21' };

/** What the engines need of the cluster (a TestEnv has this shape). */
export interface EngineHost {
  readonly info: { readonly kubeconfigPath: string; readonly binDir: { readonly kubectl: string } };
  kubectl(args: string[], opts?: { input?: string; namespace?: string | false }): Promise<RunResult>;
}

/** Path of each binary and its CRD folder, building the missing ones first (minutes on a cold cache). */
export async function gitopsBinaries(names: GitopsBinary[]): Promise<Record<GitopsBinary, string>> {
  const dir = binCacheDir();
  const missing = names.filter((n) => !existsSync(join(dir, n)) || !existsSync(join(dir, `${n}-crds`)));
  if (missing.length > 0) {
    process.stderr.write(`[gitops] building ${missing.join(', ')} into ${dir}\n`);
    const script = join(repoRoot, 'test', 'controlplane', 'build-gitops-bins.sh');
    await new Promise<void>((resolve, reject) => {
      const child = spawn('bash', [script, ...missing], { stdio: ['ignore', 'ignore', 'inherit'] });
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`build-gitops-bins.sh exited ${code}`))));
    });
  }
  return Object.fromEntries(names.map((n) => [n, join(dir, n)])) as Record<GitopsBinary, string>;
}

/** Applies an engine's CRDs (server-side, idempotent) and waits until they are served. */
export async function installEngineCrds(host: EngineHost, binary: GitopsBinary): Promise<void> {
  const dir = join(binCacheDir(), `${binary}-crds`);
  const apply = ['apply', '--server-side', '--force-conflicts', '--field-manager=kd-connections-tests', '-f', dir];
  ok(await host.kubectl(apply, { namespace: false }), `apply ${binary} CRDs`);
  await waitEstablished(host, ['-f', dir]);
}

/** A Go engine process; its output is kept for failure messages. */
export interface EngineProcess {
  readonly name: string;
  readonly pid: number | undefined;
  output(): string;
  readonly exited: boolean;
  stop(): Promise<void>;
}

function startBinary(name: string, bin: string, args: string[], env: NodeJS.ProcessEnv): EngineProcess {
  const child: ChildProcess = spawn(bin, args, {
    // As the engines' images start them (Argo CD's are symlinks to one binary): client-go's user agent,
    // which the audit-log checks filter on, is named after argv[0].
    argv0: name,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  // Keep the tail only: the engines log every reconcile.
  const keep = (c: Buffer) => {
    out = (out + c.toString()).slice(-200_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited = false;
  const exit = new Promise<void>((r) =>
    child.once('exit', () => {
      exited = true;
      r();
    }),
  );
  return {
    name,
    pid: child.pid,
    output: () => out,
    get exited() {
      return exited;
    },
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(t);
    },
  };
}

/** Waits until GET url answers 200; fails with the process output when it exits first. */
async function untilHealthy(p: EngineProcess, url: string, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (
      await fetch(url)
        .then((r) => r.status === 200)
        .catch(() => false)
    )
      return;
    if (p.exited) throw new Error(`${p.name} exited before it was ready:\n${p.output().slice(-4000)}`);
    if (Date.now() > end) throw new Error(`${p.name} not ready after ${timeoutMs} ms:\n${p.output().slice(-4000)}`);
    await sleep(200);
  }
}

export interface RunningEngine {
  readonly processes: EngineProcess[];
  /** The last lines of every process, for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

function engine(processes: EngineProcess[], cleanup: () => void): RunningEngine {
  return {
    processes,
    output: () => processes.map((p) => `--- ${p.name}\n${p.output().slice(-6000)}`).join('\n'),
    async stop() {
      await Promise.all(processes.map((p) => p.stop()));
      cleanup();
    },
  };
}

/** Every TCP listener of the engine's processes, as `<process> <address>`. */
export function engineListeners(e: RunningEngine): string[] {
  return e.processes.flatMap((p) => (p.pid ? listeningAddresses(p.pid).map((a) => `${p.name} ${a}`) : []));
}

async function createNamespace(host: EngineHost, namespace: string): Promise<void> {
  const r = await host.kubectl(['create', 'namespace', namespace], { namespace: false });
  if (r.code !== 0 && !/AlreadyExists/.test(r.stderr)) ok(r, `create namespace ${namespace}`);
}

/**
 * Starts source-controller and kustomize-controller for `namespace` (created if missing), Flux's CRDs
 * installed first. Artifacts are served by source-controller on 127.0.0.1 and fetched from there by
 * kustomize-controller, as in a cluster.
 */
export async function startFlux(host: EngineHost, namespace: string): Promise<RunningEngine> {
  const bins = await gitopsBinaries(['source-controller', 'kustomize-controller']);
  await installEngineCrds(host, 'source-controller');
  await installEngineCrds(host, 'kustomize-controller');
  await createNamespace(host, namespace);
  const storage = mkdtempSync(join(tmpdir(), 'kd-flux-'));
  const env = { KUBECONFIG: host.info.kubeconfigPath, RUNTIME_NAMESPACE: namespace };
  const common = async () => {
    const [metrics, health] = [await freePort(), await freePort()];
    const args = [
      `--metrics-addr=127.0.0.1:${metrics}`,
      `--health-addr=127.0.0.1:${health}`,
      '--enable-leader-election=false',
      '--watch-all-namespaces=false',
      '--events-addr=',
      '--log-encoding=json',
      '--log-level=info',
      '--requeue-dependency=2s',
    ];
    return { args, ready: `http://127.0.0.1:${health}/readyz` };
  };
  const storagePort = await freePort();
  const sc = await common();
  const source = startBinary(
    'source-controller',
    bins['source-controller'],
    [
      ...sc.args,
      `--storage-path=${storage}`,
      `--storage-addr=127.0.0.1:${storagePort}`,
      `--storage-adv-addr=127.0.0.1:${storagePort}`,
    ],
    env,
  );
  const kc = await common();
  const kustomize = startBinary('kustomize-controller', bins['kustomize-controller'], kc.args, env);
  const running = engine([source, kustomize], () => rmSync(storage, { recursive: true, force: true }));
  try {
    await untilHealthy(source, sc.ready);
    await untilHealthy(kustomize, kc.ready);
  } catch (e) {
    await running.stop();
    throw e;
  }
  return running;
}

export interface ArgoCdOptions {
  /** argocd-cm data besides what the harness sets (e.g. resource.customizations.*). */
  settings?: Record<string, string>;
  /** Seconds between reconciliations of each Application (Argo CD's timeout.reconciliation). */
  resyncSeconds?: number;
}

/**
 * Starts Redis, the repo-server and the application-controller for `namespace` (created if missing),
 * with Argo CD's CRDs, the argocd-cm / argocd-secret it reads and the `default` AppProject (which
 * argocd-server would create; it does not run here). The controller reaches the test cluster as
 * Argo CD's in-cluster destination https://kubernetes.default.svc through the kubeconfig
 * (ARGOCD_FAKE_IN_CLUSTER, Argo CD's switch for running out of cluster).
 */
export async function startArgoCd(host: EngineHost, namespace: string, o: ArgoCdOptions = {}): Promise<RunningEngine> {
  const bins = await gitopsBinaries(['argocd']);
  await installEngineCrds(host, 'argocd');
  await createNamespace(host, namespace);
  const data = { 'timeout.reconciliation': `${o.resyncSeconds ?? 5}s`, ...o.settings };
  const objects = [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'argocd-cm', labels: { 'app.kubernetes.io/part-of': 'argocd' } },
      data,
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'argocd-secret', labels: { 'app.kubernetes.io/part-of': 'argocd' } },
      stringData: { 'server.secretkey': randomBytes(24).toString('base64') },
    },
    {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'AppProject',
      metadata: { name: 'default' },
      spec: {
        sourceRepos: ['*'],
        destinations: [{ server: '*', namespace: '*' }],
        clusterResourceWhitelist: [{ group: '*', kind: '*' }],
      },
    },
  ];
  ok(
    await host.kubectl(['apply', '-f', '-'], {
      namespace,
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    }),
    'apply Argo CD settings',
  );

  const home = mkdtempSync(join(tmpdir(), 'kd-argocd-'));
  // The repo-server renders a kustomization with the kustomize CLI (the Argo CD image ships one); here
  // kubectl's built-in kustomize (the same library) answers the two calls it makes.
  mkdirSync(join(home, 'bin'));
  writeFileSync(
    join(home, 'bin', 'kustomize'),
    [
      '#!/bin/sh',
      'case "$1" in',
      `  build) shift; exec '${host.info.binDir.kubectl}' kustomize "$@" ;;`,
      '  version) echo v5.0.0 ;;',
      '  *) echo "kustomize shim: unsupported: $*" >&2; exit 1 ;;',
      'esac',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  const [redisPort, repoPort, repoMetrics, ctrlMetrics] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const redis = startBinary(
    'redis-server',
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', home],
    {},
  );
  const env = {
    HOME: home,
    TMPDIR: home,
    ARGOCD_GPG_ENABLED: 'false',
    ARGOCD_PLUGINSOCKFILEPATH: join(home, 'plugins'),
    ARGOCD_SSH_DATA_PATH: join(home, 'ssh'),
    ARGOCD_TLS_DATA_PATH: join(home, 'tls'),
    ARGOCD_GNUPGHOME: join(home, 'gnupg'),
    // Applies the waves of a sync without the default 2 s pause between them.
    ARGOCD_SYNC_WAVE_DELAY: '0',
  };
  const repo = startBinary(
    'argocd-repo-server',
    bins.argocd,
    [
      '--address=127.0.0.1',
      `--port=${repoPort}`,
      '--metrics-address=127.0.0.1',
      `--metrics-port=${repoMetrics}`,
      `--redis=127.0.0.1:${redisPort}`,
      '--disable-tls',
      '--loglevel=info',
    ],
    { ...env, ARGOCD_BINARY_NAME: 'argocd-repo-server', PATH: `${join(home, 'bin')}:${process.env.PATH ?? ''}` },
  );
  const resync = String(o.resyncSeconds ?? 5);
  const controller = startBinary(
    'argocd-application-controller',
    bins.argocd,
    [
      `--kubeconfig=${host.info.kubeconfigPath}`,
      `--namespace=${namespace}`,
      `--redis=127.0.0.1:${redisPort}`,
      `--repo-server=127.0.0.1:${repoPort}`,
      '--repo-server-plaintext',
      `--metrics-port=${ctrlMetrics}`,
      `--app-resync=${resync}`,
      '--self-heal-timeout-seconds=1',
      '--loglevel=info',
    ],
    {
      ...env,
      ARGOCD_BINARY_NAME: 'argocd-application-controller',
      ARGOCD_FAKE_IN_CLUSTER: 'true',
      KUBECONFIG: host.info.kubeconfigPath,
    },
  );
  const running = engine([redis, repo, controller], () => rmSync(home, { recursive: true, force: true }));
  try {
    await untilHealthy(repo, `http://127.0.0.1:${repoMetrics}/metrics`);
    await untilHealthy(controller, `http://127.0.0.1:${ctrlMetrics}/healthz`);
  } catch (e) {
    await running.stop();
    throw e;
  }
  return running;
}
