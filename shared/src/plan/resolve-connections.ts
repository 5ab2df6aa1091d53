/**
 * Step 1 and 2 of a reconcile: give every connection a state (the classifier the webhook uses too),
 * keep the ones pods may see (fail closed: forbidden or unlabeled objects, and objects too big to ever be
 * delivered, are left out and reported),
 * and hash what the pods will see from them (connections-hash.ts). Status shows a digest per connected
 * cluster and ConfigMap (anyone who can view the cluster can read those anyway), never per Secret.
 */
import { observeCluster, observeObject, type Verdict } from '../domain/classify-connection.js';
import { connectionSets } from '../domain/connection-sets.js';
import { tooLargeToDeliver } from '../configmeta/connected-object-size.js';
import { clusterDigest, configMapDigest, connectionsHash, secretDigest } from '../configmeta/connections-hash.js';
import type { ResolvedApp, RuleOptions, World } from '../domain/lookup.js';
import { membersOf, type MemberOptions } from '../configmeta/members.js';
import type { ConnectedObjects, RenderOptions } from '../configmeta/configmeta-types.js';
import type { ConfigMapLike, ConnectionKind, ConnectionStatus, KDCluster, SecretLike } from '../domain/types.js';

export interface ResolveOptions extends MemberOptions, RenderOptions, RuleOptions {}

export interface ResolvedConnections {
  statuses: ConnectionStatus[];
  connected: ConnectedObjects;
  /** Hex sha256 over what pods see from the connected objects. */
  hash: string;
}

/** A connected object too big to be delivered (connected-object-size.ts) is left out, and says why. */
function deliverable<O extends { tooLargeBytes?: number }>(
  kind: 'ConfigMap' | 'Secret',
  name: string,
  r: { verdict: Verdict; object?: O },
): { verdict: Verdict; object?: O } {
  const bytes = r.object?.tooLargeBytes;
  if (r.verdict.state !== 'Connected' || bytes === undefined) return r;
  return { verdict: { state: 'NotConnectable', message: tooLargeToDeliver(kind, name, bytes) } };
}

export async function resolveConnections(
  cluster: KDCluster,
  own: ResolvedApp | undefined,
  world: World,
  opts: ResolveOptions,
): Promise<ResolvedConnections> {
  const ns = cluster.metadata.namespace ?? '';
  const self = cluster.metadata.name ?? '';
  const sets = connectionSets(cluster.spec?.connections);
  const statuses: ConnectionStatus[] = [];
  const connected: ConnectedObjects = { clusters: [], configmaps: [], secrets: [] };
  const digests: Record<string, string> = {};
  const add = (kind: ConnectionKind, name: string, v: Verdict, digest?: string) => {
    statuses.push({
      kind,
      name,
      state: v.state,
      ...(v.message ? { message: v.message } : {}),
      ...(digest && kind !== 'Secret' ? { contentHash: digest.slice(0, 16) } : {}),
    });
    if (digest) digests[`${kind}/${name}`] = digest;
  };

  for (const name of [...sets.clusters].sort()) {
    const { verdict, target, targetApp } = await observeCluster(world, ns, self, name, own, opts, cluster.spec);
    if (verdict.state !== 'Connected' || !target || !targetApp) {
      add('Cluster', name, verdict);
      continue;
    }
    const members = membersOf(target, targetApp.app, await world.podsOf(ns, name), opts);
    const c = { name, cluster: target, app: targetApp.app, members };
    connected.clusters.push(c);
    add('Cluster', name, verdict, clusterDigest(c));
  }
  for (const name of [...sets.configmaps].sort()) {
    const { verdict, object } = deliverable('ConfigMap', name, await observeObject(world, 'ConfigMap', ns, name, opts));
    const cm = verdict.state === 'Connected' ? (object as ConfigMapLike) : undefined;
    if (cm) connected.configmaps.push(cm);
    add('ConfigMap', name, verdict, cm && configMapDigest(cm));
  }
  for (const name of [...sets.secrets].sort()) {
    const { verdict, object } = deliverable('Secret', name, await observeObject(world, 'Secret', ns, name, opts));
    const s = verdict.state === 'Connected' ? (object as SecretLike) : undefined;
    if (s) connected.secrets.push(s);
    add('Secret', name, verdict, s && secretDigest(s));
  }
  return { statuses, connected, hash: connectionsHash(digests) };
}
