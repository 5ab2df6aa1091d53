/**
 * Reconcile(cluster) as observe → plan → act. It observes current state in the caches, asks shared's
 * pure planner (plan-reconcile.ts) what to write, and makes at most four kinds of writes, each a single
 * JSON Patch with `test` preconditions (or a create / a delete with preconditions):
 *   1. spec.configMetaGenerator + 1 when what the pods would see changed and no regeneration is pending;
 *   2. the cluster's private Secret (Secret values for root in the pod) when its content changed —
 *      before the pods, so the kubelet's sync for the pod update finds it current;
 *   3. the configmeta annotations of each member pod that does not hold the current document;
 *   4. /status, only when it differs.
 * A refused precondition or any failure throws: the work queue retries the key with backoff, against
 * fresher caches. Nothing here sleeps or loops on a stale copy.
 */
import { membershipOf, type CachedPod } from '@kd-connections/shared/configmeta';
import { privateConfigMetaSecretName, resolveApp, type KDCluster, type World } from '@kd-connections/shared/domain';
import {
  clusterTarget,
  deliveryOutcome,
  planReconcile,
  privateSecretOwner,
  planStatus,
  resolveConnections,
  type CachedPrivateSecret,
  type Observation,
  type PodWriteResults,
  type PrivateSecretWrite,
  type ReconcilePlan,
  type SecretBody,
} from '@kd-connections/shared/plan';
import { splitKey, type PatchOp } from '@kd-connections/shared/primitives';
import { errorMessage, errorStatus, isConflict, type EventInput, type Logger } from '@kd-connections/shared/runtime';

export interface Writes {
  /** JSON Patch on the kdcluster (main resource); returns the updated object. */
  patchCluster(namespace: string, name: string, ops: PatchOp[]): Promise<KDCluster>;
  patchClusterStatus(namespace: string, name: string, ops: PatchOp[]): Promise<KDCluster>;
  /** Returns the pod's new resourceVersion. */
  patchPod(namespace: string, name: string, ops: PatchOp[]): Promise<string | undefined>;
  createSecret(namespace: string, body: SecretBody): Promise<void>;
  patchSecret(namespace: string, name: string, ops: PatchOp[]): Promise<void>;
  /** Deletes only the object with this uid (and resourceVersion, when given). */
  deleteSecret(namespace: string, name: string, pre: { uid: string; resourceVersion?: string }): Promise<void>;
}

export interface ReconcileOptions {
  systemNamespace: string;
  secretConnections: boolean;
  clusterDomain: string;
  /** Pod patches in flight at once for one cluster. */
  podConcurrency: number;
  /** How long a new cluster's first delivery waits for a pod in every seat; absent: it does not wait. */
  firstDeliveryWaitMs?: number;
}

export interface ReconcileDeps {
  getCluster(namespace: string, name: string): KDCluster | undefined;
  /** Cached pods with the member labels of a cluster (annotations trimmed to generator/hash). */
  world: World;
  writes: Writes;
  events: { record(e: EventInput): void };
  /** The private Secrets (metadata only) and the key of their content MAC; absent without Secret connections. */
  privateSecrets?: {
    get(namespace: string, name: string): CachedPrivateSecret | undefined;
    key(): Uint8Array | undefined;
    /**
     * A live read of a Secret of that name (metadata only), for the one the cache cannot show: a create
     * refused because the name exists, held by a Secret without the reconciler's label.
     */
    fetch(namespace: string, name: string): Promise<CachedPrivateSecret | undefined>;
  };
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
  /** The private Secret write made, if any. */
  privateSecret?: PrivateSecretWrite['kind'];
  /** Set while the first delivery waits for pods in vacant seats: when to look again. */
  requeueAfterMs?: number;
};

/** The key expectations use for an object we write. */
export function writeKey(kind: 'kdcluster' | 'pod' | 'secret', key: string): string {
  return `${kind}:${key}`;
}

async function mapLimit<T>(items: T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let i = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!);
  });
  await Promise.all(workers);
}

/** Reads what the planner needs; undefined when there is nothing to do, a number (ms) when it must wait. */
async function observe(key: string, d: ReconcileDeps): Promise<Observation | number | undefined> {
  const { namespace, name } = splitKey(key);
  const cluster = d.getCluster(namespace, name);
  if (!cluster || cluster.metadata.deletionTimestamp) return undefined;
  const pods = (await d.world.podsOf(namespace, name)) as CachedPod[];
  const privateName = privateConfigMetaSecretName(name);
  // Acting on a view that predates our own last writes would repeat them (and trip their preconditions).
  const wait =
    d.pendingWrites?.([
      writeKey('kdcluster', key),
      ...pods.map((p) => writeKey('pod', `${namespace}/${p.metadata.name}`)),
      ...(d.privateSecrets ? [writeKey('secret', `${namespace}/${privateName}`)] : []),
    ]) ?? 0;
  if (wait > 0) return wait;
  const privateSecret = d.privateSecrets?.get(namespace, privateName);
  const own = await resolveApp(d.world, namespace, cluster.spec ?? {}, d.opts.systemNamespace);
  const resolved = await resolveConnections(cluster, own, d.world, d.opts);
  const now = (d.now ?? (() => new Date()))().toISOString();
  const seatWait = { now, ...(d.opts.firstDeliveryWaitMs === undefined ? {} : { waitMs: d.opts.firstDeliveryWaitMs }) };
  const { members, ignored, vacant, neverDelivered, waiting } = membershipOf(cluster, own?.app, pods, {
    ...d.opts,
    ...seatWait,
  });
  const seating = { ignored, vacant, neverDelivered, waiting };
  return { cluster, own, resolved, members, seating, pods, now, ...(privateSecret ? { privateSecret } : {}) };
}

export async function reconcileCluster(key: string, d: ReconcileDeps): Promise<ReconcileOutcome> {
  const outcome: ReconcileOutcome = { podsWritten: 0, statusWritten: false };
  const observed = await observe(key, d);
  if (observed === undefined) return outcome;
  if (typeof observed === 'number') return { ...outcome, deferredMs: observed };
  let o = observed;
  const privateKey = d.privateSecrets?.key();
  const planOpts = {
    systemNamespace: d.opts.systemNamespace,
    firstDeliveryWaitMs: d.opts.firstDeliveryWaitMs,
    ...(privateKey ? { privateKey } : {}),
  };
  let plan = planReconcile(o, planOpts);
  if (plan.appProblem) {
    outcome.statusWritten = await writeStatus(o.cluster, planStatus(o.cluster, o, plan.appProblem, undefined), d);
    return outcome;
  }
  if (plan.holdUntil) return hold(o, plan, outcome, d);
  const log = d.log.child({ cluster: key });
  // The private Secret is created before anything else: when its name is taken by someone else's
  // Secret, the pods must get the document without its private half, so the plan is made again.
  let privateFailure: Error | undefined;
  if (plan.privateSecret?.kind === 'create') {
    const created = await createPrivateSecret(o.cluster, plan.privateSecret, d);
    if ('foreign' in created) {
      o = { ...o, privateSecret: created.foreign };
      plan = planReconcile(o, planOpts);
    } else if (created.error) privateFailure = created.error;
    else outcome.privateSecret = 'create';
  }
  let cluster = o.cluster;
  if (plan.bump) {
    cluster = await bump(cluster, plan.bump.ops, d);
    log.info('requested configmeta regeneration', { from: plan.bump.from, to: plan.bump.to, cause: plan.bump.cause });
    record(d, plan.bump.events);
    outcome.bumped = { from: plan.bump.from, to: plan.bump.to };
  }
  record(d, plan.events);
  if (plan.privateSecret && plan.privateSecret.kind !== 'create') {
    privateFailure = await writePrivateSecret(cluster, plan.privateSecret, d);
    if (!privateFailure) outcome.privateSecret = plan.privateSecret.kind;
  }
  const results = await writePods(cluster, plan, d);
  outcome.podsWritten = results.written.length;
  const { delivery, events } = deliveryOutcome(plan, results, o);
  record(d, events);
  outcome.statusWritten = await writeStatus(cluster, planStatus(cluster, o, undefined, delivery), d);
  const failed = Object.keys(results.failed).sort();
  if (failed.length > 0) throw new RetryableError(`configmeta not delivered to ${failed.join(', ')}`);
  if (privateFailure) throw privateFailure;
  // Its removal sends no event the reconciler watches (it need not carry the label): checked with backoff.
  if (plan.foreignPrivateSecret) {
    const name = privateConfigMetaSecretName(cluster.metadata.name ?? '');
    throw new RetryableError(`${name} is someone else's Secret; checking again with backoff`);
  }
  if (outcome.podsWritten > 0 || outcome.bumped)
    log.info('configmeta delivered', {
      generator: plan.generator,
      pods: outcome.podsWritten,
      members: o.members.length,
    });
  // A new pod waiting for the seats below it is seen again when they fill (their pods' events) or its wait ends.
  const until = Math.min(...(o.seating?.waiting ?? []).map((w) => Date.parse(w.until)));
  if (Number.isFinite(until)) return { ...outcome, requeueAfterMs: Math.max(1000, until - Date.parse(o.now)) };
  return outcome;
}

/**
 * The first delivery waits for pods in the vacant seats: only a generator bump, the events and status
 * (MembersSeated names the seats) are written; a pod's arrival enqueues the cluster again, and the
 * reconcile is retried when the wait is over.
 */
async function hold(o: Observation, plan: ReconcilePlan, outcome: ReconcileOutcome, d: ReconcileDeps) {
  let cluster = o.cluster;
  if (plan.bump) {
    cluster = await bump(cluster, plan.bump.ops, d);
    record(d, plan.bump.events);
    outcome.bumped = { from: plan.bump.from, to: plan.bump.to };
  }
  record(d, plan.events);
  const waiting = { generator: plan.generator, synced: [], failed: {} };
  outcome.statusWritten = await writeStatus(cluster, planStatus(cluster, o, undefined, waiting, plan.holdUntil), d);
  return { ...outcome, requeueAfterMs: Math.max(1000, Date.parse(plan.holdUntil!) - Date.parse(o.now)) };
}

function record(d: ReconcileDeps, events: EventInput[]): void {
  for (const e of events) d.events.record(e);
}

async function bump(cluster: KDCluster, ops: PatchOp[], d: ReconcileDeps): Promise<KDCluster> {
  const { namespace = '', name = '' } = cluster.metadata;
  try {
    return await d.writes.patchCluster(namespace, name, ops);
  } catch (e) {
    if (isConflict(e))
      throw new RetryableError(`configMetaGenerator of ${namespace}/${name} moved on since it was read; retrying`);
    throw e;
  }
}

/**
 * Creates, patches or deletes the private Secret. A failure does not hold back the public delivery: it
 * is returned, thrown after the pods and status are written, and the key is retried with backoff. The
 * Warning names the Secret and the HTTP status only — an API message about a Secret write could quote
 * what the patch carried.
 */
async function writePrivateSecret(
  cluster: KDCluster,
  w: PrivateSecretWrite,
  d: ReconcileDeps,
): Promise<Error | undefined> {
  const namespace = cluster.metadata.namespace ?? '';
  try {
    if (w.kind === 'create') await d.writes.createSecret(namespace, w.body);
    else if (w.kind === 'patch') await d.writes.patchSecret(namespace, w.name, w.ops);
    else await d.writes.deleteSecret(namespace, w.name, { uid: w.uid, resourceVersion: w.resourceVersion });
    if (w.kind === 'patch' && w.editedBy) {
      // Its content is derived: an edit would be lost on the next change anyway, and until then the
      // sidecar may refuse it (sections of another size) or deliver it. Put back, and said so.
      d.events.record({
        regarding: clusterTarget(cluster),
        type: 'Warning',
        reason: 'PrivateSecretEdited',
        action: 'Deliver',
        note:
          `private configmeta Secret ${w.name} was changed by ${w.editedBy.join(', ')}, not by the reconciler; ` +
          'its data is derived from the connected Secrets and was written again: edit those instead',
      });
    }
    return undefined;
  } catch (e) {
    // Already gone (a stale cache after our own delete, or someone else's): what the delete wanted.
    if (w.kind === 'delete' && errorStatus(e) === 404) return undefined;
    return privateWriteFailure(cluster, w, e, d);
  }
}

/**
 * Creates the private Secret. A create refused because the name exists (409) is answered by reading who
 * holds it: someone else's Secret is returned (and never touched); our own not yet in the cache, or one
 * gone meanwhile, is retried.
 */
async function createPrivateSecret(
  cluster: KDCluster,
  w: Extract<PrivateSecretWrite, { kind: 'create' }>,
  d: ReconcileDeps,
): Promise<{ foreign: CachedPrivateSecret } | { error?: Error }> {
  const namespace = cluster.metadata.namespace ?? '';
  try {
    await d.writes.createSecret(namespace, w.body);
    return {};
  } catch (e) {
    if (errorStatus(e) !== 409 || !d.privateSecrets) return { error: privateWriteFailure(cluster, w, e, d) };
    const found = await d.privateSecrets.fetch(namespace, w.name);
    if (found && privateSecretOwner(found, cluster).owner === 'foreign') return { foreign: found };
    return {
      error: new RetryableError(
        `private configmeta Secret ${w.name} (create): ${found ? 'exists already, not yet in the cache' : 'existed, gone since'}; retrying`,
      ),
    };
  }
}

/** A failed private Secret write as the error to retry with, reported by a Warning unless it is a conflict. */
function privateWriteFailure(cluster: KDCluster, w: PrivateSecretWrite, e: unknown, d: ReconcileDeps): Error {
  const what = `private configmeta Secret ${w.name} (${w.kind})`;
  if (isConflict(e)) return new RetryableError(`${what}: changed since it was read; retrying`);
  const code = errorStatus(e);
  d.events.record({
    regarding: clusterTarget(cluster),
    type: 'Warning',
    reason: 'PrivateConfigMetaFailed',
    action: 'Deliver',
    note: `${what} failed${code ? ` with HTTP ${code}` : ''}; retrying with backoff`,
  });
  return new Error(`${what} failed${code ? ` with HTTP ${code}` : ''}`);
}

async function writePods(cluster: KDCluster, plan: ReconcilePlan, d: ReconcileDeps): Promise<PodWriteResults> {
  const results: PodWriteResults = { written: [], failed: {} };
  const namespace = cluster.metadata.namespace ?? '';
  await mapLimit(plan.podWrites, d.opts.podConcurrency, async ({ pod, ops }) => {
    try {
      await d.writes.patchPod(namespace, pod, ops);
      results.written.push(pod);
    } catch (e) {
      results.failed[pod] = isConflict(e) ? 'pod changed since it was read' : errorMessage(e).slice(0, 200);
    }
  });
  return results;
}

async function writeStatus(cluster: KDCluster, ops: PatchOp[], d: ReconcileDeps): Promise<boolean> {
  if (ops.length === 0) return false;
  const { namespace = '', name = '' } = cluster.metadata;
  try {
    await d.writes.patchClusterStatus(namespace, name, ops);
  } catch (e) {
    if (isConflict(e)) throw new RetryableError(`status of ${namespace}/${name} moved on since it was read; retrying`);
    throw e;
  }
  return true;
}
