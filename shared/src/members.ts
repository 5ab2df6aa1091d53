/**
 * Member pods of a cluster, as configmeta describes them. Members are the pods labelled
 * kubedirector.hpe.com/kdcluster=<cluster> and kubedirector.hpe.com/role=<role>, whoever created them;
 * pods being deleted are not members any more.
 */
import {
  assignNodeIds,
  compareMemberNames,
  readNodeIdState,
  statefulSetRetention,
  type NodeIdState,
} from './node-ids.js';
import { LABEL_KDCLUSTER, LABEL_ROLE, type KDApp, type KDCluster, type PodLike } from './types.js';

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
}

export interface MemberOptions {
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

/**
 * The members of `cluster` among `pods`, ordered by role (app role order) then node id — KubeDirector's
 * order, where a role lists its members as they were created. A pod's DNS name follows its
 * spec.hostname/spec.subdomain (a headless Service of that name); without a subdomain the cluster's
 * name is assumed to be that Service, as KubeDirector's own headless Service would provide.
 */
export function membersOf(
  cluster: KDCluster,
  app: KDApp | undefined,
  pods: PodLike[],
  opts: MemberOptions = {},
): Member[] {
  const name = cluster.metadata.name ?? '';
  const ns = cluster.metadata.namespace ?? '';
  const domainSuffix = `svc.${opts.clusterDomain ?? 'cluster.local'}`;
  const roleOrder = new Map<string, number>();
  for (const r of [...(app?.spec?.roles ?? []), ...(cluster.spec?.roles ?? [])]) {
    if (r && typeof r.id === 'string' && !roleOrder.has(r.id)) roleOrder.set(r.id, roleOrder.size);
  }
  const order = (role: string) => roleOrder.get(role) ?? Number.MAX_SAFE_INTEGER;
  const byRole = (a: string, b: string) => order(a) - order(b) || cmp(a, b);
  const found = pods
    .filter((p) => isMemberOf(p, name) && (p.metadata.namespace ?? ns) === ns)
    .map((p) => ({ pod: p, podName: p.metadata.name ?? '', role: p.metadata.labels![LABEL_ROLE]! }))
    .sort((a, b) => byRole(a.role, b.role) || compareMemberNames(a.podName, b.podName));
  const ids = nodeIdsOf(
    cluster,
    found.map((f) => f.podName),
  ).nodeIDs;
  return found
    .sort((a, b) => byRole(a.role, b.role) || ids[a.podName]! - ids[b.podName]!)
    .map(({ pod, podName, role }) => {
      const domain = `${pod.spec?.subdomain || name}.${ns}.${domainSuffix}`;
      return {
        pod: podName,
        uid: pod.metadata.uid,
        role,
        id: String(ids[podName]),
        fqdn: `${pod.spec?.hostname || podName}.${domain}`,
        domain,
        ready: isPodReady(pod),
      };
    });
}

/** Node ids for the members `pods` (pod names, in the order new members are numbered). */
export function nodeIdsOf(cluster: KDCluster, pods: string[]): NodeIdState {
  return assignNodeIds(readNodeIdState(cluster.status), pods, retention(cluster));
}

/** The node id state to keep in status once `members` (membersOf's result) carry their ids. */
export function nodeIdStateOf(cluster: KDCluster, members: Member[]): NodeIdState {
  const stored = readNodeIdState(cluster.status);
  const ids = Object.fromEntries(members.map((m) => [m.pod, Number(m.id)] as const));
  const lastNodeID = Math.max(stored.lastNodeID, ...Object.values(ids));
  return assignNodeIds(
    { lastNodeID, nodeIDs: { ...stored.nodeIDs, ...ids } },
    members.map((m) => m.pod),
    retention(cluster),
  );
}

function retention(cluster: KDCluster): (pod: string) => boolean {
  return statefulSetRetention((cluster.spec?.roles ?? []).map((r) => (typeof r?.members === 'number' ? r.members : 0)));
}

function cmp(a: string | undefined, b: string | undefined): number {
  return (a ?? '') < (b ?? '') ? -1 : (a ?? '') > (b ?? '') ? 1 : 0;
}
