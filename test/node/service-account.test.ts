/**
 * ServiceAccounts on the test node as on any cluster: the API server's ServiceAccount admission gives
 * each pod a projected token, the namespace's `kube-root-ca.crt` CA bundle and its namespace; the token
 * authenticates to the API server (checked with the CA from inside the container), and workloads made by
 * the controller-manager (a Deployment, a StatefulSet) roll out with it. The services' own in-cluster
 * loader (shared's kubeconfig.ts, used when they run in a pod without --kubeconfig) authenticates with
 * those files as read from the pod.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeClient, loadKubeConnection } from '@kd-connections/shared/runtime';
import { TEST_NODE_TOLERATION } from '../controlplane/node.js';
import { BUSYBOX_IMAGE } from '../images/base-images.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, getJson, kubectlOk } from '../support/kd-objects.js';
import { eventually, run } from '../support/processes.js';
import { runningPod, waitForNode, waitPodReady } from './node-support.js';

const env = useTestEnv();
const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
beforeAll(async () => {
  await waitForNode();
}, 250_000);

const exec = (pod: string, script: string) => kubectlOk(env, ['exec', pod, '--', 'sh', '-c', script]);

/** A pod template on the test node that is Ready only while its token and CA files are there. */
const podTemplate = (app: string) => ({
  metadata: { labels: { app } },
  spec: {
    hostNetwork: true,
    tolerations: [TEST_NODE_TOLERATION],
    terminationGracePeriodSeconds: 1,
    containers: [
      {
        name: 'c',
        image: BUSYBOX_IMAGE,
        imagePullPolicy: 'Never',
        command: ['sleep', '3600'],
        readinessProbe: {
          exec: { command: ['sh', '-c', `test -s ${SA_DIR}/token && test -s ${SA_DIR}/ca.crt`] },
          periodSeconds: 1,
        },
      },
    ],
  },
});

describe('ServiceAccount tokens on the test node', () => {
  it('the namespace has its default ServiceAccount and the kube-root-ca.crt ConfigMap', async () => {
    await getJson(env, ['serviceaccount', 'default']);
    const cm = await eventually(
      'kube-root-ca.crt published',
      async () => {
        const r = await env.kubectl(['get', 'configmap', 'kube-root-ca.crt', '-o', 'json']);
        return r.code === 0 ? (JSON.parse(r.stdout) as { data: Record<string, string> }) : undefined;
      },
      30_000,
    );
    expect(cm.data['ca.crt']).toBe(env.info.caPem);
  });

  it('a pod gets a projected token, the CA and its namespace; the token authenticates as the pod', async () => {
    await apply(env, [runningPod('sa-reader', 'exec sleep 3600', { ready: `test -s ${SA_DIR}/token` })]);
    await waitPodReady(env, 'sa-reader');
    const pod = await getJson(env, ['pod', 'sa-reader']);
    expect(pod.spec.serviceAccountName).toBe('default');
    const projected = (pod.spec.volumes as { name: string; projected?: { sources: object[] } }[]).find((v) =>
      v.name.startsWith('kube-api-access-'),
    );
    expect(projected?.projected?.sources).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ serviceAccountToken: expect.objectContaining({ path: 'token' }) }),
        expect.objectContaining({ configMap: expect.objectContaining({ name: 'kube-root-ca.crt' }) }),
      ]),
    );

    const token = await exec('sa-reader', `cat ${SA_DIR}/token`);
    const caInPod = await exec('sa-reader', `cat ${SA_DIR}/ca.crt`);
    expect(await exec('sa-reader', `cat ${SA_DIR}/namespace`)).toBe(env.namespace);
    expect(caInPod).toBe(env.info.caPem);

    // The token and the CA as read inside the container, used by a client outside it: TLS verified with
    // that CA only (no kubeconfig), authenticated by the token alone. (Not from the pod itself: busybox's
    // wget cannot verify a certificate, and its TLS handshake with kube-apiserver fails, alert 40.)
    const dir = mkdtempSync(join(tmpdir(), 'kd-sa-test-'));
    try {
      writeFileSync(join(dir, 'ca.crt'), caInPod);
      writeFileSync(join(dir, 'empty.kubeconfig'), 'apiVersion: v1\nkind: Config\n');
      const whoami = await run(env.info.binDir.kubectl, [
        `--kubeconfig=${join(dir, 'empty.kubeconfig')}`,
        `--server=${env.info.server}`,
        `--certificate-authority=${join(dir, 'ca.crt')}`,
        `--token=${token}`,
        'auth',
        'whoami',
        '-o',
        'json',
      ]);
      expect({ code: whoami.code, stderr: whoami.stderr }).toEqual({ code: 0, stderr: '' });
      const user = JSON.parse(whoami.stdout).status.userInfo;
      expect(user.username).toBe(`system:serviceaccount:${env.namespace}:default`);
      // A bound token: it names the pod it was issued for (and stops working when the pod is gone).
      expect(user.extra['authentication.kubernetes.io/pod-name']).toEqual(['sa-reader']);

      // The services' in-cluster loader, given the pod's environment and its ServiceAccount files: TLS
      // verified with that CA, and the API server knows the caller (the default ServiceAccount may not
      // list pods: a 403 naming it, where a bad token would get a 401).
      writeFileSync(join(dir, 'token'), token);
      const server = new URL(env.info.server);
      const connection = await loadKubeConnection({
        env: { KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port },
        serviceAccountDir: dir,
      });
      const client = new KubeClient(connection, 'kd-sa-test');
      try {
        const denied = await client.get(`/api/v1/namespaces/${env.namespace}/pods`).then(
          () => 'allowed',
          (e: { status?: number; message?: string }) => `${e.status}: ${e.message}`,
        );
        expect(denied).toMatch(/^403: .*"system:serviceaccount:[^"]+:default" cannot list resource "pods"/);
        expect(denied).toContain(`system:serviceaccount:${env.namespace}:default`);
      } finally {
        client.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a Deployment and a StatefulSet roll out, each pod Ready only with its token and CA', async () => {
    await apply(env, [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'sa-web' },
        spec: { replicas: 2, selector: { matchLabels: { app: 'sa-web' } }, template: podTemplate('sa-web') },
      },
      {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: { name: 'sa-db' },
        spec: {
          replicas: 2,
          serviceName: 'sa-db',
          podManagementPolicy: 'Parallel',
          selector: { matchLabels: { app: 'sa-db' } },
          template: podTemplate('sa-db'),
        },
      },
    ]);
    await kubectlOk(env, ['rollout', 'status', 'deployment/sa-web', '--timeout=120s']);
    await kubectlOk(env, ['rollout', 'status', 'statefulset/sa-db', '--timeout=120s']);
    expect((await getJson(env, ['deployment', 'sa-web'])).status.availableReplicas).toBe(2);
    expect((await getJson(env, ['statefulset', 'sa-db'])).status.readyReplicas).toBe(2);
    const tokenOf = (p: string) => exec(p, `cat ${SA_DIR}/token`);
    const [a, b] = [await tokenOf('sa-db-0'), await tokenOf('sa-db-1')];
    // Each pod its own token.
    expect(a).toMatch(/^ey[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(a).not.toBe(b);

    // A template change rolls the Deployment to new pods (the controller-manager's ReplicaSets at work).
    await kubectlOk(env, ['set', 'env', 'deployment/sa-web', 'ROLL=2']);
    await kubectlOk(env, ['rollout', 'status', 'deployment/sa-web', '--timeout=120s']);
    const d = await getJson(env, ['deployment', 'sa-web']);
    expect({ updated: d.status.updatedReplicas, available: d.status.availableReplicas }).toEqual({
      updated: 2,
      available: 2,
    });
  });
});
