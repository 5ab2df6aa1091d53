/**
 * Member pods of a kdcluster as real containers: the pod webhook's kd-guestconfig sidecar delivers the configmeta
 * document into the container, a ConfigMap edit reaches the file, and "ready members" (the status READY
 * column, the webhook's "no ready members yet" warning) follow real pod readiness.
 */
import { describe, expect, it } from '@jest/globals';
import { CONFIGMETA_DIR } from '@kd-connections/shared/delivery';
import { CONFIGMETA_FILE } from '@kd-connections/shared/domain';
import { useTestEnv } from '../support/cluster.js';
import { apply, configMap, getJson, kdApp, kdCluster, kubectlOk, podConfigMeta } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { runningPod, useDeliveryServices, waitPodReady } from './node-support.js';

const env = useTestEnv();
const FILE = `${CONFIGMETA_DIR}/${CONFIGMETA_FILE}`;
useDeliveryServices(env);

const member = (name: string, cluster: string, ready = 'true') =>
  runningPod(name, 'exec sleep 3600', {
    labels: { 'kubedirector.hpe.com/kdcluster': cluster, 'kubedirector.hpe.com/role': 'controller' },
    ready,
  });

async function readInPod(pod: string): Promise<string> {
  return kubectlOk(env, ['exec', pod, '--', 'cat', FILE]);
}

async function membersSummary(cluster: string): Promise<string | undefined> {
  return (await getJson(env, ['kubedirectorcluster', cluster])).status?.membersSummary;
}

describe('a member pod running on the node', () => {
  it('holds the delivered configmeta document in its container, and sees a ConfigMap edit', async () => {
    await apply(env, [
      kdApp('nb'),
      configMap('model', { path: '/models/a/1' }),
      kdCluster('notebook', 'nb', { configmaps: ['model'] }),
    ]);
    await apply(env, [member('notebook-controller-0', 'notebook')]);
    await waitPodReady(env, 'notebook-controller-0');

    const delivered = await eventually('configmeta delivered to the pod', () =>
      podConfigMeta(env, 'notebook-controller-0'),
    );
    const inFile = await eventually('the configmeta file in the container', async () => {
      const text = await readInPod('notebook-controller-0').catch(() => '');
      return text ? text : undefined;
    });
    expect(JSON.parse(inFile)).toEqual(delivered.doc);
    expect(inFile).toContain('/models/a/1');

    await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/models/b/2"}}']);
    const after = await eventually(
      'the edited ConfigMap inside the container',
      async () => {
        const text = await readInPod('notebook-controller-0');
        return text.includes('/models/b/2') ? text : undefined;
      },
      90_000,
      250,
    );
    expect(after).not.toContain('/models/a/1');
    expect(JSON.parse(after)).toEqual((await podConfigMeta(env, 'notebook-controller-0'))!.doc);
  });

  it('counts ready members from real pod readiness: READY column and the "no ready members yet" warning', async () => {
    await apply(env, [kdApp('db'), kdCluster('store', 'db')]);
    // Ready only once the file /tmp/up exists: the test decides when the kubelet sees it ready.
    await apply(env, [member('store-controller-0', 'store', 'test -e /tmp/up')]);
    const connecting = kdCluster('client', 'nb', { clusters: ['store'] });
    const dryRunWarning = async () => {
      const r = await env.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: JSON.stringify(connecting) });
      if (r.code !== 0) throw new Error(r.stderr);
      return r.stderr;
    };
    await eventually(
      'the pod is Running',
      async () => (await getJson(env, ['pod', 'store-controller-0'])).status.phase === 'Running',
      120_000,
    );
    await eventually('status shows 0/1 ready', async () => (await membersSummary('store')) === '0/1', 30_000);
    expect(await dryRunWarning()).toContain('has no ready members yet');

    await kubectlOk(env, ['exec', 'store-controller-0', '--', 'touch', '/tmp/up']);
    await waitPodReady(env, 'store-controller-0');
    await eventually('status shows 1/1 ready', async () => (await membersSummary('store')) === '1/1', 30_000);
    expect(await dryRunWarning()).not.toContain('no ready members');
    const table = await kubectlOk(env, ['get', 'kubedirectorcluster', 'store']);
    expect(table).toMatch(/READY[\s\S]*\n\S+\s.*\b1\/1\b/);

    // The kubelet takes readiness away again when the probe fails.
    await kubectlOk(env, ['exec', 'store-controller-0', '--', 'rm', '/tmp/up']);
    await eventually('status back to 0/1', async () => (await membersSummary('store')) === '0/1', 60_000);
    expect(await dryRunWarning()).toContain('has no ready members yet');
  });
});
