/**
 * A real etcd + kube-apiserver on loopback, started the way controller-runtime's envtest does it:
 * free ports, a temporary directory, a throw-away PKI, an admin client certificate (system:masters),
 * a kubeconfig file and readiness waits. Everything stays on 127.0.0.1: the API server is told to bind
 * and advertise loopback and not to reconcile endpoints, and webhooks are only ever registered by URL.
 *
 * Teardown is explicit (stop()), on process exit, and — for a parent killed with SIGKILL — by a
 * detached watchdog that notices the parent is gone and kills both processes and removes the folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCA, createServingCert, type CertPair } from '@kd-connections/certs';
import { createClientCert, createSigningKey } from '../support/test-pki.js';
import { ensureBinaries } from './binaries.js';
import { freePort, waitFor } from './net.js';

/** Everything a client (another process, kubectl, a test worker) needs; JSON-serializable. */
export interface ControlPlaneInfo {
  dir: string;
  server: string;
  apiPort: number;
  etcdUrl: string;
  kubeconfigPath: string;
  auditLogPath: string;
  binDir: Record<'kube-apiserver' | 'etcd' | 'kubectl' | 'helm', string>;
  caPem: string;
  /** The CA's key: a node signs its kubelet's client certificate with it. */
  caKeyPem: string;
  adminCertPem: string;
  adminKeyPem: string;
  /** A CA for webhook servers run by tests, and a serving pair for 127.0.0.1/localhost signed by it. */
  webhookCaPem: string;
  webhookServing: CertPair;
  serviceAccountIssuer: string;
  /** Where the node started beside this control plane reports its state (see node-status.ts). */
  nodeStatusPath: string;
}

export interface StartOptions {
  /** Extra kube-apiserver flags, e.g. --admission-control-config-file. */
  apiserverFlags?: string[];
  /** Write an audit log of every write request (used to count API writes). Default true. */
  audit?: boolean;
  /** Progress messages (binary build, start). */
  log?: (msg: string) => void;
  startTimeoutMs?: number;
}

export interface ControlPlane extends ControlPlaneInfo {
  info(): ControlPlaneInfo;
  /** Process ids of etcd and kube-apiserver (for tests of the teardown itself). */
  pids(): { etcd?: number; apiserver?: number };
  /** Stops kube-apiserver only (etcd keeps the data); for fault-injection tests. */
  stopApiServer(): Promise<void>;
  /** Starts kube-apiserver again on the same port with the same data. */
  startApiServer(): Promise<void>;
  stop(): Promise<void>;
}

// Metadata for every write: enough to count writes by verb, resource and user, never bodies.
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`;

function get(url: string, tls?: https.RequestOptions): Promise<number> {
  return new Promise((ok, fail) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.get(url, { ...tls, timeout: 2000 }, (res) => {
      res.resume();
      ok(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', fail);
  });
}

/** SIGTERM, then SIGKILL after graceMs; resolves when the process has exited. */
export async function stopProcess(p: ChildProcess | undefined, graceMs = 10_000): Promise<void> {
  if (!p || p.exitCode !== null || p.signalCode) return;
  const exited = new Promise<void>((r) => p.once('exit', () => r()));
  p.kill('SIGTERM');
  const timer = setTimeout(() => p.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export function kubeconfigYaml(server: string, ca: string, cert: string, key: string): string {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  // JSON is YAML; kubectl, helm and client-node all read it.
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'kd-test', cluster: { server, 'certificate-authority-data': b64(ca) } }],
      users: [{ name: 'admin', user: { 'client-certificate-data': b64(cert), 'client-key-data': b64(key) } }],
      contexts: [{ name: 'kd-test', context: { cluster: 'kd-test', user: 'admin', namespace: 'default' } }],
      'current-context': 'kd-test',
    },
    null,
    2,
  );
}

export async function startControlPlane(opts: StartOptions = {}): Promise<ControlPlane> {
  const log = opts.log ?? (() => {});
  const startTimeout = opts.startTimeoutMs ?? 90_000;
  const bins = await ensureBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'kd-controlplane-'));
  const p = (f: string) => join(dir, f);

  // PKI: one CA for the API server's serving certificate and for client certificates.
  const ca = createCA({ commonName: 'kd-test-ca' });
  const serving = createServingCert({
    ca,
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    commonName: 'kube-apiserver',
  });
  const admin = createClientCert({ ca, commonName: 'admin', organizations: ['system:masters'] });
  const sa = createSigningKey();
  const webhookCa = createCA({ commonName: 'kd-test-webhook-ca' });
  const webhookServing = createServingCert({ ca: webhookCa, dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  writeFileSync(p('ca.crt'), ca.certPem);
  writeFileSync(p('apiserver.crt'), serving.certPem);
  writeFileSync(p('apiserver.key'), serving.keyPem, { mode: 0o600 });
  // The API server's client certificate towards kubelets (exec, logs, port-forward).
  const kubeletClient = createClientCert({
    ca,
    commonName: 'kube-apiserver-kubelet-client',
    organizations: ['system:masters'],
  });
  writeFileSync(p('kubelet-client.crt'), kubeletClient.certPem);
  writeFileSync(p('kubelet-client.key'), kubeletClient.keyPem, { mode: 0o600 });
  writeFileSync(p('sa.pub'), sa.publicKeyPem);
  writeFileSync(p('sa.key'), sa.privateKeyPem, { mode: 0o600 });
  writeFileSync(p('audit-policy.yaml'), AUDIT_POLICY);

  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const server = `https://127.0.0.1:${apiPort}`;
  const kubeconfigPath = p('kubeconfig');
  writeFileSync(kubeconfigPath, kubeconfigYaml(server, ca.certPem, admin.certPem, admin.keyPem), { mode: 0o600 });
  const tls = { ca: ca.certPem, cert: admin.certPem, key: admin.keyPem };

  const children: { etcd?: ChildProcess; api?: ChildProcess; watchdog?: ChildProcess } = {};
  const logFd = (name: string) => openSync(p(name), 'a');

  const spawnLogged = (bin: string, args: string[], logName: string): ChildProcess => {
    const fd = logFd(logName);
    const child = spawn(bin, args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    return child;
  };

  const killAllSync = () => {
    for (const c of [children.api, children.etcd]) if (c && c.exitCode === null) c.kill('SIGKILL');
  };
  process.once('exit', killAllSync);

  const armWatchdog = () => {
    children.watchdog?.kill('SIGKILL');
    const pids = [children.etcd?.pid, children.api?.pid].filter((x): x is number => !!x).join(' ');
    // Detached, so a Ctrl-C to the test's process group or a SIGKILL of the parent leaves it alive to clean up.
    const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; kill -TERM ${pids} 2>/dev/null; sleep 3; kill -KILL ${pids} 2>/dev/null; rm -rf '${dir}'`;
    children.watchdog = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
    children.watchdog.unref();
  };

  const stopEverything = async () => {
    await stopProcess(children.api);
    await stopProcess(children.etcd);
    children.watchdog?.kill('SIGKILL');
    process.removeListener('exit', killAllSync);
    if (!process.env.KD_KEEP_CONTROLPLANE) rmSync(dir, { recursive: true, force: true });
  };

  try {
    log(`starting etcd on 127.0.0.1:${etcdPort}`);
    children.etcd = spawnLogged(
      bins.etcd,
      [
        '--name=kd-test',
        `--data-dir=${p('etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=kd-test=http://127.0.0.1:${peerPort}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ],
      'etcd.log',
    );
    armWatchdog();
    await waitFor('etcd', startTimeout, async () => (await get(`${etcdUrl}/health`)) === 200, children.etcd);

    const apiArgs = [
      `--etcd-servers=${etcdUrl}`,
      // Loopback only: never bind, advertise or reconcile endpoints on another interface.
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--endpoint-reconciler-type=none',
      `--secure-port=${apiPort}`,
      `--cert-dir=${dir}`,
      `--tls-cert-file=${p('apiserver.crt')}`,
      `--tls-private-key-file=${p('apiserver.key')}`,
      `--client-ca-file=${p('ca.crt')}`,
      '--authorization-mode=RBAC',
      `--service-account-issuer=${server}/`,
      `--service-account-key-file=${p('sa.pub')}`,
      `--service-account-signing-key-file=${p('sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      // A node, if one joins, is named and addressed 127.0.0.1; its kubelet trusts this CA's clients.
      `--kubelet-client-certificate=${p('kubelet-client.crt')}`,
      `--kubelet-client-key=${p('kubelet-client.key')}`,
      '--kubelet-preferred-address-types=Hostname,InternalIP',
      '--profiling=false',
      ...(opts.audit === false
        ? []
        : [
            `--audit-policy-file=${p('audit-policy.yaml')}`,
            `--audit-log-path=${p('audit.log')}`,
            '--audit-log-format=json',
            '--audit-log-mode=blocking',
            '--audit-log-maxsize=0',
          ]),
      ...(opts.apiserverFlags ?? []),
    ];
    const startApi = async () => {
      log(`starting kube-apiserver on ${server}`);
      children.api = spawnLogged(bins['kube-apiserver'], apiArgs, 'apiserver.log');
      armWatchdog();
      await waitFor(
        'kube-apiserver',
        startTimeout,
        async () => (await get(`${server}/readyz`, tls)) === 200,
        children.api,
      );
      await waitFor(
        'default namespace',
        20_000,
        async () => (await get(`${server}/api/v1/namespaces/default`, tls)) === 200,
      );
    };
    await startApi();

    const info: ControlPlaneInfo = {
      dir,
      server,
      apiPort,
      etcdUrl,
      kubeconfigPath,
      auditLogPath: p('audit.log'),
      binDir: bins,
      caPem: ca.certPem,
      caKeyPem: ca.keyPem,
      adminCertPem: admin.certPem,
      adminKeyPem: admin.keyPem,
      webhookCaPem: webhookCa.certPem,
      webhookServing,
      serviceAccountIssuer: `${server}/`,
      nodeStatusPath: p('node-status.json'),
    };
    return {
      ...info,
      info: () => info,
      pids: () => ({ etcd: children.etcd?.pid, apiserver: children.api?.pid }),
      stopApiServer: () => stopProcess(children.api),
      startApiServer: startApi,
      stop: stopEverything,
    };
  } catch (e) {
    const tail = (f: string) => (existsSync(p(f)) ? readFileSync(p(f), 'utf8').split('\n').slice(-30).join('\n') : '');
    const detail = `\n--- etcd.log ---\n${tail('etcd.log')}\n--- apiserver.log ---\n${tail('apiserver.log')}`;
    await stopEverything();
    throw new Error(`${e instanceof Error ? e.message : String(e)}${detail}`);
  }
}
