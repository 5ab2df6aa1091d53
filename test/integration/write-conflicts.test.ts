/**
 * What the real API server answers to the writes the reconciler makes when they fail, and how
 * isConflict classifies each answer: only a failed JSON Patch `test` (a 422 saying so) and a 409 are
 * precondition conflicts (retry soon against fresher caches); an invalid patch or a schema rejection is
 * an error (backoff, reported). The unit test (shared/test/is-conflict.test.ts) replays these bodies,
 * captured here from kube-apiserver; this file keeps them honest against the server actually run.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { isConflict, KubeApiError, KubeClient } from '@kd-connections/shared/runtime';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { apply, configMap, kdApp, kdCluster } from '../support/kd-objects.js';
import { readFileSync } from 'node:fs';

const CAPTURED = JSON.parse(
  readFileSync(new URL('../../shared/test/fixtures/apiserver-write-errors.json', import.meta.url), 'utf8'),
) as Record<string, { status: number; body: string }>;
const env = useTestEnv();
let client: KubeClient;
const cm = () => `/api/v1/namespaces/${env.namespace}/configmaps/conf`;
const cmList = () => `/api/v1/namespaces/${env.namespace}/configmaps`;
const kd = () => `/apis/kubedirector.hpe.com/v1beta1/namespaces/${env.namespace}/kubedirectorclusters/c`;

beforeAll(async () => {
  await installCrds(env);
  await apply(env, [
    configMap('conf', { v: '1' }),
    kdApp('trainer', { category: 'training' }),
    kdCluster('c', 'trainer'),
  ]);
  client = new KubeClient(env.kc);
});
afterAll(() => client?.close());

async function failure(w: () => Promise<unknown>): Promise<KubeApiError> {
  try {
    await w();
  } catch (e) {
    if (e instanceof KubeApiError) return e;
    throw e;
  }
  throw new Error('the write succeeded');
}

/** The answer as the unit test replays it: status and the API's Status body. */
const shape = (e: KubeApiError) => ({ status: e.status, body: e.body });

const CASES: Record<string, { conflict: boolean; write: () => Promise<unknown> }> = {
  testValueDiffers: {
    conflict: true,
    write: () => client.jsonPatch(cm(), [{ op: 'test', path: '/data/v', value: 'other' }]),
  },
  testPathMissing: {
    conflict: true,
    write: () => client.jsonPatch(cm(), [{ op: 'test', path: '/metadata/annotations/x', value: 'y' }]),
  },
  testResourceVersionDiffers: {
    conflict: true,
    write: () => client.jsonPatch(cm(), [{ op: 'test', path: '/metadata/resourceVersion', value: '1' }]),
  },
  replaceMissingPath: {
    conflict: false,
    write: () => client.jsonPatch(cm(), [{ op: 'replace', path: '/data/absent/deeper', value: 'x' }]),
  },
  removeMissingPath: {
    conflict: false,
    write: () => client.jsonPatch(cm(), [{ op: 'remove', path: '/metadata/labels/absent' }]),
  },
  schemaRejection: {
    conflict: false,
    write: () => client.jsonPatch(kd(), [{ op: 'add', path: '/spec/appCatalog', value: 'elsewhere' }]),
  },
  invalidObject: {
    conflict: false,
    write: () => client.jsonPatch(cm(), [{ op: 'add', path: '/data/bad~1key', value: 'x' }]),
  },
  alreadyExists: {
    conflict: true,
    write: () =>
      client.request('POST', cmList(), { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'conf' } } }),
  },
  deletePreconditionUid: {
    conflict: true,
    write: () =>
      client.request('DELETE', cm(), {
        body: {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          preconditions: { uid: '00000000-0000-0000-0000-000000000000' },
        },
      }),
  },
};

describe('isConflict on what kube-apiserver answers', () => {
  for (const [name, c] of Object.entries(CASES)) {
    it(`${name}: ${c.conflict ? 'a precondition conflict' : 'an error, not a conflict'}`, async () => {
      const e = await failure(c.write);
      if (process.env.KD_CAPTURE_WRITE_ERRORS) process.stdout.write(`CAPTURE ${name} ${JSON.stringify(shape(e))}\n`);
      expect(isConflict(e)).toBe(c.conflict);
      // The unit test replays the captured answer; it must still be what the server says.
      const captured = CAPTURED[name];
      expect(captured).toBeDefined();
      const reasonOf = (body: string | undefined) => (JSON.parse(body ?? '{}') as { reason?: string }).reason;
      expect([e.status, reasonOf(e.body)]).toEqual([captured!.status, reasonOf(captured!.body)]);
    });
  }
});
