/**
 * The status a reconcile writes: generator bookkeeping, the connection hash, each
 * connection's state, member counts, the two detailed conditions and the kstatus summary (Ready, and
 * Reconciling or Stalled while it is not). Pure: the reconciler compares the result
 * with what is stored and writes only a difference.
 */
import { tooLargeMessage } from '../configmeta/annotation-size.js';
import type { Member } from '../configmeta/members.js';
import type { IgnoredPod } from '../configmeta/seats.js';
import type { Condition, ConnectionStatus, KDClusterStatus } from '../domain/types.js';

export const CONDITION_CONNECTIONS_RESOLVED = 'ConnectionsResolved';
export const CONDITION_CONFIGMETA_SYNCED = 'ConfigMetaSynced';
export const CONDITION_MEMBERS_SEATED = 'MembersSeated';
/** kstatus summary conditions: `kubectl wait --for=condition=Ready`, Flux health checks, Argo CD health. */
export const CONDITION_READY = 'Ready';
export const CONDITION_RECONCILING = 'Reconciling';
export const CONDITION_STALLED = 'Stalled';

export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

/** Replaces the condition of the same type; the transition time moves only when the status flips. */
export function setCondition(conditions: Condition[] | undefined, next: ConditionInput, now: string): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const prev = i >= 0 ? list[i] : undefined;
  const merged: Condition = {
    ...next,
    lastTransitionTime: prev && prev.status === next.status ? prev.lastTransitionTime : now,
  };
  if (i >= 0) list[i] = merged;
  else list.push(merged);
  return list;
}

/** Drops the condition of that type (kstatus's Reconciling and Stalled are present only while True). */
export function removeCondition(conditions: Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}

export interface Delivery {
  /** The generator the pods were brought to. */
  generator: number;
  /** Members that hold the configmeta of `generator` after this pass. */
  synced: string[];
  /** Members whose patch failed: pod name → reason. */
  failed: Record<string, string>;
  /** Set when configmeta does not fit in an annotation: its size in bytes. */
  tooLargeBytes?: number;
  /** Members whose pod has no configmeta volume (not opted out): they hold the annotation but never see the file. */
  missingVolume?: string[];
  /** Set when someone else's Secret holds the private Secret's name: why the pods lack Secret values. */
  foreignPrivateSecret?: string;
}

export const REASON_MISSING_VOLUME = 'PodsMissingConfigMetaVolume';
export const REASON_FOREIGN_PRIVATE_SECRET = 'PrivateSecretNotOwned';
const LISTED_PODS = 10;

/** Names the pods (the first ten, then a count) and what to do: the volume can only come with a new pod. */
export function missingVolumeMessage(pods: string[]): string {
  const sorted = [...pods].sort();
  const listed = sorted.slice(0, LISTED_PODS).join(', ');
  const more = sorted.length > LISTED_PODS ? ` and ${sorted.length - LISTED_PODS} more` : '';
  return (
    `${sorted.length} member pod(s) have no configmeta volume, so /etc/guestconfig/configmeta.json never appears ` +
    `in them (created while the pod webhook was unavailable, or labelled after creation): ${listed}${more}. ` +
    `Pod volumes cannot be added later: delete each pod so its controller recreates it through the webhook ` +
    `(e.g. kubectl delete pod <name> for a StatefulSet member)`
  );
}

/** How the members fill the seats the spec declares (seats.ts). */
export interface SeatingReport {
  /** Labelled pods that are not members, with the reason. */
  ignored: IgnoredPod[];
  /** Seats no pod has filled. */
  vacant: { role: string; seat: number }[];
  /** Set while the first delivery waits for the vacant seats: when it goes ahead without them (ISO). */
  holdUntil?: string;
}

export const REASON_PODS_BEYOND_SEATS = 'PodsBeyondSeats';
export const REASON_WAITING_FOR_MEMBERS = 'WaitingForMembers';

/** Names the ignored pods (the first ten, then a count) and why each is not a member. */
export function ignoredPodsMessage(ignored: IgnoredPod[]): string {
  const listed = ignored.slice(0, LISTED_PODS).map((i) => `${i.pod}: ${i.why}`);
  const more = ignored.length > LISTED_PODS ? `; and ${ignored.length - LISTED_PODS} more` : '';
  return `${ignored.length} labelled pod(s) are not members and get no configmeta: ${listed.join('; ')}${more}`;
}

function seatList(vacant: { role: string; seat: number }[]): string {
  const shown = vacant.slice(0, LISTED_PODS).map((v) => `${v.role} seat ${v.seat}`);
  return shown.join(', ') + (vacant.length > LISTED_PODS ? ` and ${vacant.length - LISTED_PODS} more` : '');
}

/**
 * Whether every seat has its member: False while the first delivery waits for pods (WaitingForMembers),
 * when labelled pods are beyond the seats (PodsBeyondSeats, which the user must fix), when seats have no
 * pod (MembersMissing) or a member's pod is away (MembersAway); every part is in the message.
 */
function seatedCondition(input: StatusInput): ConditionInput {
  const base = { type: CONDITION_MEMBERS_SEATED, observedGeneration: input.generation };
  if (input.appProblem) {
    const message = "seats cannot be counted without the cluster's app (a role's default is its cardinality)";
    return { ...base, status: 'Unknown', reason: 'AppNotFound', message };
  }
  const s = input.seating ?? { ignored: [], vacant: [] };
  const away = input.members.filter((m) => !m.present);
  const parts: [string, string][] = [];
  if (s.ignored.length) parts.push([REASON_PODS_BEYOND_SEATS, ignoredPodsMessage(s.ignored)]);
  if (s.holdUntil && s.vacant.length)
    parts.push([
      REASON_WAITING_FOR_MEMBERS,
      `the first delivery waits until every seat has its pod (at most until ${s.holdUntil}); no pod yet for ` +
        `${seatList(s.vacant)} (a StatefulSet makes its pods at once only with podManagementPolicy: Parallel)`,
    ]);
  else if (s.vacant.length) parts.push(['MembersMissing', `no pod for ${seatList(s.vacant)}`]);
  if (away.length)
    parts.push([
      'MembersAway',
      `${away.map((m) => `${m.pod} (${m.role})`).join(', ')}: pod away; keeps its place and node id in every document`,
    ]);
  if (parts.length === 0) {
    return {
      ...base,
      status: 'True',
      reason: 'Seated',
      message: `${input.members.length} member(s), every seat filled`,
    };
  }
  return { ...base, status: 'False', reason: parts[0]![0], message: parts.map(([, m]) => m).join('; ') };
}

export interface StatusInput {
  previous: KDClusterStatus | undefined;
  generation: number | undefined;
  /** Set when the cluster's own app could not be found (nothing can be rendered). */
  appProblem?: string;
  connections: ConnectionStatus[];
  hash: string;
  members: Member[];
  seating?: SeatingReport;
  delivery?: Delivery;
  now: string;
}

function connectionsCondition(input: StatusInput): ConditionInput {
  const { connections, generation } = input;
  if (input.appProblem) {
    return {
      type: CONDITION_CONNECTIONS_RESOLVED,
      status: 'False',
      reason: 'AppNotFound',
      message: input.appProblem,
      observedGeneration: generation,
    };
  }
  const bad = connections.filter((c) => c.state !== 'Connected');
  if (bad.length === 0) {
    return {
      type: CONDITION_CONNECTIONS_RESOLVED,
      status: 'True',
      reason: 'AllConnected',
      message:
        connections.length === 0
          ? 'no connections'
          : `${connections.length}/${connections.length} connections connected`,
      observedGeneration: generation,
    };
  }
  const reason = bad.every((c) => c.state === bad[0]!.state) ? bad[0]!.state : 'ConnectionProblems';
  return {
    type: CONDITION_CONNECTIONS_RESOLVED,
    status: 'False',
    reason,
    message: bad
      .map((c) => `${c.kind.toLowerCase()} ${c.name}: ${c.state}${c.message ? ` (${c.message})` : ''}`)
      .join('; '),
    observedGeneration: generation,
  };
}

function syncedCondition(input: StatusInput): ConditionInput {
  const { delivery, generation } = input;
  // Members whose pod is away get their document when it is back (MembersSeated says who).
  const members = input.members.filter((m) => m.present);
  const base = { type: CONDITION_CONFIGMETA_SYNCED, observedGeneration: generation };
  if (input.appProblem || !delivery) {
    return {
      ...base,
      status: 'False',
      reason: 'AppNotFound',
      message: "configmeta cannot be rendered without the cluster's app",
    };
  }
  if (delivery.tooLargeBytes !== undefined) {
    return {
      ...base,
      status: 'False',
      reason: 'ConfigMetaTooLarge',
      message: tooLargeMessage(delivery.tooLargeBytes),
    };
  }
  const held = input.seating?.holdUntil && members.length > 0;
  if (held) {
    return {
      ...base,
      status: 'False',
      reason: REASON_WAITING_FOR_MEMBERS,
      message: `not delivered yet: the first delivery waits for a pod in every seat (MembersSeated)`,
    };
  }
  const failed = Object.keys(delivery.failed).sort();
  if (failed.length > 0) {
    return {
      ...base,
      status: 'False',
      reason: 'PodPatchFailed',
      message: `configmeta generator ${delivery.generator} written to ${delivery.synced.length}/${members.length} member pods; failed: ${failed.map((p) => `${p} (${delivery.failed[p]})`).join(', ')}`,
    };
  }
  if (delivery.foreignPrivateSecret) {
    return { ...base, status: 'False', reason: REASON_FOREIGN_PRIVATE_SECRET, message: delivery.foreignPrivateSecret };
  }
  if (delivery.missingVolume?.length) {
    return {
      ...base,
      status: 'False',
      reason: REASON_MISSING_VOLUME,
      message: missingVolumeMessage(delivery.missingVolume),
    };
  }
  return {
    ...base,
    status: 'True',
    reason: 'Synced',
    message:
      members.length === 0
        ? `no member pods yet (generator ${delivery.generator})`
        : `configmeta generator ${delivery.generator} written to ${delivery.synced.length}/${members.length} member pods`,
  };
}

/** Every member whose pod is there holds the configmeta of this delivery's generator. */
export function isDeliveryComplete(d: Delivery | undefined, members: Member[]): boolean {
  return (
    !!d &&
    d.tooLargeBytes === undefined &&
    Object.keys(d.failed).length === 0 &&
    members.every((m) => !m.present || d.synced.includes(m.pod))
  );
}

/**
 * Whether the seats keep the cluster from Ready: pods beyond them (the user must act), or member pods held
 * back from their first document. Vacant seats and members whose pod is away do not: nothing the
 * reconciler could deliver is missing (so a GitOps sync that applies the kdcluster before its
 * StatefulSets is not stuck on it), and MembersSeated says who is missing.
 */
function seatsBlockReady(seated: ConditionInput, members: Member[]): boolean {
  return (
    seated.reason === REASON_PODS_BEYOND_SEATS ||
    (seated.reason === REASON_WAITING_FOR_MEMBERS && members.some((m) => m.present))
  );
}

/**
 * Reasons of the detailed conditions that retrying cannot clear: the user has to change something (the
 * app, a connection, the connected objects' size, or recreate pods). kstatus calls that Stalled; anything
 * else not yet done (a pod write that failed and is retried with backoff) is Reconciling.
 */
const NEEDS_USER_ACTION = new Set([
  'AppNotFound',
  'Missing',
  'NotConnectable',
  'Unlabeled',
  'ConnectionProblems',
  'ConfigMetaTooLarge',
  REASON_MISSING_VOLUME,
  REASON_FOREIGN_PRIVATE_SECRET,
]);

/**
 * The summary of the two detailed conditions, with kstatus semantics: Ready=True only when every
 * connection is resolved and every member holds the configmeta of this generation; otherwise Ready=False
 * with the first failing condition's reason and message, plus Stalled=True (user action needed) or
 * Reconciling=True (being retried). Every condition carries the generation it describes, so a wait on
 * Ready does not succeed on the previous generation's answer.
 */
export function summaryConditions(
  connections: ConditionInput,
  seated: ConditionInput,
  synced: ConditionInput,
  complete: boolean,
  generation: number | undefined,
): { ready: ConditionInput; reconciling?: ConditionInput; stalled?: ConditionInput } {
  if (connections.status === 'True' && seated.status === 'True' && synced.status === 'True' && complete) {
    return {
      ready: {
        type: CONDITION_READY,
        status: 'True',
        reason: 'Ready',
        message: `${connections.message}; ${synced.message}`,
        observedGeneration: generation,
      },
    };
  }
  const failing = [connections, seated, synced].find((c) => c.status !== 'True');
  const reason = failing?.reason ?? 'DeliveryPending';
  const message = failing?.message ?? `${synced.message}; waiting for the remaining member pods`;
  const ready: ConditionInput = {
    type: CONDITION_READY,
    status: 'False',
    reason,
    message,
    observedGeneration: generation,
  };
  const abnormal = { status: 'True' as const, reason, message, observedGeneration: generation };
  return NEEDS_USER_ACTION.has(reason)
    ? { ready, stalled: { type: CONDITION_STALLED, ...abnormal } }
    : { ready, reconciling: { type: CONDITION_RECONCILING, ...abnormal } };
}

export function buildStatus(input: StatusInput): KDClusterStatus {
  const prev = input.previous ?? {};
  const complete = !input.appProblem && isDeliveryComplete(input.delivery, input.members);
  const resolved = connectionsCondition(input);
  const seated = seatedCondition(input);
  const delivered = syncedCondition(input);
  const blocking = seatsBlockReady(seated, input.members) ? seated : { ...seated, status: 'True' as const };
  const summary = summaryConditions(resolved, blocking, delivered, complete, input.generation);
  let conditions = setCondition(prev.conditions, resolved, input.now);
  conditions = setCondition(conditions, seated, input.now);
  conditions = setCondition(conditions, delivered, input.now);
  conditions = setCondition(conditions, summary.ready, input.now);
  conditions = summary.reconciling
    ? setCondition(conditions, summary.reconciling, input.now)
    : removeCondition(conditions, CONDITION_RECONCILING);
  conditions = summary.stalled
    ? setCondition(conditions, summary.stalled, input.now)
    : removeCondition(conditions, CONDITION_STALLED);
  const connected = input.connections.filter((c) => c.state === 'Connected').length;
  const ready = input.members.filter((m) => m.ready).length;
  const synced = input.delivery?.synced.length ?? 0;
  const status: KDClusterStatus = {
    ...prev,
    observedGeneration: input.generation,
    // Recorded only once every member holds it: until then the regeneration is still pending.
    lastConfigMetaGenerator: complete ? input.delivery!.generator : prev.lastConfigMetaGenerator,
    connectionsHash: complete ? input.hash : prev.connectionsHash,
    connections: input.connections,
    members: { total: input.members.length, ready, synced },
    connectionsSummary: `${connected}/${input.connections.length}`,
    membersSummary: `${ready}/${input.members.length}`,
    conditions,
  };
  if (status.lastConfigMetaGenerator === undefined) delete status.lastConfigMetaGenerator;
  if (status.connectionsHash === undefined) delete status.connectionsHash;
  return status;
}
