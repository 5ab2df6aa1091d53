/**
 * Event routing: informer events → the keys of the clusters to reconcile. Handlers only enqueue; they never
 * look at what changed beyond deciding whom to wake (a cluster's own objects and pods wake it; a connected
 * object, app or cluster wakes its dependents through the reverse index), and record the versions the
 * watch delivered for the write expectations.
 */
import { LABEL_KDCLUSTER, LABEL_ROLE, type KDCluster } from '@kd-connections/shared/domain';
import { LABEL_PRIVATE_CONFIGMETA_OF, type ReverseIndex } from '@kd-connections/shared/plan';
import { objectKey } from '@kd-connections/shared/primitives';
import { INDEX_CLUSTERS_BY_APP, type CachedPod, type Caches } from './caches.js';
import type { Expectations } from './expectations.js';
import { writeKey } from './reconcile.js';

export interface EventRoutes {
  caches: Caches;
  index: ReverseIndex;
  expectations: Expectations;
  /** Where appCatalog: system apps live: such an app's change wakes clusters in every namespace. */
  systemNamespace: string;
  /** Adds a cluster's key to the work queue (a no-op while this replica does not lead). */
  enqueue: (key: string) => void;
}

export function routeEvents({ caches, index, expectations, systemNamespace, enqueue }: EventRoutes): void {
  const enqueueDependents = (kind: 'Cluster' | 'ConfigMap' | 'Secret', key: string) => {
    for (const k of index.dependentsOf(kind, key)) enqueue(k);
  };

  const { clusters, apps, configMaps, secrets, pods, privateSecrets } = caches;
  const onCluster = (c: KDCluster, old?: KDCluster) => {
    const key = objectKey(c.metadata.namespace, c.metadata.name);
    expectations.observe(writeKey('kdcluster', key), c.metadata.resourceVersion);
    for (const r of index.set(key, c.spec?.connections)) caches.release(r);
    enqueue(key);
    // A connected cluster's embedded view depends on its spec (and pods, below), not on its status.
    if (!old || old.metadata.generation !== c.metadata.generation) enqueueDependents('Cluster', key);
  };
  clusters.on('add', (c) => onCluster(c));
  clusters.on('update', (c, old) => onCluster(c, old));
  clusters.on('delete', (c) => {
    const key = objectKey(c.metadata.namespace, c.metadata.name);
    expectations.observe(writeKey('kdcluster', key), undefined);
    for (const r of index.delete(key)) caches.release(r);
    enqueueDependents('Cluster', key);
  });

  const onApp = (a: { metadata: { namespace?: string; name?: string } }) => {
    const users =
      a.metadata.namespace === systemNamespace
        ? clusters.byIndex(INDEX_CLUSTERS_BY_APP, `*/${a.metadata.name}`)
        : clusters.byIndex(INDEX_CLUSTERS_BY_APP, `${a.metadata.namespace}/${a.metadata.name}`);
    for (const c of users) {
      const key = objectKey(c.metadata.namespace, c.metadata.name);
      enqueue(key);
      enqueueDependents('Cluster', key);
    }
  };
  for (const ev of ['add', 'update', 'delete'] as const) apps.on(ev, onApp);

  for (const ev of ['add', 'update', 'delete'] as const) {
    configMaps.on(ev, (cm) => enqueueDependents('ConfigMap', objectKey(cm.metadata.namespace, cm.metadata.name)));
    secrets?.on(ev, (s) => enqueueDependents('Secret', objectKey(s.metadata.namespace, s.metadata.name)));
  }

  // A private Secret changed or went away (ours, or someone else's doing): its cluster checks it.
  for (const ev of ['add', 'update', 'delete'] as const) {
    privateSecrets?.on(ev, (s) => {
      const { namespace, name } = s.metadata;
      expectations.observe(
        writeKey('secret', objectKey(namespace, name)),
        ev === 'delete' ? undefined : s.metadata.resourceVersion,
      );
      const cluster = s.metadata.labels?.[LABEL_PRIVATE_CONFIGMETA_OF];
      if (cluster) enqueue(objectKey(namespace, cluster));
    });
  }

  // What a connected cluster's embedded view uses of a pod; annotation writes (ours) leave it alone.
  const membership = (p: CachedPod) =>
    JSON.stringify([
      p.metadata.labels?.[LABEL_ROLE],
      !!p.metadata.deletionTimestamp,
      p.spec?.hostname,
      p.spec?.subdomain,
      p.metadata.uid,
    ]);
  const onPod = (p: CachedPod, old?: CachedPod, gone = false) => {
    expectations.observe(
      writeKey('pod', objectKey(p.metadata.namespace, p.metadata.name)),
      gone ? undefined : p.metadata.resourceVersion,
    );
    const cluster = p.metadata.labels?.[LABEL_KDCLUSTER];
    const before = old?.metadata.labels?.[LABEL_KDCLUSTER];
    for (const c of new Set([cluster, before])) {
      if (!c) continue;
      const key = objectKey(p.metadata.namespace, c);
      enqueue(key);
      if (!old || membership(old) !== membership(p) || before !== cluster) enqueueDependents('Cluster', key);
    }
  };
  pods.on('add', (p) => onPod(p));
  pods.on('update', (p, old) => onPod(p, old));
  pods.on('delete', (p) => onPod(p, { ...p, metadata: { ...p.metadata, uid: `${p.metadata.uid}-gone` } }, true));
}
