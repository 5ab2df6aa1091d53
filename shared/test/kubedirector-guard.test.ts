/**
 * The guard's reads against a fake API: the operator by name (its webhook configuration, its Deployment in
 * the namespaces it is looked for in), and reads the service is not granted (403), which leave the other
 * findings in force instead of failing the look.
 */
import { describe, expect, it } from '@jest/globals';
import { KubeDirectorGuard, observeKubeDirectorApi } from '../src/kubedirector/guard.js';
import { KubeApiError, type KubeClient } from '../src/runtime/kube-client.js';
import { silentLogger } from '../src/runtime/logger.js';

const GROUP = '/apis/kubedirector.hpe.com/v1beta1';
const WEBHOOK = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kubedirector-webhook';
const deployment = (ns: string) => `/apis/apps/v1/namespaces/${ns}/deployments/kubedirector`;
const OPENAPI = '/openapi/v3/apis/kubedirector.hpe.com/v1beta1';

/** A client answering from `objects` (404 otherwise), 403 for `forbidden`; it records every path asked. */
function fakeClient(objects: Record<string, unknown>, forbidden: string[] = []) {
  const asked: string[] = [];
  const client = {
    async getIfExists(path: string) {
      asked.push(path);
      if (forbidden.includes(path)) throw new KubeApiError(403, 'Forbidden', `${path} is forbidden`);
      return objects[path];
    },
  } as unknown as KubeClient;
  return { client, asked };
}

const kubeDirectorGroup = {
  resources: ['kubedirectorclusters', 'kubedirectorapps', 'kubedirectorconfigs'].map((name) => ({ name })),
};

describe('observeKubeDirectorApi', () => {
  it("finds the Deployment in the namespace KubeDirector's webhook Service names, asking only for those names", async () => {
    const { client, asked } = fakeClient({
      [WEBHOOK]: { webhooks: [{ clientConfig: { service: { namespace: 'kd-ops', name: 'kubedirector-validator' } } }] },
      [deployment('kd-ops')]: { metadata: { name: 'kubedirector', namespace: 'kd-ops' } },
    });
    const o = await observeKubeDirectorApi(client);
    expect(o).toMatchObject({ operatorWebhook: true, operatorDeployments: ['kd-ops/kubedirector'] });
    expect(asked.filter((p) => p.startsWith('/apis/apps/')).sort()).toEqual(
      [deployment('default'), deployment('kd-ops'), deployment('kubedirector')].sort(),
    );
  });

  it('says nothing was found when nothing is there (404s), and nothing is unknown', async () => {
    const o = await observeKubeDirectorApi(fakeClient({}).client);
    expect(o).toEqual({
      resources: undefined,
      clusterSchema: undefined,
      operatorWebhook: false,
      operatorDeployments: [],
    });
  });

  it('keeps forbidden reads unknown; the CRD finding still refuses', async () => {
    const { client } = fakeClient({ [GROUP]: kubeDirectorGroup, [OPENAPI]: {} }, [
      WEBHOOK,
      deployment('default'),
      deployment('kubedirector'),
    ]);
    const o = await observeKubeDirectorApi(client);
    expect(o.operatorWebhook).toBeUndefined();
    expect(o.operatorDeployments).toBeUndefined();
    const notes: string[] = [];
    const guard = new KubeDirectorGuard({
      client,
      log: silentLogger,
      events: { record: (e) => void notes.push(String(e.note)) },
      regarding: { apiVersion: 'v1', kind: 'Pod', namespace: 'kd-system', name: 'p' },
      component: 'kd-connections admission',
    });
    await guard.check();
    expect(guard.refusal).toContain(
      "KubeDirector's operator is installed (the API serves kubedirectorconfigs.kubedirector.hpe.com)",
    );
    expect(notes).toEqual([guard.refusal]);
  });

  it('an error other than 403 fails the look, and the guard keeps its last verdict', async () => {
    let failing = false;
    const { client } = fakeClient({ [GROUP]: kubeDirectorGroup, [OPENAPI]: {} });
    const answer = client.getIfExists.bind(client);
    (client as unknown as { getIfExists: typeof answer }).getIfExists = (async (path: string) => {
      if (failing) throw new KubeApiError(500, 'InternalError', 'etcd is gone');
      return answer(path);
    }) as typeof answer;
    const guard = new KubeDirectorGuard({
      client,
      log: silentLogger,
      events: { record: () => undefined },
      regarding: { apiVersion: 'v1', kind: 'Pod', namespace: 'kd-system', name: 'p' },
      component: 'kd-connections admission',
    });
    await guard.check();
    const refusal = guard.refusal;
    expect(refusal).toContain('kubedirectorconfigs');
    failing = true;
    await expect(observeKubeDirectorApi(client)).rejects.toThrow('etcd is gone');
    await guard.check();
    expect(guard.refusal).toBe(refusal);
  });
});
