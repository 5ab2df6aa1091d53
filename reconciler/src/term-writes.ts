/**
 * The write path of one term of leadership: every write a reconcile makes, through the API client scoped
 * to that term (once it ends, nothing more is sent), counted by kind and result, and recording the
 * resourceVersion it produced so the next reconcile waits for the watch to deliver it (expectations).
 */
import { API_VERSION, KDCLUSTER_PLURAL, type KDCluster } from '@kd-connections/shared/domain';
import { RECONCILER_FIELD_MANAGER, type SecretBody } from '@kd-connections/shared/plan';
import { objectKey, type PatchOp } from '@kd-connections/shared/primitives';
import { isConflict, type KubeClient } from '@kd-connections/shared/runtime';
import type { Caches } from './caches.js';
import { type Expectations, rvAtLeast } from './expectations.js';
import type { ReconcilerMetrics, WriteKind } from './metrics.js';
import { writeKey, type Writes } from './reconcile.js';

/** One term of leadership as the write path sees it. */
export interface Term {
  signal: AbortSignal;
  check: () => void;
  /** The API client for writes, scoped to the term. */
  client: KubeClient;
}

export interface WriteDeps {
  caches: Caches;
  expectations: Expectations;
  metrics: ReconcilerMetrics;
}

export function termWrites(term: Term, deps: WriteDeps): Writes {
  const counted = async <T>(kind: WriteKind, w: () => Promise<T>): Promise<T> => {
    try {
      const r = await w();
      deps.metrics.writes.inc({ kind, result: 'ok' });
      return r;
    } catch (e) {
      deps.metrics.writes.inc({ kind, result: isConflict(e) ? 'conflict' : 'error' });
      throw e;
    }
  };
  const kd = (ns: string, name: string) => `/apis/${API_VERSION}/namespaces/${ns}/${KDCLUSTER_PLURAL}/${name}`;
  const fm = { fieldManager: RECONCILER_FIELD_MANAGER };
  // The watch can deliver a write (or a later one) before its answer arrives here; the cache then
  // already holds that version, and expecting it would hold reconciles back until the expectation expires.
  const expectCluster = (c: KDCluster) => {
    const rv = c.metadata.resourceVersion;
    if (
      !rvAtLeast(
        deps.caches.clusters.get(c.metadata.namespace ?? '', c.metadata.name ?? '')?.metadata.resourceVersion,
        rv,
      )
    )
      deps.expectations.expect(writeKey('kdcluster', objectKey(c.metadata.namespace, c.metadata.name)), rv);
    return c;
  };
  return {
    patchCluster: (ns, name, ops: PatchOp[]) =>
      counted('kdcluster', async () =>
        expectCluster(await term.client.jsonPatch<KDCluster>(kd(ns, name), ops, { query: fm })),
      ),
    patchClusterStatus: (ns, name, ops: PatchOp[]) =>
      counted('kdcluster_status', async () =>
        expectCluster(await term.client.jsonPatch<KDCluster>(`${kd(ns, name)}/status`, ops, { query: fm })),
      ),
    patchPod: (ns, name, ops: PatchOp[]) =>
      counted('pod', async () => {
        const pod = await term.client.jsonPatch<{ metadata: { resourceVersion?: string } }>(
          `/api/v1/namespaces/${ns}/pods/${name}`,
          ops,
          { query: fm },
        );
        const rv = pod.metadata.resourceVersion;
        if (!rvAtLeast(deps.caches.pods.get(ns, name)?.metadata.resourceVersion, rv))
          deps.expectations.expect(writeKey('pod', objectKey(ns, name)), rv);
        return pod.metadata.resourceVersion;
      }),
    ...secretWrites(deps, term, counted),
  };
}

/** Writes of the private Secrets; each records the version it produced, as the other writes do. */
function secretWrites(
  deps: WriteDeps,
  term: Term,
  counted: <T>(kind: WriteKind, w: () => Promise<T>) => Promise<T>,
): Pick<Writes, 'createSecret' | 'patchSecret' | 'deleteSecret'> {
  const path = (ns: string, name?: string) => `/api/v1/namespaces/${ns}/secrets${name ? `/${name}` : ''}`;
  const query = { fieldManager: RECONCILER_FIELD_MANAGER };
  type Meta = { metadata?: { resourceVersion?: string } };
  const expect = (ns: string, name: string, written: Meta) => {
    const rv = written.metadata?.resourceVersion;
    if (!rvAtLeast(deps.caches.privateSecrets?.get(ns, name)?.metadata.resourceVersion, rv))
      deps.expectations.expect(writeKey('secret', objectKey(ns, name)), rv);
  };
  return {
    createSecret: (ns, body: SecretBody) =>
      counted('private_secret', async () =>
        expect(ns, body.metadata.name, await term.client.request<Meta>('POST', path(ns), { body, query })),
      ),
    patchSecret: (ns, name, ops) =>
      counted('private_secret', async () =>
        expect(ns, name, await term.client.jsonPatch<Meta>(path(ns, name), ops, { query })),
      ),
    deleteSecret: (ns, name, preconditions) =>
      counted('private_secret', async () => {
        const body = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions };
        expect(ns, name, await term.client.request<Meta>('DELETE', path(ns, name), { body }));
      }),
  };
}
