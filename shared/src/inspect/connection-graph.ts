/**
 * A namespace's connections as a graph, for `kubectl kd-connections graph` and `explain`: every kdcluster,
 * every ConfigMap or Secret one of them names or that carries its connectable type label, and one edge
 * per connection with the state the webhook and the reconciler give it (classify-connection.ts, the same
 * judgement, from what the user's own credentials could read). A kind the user may not list makes its
 * edges Unknown and says why, rather than Missing.
 */
import { observeCluster, observeObject, type Verdict } from '../domain/classify-connection.js';
import { connectionSets } from '../domain/connection-sets.js';
import { resolveApp, type Lookup, type ResolvedApp, type RuleOptions } from '../domain/lookup.js';
import {
  LABEL_CM_TYPE,
  LABEL_SECRET_TYPE,
  type ConnectionKind,
  type ConnectionState,
  type KDApp,
  type KDCluster,
  type MetaObject,
} from '../domain/types.js';

/** What could be read of one namespace (and the system catalog's apps) with the user's credentials. */
export interface NamespaceSnapshot {
  namespace: string;
  clusters: KDCluster[];
  /** Apps of the namespace and of the system catalog, each with its metadata.namespace. */
  apps: KDApp[];
  /**
   * Names, and the type label where there is one: the rules look at nothing else (the plugin reads no
   * annotation, since kubectl's last-applied-configuration copy holds the object's data).
   */
  configMaps: MetaObject[];
  secrets: MetaObject[];
  /** What could not be listed, and why (the API server's answer): kind → reason. */
  unreadable: Partial<Record<'clusters' | 'apps' | 'configmaps' | 'secrets', string>>;
}

export type EdgeState = ConnectionState | 'Unknown';

export interface GraphNode {
  /** `<kind>/<name>`, unique in the graph. */
  id: string;
  kind: ConnectionKind;
  name: string;
  /** What the node is: a cluster's app, or a ConfigMap's or Secret's type label. */
  detail?: string;
  /** Named by a connection but not found (or not readable). */
  absent?: boolean;
}

export interface GraphEdge {
  from: string;
  to: string;
  kind: ConnectionKind;
  name: string;
  state: EdgeState;
  /** Why it is not Connected; absent when it is. */
  reason?: string;
  /** A word about a Connected edge (a cluster with no ready members yet). */
  note?: string;
  /** What the reconciler last recorded in the cluster's status, when that differs (it also checks sizes). */
  recorded?: { state: ConnectionState; message?: string };
}

export interface ConnectionGraph {
  namespace: string;
  nodes: GraphNode[];
  edges: GraphEdge[];
  /** Kinds that could not be read, as sentences. */
  unreadable: string[];
}

const LIST_NAME = { Cluster: 'clusters', ConfigMap: 'configmaps', Secret: 'secrets' } as const;
const nodeId = (kind: ConnectionKind, name: string) => `${kind}/${name}`;

function lookupOf(s: NamespaceSnapshot): Lookup {
  const key = (ns: string | undefined, name: string | undefined) => `${ns ?? ''}/${name ?? ''}`;
  const index = <T extends MetaObject>(items: T[], ns?: string) =>
    new Map(items.map((o) => [key(ns ?? o.metadata.namespace, o.metadata.name), o]));
  const apps = index(s.apps);
  const clusters = index(s.clusters, s.namespace);
  const cms = index(s.configMaps, s.namespace);
  const secrets = index(s.secrets, s.namespace);
  return {
    getApp: async (ns, name) => apps.get(key(ns, name)),
    getCluster: async (ns, name) => clusters.get(key(ns, name)),
    getConfigMap: async (ns, name) => cms.get(key(ns, name)),
    getSecret: async (ns, name) => secrets.get(key(ns, name)),
  };
}

function unreadableSentence(s: NamespaceSnapshot, what: keyof NamespaceSnapshot['unreadable']): string | undefined {
  const why = s.unreadable[what];
  if (why === undefined) return undefined;
  const name = what === 'clusters' ? 'kubedirectorclusters' : what === 'apps' ? 'kubedirectorapps' : what;
  return `cannot list ${name} with your credentials: ${why}`;
}

function edgeOf(from: string, kind: ConnectionKind, name: string, v: Verdict): GraphEdge {
  return {
    from,
    to: nodeId(kind, name),
    kind,
    name,
    state: v.state,
    ...(v.message ? { reason: v.message } : {}),
    ...(v.note ? { note: v.note } : {}),
  };
}

/**
 * The edges of one cluster's connections, judged as the webhook and the reconciler judge them. `own`: the
 * cluster's app as resolved from the snapshot (undefined: not found).
 */
export async function connectionEdges(
  cluster: KDCluster,
  s: NamespaceSnapshot,
  opts: RuleOptions,
): Promise<{ own: ResolvedApp | undefined; edges: GraphEdge[] }> {
  const lookup = lookupOf(s);
  const ns = s.namespace;
  const self = cluster.metadata.name ?? '';
  const from = nodeId('Cluster', self);
  const own = await resolveApp(lookup, ns, cluster.spec ?? {}, opts.systemNamespace);
  const sets = connectionSets(cluster.spec?.connections);
  const edges: GraphEdge[] = [];
  const unknown = (list: keyof NamespaceSnapshot['unreadable'], kind: ConnectionKind, name: string, v?: Verdict) => {
    const why = unreadableSentence(s, list)!;
    const judged = v && v.state !== 'Connected' ? `; from what could be read: ${v.message ?? v.state}` : '';
    edges.push({ from, to: nodeId(kind, name), kind, name, state: 'Unknown', reason: `${why}${judged}` });
  };
  for (const name of [...sets.clusters].sort()) {
    if (s.unreadable.clusters !== undefined && name !== self) {
      unknown('clusters', 'Cluster', name);
      continue;
    }
    const { verdict } = await observeCluster(lookup, ns, self, name, own, opts, cluster.spec);
    // NotConnectable for another cluster comes from the apps (not found, or connectable_to): with an app
    // list unreadable, it may be wrong. Missing, and a self-connection, do not depend on apps.
    const appDependent = verdict.state === 'NotConnectable' && name !== self;
    if (appDependent && s.unreadable.apps !== undefined) unknown('apps', 'Cluster', name, verdict);
    else edges.push(edgeOf(from, 'Cluster', name, verdict));
  }
  for (const kind of ['ConfigMap', 'Secret'] as const) {
    const list = LIST_NAME[kind];
    for (const name of [...sets[list]].sort()) {
      if (s.unreadable[list] !== undefined) unknown(list, kind, name);
      else edges.push(edgeOf(from, kind, name, (await observeObject(lookup, kind, ns, name, opts)).verdict));
    }
  }
  // Beside what the reconciler recorded: it also sees sizes and the installation's settings.
  for (const e of edges) {
    const r = cluster.status?.connections?.find((c) => c.kind === e.kind && c.name === e.name);
    if (r && r.state !== e.state) e.recorded = { state: r.state, ...(r.message ? { message: r.message } : {}) };
  }
  return { own, edges };
}

/** The namespace's graph: its clusters, the objects they name or that are labelled connectable, the edges. */
export async function connectionGraph(s: NamespaceSnapshot, opts: RuleOptions): Promise<ConnectionGraph> {
  const nodes = new Map<string, GraphNode>();
  const edges: GraphEdge[] = [];
  const byName = (a: MetaObject, b: MetaObject) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? '');
  for (const c of [...s.clusters].sort(byName)) {
    const name = c.metadata.name ?? '';
    const app = typeof c.spec?.app === 'string' ? c.spec.app : undefined;
    nodes.set(nodeId('Cluster', name), {
      id: nodeId('Cluster', name),
      kind: 'Cluster',
      name,
      ...(app ? { detail: `app ${app}` } : {}),
    });
  }
  for (const [kind, items, label] of [
    ['ConfigMap', s.configMaps, LABEL_CM_TYPE],
    ['Secret', s.secrets, LABEL_SECRET_TYPE],
  ] as const) {
    for (const o of [...items].sort(byName)) {
      const type = o.metadata.labels?.[label];
      if (type === undefined) continue;
      const name = o.metadata.name ?? '';
      nodes.set(nodeId(kind, name), { id: nodeId(kind, name), kind, name, detail: `type ${type}` });
    }
  }
  for (const c of [...s.clusters].sort(byName)) edges.push(...(await connectionEdges(c, s, opts)).edges);
  for (const e of edges) {
    if (nodes.has(e.to)) continue;
    const o = (e.kind === 'ConfigMap' ? s.configMaps : e.kind === 'Secret' ? s.secrets : s.clusters).find(
      (x) => x.metadata.name === e.name,
    );
    nodes.set(e.to, { id: e.to, kind: e.kind, name: e.name, ...(o ? {} : { absent: true }) });
  }
  const unreadable = (Object.keys(s.unreadable) as (keyof NamespaceSnapshot['unreadable'])[])
    .map((k) => unreadableSentence(s, k)!)
    .sort();
  return { namespace: s.namespace, nodes: [...nodes.values()], edges, unreadable };
}
