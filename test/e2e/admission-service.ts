/**
 * The built admission service (node admission/dist/main.js) run against the test control plane, and
 * its webhook configurations registered in `url` mode on 127.0.0.1 with the test webhook CA (or with no
 * caBundle, for the service's certificate bootstrap mode to fill in) — never
 * `clientConfig.service`. A configuration counts as live only when the API server demonstrably calls
 * it (the marker technique): a dry-run kdcluster with a missing app is denied only by the validating
 * webhook; a dry-run kdcluster and pod come back mutated only through the mutating one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type V1MutatingWebhook,
  type V1ValidatingWebhook,
} from '@kubernetes/client-node';
import type { RunResult, TestEnv } from '../support/cluster.js';
import { freePort } from '../controlplane/net.js';
import { metricSum } from '../support/prometheus-text.js';

export const repoPath = (rel: string): string => fileURLToPath(new URL(`../../${rel}`, import.meta.url));
const MAIN = repoPath('admission/dist/main.js');
const CRD_DIR = repoPath('charts/kd-connections/crds');
const CRDS = ['kubedirectorapps.kubedirector.hpe.com', 'kubedirectorclusters.kubedirector.hpe.com'];
const G = { group: 'kubedirector.hpe.com', version: 'v1beta1' } as const;

export function must(r: RunResult, what: string): RunResult {
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}):\n${r.stderr}\n${r.stdout}`);
  return r;
}

/** The CRDs are cluster-scoped and shared by every test file: apply (idempotent) and wait until served. */
export async function installCrds(env: TestEnv): Promise<void> {
  must(await env.kubectl(['apply', '-f', CRD_DIR], { namespace: false }), 'kubectl apply CRDs');
  must(
    await env.kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...CRDS.map((n) => `crd/${n}`)], {
      namespace: false,
    }),
    'kubectl wait Established',
  );
}

export interface LogLine {
  msg: string;
  level: string;
  [k: string]: unknown;
}

export interface RunningAdmission {
  readonly port: number;
  readonly pid: number;
  readonly certFile: string;
  readonly keyFile: string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  url(path: string): string;
  logs(): LogLine[];
  /** Replaces the serving pair the way a Secret volume update does (write aside, rename over). */
  writeCertificate(certPem: string, keyPem: string): void;
  metrics(): Promise<string>;
  /** Sum of kd_admission_requests_total samples whose labels include every given label. */
  requests(labels: Record<string, string>): Promise<number>;
  signal(sig: NodeJS.Signals): void;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** false: no certificate files (the flags choose another mode, e.g. --tls-mode=bootstrap). Default true. */
  certificateFiles?: boolean;
  /** The CA that verifies the service for /readyz and /metrics; default the test webhook CA. */
  trustedCa?: () => string | Promise<string>;
}

/**
 * Starts the service on 127.0.0.1 (a free port, unless extraArgs pass --port) with the control plane's
 * webhook serving pair, or with what the flags say when `certificateFiles` is false.
 */
export async function startAdmission(
  env: TestEnv,
  extraArgs: string[] = [],
  opts: StartOptions = {},
): Promise<RunningAdmission> {
  const files = opts.certificateFiles !== false;
  const trustedCa = opts.trustedCa ?? (() => env.info.webhookCaPem);
  const dir = mkdtempSync(join(tmpdir(), 'kd-admission-e2e-'));
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  const writeCertificate = (certPem: string, keyPem: string) => {
    // Key first, then certificate: the loader skips the mismatched pair in between.
    writeFileSync(join(dir, 'tls.key.tmp'), keyPem, { mode: 0o600 });
    renameSync(join(dir, 'tls.key.tmp'), keyFile);
    writeFileSync(join(dir, 'tls.crt.tmp'), certPem);
    renameSync(join(dir, 'tls.crt.tmp'), certFile);
  };
  if (files) writeCertificate(env.info.webhookServing.certPem, env.info.webhookServing.keyPem);
  const port = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [
      MAIN,
      // A port chosen here rather than read from the "listening" log line: any --log-level works.
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      ...(files ? [`--tls-cert-file=${certFile}`, `--tls-key-file=${keyFile}`] : []),
      `--kubeconfig=${env.info.kubeconfigPath}`,
      '--log-level=info',
      ...extraArgs,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KUBECONFIG: '' } },
  );
  const lines: LogLine[] = [];
  let stderr = '';
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    partial += chunk;
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try {
        lines.push(JSON.parse(line) as LogLine);
      } catch {
        lines.push({ msg: 'unstructured output', level: 'invalid', line });
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );

  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void exited.then((e) => (exit = e));
  const url = (path: string) => `https://127.0.0.1:${port}${path}`;
  const get = async (path: string) => httpsGet(url(path), await trustedCa());
  // Ready = certificate loaded and every cache synced.
  for (let i = 0; ; i++) {
    const r = await get('/readyz').catch(() => undefined);
    if (r?.status === 200) break;
    if (exit) throw new Error(`admission exited (${exit.code ?? exit.signal}) before it was ready:\n${stderr}`);
    if (i > 600) throw new Error(`admission not ready: ${r?.body}`);
    await sleep(50);
  }
  const metrics = async () => (await get('/metrics')).body;
  return {
    port,
    pid: child.pid!,
    certFile,
    keyFile,
    exited,
    url,
    logs: () => lines,
    writeCertificate,
    metrics,
    requests: async (labels) => metricSum(await metrics(), 'kd_admission_requests_total', labels),
    signal: (sig) => child.kill(sig),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function httpsGet(
  url: string,
  ca: string,
): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((ok, fail) => {
    https
      .get(url, { ca, agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body, headers: res.headers }));
      })
      .on('error', fail);
  });
}

export const WEBHOOK_NAMES = {
  validateCluster: 'validate-kdcluster.kd-connections.hpe.com',
  validateApp: 'validate-kdapp.kd-connections.hpe.com',
  mutateCluster: 'mutate-kdcluster.kd-connections.hpe.com',
  mutatePod: 'mutate-pod.kd-connections.hpe.com',
};

export interface Registration {
  name: string;
  remove(): Promise<void>;
}

/**
 * Registers the four webhooks for one namespace, as the chart does in its out-of-cluster `url` mode:
 * validating Fail, mutating Ignore, v1 only, sideEffects None, pods only with the kdcluster label.
 */
export async function registerWebhooks(
  env: TestEnv,
  svc: Pick<RunningAdmission, 'url'>,
  opts: { caBundle?: false } = {},
): Promise<Registration> {
  const admission = env.kc.makeApiClient(AdmissionregistrationV1Api);
  const name = `kd-admission-${env.namespace}`;
  // caBundle false: left out, for a certificate bootstrapper to fill in.
  const caBundle = opts.caBundle === false ? undefined : Buffer.from(env.info.webhookCaPem).toString('base64');
  const common = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    matchPolicy: 'Equivalent',
    timeoutSeconds: 5,
  };
  const kd = (resource: string) => [
    {
      apiGroups: [G.group],
      apiVersions: [G.version],
      operations: ['CREATE', 'UPDATE'],
      resources: [resource],
      scope: 'Namespaced',
    },
  ];
  const validating: V1ValidatingWebhook[] = [
    {
      name: WEBHOOK_NAMES.validateCluster,
      clientConfig: { url: svc.url('/validate-kdcluster'), caBundle },
      rules: kd('kubedirectorclusters'),
      failurePolicy: 'Fail',
      ...common,
    },
    {
      name: WEBHOOK_NAMES.validateApp,
      clientConfig: { url: svc.url('/validate-kdapp'), caBundle },
      rules: kd('kubedirectorapps'),
      failurePolicy: 'Fail',
      ...common,
    },
  ];
  const mutating: V1MutatingWebhook[] = [
    {
      name: WEBHOOK_NAMES.mutateCluster,
      clientConfig: { url: svc.url('/mutate-kdcluster'), caBundle },
      rules: kd('kubedirectorclusters'),
      failurePolicy: 'Ignore',
      reinvocationPolicy: 'Never',
      ...common,
    },
    {
      name: WEBHOOK_NAMES.mutatePod,
      clientConfig: { url: svc.url('/mutate-pod'), caBundle },
      rules: [
        { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' },
      ],
      // Only member pods are sent at all.
      objectSelector: { matchExpressions: [{ key: 'kubedirector.hpe.com/kdcluster', operator: 'Exists' }] },
      failurePolicy: 'Ignore',
      reinvocationPolicy: 'Never',
      ...common,
    },
  ];
  await admission.createValidatingWebhookConfiguration({ body: { metadata: { name }, webhooks: validating } });
  await admission.createMutatingWebhookConfiguration({ body: { metadata: { name }, webhooks: mutating } });
  return {
    name,
    async remove() {
      await admission.deleteValidatingWebhookConfiguration({ name }).catch(() => undefined);
      await admission.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
    },
  };
}

/**
 * Waits until the API server calls both configurations. Creates (for real) a kdapp and a labelled
 * ConfigMap the mutating markers need; everything else is dry-run.
 */
export async function waitUntilLive(env: TestEnv, timeoutMs = 30_000): Promise<void> {
  const ns = env.namespace;
  const custom = env.kc.makeApiClient(CustomObjectsApi);
  const core = env.kc.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name: 'marker-cm', labels: { 'kubedirector.hpe.com/cmType': 'marker' } } },
  });
  const end = Date.now() + timeoutMs;
  const until = async (what: string, live: () => Promise<boolean>) => {
    while (!(await live())) {
      if (Date.now() > end) throw new Error(`webhook configuration not live after ${timeoutMs} ms: ${what}`);
      await sleep(100);
    }
  };
  const cluster = (name: string, spec: Record<string, unknown>) =>
    custom.createNamespacedCustomObject({
      ...G,
      plural: 'kubedirectorclusters',
      namespace: ns,
      dryRun: 'All',
      body: { apiVersion: `${G.group}/${G.version}`, kind: 'KubeDirectorCluster', metadata: { name }, spec },
    });
  await until('validating (marker kdcluster with a missing app denied)', async () => {
    try {
      await cluster('marker-validating', { app: 'marker-app-that-does-not-exist' });
      return false;
    } catch (e) {
      const body = String((e as { body?: unknown }).body ?? '');
      if ((e as { code?: number }).code === 403 && body.includes(WEBHOOK_NAMES.validateCluster)) return true;
      throw e;
    }
  });
  // The kdapp goes through the (now live) validating kdapp webhook.
  await custom.createNamespacedCustomObject({
    ...G,
    plural: 'kubedirectorapps',
    namespace: ns,
    body: {
      apiVersion: `${G.group}/${G.version}`,
      kind: 'KubeDirectorApp',
      metadata: { name: 'marker-app' },
      spec: { label: { name: 'marker' }, distroID: 'kd/marker', version: '1', category: 'marker' },
    },
  });
  await until('mutating kdcluster (dry-run create comes back with a generator)', async () => {
    const got = (await cluster('marker-mutating', {
      app: 'marker-app',
      connections: { configmaps: ['marker-cm'] },
    })) as { spec?: { configMetaGenerator?: number } };
    return got.spec?.configMetaGenerator === 1;
  });
  await until('mutating pod (dry-run member pod comes back with the volume)', async () => {
    const pod = await core.createNamespacedPod({
      namespace: ns,
      dryRun: 'All',
      body: {
        metadata: { name: 'marker-pod', labels: { 'kubedirector.hpe.com/kdcluster': 'marker' } },
        spec: { containers: [{ name: 'c', image: 'busybox:1.36' }] },
      },
    });
    return (pod.spec?.volumes ?? []).some((v) => v.name === 'kd-configmeta');
  });
}
