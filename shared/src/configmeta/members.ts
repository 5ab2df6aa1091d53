/**
 * Member pods of a cluster, as configmeta describes them: the pods that fill its seats (seats.ts) —
 * labelled kubedirector.hpe.com/kdcluster=<cluster> and kubedirector.hpe.com/role=<role>, named with a
 * StatefulSet ordinal below the role's `members` — plus the seat holders whose pods are away (restarting).
 */
import { readNodeIdState, type NodeIdState } from './node-ids.js';
import { ordinalOf, seat, withoutOrdinal, type SeatHolder, type Seating, type SeatWait } from './seats.js';
import { LABEL_KDCLUSTER, LABEL_ROLE, type KDApp, type KDCluster, type PodLike } from '../domain/types.js';

export interface Member {
  pod: string;
  uid?: string;
  role: string;
  /**
   * Node id in configmeta: kept for life in status.nodeIDs; a new member gets the next id after
   * status.lastNodeID (node-ids.ts).
   */
  id: string;
  fqdn: string;
  domain: string;
  ready: boolean;
  /** False while the member's pod is away (being deleted, or not recreated yet): it keeps its place. */
  present: boolean;
}

export interface MemberOptions extends SeatWait {
  /** The cluster DNS domain (default cluster.local). */
  clusterDomain?: string;
}

export function isMemberOf(pod: PodLike, clusterName: string): boolean {
  const labels = pod.metadata.labels ?? {};
  return (
    labels[LABEL_KDCLUSTER] === clusterName && typeof labels[LABEL_ROLE] === 'string' && !pod.metadata.deletionTimestamp
  );
}

export function isPodReady(pod: PodLike): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** The seating and its members, ordered by role (app role order) then node id — KubeDirector's order. */
export interface Membership extends Omit<Seating, 'members'> {
  members: Member[];
}

/**
 * The members of `cluster` among `pods`. A pod's DNS name follows its spec.hostname/spec.subdomain (a
 * headless Service of that name); without a subdomain the cluster's name is assumed to be that Service,
 * as KubeDirector's own headless Service would provide. A member whose pod is away keeps the name it had.
 */
export function membershipOf(
  cluster: KDCluster,
  app: KDApp | undefined,
  pods: PodLike[],
  opts: MemberOptions = {},
): Membership {
  const name = cluster.metadata.name ?? '';
  const ns = cluster.metadata.namespace ?? '';
  const domainSuffix = `svc.${opts.clusterDomain ?? 'cluster.local'}`;
  const domainOf = (p: PodLike) => `${p.spec?.subdomain || name}.${ns}.${domainSuffix}`;
  const legacy = legacyHolders(cluster, pods, domainOf);
  const seating = seat(
    legacy ? { ...cluster, status: { ...cluster.status, seatHolders: legacy } } : cluster,
    app,
    pods,
    opts,
  );
  const members = seating.members.map(({ pod, role, id, present, fqdn }): Member => {
    if (!present) {
      return {
        pod,
        role,
        id: String(id),
        fqdn: fqdn!,
        domain: fqdn!.slice(fqdn!.indexOf('.') + 1),
        ready: false,
        present: false,
      };
    }
    const domain = domainOf(present);
    return {
      pod,
      uid: present.metadata.uid,
      role,
      id: String(id),
      fqdn: `${present.spec?.hostname || pod}.${domain}`,
      domain,
      ready: isPodReady(present),
      present: true,
    };
  });
  return { ...seating, members };
}

/**
 * Seat holders for a status written before they were recorded (0.1.0 kept only `nodeIDs`): a member whose
 * pod is away at the first reconcile after the upgrade would otherwise lose its id. Its role and DNS domain
 * are its StatefulSet siblings' (same name but the ordinal); without a sibling there is nothing to go by.
 */
function legacyHolders(
  cluster: KDCluster,
  pods: PodLike[],
  domainOf: (p: PodLike) => string,
): Record<string, SeatHolder> | undefined {
  const status = cluster.status;
  if (!status || status.seatHolders !== undefined) return undefined;
  const name = cluster.metadata.name ?? '';
  const here = pods.filter((p) => isMemberOf(p, name));
  const out: Record<string, SeatHolder> = {};
  for (const pod of Object.keys(readNodeIdState(status).nodeIDs)) {
    if (ordinalOf(pod) === undefined || here.some((p) => p.metadata.name === pod)) continue;
    const sibling = here.find(
      (p) => ordinalOf(p.metadata.name ?? '') !== undefined && withoutOrdinal(p.metadata.name!) === withoutOrdinal(pod),
    );
    if (sibling) out[pod] = { role: sibling.metadata.labels![LABEL_ROLE]!, fqdn: `${pod}.${domainOf(sibling)}` };
  }
  return out;
}

/** The members of `cluster` among `pods` (membershipOf's members). */
export function membersOf(
  cluster: KDCluster,
  app: KDApp | undefined,
  pods: PodLike[],
  opts: MemberOptions = {},
): Member[] {
  return membershipOf(cluster, app, pods, opts).members;
}

/** The node ids and seat holders to keep in status once `members` (membershipOf's result) were delivered. */
export function seatStateOf(
  cluster: KDCluster,
  members: Member[],
): NodeIdState & { seatHolders: Record<string, SeatHolder> } {
  const stored = readNodeIdState(cluster.status);
  const nodeIDs = Object.fromEntries(
    members.map((m) => [m.pod, Number(m.id)] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  const seatHolders = Object.fromEntries(
    members
      .map((m) => [m.pod, { role: m.role, fqdn: m.fqdn }] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  return { lastNodeID: Math.max(stored.lastNodeID, ...Object.values(nodeIDs)), nodeIDs, seatHolders };
}
