/**
 * `kubectl kd-connections explain <cluster>` as text: why each connection has its state (the classifier's
 * verdict from what the user could read, beside what the reconciler last recorded), which configmeta
 * generator each member pod holds and which lag, and the cluster's conditions. Pure: the plugin reads,
 * this writes.
 */
import type { GraphEdge } from './connection-graph.js';
import { appSearchDescription, type ResolvedApp } from './lookup.js';
import { ANNOTATION_CONFIGMETA_GENERATOR, LABEL_ROLE, type KDCluster, type PodLike } from './types.js';

export interface ExplainInput {
  cluster: KDCluster;
  own: ResolvedApp | undefined;
  systemNamespace: string;
  edges: GraphEdge[];
  /** Pods labelled as the cluster's members; undefined with `podsUnreadable`. */
  pods?: PodLike[];
  podsUnreadable?: string;
}

const KIND_WORD = { Cluster: 'cluster', ConfigMap: 'configmap', Secret: 'secret' } as const;

/** Where a member pod is relative to the cluster's current generator. */
export function memberLag(pod: PodLike, current: number, seated: boolean): string {
  if (!seated) return 'not seated: gets no document (beyond the seats `spec.roles[].members` declares)';
  const text = pod.metadata.annotations?.[ANNOTATION_CONFIGMETA_GENERATOR];
  if (text === undefined) return 'no document yet';
  const has = Number(text);
  if (has >= current) return `generator ${text}, current`;
  return `generator ${text}, LAGS (the cluster is at ${current})`;
}

export function explainCluster(x: ExplainInput): string {
  const c = x.cluster;
  const ns = c.metadata.namespace ?? '';
  const name = c.metadata.name ?? '';
  const spec = c.spec ?? {};
  const status = c.status ?? {};
  const lines = [`kdcluster ${ns}/${name}`];
  const app = typeof spec.app === 'string' ? spec.app : '(none)';
  lines.push(
    x.own
      ? `  app: ${app}, found in namespace ${x.own.namespace}`
      : `  app: ${app}, NOT FOUND ${appSearchDescription(ns, spec.appCatalog, x.systemNamespace)}`,
  );
  // Unset is generator 0: what the reconciler delivers until the first connection change bumps it.
  const set = typeof spec.configMetaGenerator === 'number';
  const current = set ? (spec.configMetaGenerator as number) : 0;
  const delivered = status.lastConfigMetaGenerator;
  lines.push(
    `  configmeta generator: ${current} (spec.configMetaGenerator${set ? '' : ' unset'}); last delivered to every member: ${delivered ?? 'none yet'}`,
  );

  lines.push('', 'connections (judged now, with your credentials; "reconciler:" is what status last recorded):');
  if (x.edges.length === 0) lines.push('  (none)');
  for (const e of x.edges) {
    const recorded = status.connections?.find((s) => s.kind === e.kind && s.name === e.name);
    const why = e.reason ? ` — ${e.reason}` : e.note ? ` — ${e.note}` : '';
    const rec = recorded
      ? recorded.state === e.state
        ? ''
        : `; reconciler: ${recorded.state}${recorded.message ? ` (${recorded.message})` : ''}`
      : '; reconciler: not recorded yet';
    lines.push(`  ${KIND_WORD[e.kind]} ${e.name}: ${e.state}${why}${rec}`);
  }

  lines.push('', 'members:');
  if (x.podsUnreadable !== undefined) lines.push(`  cannot list pods with your credentials: ${x.podsUnreadable}`);
  else if ((x.pods ?? []).length === 0) lines.push('  (no pod labelled as a member)');
  else {
    const seats = status.seatHolders;
    const lagging: string[] = [];
    for (const p of [...x.pods!].sort((a, b) =>
      (a.metadata.name ?? '').localeCompare(b.metadata.name ?? '', 'en', { numeric: true }),
    )) {
      const pod = p.metadata.name ?? '';
      const seated = seats === undefined || Object.hasOwn(seats, pod);
      const where = memberLag(p, current, seated);
      if (where.includes('LAGS') || where === 'no document yet') lagging.push(pod);
      lines.push(`  ${pod} (role ${p.metadata.labels?.[LABEL_ROLE] ?? '?'}): ${where}`);
    }
    lines.push(
      lagging.length === 0 ? '  every seated member holds the current generator' : `  behind: ${lagging.join(', ')}`,
    );
  }

  lines.push('', 'conditions:');
  if ((status.conditions ?? []).length === 0) lines.push('  (none yet: the reconciler has not written status)');
  for (const k of status.conditions ?? []) lines.push(`  ${k.type}=${k.status} ${k.reason}: ${k.message}`);
  return `${lines.join('\n')}\n`;
}
