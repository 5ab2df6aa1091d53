/**
 * Seats: which pods are a cluster's members. A role has as many seats as its `spec.roles[].members`
 * (absent: the minimum of the app role's cardinality, the default KubeDirector's webhook writes there),
 * and seat k is filled by the role's pod named `<anything>-k` — a StatefulSet's ordinal k. So the spec
 * says how many members there are and the StatefulSet's ordinals say which pods they are:
 *
 * - a labelled pod beyond the seats (an ordinal ≥ members, no ordinal, a role the cluster does not
 *   declare, a second pod for a seat already filled) is not a member: ignored and reported;
 * - a seat's holder is recorded in status (`seatHolders`: pod → role and DNS name), so a member whose pod
 *   restarts (being deleted, or gone until its StatefulSet recreates it) keeps its place and node id in
 *   every document meanwhile, as KubeDirector keeps a member whose pod reboots;
 * - a seat no pod has filled yet is vacant; before a cluster's first delivery the reconciler holds the
 *   documents back until no seat is vacant (plan-reconcile.ts), so the first document lists every member.
 *
 * Where KubeDirector differs, and why standalone mode must: KubeDirector creates the pods itself, so it
 * names each seat's member before the pod exists and lists it at once; here the user's StatefulSet
 * creates them, and a seat's pod name is known only once the pod appears. KubeDirector numbers a role's
 * members in the order it creates them; here new seats get ids in role order, then ordinal — the same
 * order for a StatefulSet scaled up: a new pod whose role has an empty seat below its own waits for that
 * seat's pod, for at most `waitMs` after its own creation (the reconciler's first-delivery wait), since a
 * Parallel StatefulSet makes a role's new pods at once and they are seen one by one.
 */
import { assignNodeIds, readNodeIdState, type NodeIdState } from './node-ids.js';
import { LABEL_KDCLUSTER, LABEL_ROLE, type KDApp, type KDCluster, type PodLike } from '../domain/types.js';

/** A seat's holder as status keeps it, so the member can be listed while its pod is away. */
export interface SeatHolder {
  role: string;
  fqdn: string;
}

export interface SeatedMember {
  pod: string;
  role: string;
  seat: number;
  id: number;
  /** The pod, when it exists and is not being deleted; absent while the member's pod restarts. */
  present?: PodLike;
  /** Set for a member whose pod is away: the DNS name it had. */
  fqdn?: string;
}

export interface IgnoredPod {
  pod: string;
  role: string;
  why: string;
}

export interface Seating {
  /** Every seat with a holder, ordered by role (the app's role order) then node id. */
  members: SeatedMember[];
  /**
   * New pods not numbered yet because a lower seat of their role has no pod, until when they wait (ISO):
   * a Parallel StatefulSet makes a role's new pods at once and they are seen one by one; waiting keeps
   * their ids in ordinal order, as KubeDirector numbers the members it adds.
   */
  waiting: { pod: string; role: string; seat: number; until: string }[];
  /** Labelled pods that hold no seat, with the reason. */
  ignored: IgnoredPod[];
  /** Seats no pod has filled, as `<role> <seat>`. */
  vacant: { role: string; seat: number }[];
  /** No member was ever given an id: the cluster has not had its first delivery. */
  neverDelivered: boolean;
}

const ORDINAL = /-(0|[1-9]\d*)$/;

/** The StatefulSet ordinal a pod name ends with, or undefined. */
export function ordinalOf(pod: string): number | undefined {
  const m = ORDINAL.exec(pod);
  return m ? Number(m[1]) : undefined;
}

/** The name a pod has without its ordinal: its StatefulSet's, for a StatefulSet's pod. */
export function withoutOrdinal(pod: string): string {
  return pod.replace(ORDINAL, '');
}

/** The lowest count a KubeDirector cardinality allows ("3" → 3, "1+" → 1); undefined when it is not one. */
export function minimumOf(cardinality: unknown): number | undefined {
  const m = typeof cardinality === 'string' ? /^(\d+)\+?$/.exec(cardinality.trim()) : null;
  return m ? Number(m[1]) : undefined;
}

/** Seats per role, in the app's role order (then the cluster's): the roles the cluster declares only. */
export function seatCounts(cluster: KDCluster, app: KDApp | undefined): Map<string, number> {
  const appRoles = new Map<string, unknown>();
  for (const r of app?.spec?.roles ?? []) if (r && typeof r.id === 'string') appRoles.set(r.id, r.cardinality);
  const declared = new Map<string, number>();
  for (const r of cluster.spec?.roles ?? []) {
    if (!r || typeof r.id !== 'string' || declared.has(r.id)) continue;
    const members = typeof r.members === 'number' && Number.isSafeInteger(r.members) ? r.members : undefined;
    declared.set(r.id, Math.max(0, members ?? minimumOf(appRoles.get(r.id)) ?? 0));
  }
  const order = [...appRoles.keys(), ...declared.keys()];
  return new Map([...declared].sort(([a], [b]) => order.indexOf(a) - order.indexOf(b)));
}

/** The seat holders recorded in status, cleaned (entries that are not {role, fqdn} strings are dropped). */
export function readSeatHolders(status: { seatHolders?: unknown } | undefined): Record<string, SeatHolder> {
  const raw = status?.seatHolders;
  const out: Record<string, SeatHolder> = {};
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return out;
  for (const [pod, h] of Object.entries(raw as Record<string, unknown>)) {
    const { role, fqdn } = (h ?? {}) as Record<string, unknown>;
    if (typeof role === 'string' && typeof fqdn === 'string') out[pod] = { role, fqdn };
  }
  return out;
}

/** How long a new member of a delivered cluster waits for the seats below it (`now`: ISO; no wait without both). */
export interface SeatWait {
  now?: string;
  waitMs?: number;
}

/** Seats `cluster`'s members among `pods` (its labelled pods, in any order). Pure. */
export function seat(cluster: KDCluster, app: KDApp | undefined, pods: PodLike[], wait: SeatWait = {}): Seating {
  const name = cluster.metadata.name ?? '';
  const ns = cluster.metadata.namespace ?? '';
  const counts = seatCounts(cluster, app);
  const holders = readSeatHolders(cluster.status);
  const ids = readNodeIdState(cluster.status);
  const ignored: IgnoredPod[] = [];
  const taken = new Map<string, { role: string; seat: number; pod: string; present?: PodLike }>();
  const key = (role: string, seat: number) => `${role}\u0000${seat}`;

  const labelled = pods
    .filter((p) => (p.metadata.labels ?? {})[LABEL_KDCLUSTER] === name && (p.metadata.namespace ?? ns) === ns)
    .map((p) => ({ pod: p, podName: p.metadata.name ?? '', role: (p.metadata.labels ?? {})[LABEL_ROLE] }))
    .filter((p): p is { pod: PodLike; podName: string; role: string } => typeof p.role === 'string')
    .sort((a, b) => cmp(a.podName, b.podName));
  // Pods being deleted hold nothing themselves; a holder among them is away, like one already gone.
  const present = labelled.filter((l) => !l.pod.metadata.deletionTimestamp);
  const presentNames = new Set(present.map((l) => l.podName));
  const holds = (l: { podName: string; role: string }) => holders[l.podName]?.role === l.role;
  // Recorded holders first (present, then away), so no other pod takes a seat its holder still has.
  const away = Object.entries(holders)
    .filter(([pod]) => !presentNames.has(pod))
    .map(([pod, h]) => ({ podName: pod, role: h.role, pod: undefined }));
  const candidates: { podName: string; role: string; pod: PodLike | undefined }[] = [
    ...present.filter(holds),
    ...away,
    ...present.filter((p) => !holds(p)),
  ];
  for (const l of candidates) {
    const k = ordinalOf(l.podName);
    const seats = counts.get(l.role);
    const why =
      seats === undefined
        ? `role "${l.role}" is not one of the cluster's roles (${[...counts.keys()].join(', ') || 'none'})`
        : k === undefined
          ? `its name does not end in a StatefulSet ordinal (-0, -1, …), so it fills none of the ${seats} seat(s) of role "${l.role}"`
          : k >= seats
            ? `ordinal ${k} is beyond the ${seats} seat(s) of role "${l.role}" (spec.roles[].members)`
            : taken.has(key(l.role, k))
              ? `seat ${k} of role "${l.role}" is held by ${taken.get(key(l.role, k))!.pod}`
              : undefined;
    // An away holder without a seat any more (the role shrank) is simply released, not reported.
    if (why) {
      if (l.pod) ignored.push({ pod: l.podName, role: l.role, why });
    } else taken.set(key(l.role, k!), { role: l.role, seat: k!, pod: l.podName, ...(l.pod ? { present: l.pod } : {}) });
  }

  const waiting = waitingForLowerSeats(taken, ids, wait, key);
  const roleIndex = new Map([...counts.keys()].map((r, i) => [r, i] as const));
  const seated = [...taken.values()]
    .filter((t) => !waiting.some((w) => w.pod === t.pod))
    .sort((a, b) => roleIndex.get(a.role)! - roleIndex.get(b.role)! || a.seat - b.seat);
  const next = assignNodeIds(
    ids,
    seated.map((s) => s.pod),
  );
  const members: SeatedMember[] = seated
    .map((s) => ({
      pod: s.pod,
      role: s.role,
      seat: s.seat,
      id: next.nodeIDs[s.pod]!,
      ...(s.present ? { present: s.present } : { fqdn: holders[s.pod]!.fqdn }),
    }))
    .sort((a, b) => roleIndex.get(a.role)! - roleIndex.get(b.role)! || a.id - b.id);
  const vacant: Seating['vacant'] = [];
  for (const [role, n] of counts)
    for (let k = 0; k < n; k++) if (!taken.has(key(role, k))) vacant.push({ role, seat: k });
  return {
    members,
    waiting,
    ignored: ignored.sort((a, b) => cmp(a.pod, b.pod)),
    vacant,
    neverDelivered: ids.lastNodeID === 0,
  };
}

/**
 * The present pods without an id yet whose role has an empty seat below theirs, while their pod is younger
 * than `waitMs`, in a cluster delivered before (the first delivery numbers every pod there is in one pass).
 */
function waitingForLowerSeats(
  taken: Map<string, { role: string; seat: number; pod: string; present?: PodLike }>,
  ids: NodeIdState,
  wait: SeatWait,
  key: (role: string, seat: number) => string,
): Seating['waiting'] {
  if (wait.now === undefined || !wait.waitMs || ids.lastNodeID === 0) return [];
  const now = Date.parse(wait.now);
  const out: Seating['waiting'] = [];
  for (const t of taken.values()) {
    if (!t.present || Object.hasOwn(ids.nodeIDs, t.pod)) continue;
    let below = false;
    for (let j = 0; j < t.seat && !below; j++) below = !taken.has(key(t.role, j));
    const created = new Date(t.present.metadata.creationTimestamp ?? NaN).getTime();
    if (!below || !Number.isFinite(created) || created + wait.waitMs <= now) continue;
    out.push({ pod: t.pod, role: t.role, seat: t.seat, until: new Date(created + wait.waitMs).toISOString() });
  }
  return out.sort((a, b) => cmp(a.pod, b.pod));
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
