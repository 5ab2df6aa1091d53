/**
 * What the plugin asks the API server for: of ConfigMaps and Secrets only names (server-side Tables
 * without objects), never their metadata (kubectl's last-applied annotation holds the data) nor the
 * objects; a forbidden list degrades to "unreadable" with the API server's words.
 */
import { describe, expect, it } from '@jest/globals';
import { LABEL_SECRET_TYPE } from '@kd-connections/shared/domain';
import { KubeApiError, type KubeClient } from '@kd-connections/shared/runtime';
import { readNamespace } from '../src/read-namespace.js';

type Call = { path: string; accept?: string; query?: Record<string, unknown> };

function stub(answer: (c: Call) => unknown): { client: KubeClient; calls: Call[] } {
  const calls: Call[] = [];
  const client = {
    get: async (path: string, opts: { accept?: string; query?: Record<string, unknown> } = {}) => {
      const c = { path, accept: opts.accept, query: opts.query };
      calls.push(c);
      return answer(c);
    },
  } as unknown as KubeClient;
  return { client, calls };
}

const table = (...names: string[]) => ({ kind: 'Table', rows: names.map((n) => ({ cells: [n, 'Opaque', 1, '1d'] })) });

describe('readNamespace', () => {
  it('names only for ConfigMaps and Secrets; the type label from a labelled list', async () => {
    const { client, calls } = stub((c) => {
      if (c.path.endsWith('/secrets')) return c.query?.labelSelector ? table('scm') : table('scm', 'tls');
      if (c.path.endsWith('/configmaps')) return table();
      return { items: [] };
    });
    const s = await readNamespace(client, 'ml', 'kd-system');
    expect(s.secrets).toEqual([
      { metadata: { name: 'scm', labels: { [LABEL_SECRET_TYPE]: '' } } },
      { metadata: { name: 'tls' } },
    ]);
    const objects = calls.filter((c) => /\/(secrets|configmaps)$/.test(c.path));
    expect(objects).toHaveLength(4);
    for (const c of objects) {
      expect(c.accept).toBe('application/json;as=Table;g=meta.k8s.io;v=v1');
      expect(c.query?.includeObject).toBe('None');
    }
    expect(calls.map((c) => c.path).filter((p) => p.includes('kubedirectorapps'))).toEqual([
      '/apis/kubedirector.hpe.com/v1beta1/namespaces/ml/kubedirectorapps',
      '/apis/kubedirector.hpe.com/v1beta1/namespaces/kd-system/kubedirectorapps',
    ]);
  });

  it('a forbidden list is unreadable, with the API server’s words; other errors fail', async () => {
    const forbidden = stub((c) => {
      if (c.path.endsWith('/secrets'))
        throw new KubeApiError(403, 'Forbidden', 'secrets is forbidden: User "v" cannot list');
      return c.path.includes('kubedirector') ? { items: [] } : table();
    });
    const s = await readNamespace(forbidden.client, 'ml', 'kd-system');
    expect(s.unreadable).toEqual({ secrets: 'secrets is forbidden: User "v" cannot list' });
    const broken = stub(() => {
      throw new KubeApiError(500, 'InternalError', 'etcd is down');
    });
    await expect(readNamespace(broken.client, 'ml', 'kd-system')).rejects.toThrow('etcd is down');
  });
});
