/**
 * The one way the harness starts the services under test: the built admission service
 * (admission/dist/main.js) and reconciler (reconciler/dist/main.js) as real processes on 127.0.0.1.
 * Cluster tests, the chart tests (with the chart's container args), the benchmark, the soak and
 * `npm start` all start them here. No jest dependency.
 *
 * Flags: the defaults below come first and the caller's args after them; the services take the last
 * value of a repeated flag, so a caller's flag replaces a default. Node runs with the service's flags from
 * shared/src/runtime/service-node-flags.ts (as in its image), in NODE_OPTIONS (see serviceNodeOptions).
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVICE_NODE_FLAGS } from '@kd-connections/shared/runtime';
import { freePort } from '../controlplane/net.js';
import type { ControlPlaneInfo } from '../controlplane/controlplane.js';
import { metricSum } from './prometheus-text.js';
import { sleep, startService, type ServiceProcess, type StartServiceOptions } from './processes.js';

/** What the services need of a cluster; a TestEnv (its info, its namespace) has this shape. */
export interface ServiceHost {
  readonly info: Pick<ControlPlaneInfo, 'kubeconfigPath' | 'webhookCaPem' | 'webhookServing'>;
  /** A test's namespace: the reconciler then watches only it and keeps its lease there. */
  readonly namespace?: string;
}

/**
 * NODE_OPTIONS of a service started here: its image's node flags, then the NODE_OPTIONS this process was
 * given (later flags win). A caller that sets env.NODE_OPTIONS itself (even to '') replaces all of it,
 * which is how a bench A/B runs Node's defaults.
 */
export function serviceNodeOptions(service: keyof typeof SERVICE_NODE_FLAGS): string {
  return [...SERVICE_NODE_FLAGS[service], process.env.NODE_OPTIONS ?? ''].join(' ').trim();
}

function serviceEnv(service: keyof typeof SERVICE_NODE_FLAGS, env: NodeJS.ProcessEnv | undefined): NodeJS.ProcessEnv {
  return { NODE_OPTIONS: serviceNodeOptions(service), ...env, KUBECONFIG: '' };
}

interface ProcessOptions extends StartServiceOptions {
  /** Extra environment (KUBECONFIG is always emptied: --kubeconfig says which cluster). */
  env?: NodeJS.ProcessEnv;
  /** Default: the host's kubeconfig (the chart tests pass a ServiceAccount's). */
  kubeconfig?: string;
  /** How long to wait for /readyz (default 90 s: a loaded machine can take tens of seconds to start node). */
  readyTimeoutMs?: number;
}

export interface AdmissionOptions extends ProcessOptions {
  /** Default: a free port. */
  port?: number;
  /** false: no certificate files (the flags choose another mode, e.g. --tls-mode=bootstrap). Default true. */
  certificateFiles?: boolean;
  /** The CA that verifies the service for /readyz and /metrics; default the test webhook CA. */
  trustedCa?: () => string | Promise<string>;
  /** false: return once started, without waiting for /readyz (e.g. when it needs a client certificate). */
  waitReady?: boolean;
}

export interface RunningAdmission extends ServiceProcess {
  readonly port: number;
  readonly certFile: string;
  readonly keyFile: string;
  url(path: string): string;
  /** Replaces the serving pair the way a Secret volume update does (write aside, rename over). */
  writeCertificate(certPem: string, keyPem: string): void;
  metrics(): Promise<string>;
  /** Sum of kd_admission_requests_total samples whose labels include every given label. */
  requests(labels: Record<string, string>): Promise<number>;
  /** Waits until /readyz answers 200 (startAdmission already did, unless told not to). */
  waitReady(timeoutMs?: number): Promise<void>;
  /** Stops the service (SIGTERM) and removes its certificate folder. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
}

/**
 * Starts the admission service on 127.0.0.1 with the control plane's webhook serving pair in files
 * (or what the flags say when `certificateFiles` is false) and waits until /readyz answers 200
 * (certificate loaded, every cache synced).
 */
export async function startAdmission(
  host: ServiceHost,
  extraArgs: string[] = [],
  o: AdmissionOptions = {},
): Promise<RunningAdmission> {
  const files = o.certificateFiles !== false;
  const trustedCa = o.trustedCa ?? (() => host.info.webhookCaPem);
  const dir = mkdtempSync(join(tmpdir(), 'kd-admission-'));
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  const writeCertificate = (certPem: string, keyPem: string) => {
    // Key first, then certificate: the loader skips the mismatched pair in between.
    writeFileSync(join(dir, 'tls.key.tmp'), keyPem, { mode: 0o600 });
    renameSync(join(dir, 'tls.key.tmp'), keyFile);
    writeFileSync(join(dir, 'tls.crt.tmp'), certPem);
    renameSync(join(dir, 'tls.crt.tmp'), certFile);
  };
  if (files) writeCertificate(host.info.webhookServing.certPem, host.info.webhookServing.keyPem);
  const port = o.port ?? (await freePort());
  const p = startService(
    'admission/dist/main.js',
    [
      // A port chosen here rather than read from the "listening" log line: any --log-level works.
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      ...(files ? [`--tls-cert-file=${certFile}`, `--tls-key-file=${keyFile}`] : []),
      `--kubeconfig=${o.kubeconfig ?? host.info.kubeconfigPath}`,
      // Every review's line (debug): tests wait on them. A later --log-level in extraArgs wins.
      '--log-level=debug',
      ...extraArgs,
    ],
    serviceEnv('admission', o.env),
    o,
  );
  const url = (path: string) => `https://127.0.0.1:${port}${path}`;
  const get = async (path: string) => httpsGet(url(path), await trustedCa());
  const metrics = async () => (await get('/metrics')).body;
  const stopProcess = p.stop.bind(p);
  const svc: RunningAdmission = Object.assign(p, {
    port,
    certFile,
    keyFile,
    url,
    writeCertificate,
    metrics,
    requests: async (labels: Record<string, string>) =>
      metricSum(await metrics(), 'kd_admission_requests_total', labels),
    waitReady: (timeoutMs?: number) =>
      untilReady(svc, 'admission', async () => (await get('/readyz')).status === 200, timeoutMs ?? o.readyTimeoutMs),
    async stop(signal?: NodeJS.Signals, graceMs?: number) {
      const code = await stopProcess(signal, graceMs);
      rmSync(dir, { recursive: true, force: true });
      return code;
    },
  });
  if (o.waitReady !== false) await svc.waitReady();
  return svc;
}

export interface ReconcilerOptions extends ProcessOptions {
  /** --leader-elect-identity; default a random test-… name when the host has a namespace (the chart sets KD_RECONCILER_LEADER_ELECT_IDENTITY). */
  identity?: string;
  args?: string[];
  /** Default the host's namespace. */
  systemNamespace?: string;
  leaderElect?: boolean;
}

export interface ReconcilerProcess extends ServiceProcess {
  /** The metrics and probe port on 127.0.0.1. */
  port: number;
  identity: string;
  /** Current value of a Prometheus series, e.g. metric('kd_reconciler_api_writes_total', {kind: 'pod', result: 'ok'}). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** Waits until /readyz answers 200 (caches synced). */
  waitReady(timeoutMs?: number): Promise<void>;
}

/**
 * Starts the reconciler with its metrics and probes on 127.0.0.1. For a test (the host has a namespace)
 * it watches that namespace only, keeps its lease there, and uses short watch timeouts so reconnects are
 * exercised during the suite; otherwise the caller's flags decide. Returns at once: a standby never
 * becomes leader, and some tests expect the process to exit; `waitReady` waits for /readyz.
 */
export async function startReconciler(host: ServiceHost, o: ReconcilerOptions = {}): Promise<ReconcilerProcess> {
  const port = await freePort();
  const ns = host.namespace;
  const identity =
    o.identity ?? o.env?.KD_RECONCILER_LEADER_ELECT_IDENTITY ?? `test-${Math.random().toString(36).slice(2, 8)}`;
  const scoped =
    ns === undefined
      ? []
      : [
          `--watch-namespaces=${ns}`,
          `--system-namespace=${o.systemNamespace ?? ns}`,
          `--leader-elect-resource-namespace=${ns}`,
          `--leader-elect=${o.leaderElect ?? true}`,
          '--watch-timeout-seconds=60',
        ];
  const p = startService(
    'reconciler/dist/main.js',
    [
      `--kubeconfig=${o.kubeconfig ?? host.info.kubeconfigPath}`,
      `--metrics-bind-address=127.0.0.1:${port}`,
      ...(o.identity !== undefined || ns !== undefined ? [`--leader-elect-identity=${identity}`] : []),
      // Tests add member pods one at a time as they go: no wait for a full set before the first delivery,
      // unless a test asks for it (its own tests do; the chart's value comes later in args and wins).
      '--first-delivery-wait=0s',
      ...scoped,
      ...(o.args ?? []),
    ],
    serviceEnv('reconciler', o.env),
    o,
  );
  const metric = async (name: string, labels: Record<string, string> = {}) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return metricSum(text, name, labels);
  };
  const rec: ReconcilerProcess = Object.assign(p, {
    port,
    identity,
    metric,
    waitReady: (timeoutMs?: number) =>
      untilReady(
        rec,
        'reconciler',
        async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        timeoutMs ?? o.readyTimeoutMs,
      ),
  });
  return rec;
}

/** Polls `ready`; fails at once with the output when the process exits, and stops it on timeout. */
async function untilReady(
  p: ServiceProcess,
  name: string,
  ready: () => Promise<boolean>,
  timeoutMs = 90_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await ready().catch(() => false)) return;
    if (p.exited) throw new Error(`${name} exited before it was ready:\n${p.output().slice(-3000)}`);
    if (Date.now() > end) {
      await p.stop();
      throw new Error(`${name} not ready after ${timeoutMs} ms:\n${p.output().slice(-3000)}`);
    }
    await sleep(50);
  }
}

export function httpsGet(
  url: string,
  ca: string,
): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    https
      .get(url, { ca, agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      })
      .on('error', reject);
  });
}
