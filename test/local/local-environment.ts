/**
 * `npm start`: kd-connections on a real control plane on this machine (DESIGN §9). Starts etcd +
 * kube-apiserver on loopback (building them first if needed), installs the CRDs, runs both services as
 * separate processes, registers the webhooks by URL on 127.0.0.1 with a generated CA, applies the
 * examples, adds member pods (no kubelet runs here, so they stay Pending; the reconciler writes their
 * configmeta annotation all the same), and prints a short tour. Everything lives in one temporary
 * folder that is removed on Ctrl-C.
 *
 * With --kubeconfig it runs both services against an existing cluster instead (no control plane, no
 * webhook registration: that cluster's API server could not reach this machine's loopback).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createCA, createServingCert } from '@kd-connections/certs';
import { startControlPlane, type ControlPlane } from '../controlplane/controlplane.js';
import { ensureBinaries } from '../controlplane/binaries.js';
import { waitFor } from '../controlplane/net.js';
import { installCrds } from '../support/crds.js';
import { run as runCommand, type ServiceProcess } from '../support/processes.js';
import { startAdmission, startReconciler } from '../support/services.js';
import { webhookConfigurations, WEBHOOK_NAMES } from '../support/webhook-configurations.js';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
/** The repository root, from test/local (sources) or test/dist/local (compiled). */
export const repoRoot = [resolve(here, '../..'), resolve(here, '../../..')].find((d) => {
  try {
    return JSON.parse(readFileSync(join(d, 'package.json'), 'utf8')).name === 'kd-connections';
  } catch {
    return false;
  }
})!;

export const DEMO_NAMESPACE = 'kd-demo';
export const SYSTEM_NAMESPACE = 'kd-system';
const CONFIG_NAME = 'kd-connections-local';

export interface LocalOptions {
  /** Run against this existing cluster instead of starting a control plane. */
  kubeconfig?: string;
  /** Namespaces the reconciler watches (default: all). */
  namespaces?: string[];
  say: (line: string) => void;
}

interface Service {
  name: string;
  proc: ServiceProcess;
  logFile: string;
}

export interface LocalEnvironment {
  dir: string;
  kubeconfigPath: string;
  stop(): Promise<void>;
  /** Resolves if a service exits on its own (with its name and code). */
  died: Promise<{ name: string; code: number | null; log: string }>;
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '';
  }
}

export async function startLocalEnvironment(o: LocalOptions): Promise<LocalEnvironment> {
  const dir = mkdtempSync(join(tmpdir(), 'kd-local-'));
  const services: Service[] = [];
  let cp: ControlPlane | undefined;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const s of services) await s.proc.stop();
    await cp?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const bins = await ensureBinaries(o.kubeconfig ? ['kubectl'] : undefined);
    let kubeconfigPath: string;
    let webhookTls: { caPem: string; certPem: string; keyPem: string };
    if (o.kubeconfig) {
      kubeconfigPath = resolve(o.kubeconfig);
      const ca = createCA({ commonName: 'kd-connections-local-ca' });
      const serving = createServingCert({ ca, dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
      webhookTls = { caPem: ca.certPem, ...serving };
    } else {
      o.say('Starting etcd and kube-apiserver on 127.0.0.1 ...');
      cp = await startControlPlane({ log: (m) => o.say(`  ${m}`) });
      kubeconfigPath = cp.kubeconfigPath;
      webhookTls = { caPem: cp.webhookCaPem, ...cp.webhookServing };
    }
    const kubectl = async (args: string[], input?: string) => {
      const p = run(bins.kubectl, ['--kubeconfig', kubeconfigPath, ...args], { maxBuffer: 16 * 1024 * 1024 });
      if (input !== undefined) p.child.stdin?.end(input);
      return (await p).stdout;
    };

    if (o.kubeconfig) {
      // Without the CRDs both services would wait for their caches forever; say so at once instead.
      const crds = await kubectl(['get', 'crd', '-o', 'name']).catch((e: { stderr?: string }) => {
        throw new Error(`cannot reach the cluster of ${kubeconfigPath}: ${e.stderr ?? String(e)}`);
      });
      const missing = ['kubedirectorapps', 'kubedirectorclusters'].filter(
        (n) => !crds.includes(`${n}.kubedirector.hpe.com`),
      );
      if (missing.length) {
        throw new Error(
          `the cluster has no ${missing.join(' and ')} CRD; install them first: kubectl apply -f ${join(repoRoot, 'charts/kd-connections/crds')}`,
        );
      }
    } else {
      o.say('Installing the CRDs ...');
      await installCrds({ kubectl: (args) => runCommand(bins.kubectl, ['--kubeconfig', kubeconfigPath, ...args]) });
      for (const ns of [SYSTEM_NAMESPACE, DEMO_NAMESPACE]) await kubectl(['create', 'namespace', ns]);
    }

    const host = { info: { kubeconfigPath, webhookCaPem: webhookTls.caPem, webhookServing: webhookTls } };
    const logFile = (name: string) => join(dir, `${name}.log`);
    o.say('Starting the admission service and the reconciler ...');
    const admission = await startAdmission(host, [`--system-namespace=${SYSTEM_NAMESPACE}`], {
      logFile: logFile('admission'),
      waitReady: false,
    });
    services.push({ name: 'admission', proc: admission, logFile: logFile('admission') });
    const reconciler = await startReconciler(host, {
      args: [
        `--system-namespace=${SYSTEM_NAMESPACE}`,
        `--lease-namespace=${o.kubeconfig ? 'default' : SYSTEM_NAMESPACE}`,
        ...(o.namespaces?.length ? [`--namespaces=${o.namespaces.join(',')}`] : []),
      ],
      logFile: logFile('reconciler'),
    });
    services.push({ name: 'reconciler', proc: reconciler, logFile: logFile('reconciler') });
    const died = Promise.race(
      services.map((s) => s.proc.exit.then(({ code }) => ({ name: s.name, code, log: tail(s.logFile) }))),
    );
    try {
      await admission.waitReady(120_000);
      await reconciler.waitReady(120_000);
    } catch (e) {
      throw new Error(
        `${(e as Error).message}\n--- admission.log ---\n${tail(services[0]!.logFile)}\n--- reconciler.log ---\n${tail(services[1]!.logFile)}`,
      );
    }

    if (!o.kubeconfig) {
      o.say('Registering the webhooks (clientConfig.url on 127.0.0.1) ...');
      const { validating, mutating } = webhookConfigurations({
        baseUrl: admission.url(''),
        caBundle: Buffer.from(webhookTls.caPem).toString('base64'),
        namespaceSelector: {
          matchExpressions: [
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', SYSTEM_NAMESPACE] },
          ],
        },
      });
      const list = {
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'ValidatingWebhookConfiguration',
            metadata: { name: CONFIG_NAME },
            webhooks: validating,
          },
          {
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'MutatingWebhookConfiguration',
            metadata: { name: CONFIG_NAME },
            webhooks: mutating,
          },
        ],
      };
      await kubectl(['apply', '-f', '-'], JSON.stringify(list));
      await waitUntilLive(kubectl);

      o.say('Applying the examples ...');
      const ex = (f: string) => join(repoRoot, 'examples', f);
      for (const f of ['10-apps.yaml', '20-configmaps.yaml', '30-secrets.yaml', '40-clusters.yaml'])
        await kubectl(['-n', DEMO_NAMESPACE, 'apply', '-f', ex(f)]);
      const pods = await demoPods(kubectl);
      await kubectl(
        ['-n', DEMO_NAMESPACE, 'apply', '-f', '-'],
        JSON.stringify({ apiVersion: 'v1', kind: 'List', items: pods }),
      );
      o.say('Waiting for the reconciler to deliver configmeta to the member pods ...');
      await waitFor(
        'configmeta in every member pod',
        120_000,
        async () => {
          const got = JSON.parse(await kubectl(['-n', DEMO_NAMESPACE, 'get', 'pods', '-o', 'json'])) as {
            items: { metadata: { annotations?: Record<string, string> } }[];
          };
          return (
            got.items.length === pods.length &&
            got.items.every((p) => p.metadata.annotations?.['kubedirector.hpe.com/configmeta'])
          );
        },
        undefined,
        500,
      );
    }
    return { dir, kubeconfigPath, stop, died };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Until the API server calls the validating webhook: a dry-run kdcluster with a missing app is denied. */
async function waitUntilLive(kubectl: (args: string[], input?: string) => Promise<string>): Promise<void> {
  const marker = JSON.stringify({
    apiVersion: 'kubedirector.hpe.com/v1beta1',
    kind: 'KubeDirectorCluster',
    metadata: { name: 'webhook-marker', namespace: DEMO_NAMESPACE },
    spec: { app: 'no-such-app-marker' },
  });
  await waitFor('webhooks live', 30_000, async () => {
    try {
      await kubectl(['create', '--dry-run=server', '-f', '-'], marker);
      return false;
    } catch (e) {
      return String((e as { stderr?: string }).stderr ?? '').includes(WEBHOOK_NAMES.validateCluster);
    }
  });
}

/** Member pods for every example cluster (at most two per role), named <cluster>-<role>-<i>. */
async function demoPods(kubectl: (args: string[]) => Promise<string>): Promise<object[]> {
  const clusters = JSON.parse(await kubectl(['-n', DEMO_NAMESPACE, 'get', 'kubedirectorclusters', '-o', 'json'])) as {
    items: { metadata: { name: string }; spec: { roles?: { id: string; members?: number }[] } }[];
  };
  const pods: object[] = [];
  for (const c of clusters.items) {
    for (const r of c.spec.roles ?? []) {
      for (let i = 0; i < Math.min(r.members ?? 1, 2); i++) {
        pods.push({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: `${c.metadata.name}-${r.id.toLowerCase()}-${i}`,
            labels: { 'kubedirector.hpe.com/kdcluster': c.metadata.name, 'kubedirector.hpe.com/role': r.id },
          },
          spec: { containers: [{ name: 'app', image: 'registry.invalid/kd-demo:1' }] },
        });
      }
    }
  }
  return pods;
}

export function tour(env: LocalEnvironment, binDir: string, local: boolean): string {
  const k = `kubectl -n ${DEMO_NAMESPACE}`;
  const lines = [
    '',
    'kd-connections is running.',
    '',
    `  export KUBECONFIG=${env.kubeconfigPath}`,
    `  export PATH=${binDir}:$PATH    # kubectl v1.36 and helm, built for this project`,
    '',
  ];
  if (local) {
    lines.push(
      'Try:',
      '  1. A connection the notebook app does not allow (postgres is a database) is denied:',
      `     ${k} apply -f ${join(repoRoot, 'examples/denied/notebook-to-postgres.yaml')}`,
      '  2. Edit a connected ConfigMap; the clusters that use it get a new configmeta generator:',
      `     ${k} patch configmap model-prediction --type=merge -p '{"data":{"path":"/models/resnet50/4"}}'`,
      `     ${k} get kdcluster`,
      "  3. Read a member pod's configmeta (the reconciler keeps it in an annotation):",
      `     ${k} get pod notebook-controller-0 -o jsonpath='{.metadata.annotations.kubedirector\\.hpe\\.com/configmeta}'`,
      '',
    );
  } else {
    lines.push(
      'Both services run against the cluster of the given kubeconfig. Webhooks were not registered: that',
      "cluster's API server cannot reach this machine's 127.0.0.1. Install the chart to use them there.",
      '',
    );
  }
  lines.push(
    `Logs: ${join(env.dir, 'admission.log')}  ${join(env.dir, 'reconciler.log')}`,
    'Press Ctrl-C to stop everything.',
    '',
  );
  return lines.join('\n');
}
