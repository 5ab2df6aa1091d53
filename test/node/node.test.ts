/**
 * The harness's node: a real kubelet on containerd joins the test control plane; pods run in real
 * containers; the API server reaches the kubelet for logs and exec; the controller-manager and the
 * scheduler do their part (a Deployment becomes available). ServiceAccount tokens: service-account.test.ts.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { networkInterfaces } from 'node:os';
import { useTestEnv } from '../support/cluster.js';
import { apply, getJson, kubectlOk } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { TEST_NODE_TOLERATION } from '../controlplane/node.js';
import { BUSYBOX_IMAGE } from '../images/base-images.js';
import { runningPod, waitForNode, waitPodReady } from './node-support.js';

const env = useTestEnv();
beforeAll(async () => {
  await waitForNode();
}, 250_000);

describe('the test node', () => {
  it('is Ready, named and addressed 127.0.0.1, on kubelet v1.36.3 and containerd', async () => {
    const r = await env.kubectl(['get', 'node', '127.0.0.1', '-o', 'json'], { namespace: false });
    const node = JSON.parse(r.stdout);
    const cond = (node.status.conditions as { type: string; status: string }[]).find((c) => c.type === 'Ready');
    expect(cond?.status).toBe('True');
    expect(node.status.nodeInfo.kubeletVersion).toBe('v1.36.3');
    expect(node.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\//);
    expect(node.status.addresses).toEqual(expect.arrayContaining([{ type: 'InternalIP', address: '127.0.0.1' }]));
  });

  it('runs a pod to Running and Ready; kubectl logs and exec reach its container', async () => {
    await apply(env, [runningPod('hello', 'echo "hello from $(hostname)"; exec sleep 3600')]);
    await waitPodReady(env, 'hello');
    const pod = await getJson(env, ['pod', 'hello']);
    expect(pod.status.phase).toBe('Running');
    expect(pod.spec.nodeName).toBe('127.0.0.1');
    await eventually(
      'the log line',
      async () => (await kubectlOk(env, ['logs', 'hello'])).includes('hello from'),
      20_000,
    );
    expect(await kubectlOk(env, ['exec', 'hello', '--', 'sh', '-c', 'echo $((6*7)); cat /proc/1/comm'])).toBe(
      '42\nsleep\n',
    );
  });

  it('gives a pod without host network an address on the isolated bridge: other pods yes, the host no', async () => {
    const isolated = (name: string) => {
      const pod = runningPod(name, 'exec sleep 3600');
      pod.spec.hostNetwork = false;
      return pod;
    };
    await apply(env, [isolated('iso-a'), isolated('iso-b')]);
    await waitPodReady(env, 'iso-a');
    await waitPodReady(env, 'iso-b');
    const ipOf = async (n: string) => (await getJson(env, ['pod', n])).status.podIP as string;
    const [a, b] = [await ipOf('iso-a'), await ipOf('iso-b')];
    expect(a).toMatch(/^10\.254\.254\.\d+$/);
    expect(await kubectlOk(env, ['exec', 'iso-a', '--', 'ping', '-c', '1', '-W', '2', b])).toContain(
      '1 packets received',
    );
    const hostIps = Object.values(networkInterfaces())
      .flat()
      .filter((i) => i && i.family === 'IPv4' && !i.internal)
      .map((i) => i!.address);
    for (const ip of [...hostIps, '1.1.1.1']) {
      const r = await env.kubectl(['exec', 'iso-a', '--', 'ping', '-c', '1', '-W', '1', ip]);
      expect(`${ip}: exit ${r.code} ${r.stdout}${r.stderr}`).toMatch(
        /exit 1 .*(Network is unreachable|0 packets received)/s,
      );
    }
  });

  it('runs a Deployment to available (scheduler + controller-manager)', async () => {
    await apply(env, [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web' },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: {
              hostNetwork: true,
              tolerations: [TEST_NODE_TOLERATION],
              terminationGracePeriodSeconds: 1,
              containers: [{ name: 'c', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
            },
          },
        },
      },
    ]);
    await kubectlOk(env, ['rollout', 'status', 'deployment/web', '--timeout=120s']);
    const d = await getJson(env, ['deployment', 'web']);
    expect(d.status.availableReplicas).toBe(2);
    const pods = await getJson(env, ['pods', '-l', 'app=web']);
    expect(pods.items.map((p: { spec: { nodeName: string } }) => p.spec.nodeName)).toEqual(['127.0.0.1', '127.0.0.1']);
  });
});
