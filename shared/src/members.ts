/**
 * Member pods of a cluster, as configmeta describes them. Members are the pods labelled
 * kubedirector.hpe.com/kdcluster=<cluster> and kubedirector.hpe.com/role=<role>, whoever created them;
 * pods being deleted are not members any more.
 */
import { LABEL_KDCLUSTER, LABEL_ROLE, type KDApp, type KDCluster, type PodLike } from './types.js';

export interface Member {
  pod: string;
  uid?: string;
  role: string;
  /** Node id in configmeta: position in (app role order, pod name), from 1. */
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
 * The members of `cluster` among `pods`, in a stable order. A pod's DNS name follows its
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
  return pods
    .filter((p) => isMemberOf(p, name) && (p.metadata.namespace ?? ns) === ns)
    .map((p) => ({ pod: p, role: p.metadata.labels![LABEL_ROLE]! }))
    .sort(
      (a, b) => order(a.role) - order(b.role) || cmp(a.role, b.role) || cmp(a.pod.metadata.name, b.pod.metadata.name),
    )
    .map(({ pod, role }, i) => {
      const podName = pod.metadata.name ?? '';
      const domain = `${pod.spec?.subdomain || name}.${ns}.${domainSuffix}`;
      return {
        pod: podName,
        uid: pod.metadata.uid,
        role,
        id: String(i + 1),
        fqdn: `${pod.spec?.hostname || podName}.${domain}`,
        domain,
        ready: isPodReady(pod),
      };
    });
}

function cmp(a: string | undefined, b: string | undefined): number {
  return (a ?? '') < (b ?? '') ? -1 : (a ?? '') > (b ?? '') ? 1 : 0;
}
