/**
 * An in-memory WebhookConfigurationClient that applies JSON Patch `test`/`add` the way the API
 * server does (atomically; a failed test is a 422 that KubeClient marks as such), for unit tests of inject-ca.
 */
import { KubeApiError } from '@kd-connections/shared/runtime';
import type {
  JsonPatchOp,
  WebhookConfigurationClient,
  WebhookConfigurationRef,
  WebhookConfigurationView,
} from '../src/inject.js';

export interface FakeClient extends WebhookConfigurationClient {
  objects: Map<string, WebhookConfigurationView>;
  patches: { ref: WebhookConfigurationRef; ops: JsonPatchOp[] }[];
  /** Runs after a read, before the caller's next step: simulates another writer. */
  afterRead?: (key: string) => void;
}

export const key = (ref: WebhookConfigurationRef) => `${ref.kind}/${ref.name}`;

function apiError(code: number, message: string, patchFailure?: 'test-failed'): Error {
  return new KubeApiError(code, 'Failure', `${code} ${message}`, undefined, undefined, patchFailure);
}

function resolve(root: unknown, path: string): { parent: Record<string, unknown>; leaf: string } {
  const parts = path.split('/').slice(1);
  const leaf = parts.pop()!;
  let cur = root as Record<string, unknown>;
  for (const p of parts) {
    const next = cur?.[p];
    if (next === undefined || typeof next !== 'object')
      throw apiError(422, 'the server rejected our request due to an error in our request');
    cur = next as Record<string, unknown>;
  }
  return { parent: cur, leaf };
}

export function fakeClient(initial: Record<string, WebhookConfigurationView>): FakeClient {
  const objects = new Map(Object.entries(initial).map(([k, v]) => [k, structuredClone(v)]));
  const client: FakeClient = {
    objects,
    patches: [],
    async read(ref) {
      const obj = objects.get(key(ref));
      if (!obj) throw apiError(404, `not found`);
      const copy = structuredClone(obj);
      client.afterRead?.(key(ref));
      return copy;
    },
    async patch(ref, ops) {
      client.patches.push({ ref, ops });
      const obj = objects.get(key(ref));
      if (!obj) throw apiError(404, 'not found');
      const next = structuredClone(obj);
      for (const op of ops) {
        const { parent, leaf } = resolve(next, op.path);
        if (op.op === 'test' && parent[leaf] !== op.value) {
          throw apiError(422, 'the server rejected our request due to an error in our request', 'test-failed');
        }
        if (op.op === 'add') parent[leaf] = op.value;
      }
      objects.set(key(ref), next);
      return structuredClone(next);
    },
  };
  return client;
}
