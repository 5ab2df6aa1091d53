/**
 * What changed between the recorded connection states and the current ones, in words, and the events a
 * regeneration posts: on the cluster, which connection changed; on each changed object, which cluster
 * it triggered and the new generator. Status holds no per-Secret digest (one could be tested against
 * guesses), so Secrets that stay connected are not compared one by one: when nothing else explains a
 * new connectionsHash, the description names the connected Secrets, one of which changed.
 */
import type { EventInput, EventTarget } from '../runtime/event-recorder.js';
import type { ResolvedConnections } from './resolve-connections.js';
import { API_VERSION, type ConnectionStatus, type KDCluster } from '../domain/types.js';

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
      else if (c.kind === 'Secret') continue;
      else if (o.contentHash !== c.contentHash) parts.push(`connected ${noun} changed`);
      else continue;
      changed.push(c);
    } else if (o?.state === 'Connected') {
      parts.push(`connected ${noun} is now ${c.state}${c.message ? ` (${c.message})` : ''}`);
      changed.push(c);
    }
  }
  for (const o of old.values())
    if (o.state === 'Connected') parts.push(`${KIND_NOUN[o.kind]} ${o.name} is no longer connected`);
  if (parts.length > 0) return { changed, text: parts.join(', ') };
  // Nothing else explains the change: a Secret that stayed connected changed. Which one is told only
  // when a single one is connected, which status shows anyway.
  const kept = after.filter((c) => c.kind === 'Secret' && c.state === 'Connected');
  if (kept.length === 1) return { changed: kept, text: `connected secret ${kept[0]!.name} changed` };
  if (kept.length > 1)
    return { changed, text: `one of the connected secrets ${kept.map((c) => c.name).join(', ')} changed` };
  return { changed, text: 'connected content changed' };
}

export function clusterTarget(c: KDCluster): EventTarget {
  return {
    apiVersion: API_VERSION,
    kind: 'KubeDirectorCluster',
    namespace: c.metadata.namespace,
    name: c.metadata.name ?? '',
    uid: c.metadata.uid,
  };
}

function connectionTarget(c: ConnectionStatus, namespace: string, r: ResolvedConnections): EventTarget | undefined {
  if (c.kind === 'Cluster') {
    const x = r.connected.clusters.find((k) => k.name === c.name);
    return x && clusterTarget(x.cluster);
  }
  const list = c.kind === 'ConfigMap' ? r.connected.configmaps : r.connected.secrets;
  const o = list.find((k) => k.metadata.name === c.name);
  return o && { apiVersion: 'v1', kind: c.kind, namespace, name: c.name, uid: o.metadata.uid };
}

/** The events of a regeneration from `from` to `to`, and the cause in words (for the log). */
export function regenerationEvents(
  cluster: KDCluster,
  resolved: ResolvedConnections,
  from: number,
  to: number,
): { cause: string; events: EventInput[] } {
  const { changed, text } = describeChanges(cluster.status?.connections, resolved.statuses);
  const regarding = clusterTarget(cluster);
  const events: EventInput[] = [
    {
      regarding,
      type: 'Normal',
      reason: 'ConnectionChanged',
      action: 'Regenerate',
      note: `${text}; configMetaGenerator ${from} → ${to}`,
    },
  ];
  for (const c of changed) {
    const target = connectionTarget(c, cluster.metadata.namespace ?? '', resolved);
    if (!target) continue;
    events.push({
      regarding: target,
      related: regarding,
      type: 'Normal',
      reason: 'ConnectionUsed',
      action: 'Regenerate',
      note: `cluster ${cluster.metadata.name} uses this as a connection; requested configmeta regeneration (generator ${to})`,
    });
  }
  return { cause: text, events };
}
