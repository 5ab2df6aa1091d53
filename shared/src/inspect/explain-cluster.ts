/**
 * `kubectl kd-connections explain <cluster>` as text: why each connection has its state (the classifier's
 * verdict from what the user could read, beside what the reconciler last recorded), which configmeta
 * generator each member pod holds and which lag, and the cluster's conditions. Pure: the plugin reads,
 * this writes.
 */
import type { GraphEdge } from './connection-graph.js';
import { appSearchDescription, type ResolvedApp } from '../domain/lookup.js';
import { membershipOf } from '../configmeta/members.js';
import { oneLine } from './render-connection-graph.js';
import { ANNOTATION_CONFIGMETA_GENERATOR, type KDCluster, type PodLike } from '../domain/types.js';

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
export function memberLag(pod: PodLike, current: number): string {
  const text = pod.metadata.annotations?.[ANNOTATION_CONFIGMETA_GENERATOR];
  if (text === undefined) return 'no document yet';
  if (Number(text) >= current) return `generator ${text}, current`;
  return `generator ${text}, LAGS (the cluster is at ${current})`;
}

export function explainCluster(x: ExplainInput): string {
  const c = x.cluster;
  const ns = c.metadata.namespace ?? '';
  const name = c.metadata.name ?? '';
  const spec = c.spec ?? {};
  const status = c.status ?? {};
  const lines = [`kdcluster ${ns}/${name}`];
  const app = typeof spec.app === 'string' ? oneLine(spec.app) : '(none)';
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
    const recorded = status.connections?.some((r) => r.kind === e.kind && r.name === e.name);
    const why = e.reason ? ` — ${e.reason}` : e.note ? ` — ${e.note}` : '';
    const rec = e.recorded
      ? `; reconciler: ${e.recorded.state}${e.recorded.message ? ` (${e.recorded.message})` : ''}`
      : recorded
        ? ''
        : '; reconciler: not recorded yet';
    lines.push(oneLine(`  ${KIND_WORD[e.kind]} ${e.name}: ${e.state}${why}${rec}`));
  }

  lines.push('', "members (the reconciler's seating: spec.roles[].members seats, filled by StatefulSet ordinals):");
  if (x.podsUnreadable !== undefined) lines.push(`  cannot list pods with your credentials: ${x.podsUnreadable}`);
  else {
    const seating = membershipOf(c, x.own?.app, x.pods ?? []);
    const byName = new Map((x.pods ?? []).map((p) => [p.metadata.name ?? '', p]));
    const behind: string[] = [];
    for (const m of seating.members) {
      const pod = byName.get(m.pod);
      const where =
        m.present && pod ? memberLag(pod, current) : 'away (its pod is gone or terminating): keeps its seat and id';
      if (m.present && where !== `generator ${current}, current`) behind.push(m.pod);
      lines.push(`  ${m.pod} (role ${m.role}, node id ${m.id}): ${where}`);
    }
    for (const i of seating.ignored)
      lines.push(`  ${i.pod} (role ${i.role}): not a member, gets no document: ${i.why}`);
    for (const v of seating.vacant) lines.push(`  role ${v.role} seat ${v.seat}: vacant (no pod fills it yet)`);
    if (seating.members.length === 0 && seating.ignored.length === 0) lines.push('  (no pod labelled as a member)');
    else
      lines.push(
        behind.length === 0 ? '  every member present holds the current generator' : `  behind: ${behind.join(', ')}`,
      );
  }

  lines.push('', 'conditions:');
  if ((status.conditions ?? []).length === 0) lines.push('  (none yet: the reconciler has not written status)');
  for (const k of status.conditions ?? []) lines.push(oneLine(`  ${k.type}=${k.status} ${k.reason}: ${k.message}`));
  return `${lines.join('\n')}\n`;
}
