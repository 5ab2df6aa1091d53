/**
 * `npm start`: kd-connections on a real single-node cluster on this machine. Starts etcd +
 * kube-apiserver on loopback (building them first if needed) and a node (containerd, kubelet, scheduler,
 * controller-manager; see test/controlplane/node.ts), starts a registry on 127.0.0.1 (CNCF Distribution)
 * and pushes the member pods' sidecar image there with crane, built as `npm run images` builds it (the node
 * pulls it by digest, as a user's node pulls a release), installs the CRDs, runs both services as separate
 * processes, registers the webhooks by URL on 127.0.0.1 with a generated CA, applies the examples, runs
 * their member pods as real containers (busybox built locally, host network), waits until they are Ready
 * and hold their configmeta file, and prints a short tour. Everything lives in temporary folders that are
 * removed on Ctrl-C, and the node's host changes are undone.
 *
 * When a node cannot run here (not root, no containerd, or another run's node holds this machine), it
 * says why and goes on without one: member pods then stay Pending and configmeta stays an annotation.
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
import { parseAllDocuments } from 'yaml';
import { createCA, createServingCert } from '@kd-connections/certs';
import { buildGuestconfigImage, packageVersion, pushImages } from '@kd-connections/images';
import { KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../controlplane/controlplane.js';
import { installNodePrerequisites, startNode, type NodeHandle } from '../controlplane/node.js';
import { trustLoopbackRegistry } from '../controlplane/containerd.js';
import { startRegistry, type LocalRegistry } from '../support/oci-registry.js';
import { BUSYBOX_IMAGE } from '../images/base-images.js';
import { CONFIGMETA_DIR } from '@kd-connections/shared/delivery';
import { CONFIGMETA_FILE, PRIVATE_CONFIGMETA_FILE } from '@kd-connections/shared/domain';
import { ensureBinaries, ensureRegistryBinaries } from '../controlplane/binaries.js';
import { waitFor } from '../controlplane/net.js';
import { installCrds } from '../support/crds.js';
import { createNamespace } from '../support/namespaces.js';
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
  /** Member pods run as containers (a node runs); false: they stay Pending. */
  node: boolean;
  /** The registry on 127.0.0.1 the node pulls from, and the sidecar image pushed there (by digest). */
  registry?: string;
  sidecarImage?: string;
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
  let node: Promise<NodeHandle | undefined> | undefined;
  let registry: LocalRegistry | undefined;
  let craneBin: string | undefined;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const s of services) await s.proc.stop();
    await (await node)?.stop();
    await registry?.stop();
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
      o.say('Starting a registry on 127.0.0.1 (the node pulls the sidecar image from it) ...');
      // Both built from the Go module proxy on first use (about two minutes), then cached.
      const { registry: registryBin, crane } = await ensureRegistryBinaries();
      craneBin = crane;
      const reg = (registry = await startRegistry({ binary: registryBin }));
      // The node comes up while the CRDs, services and webhooks are set up.
      const nodeStarted = Date.now();
      node = (async () => {
        let n: NodeHandle | undefined;
        try {
          await installNodePrerequisites((m) => o.say(`  ${m}`));
          n = await startNode(cp.info(), { log: (m) => o.say(`  ${m}`) });
          trustLoopbackRegistry(n.registryHosts, reg.host);
          await n.ready;
          o.say(`  node Ready ${Date.now() - nodeStarted} ms after its start`);
          return n;
        } catch (e) {
          o.say(`  No node on this machine (${(e as Error).message.split('\n')[0]}); member pods will stay Pending.`);
          await n?.stop();
          return undefined;
        }
      })();
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
          `the cluster has no ${missing.join(' and ')} CRD; install them first: kubectl apply -f ${join(repoRoot, 'charts/kd-connections/files/crds')}`,
        );
      }
    } else {
      o.say('Installing the CRDs ...');
      await installCrds({ kubectl: (args) => runCommand(bins.kubectl, ['--kubeconfig', kubeconfigPath, ...args]) });
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      // With their default ServiceAccount: the API server admits pods only once it exists.
      for (const ns of [SYSTEM_NAMESPACE, DEMO_NAMESPACE]) await createNamespace(kc, ns, {});
    }

    // The sidecar every member pod gets, released to the registry; admission names it by digest.
    let sidecarImage: string | undefined;
    if (registry) {
      o.say(`Building the guestconfig sidecar image and pushing it to ${registry.host} ...`);
      const built = buildGuestconfigImage({
        repoRoot,
        outDir: join(dir, 'images'),
        tag: packageVersion(repoRoot),
        registry: registry.host,
      });
      const [pushed] = pushImages([built], registry.host, packageVersion(repoRoot), {
        insecure: true,
        crane: craneBin!,
      });
      o.say(`  pushed ${pushed!.reference} ${pushed!.digest}`);
      sidecarImage = pushed!.pinned;
    }

    const host = { info: { kubeconfigPath, webhookCaPem: webhookTls.caPem, webhookServing: webhookTls } };
    const logFile = (name: string) => join(dir, `${name}.log`);
    o.say('Starting the admission service and the reconciler ...');
    const admission = await startAdmission(
      host,
      [
        `--system-namespace=${SYSTEM_NAMESPACE}`,
        '--log-level=info',
        ...(sidecarImage ? [`--guestconfig-image=${sidecarImage}`] : []),
      ],
      {
        logFile: logFile('admission'),
        waitReady: false,
      },
    );
    services.push({ name: 'admission', proc: admission, logFile: logFile('admission') });
    const reconciler = await startReconciler(host, {
      args: [
        `--system-namespace=${SYSTEM_NAMESPACE}`,
        `--leader-elect-resource-namespace=${o.kubeconfig ? 'default' : SYSTEM_NAMESPACE}`,
        ...(o.namespaces?.length ? [`--watch-namespaces=${o.namespaces.join(',')}`] : []),
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
      const withNode = (await node) !== undefined;
      const members = withNode ? memberWorkloads() : { objects: await demoPods(kubectl), pods: 0 };
      const expected = withNode ? members.pods : members.objects.length;
      await kubectl(
        ['-n', DEMO_NAMESPACE, 'apply', '-f', '-'],
        JSON.stringify({ apiVersion: 'v1', kind: 'List', items: members.objects }),
      );
      if (withNode) {
        o.say(`Waiting for the StatefulSets' ${expected} member pods to run and be Ready ...`);
        await waitFor('every member pod created', 120_000, async () => {
          const got = JSON.parse(await kubectl(['-n', DEMO_NAMESPACE, 'get', 'pods', '-o', 'json'])) as {
            items: unknown[];
          };
          return got.items.length === expected;
        });
        await kubectl(['-n', DEMO_NAMESPACE, 'wait', '--for=condition=Ready', '--all', 'pods', '--timeout=180s']);
      }
      o.say('Waiting for the reconciler to deliver configmeta to the member pods ...');
      await waitFor(
        'configmeta in every member pod',
        120_000,
        async () => {
          const got = JSON.parse(await kubectl(['-n', DEMO_NAMESPACE, 'get', 'pods', '-o', 'json'])) as {
            items: { metadata: { annotations?: Record<string, string> } }[];
          };
          return (
            got.items.length === expected &&
            got.items.every((p) => p.metadata.annotations?.['kubedirector.hpe.com/configmeta'])
          );
        },
        undefined,
        500,
      );
      if (withNode) {
        // The pods are Ready, so their kd-guestconfig sidecar has delivered the file already (the app
        // starts only after it); this also waits out kubectl exec's first connection.
        await waitFor(
          'configmeta file inside a member pod',
          60_000,
          async () => {
            const doc = await kubectl(['-n', DEMO_NAMESPACE, 'exec', TOUR_POD, '--', 'cat', CONFIGMETA_PATH]);
            return doc.trim().startsWith('{');
          },
          undefined,
          500,
        ).catch(() => {});
        // The notebook connects a Secret: its private file comes with the kubelet's next look at the
        // private Secret volume (the app does not wait for it), so the tour's step 4 shows it at once.
        await waitFor(
          'private configmeta file inside a member pod',
          90_000,
          async () => {
            await kubectl(['-n', DEMO_NAMESPACE, 'exec', TOUR_POD, '--', 'test', '-s', PRIVATE_PATH]);
            return true;
          },
          undefined,
          500,
        ).catch(() => {});
      }
    }
    return {
      dir,
      kubeconfigPath,
      node: (await node) !== undefined,
      ...(registry && sidecarImage ? { registry: registry.host, sidecarImage } : {}),
      stop,
      died,
    };
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

const TOUR_POD = 'notebook-controller-0';
const CONFIGMETA_PATH = `${CONFIGMETA_DIR}/${CONFIGMETA_FILE}`;
const PRIVATE_PATH = `${CONFIGMETA_DIR}/${PRIVATE_CONFIGMETA_FILE}`;
/** The token of examples/30-secrets.yaml, which the notebook connects: the tour looks for it in the API. */
export const EXAMPLE_SECRET_VALUE = 'replace-me';

/**
 * The member workloads of examples/members/ (a StatefulSet per role, a headless Service per cluster) as a
 * user applies them, run here on the host network (all traffic stays on this machine) with the locally
 * imported busybox instead of the image a user would pull; and how many pods they make.
 */
function memberWorkloads(): { objects: object[]; pods: number } {
  const text = readFileSync(join(repoRoot, 'examples', 'members', 'members.yaml'), 'utf8');
  const objects = parseAllDocuments(text).map((d) => d.toJSON() as Record<string, any>);
  let pods = 0;
  for (const o of objects) {
    if (o.kind !== 'StatefulSet') continue;
    pods += o.spec.replicas;
    const pod = o.spec.template.spec;
    Object.assign(pod, { hostNetwork: true, terminationGracePeriodSeconds: 1 });
    Object.assign(pod.containers[0], {
      image: BUSYBOX_IMAGE,
      imagePullPolicy: 'Never',
      readinessProbe: { exec: { command: ['true'] }, periodSeconds: 2 },
    });
  }
  return { objects, pods };
}

/**
 * Without a node (no controller-manager to run StatefulSets): bare member pods, one per seat
 * (spec.roles[].members), named <cluster>-<role>-<i>
 * (the ordinal is the seat, seats.ts): busybox
 * sleeping, on the host network (all traffic stays on this machine), from the locally imported image.
 */
async function demoPods(kubectl: (args: string[]) => Promise<string>): Promise<object[]> {
  const clusters = JSON.parse(await kubectl(['-n', DEMO_NAMESPACE, 'get', 'kubedirectorclusters', '-o', 'json'])) as {
    items: { metadata: { name: string }; spec: { roles?: { id: string; members?: number }[] } }[];
  };
  const pods: object[] = [];
  for (const c of clusters.items) {
    for (const r of c.spec.roles ?? []) {
      for (let i = 0; i < (r.members ?? 1); i++) {
        pods.push({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: `${c.metadata.name}-${r.id.toLowerCase()}-${i}`,
            labels: { 'kubedirector.hpe.com/kdcluster': c.metadata.name, 'kubedirector.hpe.com/role': r.id },
          },
          spec: {
            hostNetwork: true,
            terminationGracePeriodSeconds: 1,
            containers: [
              {
                name: 'app',
                image: BUSYBOX_IMAGE,
                imagePullPolicy: 'Never',
                command: ['sleep', '2147483647'],
                readinessProbe: { exec: { command: ['true'] }, periodSeconds: 2 },
              },
            ],
          },
        });
      }
    }
  }
  return pods;
}

export function tour(env: LocalEnvironment, binDir: string, local: boolean): string {
  const k = `kubectl -n ${DEMO_NAMESPACE}`;
  // The value's base64 (as Secret data and configmeta hold it), without its padding.
  const secretGrep = Buffer.from(EXAMPLE_SECRET_VALUE).toString('base64').replace(/=+$/, '');
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
      ...(env.node
        ? [
            '  3. Read the configmeta file inside a running member pod, as its app does; "path" shows the edit',
            '     within seconds (run it before step 2 too, to see it change):',
            `     ${k} exec ${TOUR_POD} -- cat ${CONFIGMETA_PATH}`,
          ]
        : [
            "  3. Read a member pod's configmeta (no node runs here, so it stays in the pod's annotation):",
            `     ${k} get pod ${TOUR_POD} -o jsonpath='{.metadata.annotations.kubedirector\\.hpe\\.com/configmeta}'`,
          ]),
      ...(env.node
        ? [
            `  4. The notebook connects the Secret scm-creds: its values reach root in the member pods (configcli`,
            '     merges this file for root; base64, as KubeDirector renders them), and no other user there:',
            `     ${k} exec ${TOUR_POD} -- cat ${PRIVATE_PATH}`,
            `     ${k} exec ${TOUR_POD} -- su nobody -s /bin/sh -c 'cat ${PRIVATE_PATH}'`,
          ]
        : [
            `  4. The notebook connects the Secret scm-creds: its values go only into the cluster's private Secret,`,
            '     which member pods mount for root (on a node; none runs here).',
          ]),
      `     Nothing you can list but Secrets holds the token "${EXAMPLE_SECRET_VALUE}", plain or base64 (prints 0):`,
      `     ${k} get pods,kdcluster,events,configmaps -o json | grep -cE '${EXAMPLE_SECRET_VALUE}|${secretGrep}'`,
      '',
    );
  } else {
    lines.push(
      'Both services run against the cluster of the given kubeconfig. Webhooks were not registered: that',
      "cluster's API server cannot reach this machine's 127.0.0.1. Install the chart to use them there.",
      '',
    );
  }
  if (env.registry && env.sidecarImage)
    lines.push(
      `Images: member pods run the sidecar ${env.sidecarImage},`,
      `  pulled by the node from the registry at http://${env.registry} (crane ls ${env.registry}/kd-connections/guestconfig).`,
      '',
    );
  lines.push(
    `Logs: ${join(env.dir, 'admission.log')}  ${join(env.dir, 'reconciler.log')}`,
    'Press Ctrl-C to stop everything.',
    '',
  );
  return lines.join('\n');
}
