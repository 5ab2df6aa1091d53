/**
 * The admission workload: the objects seeded into a namespace so that every connection in a review
 * needs lookups (apps, clusters with their apps and connectable_to, labelled ConfigMaps and a Secret),
 * and AdmissionReviews of about 5 KB shaped the way kube-apiserver sends them — managedFields, the
 * kubectl last-applied annotation, userInfo, options, object and (on UPDATE) oldObject with status.
 */
import { randomUUID } from 'node:crypto';
import { configMap, kdApp, kdCluster, secret } from '../support/kd-objects.js';

type Obj = Record<string, any>;

export const SEED = {
  apps: ['notebook', 'trainer'],
  clusters: ['train-0', 'train-1', 'train-2', 'train-3'],
  /** A cluster of the notebook app: connecting a notebook cluster to it breaks connectable_to. */
  notebookClusters: ['lab-0'],
  configmaps: ['model-0', 'model-1', 'model-2'],
  secrets: ['creds'],
};

/** Apps, connectable clusters, labelled ConfigMaps and a Secret; everything the reviews look up. */
export function seedObjects(): Obj[] {
  return [
    kdApp('notebook', {
      category: 'notebook',
      version: '3.1.0',
      connectable_to: [{ category: 'training', version: '>=2.4 <3' }, { distroID: 'bluedata/mlflow' }],
      roles: ['controller', 'worker'],
    }),
    kdApp('trainer', { category: 'training', version: '2.4.5', distroID: 'bluedata/spark245', roles: ['worker'] }),
    ...SEED.clusters.map((c) => kdCluster(c, 'trainer', {}, ['worker'])),
    ...SEED.notebookClusters.map((c) => kdCluster(c, 'notebook', {}, ['controller'])),
    ...SEED.configmaps.map((c) => configMap(c, { path: `/models/${c}`, framework: 'tensorflow', replicas: '3' })),
    secret('creds', { token: 'bench-token', user: 'bench' }),
  ];
}

export interface Connections {
  clusters: string[];
  configmaps: string[];
  secrets: string[];
}

/** The kdcluster a user would write: two roles, connections to clusters, ConfigMaps and a Secret. */
export function notebookCluster(name: string, connections: Connections, generator?: number): Obj {
  const role = (id: string, members: number, cpu: string, memory: string) => ({
    id,
    members,
    resources: { requests: { cpu, memory }, limits: { cpu, memory, 'nvidia.com/gpu': '0' } },
    storage: { size: '40Gi', storageClassName: 'standard' },
    env: [{ name: 'MODEL_STORE', value: '/mnt/models' }],
  });
  const base = kdCluster(name, 'notebook', connections, ['controller']) as Obj;
  base.metadata.labels = { team: 'data-science', 'app.kubernetes.io/part-of': 'ml-platform', env: 'staging' };
  base.spec.roles = [role('controller', 1, '2', '8Gi'), role('worker', 4, '4', '16Gi')];
  base.spec.serviceType = 'ClusterIP';
  if (generator !== undefined) base.spec.configMetaGenerator = generator;
  return base;
}

function managedFields(obj: Obj, time: string, withStatus: boolean, clientSide: boolean): Obj[] {
  const fields: Obj = {
    'f:metadata': {
      ...(clientSide ? { 'f:annotations': { '.': {}, 'f:kubectl.kubernetes.io/last-applied-configuration': {} } } : {}),
      'f:labels': Object.fromEntries([['.', {}], ...Object.keys(obj.metadata.labels ?? {}).map((k) => [`f:${k}`, {}])]),
    },
    'f:spec': {
      '.': {},
      'f:app': {},
      'f:serviceType': {},
      'f:roles': {},
      'f:connections': { '.': {}, 'f:clusters': {}, 'f:configmaps': {}, 'f:secrets': {} },
    },
  };
  const entries: Obj[] = [
    {
      manager: clientSide ? 'kubectl-client-side-apply' : 'kubectl',
      operation: clientSide ? 'Update' : 'Apply',
      apiVersion: 'kubedirector.hpe.com/v1beta1',
      time,
      fieldsType: 'FieldsV1',
      fieldsV1: fields,
    },
    {
      manager: 'kd-connections-admission',
      operation: 'Update',
      apiVersion: 'kubedirector.hpe.com/v1beta1',
      time,
      fieldsType: 'FieldsV1',
      fieldsV1: { 'f:spec': { 'f:configMetaGenerator': {} } },
    },
  ];
  if (withStatus)
    entries.push({
      manager: 'kd-connections-reconciler',
      operation: 'Update',
      apiVersion: 'kubedirector.hpe.com/v1beta1',
      time,
      fieldsType: 'FieldsV1',
      fieldsV1: {
        'f:status': {
          '.': {},
          'f:conditions': {},
          'f:connections': {},
          'f:connectionsHash': {},
          'f:lastConfigMetaGenerator': {},
          'f:members': {},
          'f:observedGeneration': {},
        },
      },
      subresource: 'status',
    });
  return entries;
}

/** The object as stored by the API server: identity, last-applied, managedFields, and status if asked. */
function stored(
  obj: Obj,
  namespace: string,
  opts: { rv: number; generation: number; status: boolean; lastApplied: boolean },
): Obj {
  const time = '2026-01-12T09:30:00Z';
  const applied = { apiVersion: obj.apiVersion, kind: obj.kind, metadata: obj.metadata, spec: obj.spec };
  const o: Obj = structuredClone(obj);
  o.metadata = {
    ...o.metadata,
    namespace,
    uid: '5f0b1c2e-8d7a-4e34-9c1b-2b3f4a5d6e7f',
    resourceVersion: String(opts.rv),
    generation: opts.generation,
    creationTimestamp: time,
    ...(opts.lastApplied
      ? { annotations: { 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify(applied) + '\n' } }
      : {}),
    managedFields: managedFields(o, time, opts.status, opts.lastApplied),
  };
  if (opts.status) {
    const conn = (kind: string, names: string[]) =>
      names.map((name) => ({ kind, name, state: 'Connected', contentHash: 'e3b0c44298fc1c149afbf4c8996fb924' }));
    o.status = {
      observedGeneration: opts.generation,
      lastConfigMetaGenerator: o.spec.configMetaGenerator ?? 0,
      connectionsHash: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
      members: { total: 5, ready: 5, synced: 5 },
      connections: [
        ...conn('Cluster', o.spec.connections?.clusters ?? []),
        ...conn('ConfigMap', o.spec.connections?.configmaps ?? []),
        ...conn('Secret', o.spec.connections?.secrets ?? []),
      ],
      conditions: [
        {
          type: 'ConfigMetaSynced',
          status: 'True',
          reason: 'Delivered',
          message: 'all 5 member pods hold configmeta generator 1',
          lastTransitionTime: time,
          observedGeneration: opts.generation,
        },
      ],
    };
  }
  return o;
}

/** An AdmissionReview as kube-apiserver sends it for a kdcluster write. */
function admissionReview(
  operation: 'CREATE' | 'UPDATE',
  obj: Obj,
  old: Obj | null,
  namespace: string,
  name: string,
): Obj {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: 'kubedirector.hpe.com', version: 'v1beta1', kind: 'KubeDirectorCluster' },
      resource: { group: 'kubedirector.hpe.com', version: 'v1beta1', resource: 'kubedirectorclusters' },
      requestKind: { group: 'kubedirector.hpe.com', version: 'v1beta1', kind: 'KubeDirectorCluster' },
      requestResource: { group: 'kubedirector.hpe.com', version: 'v1beta1', resource: 'kubedirectorclusters' },
      name,
      namespace,
      operation,
      userInfo: {
        username: 'jane@example.com',
        uid: 'a1b2c3d4-0000-4000-8000-000000000001',
        groups: ['data-science', 'system:authenticated'],
        extra: { 'authentication.kubernetes.io/credential-id': ['X509SHA256=0f1e2d3c4b5a69788796a5b4c3d2e1f0'] },
      },
      object: obj,
      oldObject: old,
      dryRun: false,
      options: {
        apiVersion: 'meta.k8s.io/v1',
        kind: operation === 'CREATE' ? 'CreateOptions' : 'UpdateOptions',
        fieldManager: operation === 'CREATE' ? 'kubectl-client-side-apply' : 'kubectl',
        fieldValidation: 'Strict',
      },
    },
  };
}

export type ReviewKind = 'validate-create' | 'validate-update' | 'mutate-create' | 'mutate-update';

export interface BenchReview {
  name: ReviewKind;
  path: string;
  body: string;
}

/**
 * The four reviews the API server sends for a kdcluster write (validating and mutating, CREATE and
 * UPDATE). By default the UPDATE adds a cluster and a ConfigMap, so it is allowed, checks every
 * connection against connectable_to, and makes the mutating webhook raise configMetaGenerator; the
 * growth section passes its own connections (the CREATE carries `after`).
 */
export function benchReviews(
  namespace: string,
  before: Connections = { clusters: ['train-0', 'train-1'], configmaps: ['model-0'], secrets: ['creds'] },
  after: Connections = {
    clusters: ['train-0', 'train-1', 'train-2'],
    configmaps: ['model-0', 'model-1'],
    secrets: ['creds'],
  },
): BenchReview[] {
  const name = 'nb-bench';
  // Created with `kubectl apply` (client-side: the last-applied annotation), updated with server-side apply.
  const create = stored(notebookCluster(name, after), namespace, {
    rv: 0,
    generation: 1,
    status: false,
    lastApplied: true,
  });
  delete create.metadata.uid;
  delete create.metadata.resourceVersion;
  delete create.metadata.creationTimestamp;
  const updated = { rv: 48213, generation: 3, status: true, lastApplied: false };
  const oldObject = stored(notebookCluster(name, before, 1), namespace, updated);
  const object = stored(notebookCluster(name, after, 1), namespace, updated);
  const review = (operation: 'CREATE' | 'UPDATE', obj: Obj, old: Obj | null) =>
    admissionReview(operation, obj, old, namespace, name);
  return [
    {
      name: 'validate-create',
      path: '/validate-kdcluster?timeout=5s',
      body: JSON.stringify(review('CREATE', create, null)),
    },
    {
      name: 'validate-update',
      path: '/validate-kdcluster?timeout=5s',
      body: JSON.stringify(review('UPDATE', object, oldObject)),
    },
    {
      name: 'mutate-create',
      path: '/mutate-kdcluster?timeout=5s',
      body: JSON.stringify(review('CREATE', create, null)),
    },
    {
      name: 'mutate-update',
      path: '/mutate-kdcluster?timeout=5s',
      body: JSON.stringify(review('UPDATE', object, oldObject)),
    },
  ];
}

/** The reviews as the load generator's requests. */
export function loadRequests(reviews: readonly BenchReview[]) {
  return reviews.map((r) => ({
    method: 'POST' as const,
    path: r.path,
    headers: { 'content-type': 'application/json' },
    body: r.body,
  }));
}

export function meanReviewBytes(reviews: readonly BenchReview[]): number {
  return Math.round(reviews.reduce((n, r) => n + Buffer.byteLength(r.body), 0) / reviews.length);
}

/** What each review must be answered with (checked once before any load). */
export function expectedAnswer(kind: ReviewKind): { allowed: true; patch: boolean } {
  return { allowed: true, patch: kind.startsWith('mutate') };
}

/**
 * Reviews that are refused, for comparing answers with the Go peer (not part of the load): a missing
 * cluster, a cluster whose app breaks connectable_to, a missing ConfigMap, a duplicate, and a
 * configMetaGenerator that is a string (refused by both the validating and the mutating webhook).
 */
export function deniedReviews(namespace: string): BenchReview[] {
  const name = 'nb-denied';
  const bad = notebookCluster(name, {
    clusters: ['train-0', 'ghost', ...SEED.notebookClusters],
    configmaps: ['model-0', 'missing-cm', 'model-0'],
    secrets: ['creds'],
  });
  bad.metadata.namespace = namespace;
  const stringGenerator = structuredClone(bad);
  stringGenerator.spec.configMetaGenerator = '5';
  const lowered = notebookCluster(name, { clusters: ['train-0'], configmaps: [], secrets: [] }, 1);
  const loweredOld = notebookCluster(name, { clusters: [], configmaps: [], secrets: [] }, 4);
  for (const o of [lowered, loweredOld]) o.metadata.namespace = namespace;
  const body = (op: 'CREATE' | 'UPDATE', o: Obj, old: Obj | null) =>
    JSON.stringify(admissionReview(op, o, old, namespace, name));
  return [
    { name: 'validate-create', path: '/validate-kdcluster?timeout=5s', body: body('CREATE', bad, null) },
    { name: 'validate-create', path: '/validate-kdcluster?timeout=5s', body: body('CREATE', stringGenerator, null) },
    { name: 'validate-update', path: '/validate-kdcluster?timeout=5s', body: body('UPDATE', lowered, loweredOld) },
    { name: 'mutate-create', path: '/mutate-kdcluster?timeout=5s', body: body('CREATE', stringGenerator, null) },
    { name: 'mutate-update', path: '/mutate-kdcluster?timeout=5s', body: body('UPDATE', lowered, loweredOld) },
  ];
}
