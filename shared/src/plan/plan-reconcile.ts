/**
 * The decisions of a reconcile, as pure functions: the reconciler observes (caches), plans here, and acts
 * (writes). The plan says which writes to make — at most a generator bump, one JSON Patch per member pod
 * that does not hold the current configmeta, and a /status patch — and which events to post.
 * Status depends on how the pod writes went, so it is planned after them (`planStatus`).
 */
import { fitsInAnnotations, tooLargeMessage } from '../configmeta/annotation-size.js';
import {
  buildStatus,
  CONDITION_CONFIGMETA_SYNCED,
  CONDITION_MEMBERS_SEATED,
  ignoredPodsMessage,
  missingVolumeMessage,
  REASON_FOREIGN_PRIVATE_SECRET,
  REASON_MISSING_VOLUME,
  REASON_PODS_BEYOND_SEATS,
  type Delivery,
  type SeatingReport,
} from './cluster-status.js';
import { clusterTarget, regenerationEvents } from './connection-changes.js';
import { canonicalJson } from '../primitives/canonical-json.js';
import { decideBump, type GeneratorBump } from '../domain/generator.js';
import { sha256Hex } from '../primitives/hash.js';
import { sectionPatch, setAnnotationsPatch, type PatchOp } from '../primitives/json-patch.js';
import type { EventInput } from '../runtime/event-recorder.js';
import { appSearchDescription, type ResolvedApp } from '../domain/lookup.js';
import { seatStateOf, type Member } from '../configmeta/members.js';
import type { IgnoredPod, Seating } from '../configmeta/seats.js';
import {
  foreignPrivateSecretMessage,
  planPrivateSecret,
  privateSecretOwner,
  privateVersion,
  type CachedPrivateSecret,
  type PrivateSecretWrite,
} from './plan-private-secret.js';
import { renderConnections, renderSplicedConfigMetaForMembers } from '../configmeta/render-configmeta.js';
import { renderPrivateFiles, type PrivateFiles } from '../configmeta/render-private-configmeta.js';
import {
  ANNOTATION_CONFIGMETA_ROSTER,
  ANNOTATION_CONFIGMETA_SPLICE,
  SPLICE_SECTIONS,
  type SpliceSection,
} from '../domain/guestconfig-layout.js';
import { rosterDigest, rosterOf } from './plan-roster-changes.js';
import type { ResolvedConnections } from './resolve-connections.js';
import type { CachedPod } from '../configmeta/trim-object.js';
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
  type KDCluster,
  type KDClusterStatus,
} from '../domain/types.js';

/** What a reconcile read: the cluster, its app, its connections resolved, its members and their pods. */
export interface Observation {
  cluster: KDCluster;
  own: ResolvedApp | undefined;
  resolved: ResolvedConnections;
  members: Member[];
  /** How the members fill the spec's seats (membershipOf); absent: every seat filled, no pod ignored. */
  seating?: {
    ignored: IgnoredPod[];
    vacant: { role: string; seat: number }[];
    neverDelivered: boolean;
    /** New pods not numbered yet: a lower seat of their role has no pod (seats.ts). */
    waiting?: Seating['waiting'];
  };
  pods: CachedPod[];
  /** The cluster's private Secret as cached (metadata only), when it exists. */
  privateSecret?: CachedPrivateSecret;
  /** ISO time for condition transitions. */
  now: string;
}

export interface PlanOptions {
  systemNamespace: string;
  /**
   * The reconciler's digest key, present when Secret connections are on: the private Secret is planned
   * only then (without them the reconciler may not touch Secrets).
   */
  privateKey?: Uint8Array;
  /**
   * How long a new cluster's first delivery waits for a pod in every seat (from its creation); absent:
   * it does not wait.
   */
  firstDeliveryWaitMs?: number;
}

export interface PodWrite {
  pod: string;
  ops: PatchOp[];
}

export interface ReconcilePlan {
  /** Set when the cluster's own app was not found: nothing can be rendered; only status is written. */
  appProblem?: string;
  /**
   * Set while the first delivery waits for pods in the vacant seats: nothing is delivered until this
   * time (ISO) unless they come; the reconcile is tried again then.
   */
  holdUntil?: string;
  /** A regeneration to request, with the events to post once it is written and its cause in words. */
  bump?: GeneratorBump & { cause: string; events: EventInput[] };
  /** The generator the member pods are brought to. */
  generator: number;
  /** Members that already hold the configmeta of `generator`. */
  synced: string[];
  /** The write that brings the private Secret to the current private document, if any is needed. */
  privateSecret?: PrivateSecretWrite;
  /** One patch per member pod that does not; empty when configmeta does not fit (`tooLargeBytes`). */
  podWrites: PodWrite[];
  /** Set when configmeta does not fit in a pod's annotations: its size in bytes. Nothing is then written. */
  tooLargeBytes?: number;
  /** Events to post whatever the writes do (configmeta too large). */
  events: EventInput[];
  /** Members whose pod has no configmeta volume: written like the rest, reported as not synced. */
  missingVolume: string[];
  /**
   * Set when a Secret of the private Secret's name is someone else's (the message): the pods get the
   * document without its private half, so nothing from that Secret is ever joined into it.
   */
  foreignPrivateSecret?: string;
}

export function planReconcile(o: Observation, opts: PlanOptions): ReconcilePlan {
  const { cluster, own, resolved } = o;
  const generator = cluster.spec?.configMetaGenerator ?? 0;
  if (!own) {
    const ns = cluster.metadata.namespace ?? '';
    const where = appSearchDescription(ns, cluster.spec?.appCatalog, opts.systemNamespace);
    return {
      appProblem: `app "${String(cluster.spec?.app)}" not found ${where}`,
      generator,
      synced: [],
      podWrites: [],
      events: [],
      missingVolume: [],
    };
  }
  const decided = decideBump(cluster, resolved.hash);
  const bump = decided && { ...decided, ...regenerationEvents(cluster, resolved, decided.from, decided.to) };
  const holdUntil = firstDeliveryHold(o, opts.firstDeliveryWaitMs);
  const seatEvents = ignoredPodsEvent(o);
  if (holdUntil) {
    const held = { generator: bump?.to ?? generator, synced: [], podWrites: [], missingVolume: [] };
    return { ...held, holdUntil, events: seatEvents, ...(bump ? { bump } : {}) };
  }
  const files = opts.privateKey && privateFilesOf(o, own);
  const version =
    files && opts.privateKey ? privateVersion(opts.privateKey, o.cluster.metadata.uid ?? '', files) : undefined;
  const taken = files && o.privateSecret ? privateSecretOwner(o.privateSecret, o.cluster) : undefined;
  const foreign = taken?.owner === 'foreign' ? foreignPrivateSecretMessage(o.cluster, taken.why) : undefined;
  const plan = planDelivery(
    o,
    own,
    bump?.to ?? generator,
    files && !foreign ? { files, version: version! } : undefined,
  );
  const privateSecret =
    opts.privateKey && planPrivateSecret(o.cluster, files || undefined, o.privateSecret, opts.privateKey);
  return {
    ...plan,
    events: [...plan.events, ...seatEvents],
    ...(bump ? { bump } : {}),
    ...(privateSecret ? { privateSecret } : {}),
    ...(foreign ? { foreignPrivateSecret: foreign } : {}),
  };
}

/**
 * Until when a cluster that never had a delivery waits for pods in its vacant seats (so that its first
 * document lists every member, as KubeDirector configures a cluster once all its members exist), or
 * undefined when it does not wait: every seat filled, delivered before, or the wait is over.
 */
export function firstDeliveryHold(o: Observation, waitMs: number | undefined): string | undefined {
  const s = o.seating;
  if (waitMs === undefined || !s?.neverDelivered || s.vacant.length === 0) return undefined;
  const stamp = o.cluster.metadata.creationTimestamp;
  const created = stamp === undefined ? NaN : new Date(stamp).getTime();
  // The API server always sets it; without it there is no bound to wait against, so no wait.
  if (!Number.isFinite(created)) return undefined;
  const until = created + waitMs;
  return until > Date.parse(o.now) ? new Date(until).toISOString() : undefined;
}

function privateFilesOf(o: Observation, own: ResolvedApp): PrivateFiles | undefined {
  const self = { cluster: o.cluster, app: own.app, members: o.members };
  return renderPrivateFiles(o.resolved.connected, o.cluster.spec?.connections, self);
}

/** Every member gets the configmeta of `generator`; pods that hold it already are skipped. */
function planDelivery(
  o: Observation,
  own: ResolvedApp,
  generator: number,
  priv: { files: PrivateFiles; version: string } | undefined,
): Omit<ReconcilePlan, 'bump' | 'appProblem' | 'privateSecret'> {
  const connections = renderConnections(o.resolved.connected, {}, o.cluster.spec?.connections);
  // With a private half, each document names the byte ranges the sidecar replaces with its sections.
  const sections: Partial<Record<SpliceSection, number>> = {};
  for (const k of SPLICE_SECTIONS) {
    const text = priv?.files.sections[k];
    if (text !== undefined) sections[k] = Buffer.byteLength(text);
  }
  const docs = renderSplicedConfigMetaForMembers(o.cluster, own.app, o.members, connections, {
    sections,
    version: priv?.version,
  });
  const byName = new Map(o.pods.map((p) => [p.metadata.name ?? '', p]));
  // Every document lists the same roster; its digest tells the reconnect hook which one a member's file lists.
  const roster = rosterDigest(rosterOf(o.members));
  const synced: string[] = [];
  const podWrites: PodWrite[] = [];
  const missingVolume: string[] = [];
  let tooLargeBytes: number | undefined;
  for (const m of o.members) {
    // A member whose pod is away is listed in the others' documents; its own comes when its pod does.
    if (!m.present) continue;
    const { text, splice } = docs.get(m.pod)!;
    if (byName.get(m.pod)?.spec?.missingConfigMetaVolume) missingVolume.push(m.pod);
    // The splice is part of what the pod must hold (a new private version changes only the splice), so the
    // hash covers it; it holds no value (a keyed MAC and offsets).
    const values = {
      [ANNOTATION_CONFIGMETA]: text,
      [ANNOTATION_CONFIGMETA_GENERATOR]: String(generator),
      [ANNOTATION_CONFIGMETA_SPLICE]: splice,
      [ANNOTATION_CONFIGMETA_HASH]: sha256Hex(splice ? `${text}\n${splice}` : text),
      [ANNOTATION_CONFIGMETA_ROSTER]: roster,
    };
    const pod = byName.get(m.pod);
    const ann = pod?.metadata.annotations ?? {};
    if (
      ann[ANNOTATION_CONFIGMETA_HASH] === values[ANNOTATION_CONFIGMETA_HASH] &&
      ann[ANNOTATION_CONFIGMETA_GENERATOR] === values[ANNOTATION_CONFIGMETA_GENERATOR] &&
      ann[ANNOTATION_CONFIGMETA_ROSTER] === roster
    ) {
      synced.push(m.pod);
      continue;
    }
    if (!fitsInAnnotations(Number(pod?.metadata.otherAnnotationsBytes ?? 0), values)) {
      tooLargeBytes = Math.max(tooLargeBytes ?? 0, Buffer.byteLength(text));
    }
    podWrites.push({
      pod: m.pod,
      ops: setAnnotationsPatch(pod?.metadata ?? {}, values, ANNOTATION_CONFIGMETA_HASH),
    });
  }
  if (tooLargeBytes === undefined) return { generator, synced, podWrites, events: [], missingVolume };
  // Never a partial document in some pods: nothing is written until it fits.
  const event: EventInput = {
    regarding: clusterTarget(o.cluster),
    type: 'Warning',
    reason: 'ConfigMetaTooLarge',
    action: 'Deliver',
    note: tooLargeMessage(tooLargeBytes),
  };
  return { generator, synced, podWrites: [], tooLargeBytes, events: [event], missingVolume };
}

/** How the pod writes went: the pods written, and the reason for each that failed. */
export interface PodWriteResults {
  written: string[];
  failed: Record<string, string>;
}

/** The delivery the pod writes achieved, and the event that reports it (if any). */
export function deliveryOutcome(
  plan: ReconcilePlan,
  results: PodWriteResults,
  o: Observation,
): { delivery: Delivery; events: EventInput[] } {
  const delivery: Delivery = {
    generator: plan.generator,
    synced: [...plan.synced, ...results.written].sort(),
    failed: results.failed,
    ...(plan.tooLargeBytes !== undefined ? { tooLargeBytes: plan.tooLargeBytes } : {}),
    ...(plan.missingVolume.length > 0 ? { missingVolume: plan.missingVolume } : {}),
    ...(plan.foreignPrivateSecret ? { foreignPrivateSecret: plan.foreignPrivateSecret } : {}),
  };
  const base = { regarding: clusterTarget(o.cluster), action: 'Deliver' };
  const once = [
    onceEvent(
      REASON_MISSING_VOLUME,
      plan.missingVolume.length > 0 ? missingVolumeMessage(plan.missingVolume) : undefined,
      o,
    ),
    onceEvent(REASON_FOREIGN_PRIVATE_SECRET, plan.foreignPrivateSecret, o),
  ].filter((e): e is EventInput => e !== undefined);
  const withMissing = (events: EventInput[]) => ({ delivery, events: [...events, ...once] });
  const present = o.members.filter((m) => m.present).length;
  const written = `configmeta generator ${plan.generator} written to ${delivery.synced.length}/${present} member pods`;
  const failed = Object.keys(results.failed).sort();
  if (failed.length > 0) {
    const list = failed.map((p) => `${p} (${results.failed[p]})`).join(', ');
    return withMissing([
      { ...base, type: 'Warning', reason: 'ConfigMetaDeliveryFailed', note: `${written}; failed: ${list}` },
    ]);
  }
  if (results.written.length > 0) {
    return withMissing([{ ...base, type: 'Normal', reason: 'ConfigMetaDelivered', note: written }]);
  }
  return withMissing([]);
}

/**
 * A Warning that repeats what a condition will say (ConfigMetaSynced: pods without a configmeta volume,
 * a private Secret name someone else holds; MembersSeated: pods beyond the seats, the first part of its
 * message), only when stored status does not already say it: once per change, nothing again after a restart.
 */
function onceEvent(
  reason: string,
  note: string | undefined,
  o: Observation,
  condition = CONDITION_CONFIGMETA_SYNCED,
): EventInput | undefined {
  if (note === undefined) return undefined;
  const stored = o.cluster.status?.conditions?.find((c) => c.type === condition);
  if (stored?.reason === reason && stored.message.startsWith(note)) return undefined;
  return { regarding: clusterTarget(o.cluster), type: 'Warning', reason, action: 'Deliver', note };
}

/** The Warning that names labelled pods which are not members, once per change (empty when none). */
function ignoredPodsEvent(o: Observation): EventInput[] {
  const ignored = o.seating?.ignored ?? [];
  const note = ignored.length ? ignoredPodsMessage(ignored) : undefined;
  const e = onceEvent(REASON_PODS_BEYOND_SEATS, note, o, CONDITION_MEMBERS_SEATED);
  return e ? [e] : [];
}

/**
 * The /status patch for `cluster` as it is now (after a bump), or [] when status already says it all.
 * `delivery` is absent when the app is missing (nothing was rendered).
 */
export function planStatus(
  cluster: KDCluster,
  o: Observation,
  appProblem: string | undefined,
  delivery: Delivery | undefined,
  holdUntil?: string,
): PatchOp[] {
  const previous: KDClusterStatus = o.cluster.status ?? {};
  const seating: SeatingReport = {
    ignored: o.seating?.ignored ?? [],
    vacant: o.seating?.vacant ?? [],
    ...(holdUntil ? { holdUntil } : {}),
  };
  const built = buildStatus({
    previous,
    generation: cluster.metadata.generation,
    ...(appProblem ? { appProblem } : {}),
    connections: o.resolved.statuses,
    hash: o.resolved.hash,
    members: o.members,
    seating,
    ...(delivery ? { delivery } : {}),
    now: o.now,
  });
  // Node ids are kept for life, and seats while their pods restart: what the members were rendered with
  // is recorded with the rest — not while the first delivery waits (nothing was rendered yet).
  const desired: KDClusterStatus = holdUntil || appProblem ? built : { ...built, ...seatStateOf(o.cluster, o.members) };
  const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
  if (same(previous, desired)) return [];
  return sectionPatch(cluster.metadata, 'status', cluster.status as Record<string, unknown> | undefined, desired, same);
}
