/**
 * For tests that need running pods: wait for the node the jest run started beside the control plane
 * (it comes up in the background), and build pods that run on it — the locally built busybox image,
 * never pulled, host network (all traffic stays on 127.0.0.1), and the toleration for the test node's
 * taint (other tests' pods stay Pending as before).
 */
import { afterAll, beforeAll } from '@jest/globals';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { LABEL_KDCLUSTER, LABEL_ROLE } from '@kd-connections/shared/domain';
import { controlPlaneInfo, type TestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { startAdmission, startReconciler, type ReconcilerProcess, type RunningAdmission } from '../support/services.js';
import { registerWebhooks, waitUntilLive, type Registration } from '../support/webhook-configurations.js';
import { eventually } from '../support/processes.js';
import { readNodeStatus } from '../controlplane/node-status.js';
import { BUSYBOX_IMAGE, type BuiltImage } from '../images/base-images.js';
import { importImage } from '../controlplane/containerd.js';
import { TEST_NODE_TOLERATION, type NodeInfo } from '../controlplane/node.js';

/** containerd's client, from PATH (Debian's containerd package installs it). */
export function ctrBinary(): string {
  for (const d of (process.env.PATH ?? '').split(':').concat('/usr/bin', '/usr/sbin')) {
    if (d && existsSync(join(d, 'ctr'))) return join(d, 'ctr');
  }
  throw new Error('ctr not found (it comes with the containerd package)');
}

/** Imports test images (built or cached archives) into the running test node's containerd. */
export async function importImages(node: NodeInfo, images: BuiltImage[]): Promise<void> {
  for (const img of images) await importImage(ctrBinary(), node.containerdSocket, img.archive);
}

export async function waitForNode(timeoutMs = 240_000): Promise<NodeInfo> {
  const info = controlPlaneInfo();
  if (!info.nodeStatusPath) throw new Error('this control plane was started without a node (an older harness?)');
  const end = Date.now() + timeoutMs;
  for (;;) {
    const s = readNodeStatus(info.nodeStatusPath);
    if (s?.state === 'ready') return s.node;
    if (s?.state === 'failed') throw new Error(`the test node failed to start: ${s.error}`);
    if (s?.state === 'disabled') throw new Error(`the test node is disabled (${s.reason}); this test needs it`);
    if (Date.now() > end)
      throw new Error(`the test node is not Ready after ${timeoutMs} ms (${s?.state ?? 'no status'})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

type Obj = Record<string, any>;

/** A pod that runs `script` in busybox on the test node; Ready once `ready` (a shell test) succeeds. */
export function runningPod(
  name: string,
  script: string,
  opts: { labels?: Record<string, string>; ready?: string } = {},
): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(opts.labels ? { labels: opts.labels } : {}) },
    spec: {
      hostNetwork: true,
      tolerations: [TEST_NODE_TOLERATION],
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'app',
          image: BUSYBOX_IMAGE,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', script],
          readinessProbe: { exec: { command: ['sh', '-c', opts.ready ?? 'true'] }, periodSeconds: 1 },
        },
      ],
    },
  };
}

export interface NodeMemberPodOptions {
  /** The `app` container's image when `containers` is not given; default busybox. */
  image?: string;
  containers?: Obj[];
  annotations?: Obj;
  volumes?: Obj[];
}

/**
 * A member pod of `cluster` (role controller) on the test node, as an app declares it: the pod webhook
 * adds the delivery. `containers` default to one `app` that sleeps.
 */
export function nodeMemberPod(name: string, cluster: string, o: NodeMemberPodOptions = {}): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: { [LABEL_KDCLUSTER]: cluster, [LABEL_ROLE]: 'controller' },
      ...(o.annotations ? { annotations: o.annotations } : {}),
    },
    spec: {
      hostNetwork: true,
      tolerations: [TEST_NODE_TOLERATION],
      terminationGracePeriodSeconds: 1,
      ...(o.volumes ? { volumes: o.volumes } : {}),
      containers: o.containers ?? [
        { name: 'app', image: o.image ?? BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] },
      ],
    },
  };
}

/**
 * The member workload of `cluster`'s role `controller` (or `o.role`) as a user writes it: a StatefulSet
 * (Parallel, as KubeDirector makes them) named after the cluster (or `<cluster>-<role>` for another role),
 * its Service named after the cluster (or `o.serviceName`), one `app` container of `image` (its own
 * command unless `command` is given), on the test node.
 */
export function memberStatefulSet(
  cluster: string,
  replicas: number,
  image: string,
  command?: string[],
  o: { role?: string; serviceName?: string; resources?: Obj } = {},
): Obj {
  const role = o.role ?? 'controller';
  const labels = { [LABEL_KDCLUSTER]: cluster, [LABEL_ROLE]: role };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: o.role ? `${cluster}-${role}` : cluster },
    spec: {
      replicas,
      serviceName: o.serviceName ?? cluster,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          hostNetwork: true,
          tolerations: [TEST_NODE_TOLERATION],
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: 'app',
              image,
              imagePullPolicy: 'Never',
              ...(command ? { command } : {}),
              ...(o.resources ? { resources: o.resources } : {}),
            },
          ],
        },
      },
    },
  };
}

/**
 * kubectl wait for the pod's Ready condition; fails with the pod's description if it does not come. A pod
 * a controller is about to create (a StatefulSet just scaled) is waited for first: `kubectl wait` fails at
 * once on a pod that does not exist yet.
 */
export async function waitPodReady(env: TestEnv, name: string, timeout = '120s'): Promise<void> {
  await eventually(
    `pod ${name} exists`,
    async () => (await env.kubectl(['get', 'pod', name, '-o', 'name'])).code === 0,
  );
  const r = await env.kubectl(['wait', '--for=condition=Ready', `--timeout=${timeout}`, `pod/${name}`]);
  if (r.code !== 0) {
    const d = await env.kubectl(['describe', 'pod', name]);
    throw new Error(`pod ${name} not Ready: ${r.stderr}\n${d.stdout}`);
  }
}

/** The services of a delivery test file; the reconciler can be restarted with other flags. */
export interface DeliveryServices {
  /** The reconciler running now (set once beforeAll ran). */
  readonly reconciler: ReconcilerProcess;
  /** Stops the reconciler and starts it again with `args` (instead of the file's reconcilerArgs). */
  restartReconciler(args?: string[]): Promise<ReconcilerProcess>;
}

/**
 * For a test file about delivery into running pods: CRDs, the admission service with its webhooks
 * registered (the pod webhook injects the sidecar), the reconciler (with `reconcilerArgs`), and the
 * node, for the whole file. `ready` runs last in beforeAll, with the node.
 */
export function useDeliveryServices(
  env: TestEnv,
  ready: (node: NodeInfo) => Promise<void> = async () => {},
  o: { reconcilerArgs?: string[]; admissionArgs?: string[] } = {},
): DeliveryServices {
  let admission: RunningAdmission | undefined;
  let webhooks: Registration | undefined;
  let rec: ReconcilerProcess | undefined;
  beforeAll(async () => {
    await installCrds(env);
    admission = await startAdmission(env, o.admissionArgs ?? []);
    webhooks = await registerWebhooks(env, admission);
    await waitUntilLive(env);
    rec = await startReconciler(env, { args: o.reconcilerArgs ?? [] });
    await ready(await waitForNode());
  }, 300_000);
  afterAll(async () => {
    await webhooks?.remove();
    await rec?.stop();
    await admission?.stop();
  });
  return {
    get reconciler() {
      if (!rec) throw new Error('the reconciler is not started yet (beforeAll has not run)');
      return rec;
    },
    async restartReconciler(args: string[] = []) {
      await rec?.stop();
      rec = await startReconciler(env, { args });
      return rec;
    },
  };
}
