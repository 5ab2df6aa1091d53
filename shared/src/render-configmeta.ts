/**
 * configmeta (DESIGN §6): the JSON document every member pod gets, in KubeDirector's shape —
 * `version, services, nodegroups, distros, cluster, node, connections {clusters, configmaps, secrets}` —
 * with KubeDirector's bugs fixed:
 * - every member appears once (KubeDirector repeated the last member of a connected role);
 * - references inside an embedded connected cluster point into that cluster (all refkeys prefixed);
 * - connected clusters carry no auth tokens and no secret keys;
 * - Secret values are redacted unless inlining was explicitly chosen; Secret names and labels stay
 *   plain strings (KubeDirector base64-encoded them as a side effect of its types);
 * - kubectl's last-applied-configuration annotation is never copied (for a Secret it holds the values).
 */
import type { Member } from './members.js';
import { isDroppedAnnotation } from './trim-object.js';
import {
  LABEL_CM_TYPE,
  LABEL_SECRET_TYPE,
  type ConfigMapLike,
  type KDApp,
  type KDCluster,
  type ResourceList,
  type SecretLike,
} from './types.js';

export interface RefKey {
  bdvlibrefkey: string[];
}

export interface ServiceEntry {
  qualifiers: string[];
  name: string;
  id: string;
  hostnames: RefKey;
  global_id: string;
  fqdns: RefKey;
  exported_service: string;
  endpoints: string[];
  authToken?: string;
}

export interface RoleEntry {
  services: Record<string, ServiceEntry>;
  node_ids: string[];
  hostnames: string[];
  fqdns: string[];
  fqdn_mappings: Record<string, string>;
  flavor: { storage: string; name: string; memory: string; description: string; cores: string };
}

export interface NodeEntry {
  role_id: string;
  nodegroup_id: string;
  id: string;
  hostname: string;
  fqdn: string;
  domain: string;
  distro_id: string;
  depends_on: Record<string, RefKey>;
}

export interface ClusterSection {
  version: string;
  services: Record<string, Record<string, Record<string, RefKey>>>;
  nodegroups: Record<
    string,
    {
      roles: Record<string, RoleEntry>;
      distro_id: string;
      catalog_entry_version: string;
      config_metadata: Record<string, string> | null;
    }
  >;
  distros: Record<string, Record<string, RefKey>>;
  cluster: { name: string; isolated: boolean; id: string; config_metadata: Record<string, RefKey> };
}

export interface ConnectedObjectEntry {
  metadata: { name: string };
  labels: Record<string, string>;
  annotations: Record<string, string> | null;
  data: Record<string, string> | null;
  /** Secrets only: true when values were left out. */
  redacted?: boolean;
}

export interface EmbeddedCluster extends ClusterSection {
  node: null;
  connections: { clusters: null; configmaps: null; secrets: null };
}

export interface ConfigMetaConnections {
  clusters: Record<string, EmbeddedCluster>;
  configmaps: Record<string, ConnectedObjectEntry[]>;
  secrets: Record<string, ConnectedObjectEntry[]>;
}

export interface ConfigMeta extends ClusterSection {
  node: NodeEntry;
  connections: ConfigMetaConnections;
}

/** A connected cluster with what it takes to describe it. */
export interface ConnectedCluster {
  name: string;
  cluster: KDCluster;
  app: KDApp;
  members: Member[];
}

/** The connections that made it into configmeta (state Connected). */
export interface ConnectedObjects {
  clusters: ConnectedCluster[];
  configmaps: ConfigMapLike[];
  secrets: SecretLike[];
}

export interface RenderOptions {
  /** Put Secret values (base64, as stored) into configmeta. Off by default: every member can read it. */
  inlineSecretValues?: boolean;
}

const NODEGROUP = '1';

const ref = (prefix: string[], ...path: string[]): RefKey => ({ bdvlibrefkey: [...prefix, ...path] });

/** MiB from a Kubernetes quantity ("2Gi", "512Mi", "1G", 1073741824). */
export function memoryMiB(q: string | number | undefined): string {
  const bytes = quantityValue(q);
  return bytes === undefined ? 'n/a' : String(Math.round(bytes / (1024 * 1024)));
}

/** Whole cores, rounded up, from a CPU quantity ("500m" → 1). */
export function cores(q: string | number | undefined): string {
  const v = quantityValue(q);
  return v === undefined ? 'n/a' : String(Math.ceil(v - 1e-9));
}

const SUFFIX: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

function quantityValue(q: string | number | undefined): number | undefined {
  if (typeof q === 'number') return Number.isFinite(q) ? q : undefined;
  if (typeof q !== 'string') return undefined;
  const m = /^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]{0,2})\s*$/.exec(q);
  if (!m || !(m[2]! in SUFFIX)) return undefined;
  return Number(m[1]) * SUFFIX[m[2]!]!;
}

function roleResources(cluster: KDCluster, role: string): ResourceList {
  const r = (cluster.spec?.roles ?? []).find((x) => x?.id === role)?.resources;
  return { ...(r?.requests ?? {}), ...(r?.limits ?? {}) };
}

function servicesOfRole(app: KDApp, role: string): string[] {
  const rs = app.spec?.config?.roleServices ?? [];
  return rs.find((x) => x?.roleID === role)?.serviceIDs ?? [];
}

/** The part of configmeta that describes one cluster; `prefix` roots its references (embedded clusters). */
export function renderClusterSection(
  cluster: KDCluster,
  app: KDApp,
  members: Member[],
  opts: { prefix?: string[]; withAuthTokens?: boolean } = {},
): ClusterSection {
  const prefix = opts.prefix ?? [];
  const spec = app.spec ?? {};
  const distroId = spec.distroID ?? '';
  const appServices = new Map((spec.services ?? []).filter((s) => s && typeof s.id === 'string').map((s) => [s.id, s]));

  // Roles: those the cluster declares (in app order), plus any role a member pod carries.
  const declared = new Set(
    (cluster.spec?.roles ?? []).map((r) => r?.id).filter((x): x is string => typeof x === 'string'),
  );
  const appOrder = (spec.roles ?? []).map((r) => r?.id).filter((x): x is string => typeof x === 'string');
  const roles = [
    ...appOrder.filter((r) => declared.has(r)),
    ...[...declared].filter((r) => !appOrder.includes(r)).sort(),
  ];
  for (const m of members) if (!roles.includes(m.role)) roles.push(m.role);

  const services: ClusterSection['services'] = {};
  const roleEntries: Record<string, RoleEntry> = {};
  for (const role of roles) {
    const rm = members.filter((m) => m.role === role);
    const fqdns = rm.map((m) => m.fqdn);
    const res = roleResources(cluster, role);
    const svcEntries: Record<string, ServiceEntry> = {};
    for (const sid of servicesOfRole(app, role)) {
      const svc = appServices.get(sid);
      if (!svc) continue;
      const ep = svc.endpoint;
      const endpoints = ep
        ? fqdns.map((f) => (ep.urlScheme ? `${ep.urlScheme}://${f}:${ep.port}${ep.path ?? ''}` : `${f}:${ep.port}`))
        : [];
      svcEntries[sid] = {
        qualifiers: [],
        name: svc.label?.name ?? sid,
        id: sid,
        hostnames: ref(prefix, 'nodegroups', NODEGROUP, 'roles', role, 'hostnames'),
        global_id: `${NODEGROUP}_${role}_${sid}`,
        fqdns: ref(prefix, 'nodegroups', NODEGROUP, 'roles', role, 'fqdns'),
        exported_service: typeof svc.exported_service === 'string' ? svc.exported_service : '',
        endpoints,
        ...(opts.withAuthTokens ? { authToken: '' } : {}),
      };
      (services[sid] ??= {})[NODEGROUP] ??= {};
      services[sid]![NODEGROUP]![role] = ref(prefix, 'nodegroups', NODEGROUP, 'roles', role, 'services', sid);
    }
    roleEntries[role] = {
      services: svcEntries,
      node_ids: rm.map((m) => m.id),
      hostnames: fqdns,
      fqdns,
      fqdn_mappings: Object.fromEntries(rm.map((m) => [m.fqdn, m.id])),
      flavor: { storage: 'n/a', name: 'n/a', memory: memoryMiB(res.memory), description: 'n/a', cores: cores(res.cpu) },
    };
  }

  return {
    version: String(spec.configSchemaVersion ?? ''),
    services,
    nodegroups: {
      [NODEGROUP]: {
        roles: roleEntries,
        distro_id: distroId,
        catalog_entry_version: spec.version ?? '',
        config_metadata: spec.config?.configMeta ?? null,
      },
    },
    distros: { [distroId]: { [NODEGROUP]: ref(prefix, 'nodegroups', NODEGROUP) } },
    cluster: {
      name: cluster.metadata.name ?? '',
      isolated: false,
      id: cluster.metadata.uid ?? '',
      config_metadata: { [NODEGROUP]: ref(prefix, 'nodegroups', NODEGROUP, 'config_metadata') },
    },
  };
}

/** A connected cluster as another cluster's configmeta embeds it: one hop deep, no node, no tokens. */
export function renderEmbeddedCluster(c: ConnectedCluster): EmbeddedCluster {
  return {
    ...renderClusterSection(c.cluster, c.app, c.members, { prefix: ['connections', 'clusters', c.name] }),
    node: null,
    connections: { clusters: null, configmaps: null, secrets: null },
  };
}

function keptAnnotations(a: Record<string, string> | undefined): Record<string, string> | null {
  if (!a) return null;
  return Object.fromEntries(
    Object.entries(a)
      .filter(([k]) => !isDroppedAnnotation(k))
      .sort(([x], [y]) => (x < y ? -1 : 1)),
  );
}

export function renderConfigMapEntry(cm: ConfigMapLike): ConnectedObjectEntry {
  return {
    metadata: { name: cm.metadata.name ?? '' },
    labels: { ...(cm.metadata.labels ?? {}) },
    annotations: keptAnnotations(cm.metadata.annotations),
    data: cm.data ? { ...cm.data } : null,
  };
}

export function renderSecretEntry(s: SecretLike, opts: RenderOptions): ConnectedObjectEntry {
  const inline = opts.inlineSecretValues === true && s.data !== undefined;
  const keys = [...s.keys].sort();
  return {
    metadata: { name: s.metadata.name ?? '' },
    labels: { ...(s.metadata.labels ?? {}) },
    annotations: keptAnnotations(s.metadata.annotations) ?? {},
    data: Object.fromEntries(keys.map((k) => [k, inline ? (s.data![k] ?? '') : ''])),
    ...(inline ? {} : { redacted: true }),
  };
}

function groupBy<T extends { metadata: { name?: string; labels?: Record<string, string> } }>(
  items: T[],
  label: string,
  render: (t: T) => ConnectedObjectEntry,
): Record<string, ConnectedObjectEntry[]> {
  const out: Record<string, ConnectedObjectEntry[]> = {};
  const sorted = [...items].sort((a, b) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1));
  for (const item of sorted) {
    const group = item.metadata.labels?.[label];
    if (group === undefined) continue; // unlabeled objects are never rendered (fail closed)
    (out[group] ??= []).push(render(item));
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}

export function renderConnections(connected: ConnectedObjects, opts: RenderOptions = {}): ConfigMetaConnections {
  const clusters = [...connected.clusters].sort((a, b) => (a.name < b.name ? -1 : 1));
  return {
    clusters: Object.fromEntries(clusters.map((c) => [c.name, renderEmbeddedCluster(c)])),
    configmaps: groupBy(connected.configmaps, LABEL_CM_TYPE, renderConfigMapEntry),
    secrets: groupBy(connected.secrets, LABEL_SECRET_TYPE, (s) => renderSecretEntry(s, opts)),
  };
}

export function renderNode(app: KDApp, m: Member): NodeEntry {
  return {
    role_id: m.role,
    nodegroup_id: NODEGROUP,
    id: m.id,
    hostname: m.fqdn,
    fqdn: m.fqdn,
    domain: m.domain,
    distro_id: app.spec?.distroID ?? '',
    depends_on: {},
  };
}

/**
 * The configmeta of every member, rendered once for the cluster and specialised per pod (`node`).
 * Returns pod name → JSON text.
 */
export function renderConfigMetaForMembers(
  cluster: KDCluster,
  app: KDApp,
  members: Member[],
  connections: ConfigMetaConnections,
): Map<string, string> {
  const section = renderClusterSection(cluster, app, members, { withAuthTokens: true });
  const out = new Map<string, string>();
  for (const m of members) {
    const doc: ConfigMeta = { ...section, node: renderNode(app, m), connections };
    out.set(m.pod, JSON.stringify(doc));
  }
  return out;
}
