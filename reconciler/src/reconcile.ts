/**
 * Reconcile(cluster) — DESIGN §5. A function of a key: it reads current state from the caches,
 * decides, and makes at most three kinds of writes, each a single JSON Patch with `test` preconditions:
 *   1. spec.configMetaGenerator + 1 when what the pods would see changed and no regeneration is pending;
 *   2. the configmeta annotations of each member pod that does not hold the current document;
 *   3. /status, only when it differs.
 * A refused precondition or any failure throws: the work queue retries the key with backoff, against
 * fresher caches. Nothing here sleeps or loops on a stale copy.
 */
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
  ANNOTATIONS_SIZE_LIMIT,
  API_VERSION,
  appSearchDescription,
  buildStatus,
  canonicalJson,
  errorMessage,
  isConflict,
  membersOf,
  renderConfigMetaForMembers,
  renderConnections,
  resolveApp,
  resolveConnections,
  sectionPatch,
  setAnnotationsPatch,
  sha256Hex,
  splitKey,
  type ConnectionStatus,
  type Delivery,
  type EventInput,
  type EventTarget,
  type KDCluster,
  type KDClusterStatus,
  type Logger,
  type Member,
  type PatchOp,
  type World,
} from '@kd-connections/shared';

export interface Writes {
  /** JSON Patch on the kdcluster (main resource); returns the updated object. */
  patchCluster(namespace: string, name: string, ops: PatchOp[]): Promise<KDCluster>;
  patchClusterStatus(namespace: string, name: string, ops: PatchOp[]): Promise<KDCluster>;
  /** Returns the pod's new resourceVersion. */
  patchPod(namespace: string, name: string, ops: PatchOp[]): Promise<string | undefined>;
}

export interface ReconcileOptions {
  systemNamespace: string;
  secretConnections: boolean;
  inlineSecretValues: boolean;
  clusterDomain: string;
  /** Pod patches in flight at once for one cluster. */
  podConcurrency: number;
}

export interface ReconcileDeps {
  getCluster(namespace: string, name: string): KDCluster | undefined;
  /** Cached pods with the member labels of a cluster (annotations trimmed to generator/hash). */
  world: World;
  writes: Writes;
  events: { record(e: EventInput): void };
  log: Logger;
  opts: ReconcileOptions;
  now?: () => Date;
  /** Milliseconds until our own recent writes to these objects show in the caches (0 = fresh). */
  pendingWrites?: (objectKeys: string[]) => number;
}

/** Thrown when a write failed and the key must be retried (after status recorded the progress). */
export class RetryableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RetryableError';
  }
}

export type ReconcileOutcome = {
  /** Set when the caches do not show our own last writes yet: nothing was done; try again after. */
  deferredMs?: number;
  bumped?: { from: number; to: number };
  podsWritten: number;
  statusWritten: boolean;
};

/** The key expectations use for an object we write. */
export function writeKey(kind: 'kdcluster' | 'pod', key: string): string {
  return `${kind}:${key}`;
}

function clusterTarget(c: KDCluster): EventTarget {
  return {
    apiVersion: API_VERSION,
    kind: 'KubeDirectorCluster',
    namespace: c.metadata.namespace,
    name: c.metadata.name ?? '',
    uid: c.metadata.uid,
  };
}

const KIND_NOUN: Record<string, string> = { Cluster: 'cluster', ConfigMap: 'configmap', Secret: 'secret' };

/** What changed between the recorded connection states and the current ones, for event notes. */
export function describeChanges(
  before: ConnectionStatus[] | undefined,
  after: ConnectionStatus[],
): { changed: ConnectionStatus[]; text: string } {
  const old = new Map((before ?? []).map((c) => [`${c.kind}/${c.name}`, c]));
  const parts: string[] = [];
  const changed: ConnectionStatus[] = [];
  for (const c of after) {
    const o = old.get(`${c.kind}/${c.name}`);
    old.delete(`${c.kind}/${c.name}`);
    const noun = `${KIND_NOUN[c.kind]} ${c.name}`;
    if (c.state === 'Connected') {
      if (!o || o.state !== 'Connected') parts.push(`connected ${noun} became available`);
      else if (o.contentHash !== c.contentHash) parts.push(`connected ${noun} changed`);
      else continue;
      changed.push(c);
    } else if (o?.state === 'Connected') {
      parts.push(`connected ${noun} is now ${c.state}`);
      changed.push(c);
    }
  }
  for (const o of old.values())
    if (o.state === 'Connected') parts.push(`${KIND_NOUN[o.kind]} ${o.name} is no longer connected`);
  return { changed, text: parts.length ? parts.join(', ') : 'connected content changed' };
}

async function mapLimit<T>(items: T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let i = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!);
  });
  await Promise.all(workers);
}

export async function reconcileCluster(key: string, d: ReconcileDeps): Promise<ReconcileOutcome> {
  const { namespace, name } = splitKey(key);
  const outcome: ReconcileOutcome = { podsWritten: 0, statusWritten: false };
  let cluster = d.getCluster(namespace, name);
  if (!cluster || cluster.metadata.deletionTimestamp) return outcome;
  const log = d.log.child({ cluster: key });
  const now = (d.now ?? (() => new Date()))().toISOString();
  const status: KDClusterStatus = cluster.status ?? {};
  const pods = await d.world.podsOf(namespace, name);
  // Acting on a view that predates our own last writes would repeat them (and trip their preconditions).
  const wait =
    d.pendingWrites?.([
      writeKey('kdcluster', key),
      ...pods.map((p) => writeKey('pod', `${namespace}/${p.metadata.name}`)),
    ]) ?? 0;
  if (wait > 0) return { ...outcome, deferredMs: wait };

  // 1. Resolve the app and every connection.
  const own = await resolveApp(d.world, namespace, cluster.spec ?? {}, d.opts.systemNamespace);
  const resolved = await resolveConnections(cluster, own, d.world, d.opts);
  const members: Member[] = membersOf(cluster, own?.app, pods, d.opts);

  if (!own) {
    const problem = `app "${String(cluster.spec?.app)}" not found ${appSearchDescription(namespace, cluster.spec?.appCatalog, d.opts.systemNamespace)}`;
    const desired = buildStatus({
      previous: status,
      generation: cluster.metadata.generation,
      appProblem: problem,
      connections: resolved.statuses,
      hash: resolved.hash,
      members,
      now,
    });
    outcome.statusWritten = await writeStatus(cluster, status, desired, d);
    return outcome;
  }

  // 2. Request a regeneration when what the pods see changed and none is pending.
  const firstSeen = status.connectionsHash === undefined;
  let generator = cluster.spec?.configMetaGenerator ?? 0;
  const pending = generator > (status.lastConfigMetaGenerator ?? -1);
  if (!firstSeen && !pending && resolved.hash !== status.connectionsHash) {
    const to = generator + 1;
    const present = typeof cluster.spec?.configMetaGenerator === 'number';
    const ops: PatchOp[] = present
      ? [
          { op: 'test', path: '/spec/configMetaGenerator', value: generator },
          { op: 'replace', path: '/spec/configMetaGenerator', value: to },
        ]
      : [
          { op: 'test', path: '/metadata/resourceVersion', value: cluster.metadata.resourceVersion },
          { op: 'add', path: '/spec/configMetaGenerator', value: to },
        ];
    try {
      cluster = await d.writes.patchCluster(namespace, name, ops);
    } catch (e) {
      if (isConflict(e)) throw new RetryableError(`configMetaGenerator of ${key} moved on since it was read; retrying`);
      throw e;
    }
    const { changed, text } = describeChanges(status.connections, resolved.statuses);
    log.info('requested configmeta regeneration', { from: generator, to, cause: text });
    d.events.record({
      regarding: clusterTarget(cluster),
      type: 'Normal',
      reason: 'ConnectionChanged',
      action: 'Regenerate',
      note: `${text}; configMetaGenerator ${generator} → ${to}`,
    });
    for (const c of changed) {
      const target = connectionTarget(c, namespace, resolved);
      if (!target) continue;
      d.events.record({
        regarding: target,
        related: clusterTarget(cluster),
        type: 'Normal',
        reason: 'ConnectionUsed',
        action: 'Regenerate',
        note: `cluster ${name} uses this as a connection; requested configmeta regeneration (generator ${to})`,
      });
    }
    outcome.bumped = { from: generator, to };
    generator = to;
  }

  // 3. Deliver: every member pod gets the configmeta of this generator, skipping those that hold it.
  const connections = renderConnections(resolved.connected, d.opts);
  const docs = renderConfigMetaForMembers(cluster, own.app, members, connections);
  const delivery: Delivery = { generator, synced: [], failed: {} };
  const byName = new Map(pods.map((p) => [p.metadata.name ?? '', p]));
  const toWrite: { pod: string; values: Record<string, string> }[] = [];
  for (const m of members) {
    const text = docs.get(m.pod)!;
    const values = {
      [ANNOTATION_CONFIGMETA]: text,
      [ANNOTATION_CONFIGMETA_GENERATOR]: String(generator),
      [ANNOTATION_CONFIGMETA_HASH]: sha256Hex(text),
    };
    const ann = byName.get(m.pod)?.metadata.annotations ?? {};
    if (
      ann[ANNOTATION_CONFIGMETA_HASH] === values[ANNOTATION_CONFIGMETA_HASH] &&
      ann[ANNOTATION_CONFIGMETA_GENERATOR] === values[ANNOTATION_CONFIGMETA_GENERATOR]
    ) {
      delivery.synced.push(m.pod);
    } else {
      const other = Number(byName.get(m.pod)?.metadata.otherAnnotationsBytes ?? 0);
      const size =
        other + Object.entries(values).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0);
      if (size > ANNOTATIONS_SIZE_LIMIT)
        delivery.tooLargeBytes = Math.max(delivery.tooLargeBytes ?? 0, Buffer.byteLength(text));
      toWrite.push({ pod: m.pod, values });
    }
  }
  if (delivery.tooLargeBytes !== undefined) {
    // Never a partial document in some pods: nothing is written until it fits.
    d.events.record({
      regarding: clusterTarget(cluster),
      type: 'Warning',
      reason: 'ConfigMetaTooLarge',
      action: 'Deliver',
      note: `configmeta is ${delivery.tooLargeBytes} bytes and does not fit in a pod annotation (262144 bytes for all annotations); nothing was written`,
    });
  } else {
    await mapLimit(toWrite, d.opts.podConcurrency, async ({ pod, values }) => {
      const meta = byName.get(pod)!.metadata;
      try {
        await d.writes.patchPod(namespace, pod, setAnnotationsPatch(meta, values, ANNOTATION_CONFIGMETA_HASH));
        delivery.synced.push(pod);
        outcome.podsWritten++;
      } catch (e) {
        delivery.failed[pod] = isConflict(e) ? 'pod changed since it was read' : errorMessage(e).slice(0, 200);
      }
    });
  }
  delivery.synced.sort();

  const failed = Object.keys(delivery.failed).sort();
  if (failed.length > 0) {
    d.events.record({
      regarding: clusterTarget(cluster),
      type: 'Warning',
      reason: 'ConfigMetaDeliveryFailed',
      action: 'Deliver',
      note: `configmeta generator ${generator} written to ${delivery.synced.length}/${members.length} member pods; failed: ${failed.map((p) => `${p} (${delivery.failed[p]})`).join(', ')}`,
    });
  } else if (outcome.podsWritten > 0) {
    d.events.record({
      regarding: clusterTarget(cluster),
      type: 'Normal',
      reason: 'ConfigMetaDelivered',
      action: 'Deliver',
      note: `configmeta generator ${generator} written to ${delivery.synced.length}/${members.length} member pods`,
    });
  }

  const desired = buildStatus({
    previous: status,
    generation: cluster.metadata.generation,
    connections: resolved.statuses,
    hash: resolved.hash,
    members,
    delivery,
    now,
  });
  outcome.statusWritten = await writeStatus(cluster, status, desired, d);
  if (failed.length > 0) throw new RetryableError(`configmeta not delivered to ${failed.join(', ')}`);
  if (outcome.podsWritten > 0 || outcome.bumped)
    log.info('configmeta delivered', { generator, pods: outcome.podsWritten, members: members.length });
  return outcome;
}

function connectionTarget(
  c: ConnectionStatus,
  namespace: string,
  r: Awaited<ReturnType<typeof resolveConnections>>,
): EventTarget | undefined {
  if (c.kind === 'Cluster') {
    const x = r.connected.clusters.find((k) => k.name === c.name);
    return x && clusterTarget(x.cluster);
  }
  const list = c.kind === 'ConfigMap' ? r.connected.configmaps : r.connected.secrets;
  const o = list.find((k) => k.metadata.name === c.name);
  return o && { apiVersion: 'v1', kind: c.kind, namespace, name: c.name, uid: o.metadata.uid };
}

async function writeStatus(
  cluster: KDCluster,
  current: KDClusterStatus,
  desired: KDClusterStatus,
  d: ReconcileDeps,
): Promise<boolean> {
  const ops = sectionPatch(
    cluster.metadata,
    'status',
    cluster.status as Record<string, unknown> | undefined,
    desired,
    (a, b) => canonicalJson(a) === canonicalJson(b),
  );
  if (ops.length === 0 || canonicalJson(current) === canonicalJson(desired)) return false;
  try {
    await d.writes.patchClusterStatus(cluster.metadata.namespace ?? '', cluster.metadata.name ?? '', ops);
  } catch (e) {
    if (isConflict(e))
      throw new RetryableError(
        `status of ${cluster.metadata.namespace}/${cluster.metadata.name} moved on since it was read; retrying`,
      );
    throw e;
  }
  return true;
}
