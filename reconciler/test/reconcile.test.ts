/**
 * reconcileCluster against an in-memory world: writes are JSON Patches applied to in-memory objects
 * with fast-json-patch, so a failed `test` precondition behaves like the API server's 422.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import jsonpatch from 'fast-json-patch';
import { trimPod } from '@kd-connections/shared/configmeta';
import { configMetaVolume } from '@kd-connections/shared/delivery';
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
  LABEL_CM_TYPE,
  LABEL_KDCLUSTER,
  LABEL_ROLE,
  LABEL_SECRET_TYPE,
  PRIVATE_SECRET_KEY_CONFIGMETA,
  PRIVATE_SECRET_KEY_PLATFORM,
  privateConfigMetaSecretName,
  type ConfigMapLike,
  type KDApp,
  type KDCluster,
  type PodLike,
  type SecretLike,
  type World,
} from '@kd-connections/shared/domain';
import { LABEL_PRIVATE_CONFIGMETA_OF, trimPrivateSecret, type SecretBody } from '@kd-connections/shared/plan';
import { objectKey, type PatchOp } from '@kd-connections/shared/primitives';
import { KubeApiError, silentLogger, type EventInput } from '@kd-connections/shared/runtime';
import { reconcileCluster, RetryableError, type ReconcileDeps } from '../src/reconcile.js';

const NS = 'ml';

class FakeApi {
  apps = new Map<string, KDApp>();
  clusters = new Map<string, KDCluster>();
  cms = new Map<string, ConfigMapLike>();
  secrets = new Map<string, SecretLike>();
  pods = new Map<string, PodLike>();
  /** Private Secrets as the API server holds them (data included); the cache view is trimPrivateSecret. */
  privateSecrets = new Map<string, SecretBody & { metadata: { uid?: string; resourceVersion?: string } }>();
  failSecretWrites: KubeApiError | undefined;
  writes: string[] = [];
  events: EventInput[] = [];
  failPods = new Set<string>();
  private rv = 100;

  nextRv(): string {
    return String(++this.rv);
  }

  apply<T extends { metadata: { resourceVersion?: string } }>(obj: T, ops: PatchOp[], what: string): T {
    const copy = structuredClone(obj);
    try {
      jsonpatch.applyPatch(copy, ops as jsonpatch.Operation[], true, true);
    } catch (e) {
      if ((e as { name?: string }).name === 'TEST_OPERATION_FAILED') {
        throw new KubeApiError(
          422,
          'Invalid',
          `PATCH ${what}: 422 Invalid the server rejected our request due to an error in our request`,
          undefined,
          undefined,
          // What KubeClient.jsonPatch reports once its dry run of the tests alone failed too.
          'test-failed',
        );
      }
      throw e;
    }
    copy.metadata.resourceVersion = this.nextRv();
    return copy;
  }

  world(): World {
    return {
      getApp: async (ns, n) => this.apps.get(objectKey(ns, n)),
      getCluster: async (ns, n) => this.clusters.get(objectKey(ns, n)),
      getConfigMap: async (ns, n) => this.cms.get(objectKey(ns, n)),
      getSecret: async (ns, n) => this.secrets.get(objectKey(ns, n)),
      podsOf: async (ns, c) =>
        [...this.pods.values()]
          .filter((p) => p.metadata.namespace === ns && p.metadata.labels?.[LABEL_KDCLUSTER] === c)
          .map((p) => trimPod(p as never)),
    };
  }

  deps(): ReconcileDeps {
    return {
      getCluster: (ns, n) => this.clusters.get(objectKey(ns, n)),
      world: this.world(),
      events: { record: (e) => void this.events.push(e) },
      log: silentLogger,
      now: () => new Date('2026-12-02T12:00:00Z'),
      opts: {
        systemNamespace: 'kd-system',
        secretConnections: true,
        clusterDomain: 'cluster.local',
        podConcurrency: 2,
      },
      writes: {
        patchCluster: async (ns, n, ops) => {
          const key = objectKey(ns, n);
          const next = this.apply(this.clusters.get(key)!, ops, key);
          next.metadata.generation = (next.metadata.generation ?? 1) + 1;
          this.clusters.set(key, next);
          this.writes.push(`kdcluster ${n}`);
          return next;
        },
        patchClusterStatus: async (ns, n, ops) => {
          const key = objectKey(ns, n);
          const next = this.apply(this.clusters.get(key)!, ops, key);
          this.clusters.set(key, next);
          this.writes.push(`status ${n}`);
          return next;
        },
        patchPod: async (ns, n, ops) => {
          const key = objectKey(ns, n);
          if (this.failPods.has(n)) throw new Error('connection reset by peer');
          const next = this.apply(this.pods.get(key)!, ops, key);
          this.pods.set(key, next);
          this.writes.push(`pod ${n}`);
          return next.metadata.resourceVersion;
        },
        createSecret: async (ns, body) => {
          if (this.failSecretWrites) throw this.failSecretWrites;
          const key = objectKey(ns, body.metadata.name);
          if (this.privateSecrets.has(key))
            throw new KubeApiError(409, 'AlreadyExists', `secrets "${body.metadata.name}" already exists`);
          const uid = `uid-secret-${this.nextRv()}`;
          this.privateSecrets.set(key, {
            ...structuredClone(body),
            metadata: { ...body.metadata, uid, resourceVersion: this.nextRv() },
          });
          this.writes.push(`secret create ${body.metadata.name}`);
        },
        patchSecret: async (ns, n, ops) => {
          if (this.failSecretWrites) throw this.failSecretWrites;
          const key = objectKey(ns, n);
          this.privateSecrets.set(key, this.apply(this.privateSecrets.get(key)!, ops, key));
          this.writes.push(`secret patch ${n}`);
        },
        deleteSecret: async (ns, n, pre) => {
          const key = objectKey(ns, n);
          const cur = this.privateSecrets.get(key);
          if (!cur) throw new KubeApiError(404, 'NotFound', `secrets "${n}" not found`);
          if (cur.metadata.uid !== pre.uid) throw new KubeApiError(409, 'Conflict', 'precondition failed');
          this.privateSecrets.delete(key);
          this.writes.push(`secret delete ${n}`);
        },
      },
    };
  }

  /** deps() with Secret connections on: the private Secret is planned and written. */
  privateDeps(): ReconcileDeps {
    return {
      ...this.deps(),
      privateSecrets: {
        // The cache watches the reconciler's label only; a live read sees any Secret of the name.
        get: (ns, n) => {
          const s = this.privateSecrets.get(objectKey(ns, n));
          return s?.metadata.labels?.[LABEL_PRIVATE_CONFIGMETA_OF] !== undefined
            ? trimPrivateSecret(s as never)
            : undefined;
        },
        key: () => Buffer.alloc(32, 7),
        fetch: async (ns, n) => {
          const s = this.privateSecrets.get(objectKey(ns, n));
          return s && trimPrivateSecret(s as never);
        },
      },
    };
  }

  /** The private document as root in the pod would read it. */
  privateDoc(cluster: string): { doc: Record<string, any>; platform: string } | undefined {
    const s = this.privateSecrets.get(objectKey(NS, privateConfigMetaSecretName(cluster)));
    if (!s) return undefined;
    const text = (k: string) => Buffer.from(s.data[k]!, 'base64').toString('utf8');
    return { doc: JSON.parse(text(PRIVATE_SECRET_KEY_CONFIGMETA)), platform: text(PRIVATE_SECRET_KEY_PLATFORM) };
  }
}

function app(name: string, spec: Partial<KDApp['spec']> = {}): KDApp {
  return {
    metadata: { name, namespace: NS },
    spec: {
      distroID: `x/${name}`,
      version: '1.0',
      configSchemaVersion: 8,
      roles: [{ id: 'worker' }],
      services: [{ id: 'ui', endpoint: { port: 80, urlScheme: 'http' } }],
      config: { roleServices: [{ roleID: 'worker', serviceIDs: ['ui'] }] },
      ...spec,
    },
  };
}

function cluster(name: string, appName: string, connections: KDCluster['spec']['connections'] = {}): KDCluster {
  return {
    metadata: { name, namespace: NS, uid: `uid-${name}`, resourceVersion: '1', generation: 1 },
    spec: { app: appName, roles: [{ id: 'worker', members: 3 }], connections },
  };
}

function pod(name: string, clusterName: string, annotations?: Record<string, string>): PodLike {
  return {
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      resourceVersion: '1',
      labels: { [LABEL_KDCLUSTER]: clusterName, [LABEL_ROLE]: 'worker' },
      annotations,
    },
    // As the pod webhook leaves a member pod.
    spec: { volumes: [configMetaVolume()] },
  };
}

let api: FakeApi;
beforeEach(() => {
  api = new FakeApi();
  api.apps.set(`${NS}/trainer`, app('trainer', { category: 'training' }));
  api.apps.set(`${NS}/nb`, app('nb', { category: 'notebook', connectable_to: [{ category: 'training' }] }));
  api.cms.set(`${NS}/model`, {
    metadata: { name: 'model', namespace: NS, uid: 'uid-cm', labels: { [LABEL_CM_TYPE]: 'model' } },
    data: { path: '/v1' },
  });
  api.secrets.set(`${NS}/creds`, {
    metadata: {
      name: 'creds',
      namespace: NS,
      uid: 'uid-s',
      resourceVersion: '5',
      labels: { [LABEL_SECRET_TYPE]: 'scm' },
    },
    keys: ['token'],
    data: { token: Buffer.from('tok-1').toString('base64') },
  });
  api.clusters.set(`${NS}/t`, cluster('t', 'trainer'));
  api.clusters.set(`${NS}/a`, cluster('a', 'nb', { clusters: ['t'], configmaps: ['model'], secrets: ['creds'] }));
  for (const p of [pod('a-0', 'a'), pod('a-1', 'a', { unrelated: 'x' }), pod('a-2', 'a'), pod('t-0', 't')])
    api.pods.set(`${NS}/${p.metadata.name}`, p);
});

const ann = (p: string) => api.pods.get(`${NS}/${p}`)!.metadata.annotations ?? {};

describe('reconcileCluster', () => {
  it('first sight: delivers configmeta and initializes status without a bump', async () => {
    const out = await reconcileCluster(`${NS}/a`, api.deps());
    expect(out.bumped).toBeUndefined();
    expect(api.writes.sort()).toEqual(['pod a-0', 'pod a-1', 'pod a-2', 'status a']);
    expect(ann('a-1').unrelated).toBe('x'); // other annotations are kept
    expect(ann('a-0')[ANNOTATION_CONFIGMETA_GENERATOR]).toBe('0');
    const doc = JSON.parse(ann('a-0')[ANNOTATION_CONFIGMETA]!);
    expect(doc.connections.configmaps.model[0].data).toEqual({ path: '/v1' });
    expect(doc.connections.secrets.scm[0]).toMatchObject({ data: { token: '' }, redacted: true });
    const s = api.clusters.get(`${NS}/a`)!.status!;
    expect(s.lastConfigMetaGenerator).toBe(0);
    expect(s.connectionsHash).toMatch(/^[0-9a-f]{64}$/);
    expect(s.members).toEqual({ total: 3, ready: 0, synced: 3 });
    expect(s.connectionsSummary).toBe('3/3');
    expect(api.events.map((e) => e.note)).toEqual(['configmeta generator 0 written to 3/3 member pods']);
  });

  it('nothing changed: a second pass (a restart, a relist) writes nothing', async () => {
    await reconcileCluster(`${NS}/a`, api.deps());
    api.writes = [];
    api.events = [];
    const out = await reconcileCluster(`${NS}/a`, api.deps());
    expect(out).toEqual({ podsWritten: 0, statusWritten: false });
    expect(api.writes).toEqual([]);
    expect(api.events).toEqual([]);
  });

  it('a member pod without the configmeta volume: annotated, reported once (condition + Warning), then nothing', async () => {
    const bare = pod('a-2', 'a');
    bare.spec = {};
    api.pods.set(`${NS}/a-2`, bare);
    await reconcileCluster(`${NS}/a`, api.deps());
    expect(ann('a-2')[ANNOTATION_CONFIGMETA_GENERATOR]).toBe('0');
    const s = api.clusters.get(`${NS}/a`)!.status!;
    expect(s.conditions!.find((c) => c.type === 'ConfigMetaSynced')).toMatchObject({
      status: 'False',
      reason: 'PodsMissingConfigMetaVolume',
      message: expect.stringContaining(': a-2.'),
    });
    expect(api.events.filter((e) => e.type === 'Warning').map((e) => e.reason)).toEqual([
      'PodsMissingConfigMetaVolume',
    ]);
    // A restart with nothing changed: no write, no event.
    api.writes = [];
    api.events = [];
    expect(await reconcileCluster(`${NS}/a`, api.deps())).toEqual({ podsWritten: 0, statusWritten: false });
    expect(api.writes).toEqual([]);
    expect(api.events).toEqual([]);
  });

  it('connected content changed: one bump (test + replace), one patch per pod, one status write, events naming the cause', async () => {
    await reconcileCluster(`${NS}/a`, api.deps());
    api.writes = [];
    api.events = [];
    api.cms.get(`${NS}/model`)!.data = { path: '/v2' };
    const out = await reconcileCluster(`${NS}/a`, api.deps());
    expect(out.bumped).toEqual({ from: 0, to: 1 });
    expect(api.writes).toEqual(['kdcluster a', 'pod a-0', 'pod a-1', 'pod a-2', 'status a']);
    expect(api.clusters.get(`${NS}/a`)!.spec.configMetaGenerator).toBe(1);
    expect(api.clusters.get(`${NS}/a`)!.status!.lastConfigMetaGenerator).toBe(1);
    expect(JSON.parse(ann('a-2')[ANNOTATION_CONFIGMETA]!).connections.configmaps.model[0].data.path).toBe('/v2');
    expect(api.events.map((e) => `${e.regarding.name} ${e.reason}: ${e.note}`)).toEqual([
      'a ConnectionChanged: connected configmap model changed; configMetaGenerator 0 → 1',
      'model ConnectionUsed: cluster a uses this as a connection; requested configmeta regeneration (generator 1)',
      'a ConfigMetaDelivered: configmeta generator 1 written to 3/3 member pods',
    ]);
  });

  it('a pending regeneration (generator raised by hand) is delivered without another bump', async () => {
    await reconcileCluster(`${NS}/a`, api.deps());
    const c = api.clusters.get(`${NS}/a`)!;
    api.clusters.set(`${NS}/a`, { ...c, spec: { ...c.spec, configMetaGenerator: 7 } });
    api.cms.get(`${NS}/model`)!.data = { path: '/v3' }; // content changed too: delivered with 7, no bump to 8
    api.writes = [];
    const out = await reconcileCluster(`${NS}/a`, api.deps());
    expect(out.bumped).toBeUndefined();
    expect(ann('a-0')[ANNOTATION_CONFIGMETA_GENERATOR]).toBe('7');
    expect(api.clusters.get(`${NS}/a`)!.status!.lastConfigMetaGenerator).toBe(7);
    expect(api.writes.filter((w) => w.startsWith('kdcluster'))).toEqual([]);
  });

  it('a bump that lost a race (generator moved on) is refused by its test and retried, never applied twice', async () => {
    await reconcileCluster(`${NS}/a`, api.deps());
    api.cms.get(`${NS}/model`)!.data = { path: '/v2' };
    const deps = api.deps();
    // Someone else raises the generator between our read and our write.
    const stale = structuredClone(api.clusters.get(`${NS}/a`)!);
    const live = api.clusters.get(`${NS}/a`)!;
    api.clusters.set(`${NS}/a`, {
      ...live,
      metadata: { ...live.metadata, resourceVersion: api.nextRv() },
      spec: { ...live.spec, configMetaGenerator: 3 },
    });
    deps.getCluster = () => stale;
    await expect(reconcileCluster(`${NS}/a`, deps)).rejects.toThrow(RetryableError);
    expect(api.clusters.get(`${NS}/a`)!.spec.configMetaGenerator).toBe(3);
  });

  it('pod patches failing for a subset: progress recorded, condition and event name the pods, the key is retried', async () => {
    api.failPods.add('a-1');
    await expect(reconcileCluster(`${NS}/a`, api.deps())).rejects.toThrow('configmeta not delivered to a-1');
    const s = api.clusters.get(`${NS}/a`)!.status!;
    expect(s.lastConfigMetaGenerator).toBeUndefined(); // still pending
    expect(s.members?.synced).toBe(2);
    const cond = s.conditions!.find((c) => c.type === 'ConfigMetaSynced')!;
    expect(cond).toMatchObject({ status: 'False', reason: 'PodPatchFailed' });
    expect(cond.message).toBe(
      'configmeta generator 0 written to 2/3 member pods; failed: a-1 (connection reset by peer)',
    );
    expect(api.events.map((e) => `${e.type} ${e.note}`)).toEqual([
      'Warning configmeta generator 0 written to 2/3 member pods; failed: a-1 (connection reset by peer)',
    ]);
    // The retry writes only the pod that is missing it.
    api.failPods.clear();
    api.writes = [];
    await reconcileCluster(`${NS}/a`, api.deps());
    expect(api.writes).toEqual(['pod a-1', 'status a']);
    expect(api.clusters.get(`${NS}/a`)!.status!.lastConfigMetaGenerator).toBe(0);
  });

  it('configmeta too large for an annotation: nothing is written to any pod; condition and event say so', async () => {
    api.cms.get(`${NS}/model`)!.data = { blob: 'x'.repeat(300 * 1024) };
    await reconcileCluster(`${NS}/a`, api.deps());
    expect(api.writes).toEqual(['status a']);
    expect(ann('a-0')[ANNOTATION_CONFIGMETA]).toBeUndefined();
    const cond = api.clusters.get(`${NS}/a`)!.status!.conditions!.find((c) => c.type === 'ConfigMetaSynced')!;
    expect(cond.reason).toBe('ConfigMetaTooLarge');
    expect(api.events[0]).toMatchObject({ type: 'Warning', reason: 'ConfigMetaTooLarge' });
  });

  it('a connection the app does not allow is left out of configmeta and reported', async () => {
    api.apps.get(`${NS}/nb`)!.spec.connectable_to = [{ category: 'streaming' }];
    await reconcileCluster(`${NS}/a`, api.deps());
    const doc = JSON.parse(ann('a-0')[ANNOTATION_CONFIGMETA]!);
    expect(doc.connections.clusters).toEqual({});
    const s = api.clusters.get(`${NS}/a`)!.status!;
    expect(s.connections![0]).toMatchObject({ kind: 'Cluster', name: 't', state: 'NotConnectable' });
    expect(s.connectionsSummary).toBe('2/3');
  });

  it('a missing app: no pod is written; status says why', async () => {
    api.apps.delete(`${NS}/nb`);
    await reconcileCluster(`${NS}/a`, api.deps());
    expect(api.writes).toEqual(['status a']);
    const conds = api.clusters.get(`${NS}/a`)!.status!.conditions!;
    expect(conds.map((c) => `${c.type}=${c.status}/${c.reason}`)).toEqual([
      'ConnectionsResolved=False/AppNotFound',
      'MembersSeated=Unknown/AppNotFound',
      'ConfigMetaSynced=False/AppNotFound',
      // The kstatus summary: only the user can fix a missing app.
      'Ready=False/AppNotFound',
      'Stalled=True/AppNotFound',
    ]);
    expect(conds[0]!.message).toBe(
      `app "nb" not found in namespace "${NS}" or in the system catalog (namespace "kd-system")`,
    );
  });

  it('defers, writing nothing, while the caches do not show its own last writes', async () => {
    const deps = { ...api.deps(), pendingWrites: (keys: string[]) => (keys.includes(`pod:${NS}/a-2`) ? 250 : 0) };
    const out = await reconcileCluster(`${NS}/a`, deps);
    expect(out.deferredMs).toBe(250);
    expect(api.writes).toEqual([]);
  });

  it('guards each pod patch with the hash it read, so a pod rewritten meanwhile is not clobbered', async () => {
    await reconcileCluster(`${NS}/a`, api.deps());
    api.cms.get(`${NS}/model`)!.data = { path: '/v2' };
    const p = api.pods.get(`${NS}/a-0`)!;
    const deps = api.deps();
    const world = deps.world;
    // The cache still shows the old hash while another writer has already changed it.
    api.pods.set(`${NS}/a-0`, {
      ...p,
      metadata: {
        ...p.metadata,
        annotations: { ...p.metadata.annotations, [ANNOTATION_CONFIGMETA_HASH]: 'f'.repeat(64) },
      },
    });
    deps.world = {
      ...world,
      podsOf: async (ns, c) =>
        (await world.podsOf(ns, c)).map((x) => (x.metadata.name === 'a-0' ? trimPod(p as never) : x)),
    };
    await expect(reconcileCluster(`${NS}/a`, deps)).rejects.toThrow('configmeta not delivered to a-0');
    expect(api.pods.get(`${NS}/a-0`)!.metadata.annotations![ANNOTATION_CONFIGMETA_HASH]).toBe('f'.repeat(64));
  });
});

describe('the private Secret (Secret connections on)', () => {
  const NAME = privateConfigMetaSecretName('a');
  const setToken = (v: string) => {
    const s = api.secrets.get(`${NS}/creds`)!;
    api.secrets.set(`${NS}/creds`, { ...s, data: { token: Buffer.from(v).toString('base64') }, dataMac: v });
  };

  it('is created before the pods are written, owned by the cluster, with the values; the pods never see them', async () => {
    const out = await reconcileCluster(`${NS}/a`, api.privateDeps());
    expect(out.privateSecret).toBe('create');
    expect(api.writes[0]).toBe(`secret create ${NAME}`);
    const s = api.privateSecrets.get(`${NS}/${NAME}`)!;
    expect(s.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: 'KubeDirectorCluster',
        name: 'a',
        uid: 'uid-a',
        controller: true,
        blockOwnerDeletion: false,
      }),
    ]);
    const { doc, platform } = api.privateDoc('a')!;
    expect(doc.connections.secrets.scm[0].data).toEqual({ token: Buffer.from('tok-1').toString('base64') });
    expect(Object.keys(doc.connections.clusters)).toEqual(['t']);
    expect(JSON.parse(platform)).toEqual({});
    for (const p of ['a-0', 'a-1', 'a-2'])
      expect(JSON.stringify(ann(p))).not.toContain(Buffer.from('tok-1').toString('base64'));
  });

  it('unchanged content: no write (the MAC annotation says so); changed value: one guarded patch', async () => {
    await reconcileCluster(`${NS}/a`, api.privateDeps());
    api.writes = [];
    expect((await reconcileCluster(`${NS}/a`, api.privateDeps())).privateSecret).toBeUndefined();
    expect(api.writes).toEqual([]);
    setToken('tok-2');
    const out = await reconcileCluster(`${NS}/a`, api.privateDeps());
    expect(out.privateSecret).toBe('patch');
    expect(api.writes.filter((w) => w.startsWith('secret'))).toEqual([`secret patch ${NAME}`]);
    expect(api.privateDoc('a')!.doc.connections.secrets.scm[0].data.token).toBe(
      Buffer.from('tok-2').toString('base64'),
    );
  });

  it('a patch against a stale copy is refused by its test and retried, never applied', async () => {
    await reconcileCluster(`${NS}/a`, api.privateDeps());
    const deps = api.privateDeps();
    const stale = deps.privateSecrets!.get(NS, NAME)!;
    api.privateSecrets.get(`${NS}/${NAME}`)!.metadata.resourceVersion = '999';
    deps.privateSecrets = { ...deps.privateSecrets!, get: () => stale };
    setToken('tok-3');
    await expect(reconcileCluster(`${NS}/a`, deps)).rejects.toThrow(RetryableError);
    expect(api.privateDoc('a')!.doc.connections.secrets.scm[0].data.token).toBe(
      Buffer.from('tok-1').toString('base64'),
    );
  });

  it('is deleted (uid precondition) when the cluster no longer connects a Secret', async () => {
    await reconcileCluster(`${NS}/a`, api.privateDeps());
    const c = api.clusters.get(`${NS}/a`)!;
    api.clusters.set(`${NS}/a`, { ...c, spec: { ...c.spec, connections: { clusters: ['t'], configmaps: ['model'] } } });
    const out = await reconcileCluster(`${NS}/a`, api.privateDeps());
    expect(out.privateSecret).toBe('delete');
    expect(api.privateSecrets.size).toBe(0);
  });

  it('a delete planned from a stale cache finds it gone: done, no error, no event', async () => {
    await reconcileCluster(`${NS}/a`, api.privateDeps());
    const deps = api.privateDeps();
    const stale = deps.privateSecrets!.get(NS, NAME)!;
    deps.privateSecrets = { ...deps.privateSecrets!, get: () => stale };
    api.privateSecrets.clear();
    const c = api.clusters.get(`${NS}/a`)!;
    api.clusters.set(`${NS}/a`, { ...c, spec: { ...c.spec, connections: { clusters: ['t'] } } });
    api.events = [];
    await expect(reconcileCluster(`${NS}/a`, deps)).resolves.toMatchObject({ privateSecret: 'delete' });
    expect(api.events.filter((e) => e.type === 'Warning')).toEqual([]);
  });

  it('a failed write does not hold back the pods; a Warning names the Secret and the status code only', async () => {
    api.failSecretWrites = new KubeApiError(403, 'Forbidden', 'secrets is forbidden: tok-1 quoted here');
    await expect(reconcileCluster(`${NS}/a`, api.privateDeps())).rejects.toThrow(
      `private configmeta Secret ${NAME} (create) failed with HTTP 403`,
    );
    expect(api.writes.filter((w) => w.startsWith('pod'))).toHaveLength(3);
    const warning = api.events.find((e) => e.reason === 'PrivateConfigMetaFailed')!;
    expect(warning.note).toBe(`private configmeta Secret ${NAME} (create) failed with HTTP 403; retrying with backoff`);
  });

  it('a Secret left by an earlier cluster of the same name is deleted first', async () => {
    await reconcileCluster(`${NS}/a`, api.privateDeps());
    const c = api.clusters.get(`${NS}/a`)!;
    api.clusters.set(`${NS}/a`, { ...c, metadata: { ...c.metadata, uid: 'uid-a-2' } });
    expect((await reconcileCluster(`${NS}/a`, api.privateDeps())).privateSecret).toBe('delete');
    expect((await reconcileCluster(`${NS}/a`, api.privateDeps())).privateSecret).toBe('create');
    expect(api.privateSecrets.get(`${NS}/${NAME}`)!.metadata.ownerReferences[0]!.uid).toBe('uid-a-2');
  });

  it("someone else's Secret of that name: never changed, pods get no private half, status and one Warning name it; retried until it goes", async () => {
    const squat = {
      apiVersion: 'v1' as const,
      kind: 'Secret' as const,
      metadata: {
        name: NAME,
        namespace: NS,
        uid: 'uid-squat',
        resourceVersion: '7',
        labels: {},
        annotations: {},
        ownerReferences: [],
      },
      type: 'Opaque' as const,
      data: { [PRIVATE_SECRET_KEY_CONFIGMETA]: Buffer.from('{"forged":1}').toString('base64') },
    };
    api.privateSecrets.set(`${NS}/${NAME}`, structuredClone(squat));
    await expect(reconcileCluster(`${NS}/a`, api.privateDeps())).rejects.toThrow(
      `${NAME} is someone else's Secret; checking again with backoff`,
    );
    expect(api.privateSecrets.get(`${NS}/${NAME}`)).toEqual(squat);
    expect(api.writes.filter((w) => w.startsWith('secret'))).toEqual([]);
    // Every member written, none with a version for the sidecar to join.
    expect(api.writes.filter((w) => w.startsWith('pod'))).toHaveLength(3);
    for (const p of ['a-0', 'a-1', 'a-2']) expect(ann(p)['kd-connections.hpe.com/configmeta-splice']).toBe('');
    const synced = api.clusters.get(`${NS}/a`)!.status!.conditions!.find((c) => c.type === 'ConfigMetaSynced')!;
    expect(synced).toMatchObject({ status: 'False', reason: 'PrivateSecretNotOwned' });
    expect(synced.message).toContain(`Secret ${NS}/${NAME} is not this kdcluster's private configmeta Secret`);
    const warnings = () => api.events.filter((e) => e.reason === 'PrivateSecretNotOwned');
    expect(warnings()).toHaveLength(1);

    // The retry finds it still there: nothing written, no second Warning.
    api.writes = [];
    await expect(reconcileCluster(`${NS}/a`, api.privateDeps())).rejects.toThrow(RetryableError);
    expect(api.writes).toEqual([]);
    expect(warnings()).toHaveLength(1);

    // Gone: the reconciler creates its own, and the pods name its version.
    api.privateSecrets.delete(`${NS}/${NAME}`);
    const out = await reconcileCluster(`${NS}/a`, api.privateDeps());
    expect(out.privateSecret).toBe('create');
    const version = Buffer.from(api.privateSecrets.get(`${NS}/${NAME}`)!.data.version!, 'base64').toString();
    for (const p of ['a-0', 'a-1', 'a-2'])
      expect(ann(p)['kd-connections.hpe.com/configmeta-splice']!.split(' ')[1]).toBe(version);
    expect(api.clusters.get(`${NS}/a`)!.status!.conditions!.find((c) => c.type === 'ConfigMetaSynced')!.status).toBe(
      'True',
    );
  });
});

describe('seats: the first delivery waits for every member; a restarting member keeps its place', () => {
  const created = '2026-12-02T11:58:00Z'; // two minutes before deps().now
  const wait = (ms: number, d = api.deps()): ReconcileDeps => ({ ...d, opts: { ...d.opts, firstDeliveryWaitMs: ms } });
  const seated = () => api.clusters.get(`${NS}/a`)!.status!.conditions!.find((c) => c.type === 'MembersSeated')!;
  beforeEach(() => {
    api.clusters.get(`${NS}/a`)!.metadata.creationTimestamp = created;
    api.pods.delete(`${NS}/a-2`);
  });

  it('a new cluster with a vacant seat: nothing delivered, status names the seat, retried when the wait ends', async () => {
    const out = await reconcileCluster(`${NS}/a`, wait(5 * 60_000));
    expect(api.writes).toEqual(['status a']);
    expect(out.requeueAfterMs).toBe(3 * 60_000);
    expect(seated()).toMatchObject({ status: 'False', reason: 'WaitingForMembers' });
    expect(seated().message).toContain('no pod yet for worker seat 2');
    expect(seated().message).toContain('at most until 2026-12-02T12:03:00.000Z');
    const s = api.clusters.get(`${NS}/a`)!.status!;
    expect(s.conditions!.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'WaitingForMembers',
    });
    expect(s.conditions!.find((c) => c.type === 'ConfigMetaSynced')).toMatchObject({
      status: 'False',
      reason: 'WaitingForMembers',
    });
    expect(s.nodeIDs).toBeUndefined(); // no id is handed out before the first delivery
    expect(ann('a-0')[ANNOTATION_CONFIGMETA]).toBeUndefined();

    // The last pod arrives: every member's first document lists all three.
    api.pods.set(`${NS}/a-2`, pod('a-2', 'a'));
    const next = await reconcileCluster(`${NS}/a`, wait(5 * 60_000));
    expect(next.requeueAfterMs).toBeUndefined();
    for (const p of ['a-0', 'a-1', 'a-2'])
      expect(JSON.parse(ann(p)[ANNOTATION_CONFIGMETA]!).nodegroups['1'].roles.worker.node_ids).toEqual(['1', '2', '3']);
    expect(seated()).toMatchObject({ status: 'True', reason: 'Seated' });
  });

  it('a cluster without a creation time (never from the API server) is not held: nothing to count the wait from', async () => {
    delete api.clusters.get(`${NS}/a`)!.metadata.creationTimestamp;
    const out = await reconcileCluster(`${NS}/a`, wait(5 * 60_000));
    expect(out.requeueAfterMs).toBeUndefined();
    expect(api.writes.sort()).toEqual(['pod a-0', 'pod a-1', 'status a']);
  });

  it('once the wait is over, the pods there are get their documents and status keeps naming the seat', async () => {
    const out = await reconcileCluster(`${NS}/a`, wait(60_000));
    expect(out.requeueAfterMs).toBeUndefined();
    expect(api.writes.sort()).toEqual(['pod a-0', 'pod a-1', 'status a']);
    expect(seated()).toMatchObject({ status: 'False', reason: 'MembersMissing', message: 'no pod for worker seat 2' });
  });

  it('a member whose pod is away stays in every document with its id; only the present pods are written', async () => {
    api.pods.set(`${NS}/a-2`, pod('a-2', 'a'));
    await reconcileCluster(`${NS}/a`, wait(60_000));
    const before = JSON.parse(ann('a-0')[ANNOTATION_CONFIGMETA]!).nodegroups['1'].roles.worker;
    api.pods.delete(`${NS}/a-1`);
    api.writes.length = 0;
    const out = await reconcileCluster(`${NS}/a`, wait(60_000));
    expect(out.podsWritten).toBe(0); // the document did not change
    expect(JSON.parse(ann('a-0')[ANNOTATION_CONFIGMETA]!).nodegroups['1'].roles.worker).toEqual(before);
    expect(api.clusters.get(`${NS}/a`)!.status!.nodeIDs).toEqual({ 'a-0': 1, 'a-1': 2, 'a-2': 3 });
    expect(seated()).toMatchObject({ status: 'False', reason: 'MembersAway' });
    expect(seated().message).toContain('a-1 (worker): pod away');
  });

  it('pods a scale-up makes together are numbered in ordinal order: one seen early waits for the one below it', async () => {
    api.pods.set(`${NS}/a-2`, pod('a-2', 'a'));
    await reconcileCluster(`${NS}/a`, wait(60_000));
    api.clusters.get(`${NS}/a`)!.spec!.roles = [{ id: 'worker', members: 5 }];
    const young = (name: string) => ({
      ...pod(name, 'a'),
      metadata: { ...pod(name, 'a').metadata, creationTimestamp: '2026-12-02T11:59:50Z' }, // 10 s before now
    });
    api.pods.set(`${NS}/a-4`, young('a-4'));
    api.writes.length = 0;
    const early = await reconcileCluster(`${NS}/a`, wait(60_000));
    expect(ann('a-4')[ANNOTATION_CONFIGMETA]).toBeUndefined();
    expect(early.requeueAfterMs).toBe(50_000); // when a-4's wait ends, should a-3 never come
    expect(api.clusters.get(`${NS}/a`)!.status!.nodeIDs).toEqual({ 'a-0': 1, 'a-1': 2, 'a-2': 3 });
    api.pods.set(`${NS}/a-3`, young('a-3'));
    const both = await reconcileCluster(`${NS}/a`, wait(60_000));
    expect(both.requeueAfterMs).toBeUndefined();
    expect(api.clusters.get(`${NS}/a`)!.status!.nodeIDs).toEqual({ 'a-0': 1, 'a-1': 2, 'a-2': 3, 'a-3': 4, 'a-4': 5 });
    expect(JSON.parse(ann('a-4')[ANNOTATION_CONFIGMETA]!).nodegroups['1'].roles.worker.node_ids).toEqual([
      '1',
      '2',
      '3',
      '4',
      '5',
    ]);
  });

  it('labelled pods beyond the seats get no document, are named in status and in one Warning', async () => {
    api.pods.set(`${NS}/a-2`, pod('a-2', 'a'));
    api.pods.set(`${NS}/a-3`, pod('a-3', 'a'));
    await reconcileCluster(`${NS}/a`, wait(60_000));
    expect(ann('a-3')[ANNOTATION_CONFIGMETA]).toBeUndefined();
    expect(seated()).toMatchObject({ status: 'False', reason: 'PodsBeyondSeats' });
    const s = api.clusters.get(`${NS}/a`)!.status!;
    // Reconciling, not Stalled: while a StatefulSet and `members` change in two steps it passes by itself.
    expect(s.conditions!.find((c) => c.type === 'Reconciling')).toMatchObject({
      status: 'True',
      reason: 'PodsBeyondSeats',
    });
    expect(s.conditions!.find((c) => c.type === 'Stalled')).toBeUndefined();
    const warnings = () => api.events.filter((e) => e.reason === 'PodsBeyondSeats');
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]!.note).toContain('a-3: ordinal 3 is beyond the 3 seat(s) of role "worker"');
    await reconcileCluster(`${NS}/a`, wait(60_000));
    expect(warnings()).toHaveLength(1);
  });
});
