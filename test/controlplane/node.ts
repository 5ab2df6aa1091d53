/**
 * A real node beside the harness's control plane: containerd (+ runc), a kubelet registered as
 * "127.0.0.1", kube-scheduler and kube-controller-manager. Pods run in real containers from images built
 * on this machine (test/images), never pulled. All traffic stays on loopback: the kubelet listens on
 * 127.0.0.1 and is known by that address, and the only CNI network is loopback, so pods that need the
 * network use hostNetwork.
 *
 * The host side effects and their undoing live in node-host.ts; a detached watchdog undoes them if this
 * process dies without stop().
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createClientCert } from '../support/test-pki.js';
import { ensureBinaries } from './binaries.js';
import { containerdPaths, createPodBridge, importImage, writeContainerdFiles } from './containerd.js';
import { kubeconfigYaml, stopProcess, type ControlPlaneInfo } from './controlplane.js';
import { waitFor } from './net.js';
import {
  acquireNodeLock,
  cleanupNodeHost,
  nodeStatePath,
  nodeTraces,
  readNodeState,
  snapshotHost,
  writeNodeState,
  type NodeHostState,
} from './node-host.js';
import { BUSYBOX_IMAGE, ensureBaseImages, PAUSE_IMAGE } from '../images/base-images.js';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));

export const NODE_NAME = '127.0.0.1';
const CNI_BIN_DIR = '/usr/lib/cni';

export interface NodeInfo {
  name: string;
  dir: string;
  statePath: string;
  containerdSocket: string;
  /** containerd's registry hosts folder (trustLoopbackRegistry writes there). */
  registryHosts: string;
  images: { pause: string; busybox: string };
}

export interface NodeHandle extends NodeInfo {
  info(): NodeInfo;
  /** Resolves when the Node object reports Ready. */
  ready: Promise<void>;
  /** Stops everything and undoes the host changes; resolves with whatever traces remain (none, normally). */
  stop(): Promise<string[]>;
}

/** Which host tools are missing, with the Debian packages that provide them. */
export function missingNodePrerequisites(): string[] {
  const need: [string, string][] = [
    ['/usr/bin/containerd', 'containerd'],
    ['/usr/bin/ctr', 'containerd'],
    ['/usr/sbin/runc', 'runc'],
    [join(CNI_BIN_DIR, 'loopback'), 'containernetworking-plugins'],
  ];
  const onPath = (f: string) =>
    existsSync(f) || (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, f.split('/').pop()!)));
  const missing = need.filter(([f]) => !onPath(f)).map(([f, pkg]) => `${f} (apt-get install ${pkg})`);
  if (process.getuid?.() !== 0) missing.push('root (the kubelet manages cgroups and mounts)');
  return missing;
}

/** Debian packages a node needs (busybox-static is only downloaded, by the image builder). */
export const NODE_PACKAGES = ['containerd', 'runc', 'containernetworking-plugins'];

/**
 * npm start's first-run path on a fresh machine: installs the runtime packages with apt when they are
 * missing and this is a root shell on Debian; otherwise leaves it to missingNodePrerequisites() to say.
 */
export async function installNodePrerequisites(log: (m: string) => void): Promise<void> {
  if (missingNodePrerequisites().length === 0 || process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) return;
  log(`installing ${NODE_PACKAGES.join(', ')} with apt-get (first run only)`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await run('apt-get', ['update', '-qq'], { env, maxBuffer: 64 * 1024 * 1024 });
  await run('apt-get', ['install', '-y', '-qq', ...NODE_PACKAGES], { env, maxBuffer: 64 * 1024 * 1024 });
}

function which(name: string): string {
  for (const d of (process.env.PATH ?? '').split(':').concat('/usr/bin', '/usr/sbin')) {
    if (d && existsSync(join(d, name))) return join(d, name);
  }
  throw new Error(`${name} not found`);
}

/** The kubelet's configuration; every setting here was needed on these machines (see docs/development.md). */
export function kubeletConfig(
  dir: string,
  containerdSocket: string,
  caFile: string,
  taint = false,
  syncFrequency: string | null = '10s',
): object {
  return {
    ...(taint ? { registerWithTaints: [TEST_NODE_TAINT] } : {}),
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // Hosts of this kind run cgroup v1 (hybrid) and have swap; neither matters for tests.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${containerdSocket}`,
    address: '127.0.0.1',
    healthzBindAddress: '127.0.0.1',
    readOnlyPort: 0,
    podLogsDir: join(dir, 'pod-logs'),
    volumePluginDir: join(dir, 'volume-plugins'),
    authentication: { x509: { clientCAFile: caFile }, webhook: { enabled: false }, anonymous: { enabled: false } },
    // Only the API server holds a client certificate of this CA, and the port is on loopback.
    authorization: { mode: 'AlwaysAllow' },
    // Imported images cannot be pulled again: never garbage-collect them; never evict for a full disk.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    // Volume contents (the configmeta file) follow the API within about a second of a pod update, but now
    // and then the kubelet misses one until its periodic resync (docs/performance.md): this bounds it.
    ...(syncFrequency === null ? {} : { syncFrequency }),
    serializeImagePulls: false,
    protectKernelDefaults: false,
    makeIPTablesUtilChains: false,
    maxPods: 110,
    resolvConf: '',
    enableDebuggingHandlers: true,
  };
}

function spawnLogged(dir: string, bin: string, args: string[], logName: string): ChildProcess {
  const fd = openSync(join(dir, logName), 'a');
  const child = spawn(bin, args, { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  return child;
}

function getJson(cp: ControlPlaneInfo, path: string): Promise<{ status: number; body: unknown }> {
  return new Promise((ok, fail) => {
    const req = https.get(
      `${cp.server}${path}`,
      { ca: cp.caPem, cert: cp.adminCertPem, key: cp.adminKeyPem, timeout: 5000 },
      (res) => {
        let s = '';
        res.on('data', (c: Buffer) => (s += c.toString()));
        res.on('end', () => {
          try {
            ok({ status: res.statusCode ?? 0, body: JSON.parse(s) });
          } catch {
            ok({ status: res.statusCode ?? 0, body: s });
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', fail);
  });
}

/** True when the node object's Ready condition is True. */
export async function nodeIsReady(cp: ControlPlaneInfo, name = NODE_NAME): Promise<boolean> {
  const r = await getJson(cp, `/api/v1/nodes/${name}`);
  if (r.status !== 200) return false;
  const conds = (r.body as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions ?? [];
  return conds.some((c) => c.type === 'Ready' && c.status === 'True');
}

const watchdogScript = [join(here, 'node-watchdog.js'), resolve(here, '../dist/controlplane/node-watchdog.js')].find(
  (p) => existsSync(p),
);

/**
 * The taint the test node registers with: pods of tests that do not ask for a node keep staying Pending
 * (as they did before a node existed); pods that should run carry TEST_NODE_TOLERATION.
 */
export const TEST_NODE_TAINT = { key: 'kd-connections.test/real-node', value: 'true', effect: 'NoSchedule' };
export const TEST_NODE_TOLERATION = { key: TEST_NODE_TAINT.key, operator: 'Exists', effect: 'NoSchedule' };

export interface NodeOptions {
  log?: (m: string) => void;
  /** Register with TEST_NODE_TAINT (the test suite's node); npm start's node takes every pod. */
  taint?: boolean;
  readyTimeoutMs?: number;
  /** The kubelet's syncFrequency (default '10s'); null leaves it unset, the kubelet's own default (1m). */
  syncFrequency?: string | null;
}

export async function startNode(cp: ControlPlaneInfo, opts: NodeOptions = {}): Promise<NodeHandle> {
  const log = opts.log ?? (() => {});
  const missing = missingNodePrerequisites();
  if (missing.length) throw new Error(`a node needs: ${missing.join('; ')}`);
  if (!cp.caKeyPem) throw new Error('this control plane was started without its CA key; a node cannot join it');
  const bins = await ensureBinaries(['kubelet', 'kube-scheduler', 'kube-controller-manager', 'kubectl']);
  const images = ensureBaseImages();

  const dir = mkdtempSync(join(tmpdir(), 'kd-node-'));
  const statePath = nodeStatePath();
  const state: NodeHostState = snapshotHost(dir);
  try {
    acquireNodeLock(state, log, statePath);
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const children: Record<string, ChildProcess> = {};
  const record = () => {
    state.pids = Object.fromEntries(
      Object.entries(children)
        .filter(([, c]) => c.pid)
        .map(([n, c]) => [n, c.pid!]),
    );
    writeNodeState(state, statePath);
  };
  // Detached: survives Ctrl-C to our process group and our SIGKILL, then cleans up.
  if (watchdogScript) {
    const w = spawn(process.execPath, [watchdogScript, String(process.pid), statePath], {
      detached: true,
      stdio: 'ignore',
    });
    w.unref();
  }

  let stopping: Promise<string[]> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const n of ['kube-scheduler', 'kube-controller-manager', 'kubelet', 'containerd'])
        await stopProcess(children[n]);
      cleanupNodeHost(state, log);
      const traces = nodeTraces(state);
      if (traces.length === 0 && readNodeState(statePath)?.ownerPid === process.pid) rmSync(statePath, { force: true });
      return traces;
    })());

  try {
    // containerd, then the images.
    const cd = containerdPaths(join(dir, 'containerd'));
    writeContainerdFiles(cd, PAUSE_IMAGE, CNI_BIN_DIR);
    createPodBridge();
    log('starting containerd');
    children.containerd = spawnLogged(dir, which('containerd'), ['--config', cd.config], 'containerd.log');
    record();
    const ctr = which('ctr');
    await waitFor(
      'containerd',
      30_000,
      async () => (await run(ctr, ['--address', cd.socket, 'version']).then(() => true)) ?? false,
      children.containerd,
      200,
    );
    for (const img of images) await importImage(ctr, cd.socket, img.archive);

    // Identity and permissions of the node.
    const p = (f: string) => join(dir, f);
    const ca = { certPem: cp.caPem, keyPem: cp.caKeyPem };
    const nodeCert = createClientCert({ ca, commonName: `system:node:${NODE_NAME}`, organizations: ['system:nodes'] });
    writeFileSync(p('ca.crt'), cp.caPem);
    writeFileSync(p('kubelet.kubeconfig'), kubeconfigYaml(cp.server, cp.caPem, nodeCert.certPem, nodeCert.keyPem), {
      mode: 0o600,
    });
    // The built-in system:node binding has no subjects when only RBAC authorizes.
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'kd-harness:system:nodes' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'system:nodes' }],
    };
    const apply = run(bins.kubectl, ['--kubeconfig', cp.kubeconfigPath, 'apply', '-f', '-']);
    apply.child.stdin?.end(JSON.stringify(binding));
    await apply;

    writeFileSync(
      p('kubelet.yaml'),
      JSON.stringify(
        kubeletConfig(
          dir,
          cd.socket,
          p('ca.crt'),
          opts.taint,
          opts.syncFrequency === undefined ? '10s' : opts.syncFrequency,
        ),
        null,
        2,
      ),
    );
    mkdirSync(p('kubelet'), { recursive: true });
    log('starting kubelet, kube-scheduler and kube-controller-manager');
    children.kubelet = spawnLogged(
      dir,
      bins.kubelet,
      [
        `--config=${p('kubelet.yaml')}`,
        `--kubeconfig=${p('kubelet.kubeconfig')}`,
        `--root-dir=${p('kubelet')}`,
        `--cert-dir=${p('kubelet-pki')}`,
        // An IP as hostname becomes the node's address, so the API server reaches exec/logs on loopback.
        `--hostname-override=${NODE_NAME}`,
        '--v=1',
      ],
      'kubelet.log',
    );
    // Their own identities (bound by the built-in RBAC roles), so their writes are never the admin's.
    for (const who of ['kube-scheduler', 'kube-controller-manager']) {
      const c = createClientCert({ ca, commonName: `system:${who}` });
      writeFileSync(p(`${who}.kubeconfig`), kubeconfigYaml(cp.server, cp.caPem, c.certPem, c.keyPem), { mode: 0o600 });
    }
    const common = ['--leader-elect=false', '--secure-port=0', '--v=1'];
    children['kube-scheduler'] = spawnLogged(
      dir,
      bins['kube-scheduler'],
      [`--kubeconfig=${p('kube-scheduler.kubeconfig')}`, ...common],
      'kube-scheduler.log',
    );
    children['kube-controller-manager'] = spawnLogged(
      dir,
      bins['kube-controller-manager'],
      [
        `--kubeconfig=${p('kube-controller-manager.kubeconfig')}`,
        ...common,
        `--service-account-private-key-file=${join(cp.dir, 'sa.key')}`,
        `--root-ca-file=${join(cp.dir, 'ca.crt')}`,
        // Each controller acts as its own ServiceAccount, with the roles RBAC gives it.
        '--use-service-account-credentials=true',
        // Its default is a fixed host folder it would create and watch.
        `--flex-volume-plugin-dir=${p('kcm-volume-plugins')}`,
        `--controllers=${[
          '*',
          // No cloud: nothing to balance, route or look up.
          '-cloud-node-lifecycle-controller',
          '-service-lb-controller',
          '-node-route-controller',
        ].join(',')}`,
      ],
      'kube-controller-manager.log',
    );
    record();

    const started = Date.now();
    const ready = waitFor(
      `node ${NODE_NAME} Ready`,
      opts.readyTimeoutMs ?? 120_000,
      () => nodeIsReady(cp),
      children.kubelet,
      250,
    ).then(
      () => log(`node ${NODE_NAME} Ready after ${Date.now() - started} ms`),
      (e: Error) => {
        throw new Error(`${e.message}\n--- kubelet.log ---\n${tail(p('kubelet.log'))}`);
      },
    );
    ready.catch(() => {});
    const info: NodeInfo = {
      name: NODE_NAME,
      dir,
      statePath,
      containerdSocket: cd.socket,
      registryHosts: cd.registryHosts,
      images: { pause: PAUSE_IMAGE, busybox: BUSYBOX_IMAGE },
    };
    return { ...info, info: () => info, ready, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

function tail(f: string): string {
  try {
    return readFileSync(f, 'utf8').split('\n').slice(-30).join('\n');
  } catch {
    return '';
  }
}
