/**
 * configmeta: the JSON document every member pod gets, exactly as KubeDirector's configmeta.go renders
 * it — `version, services, nodegroups, distros, cluster, node, connections {clusters, configmaps, secrets}`,
 * map keys in Go's order, endpoint strings, flavor, empty roles and Secret encodings as KubeDirector has
 * them — except where KubeDirector is wrong (the differential test,
 * shared/test/configmeta-differential.test.ts, lists every difference):
 * - every member appears once (KubeDirector repeated the last member of a connected role);
 * - references inside an embedded connected cluster point into that cluster (all refkeys prefixed);
 * - of a Secret only its name, its type label and its keys are shown (an allow-list: an annotation or
 *   another label could quote a value); the values reach root in the pod through the private document
 *   (render-private-configmeta.ts), never this one;
 * - kubectl's last-applied-configuration annotation is never copied (for a Secret it holds the values).
 */
import type { Member } from './members.js';
import { cores, goBytes, goMap, memoryMiB } from './go-encoding.js';
import type {
  ClusterSection,
  ConfigMeta,
  ConfigMetaConnections,
  ConnectedCluster,
  ConnectedObjectEntry,
  ConnectedObjects,
  EmbeddedCluster,
  NodeEntry,
  RefKey,
  RenderOptions,
  RoleEntry,
  ServiceEntry,
} from './configmeta-types.js';
import { renderSpliced, type SplicedText } from './configmeta-splice.js';
import type { SpliceSection } from '../domain/guestconfig-layout.js';
import { isDroppedAnnotation } from './trim-object.js';
import {
  LABEL_CM_TYPE,
  LABEL_SECRET_TYPE,
  type ConfigMapLike,
  type Connections,
  type KDApp,
  type KDAppService,
  type KDCluster,
  type KDClusterRole,
  type SecretLike,
} from '../domain/types.js';

const NODEGROUP = '1';

const ref = (prefix: string[], ...path: string[]): RefKey => ({ bdvlibrefkey: [...prefix, ...path] });

function roleSpec(cluster: KDCluster, role: string): KDClusterRole | undefined {
  return (cluster.spec?.roles ?? []).find((x) => x?.id === role);
}

function servicesOfRole(app: KDApp, role: string): string[] {
  // Every roleServices entry of the role counts, in order, as KubeDirector reads them.
  return (app.spec?.config?.roleServices ?? [])
    .filter((x) => x?.roleID === role)
    .flatMap((x) => (Array.isArray(x.serviceIDs) ? x.serviceIDs : []));
}

/**
 * A service's endpoint strings, as KubeDirector forms them: `<urlScheme>://<fqdn>:<port>` (so
 * `"://host:port"` without a scheme), the endpoint's path never appended; `null` without a port.
 */
export function endpointsOf(svc: KDAppService, fqdns: string[]): string[] | null {
  const ep = svc.endpoint;
  if (!ep || ep.port === undefined || ep.port === null || fqdns.length === 0) return null;
  return fqdns.map((f) => `${ep.urlScheme ?? ''}://${f}:${ep.port}`);
}

/**
 * Block device paths of a member of `role`, as KubeDirector assigns them from the role's blockStorage:
 * `<pathPrefix><i>` for i below numDevices. Undefined when the role has none (the key is then left out).
 */
export function blockDevicePaths(cluster: KDCluster, role: string): string[] | undefined {
  const bs = roleSpec(cluster, role)?.blockStorage as { pathPrefix?: unknown; numDevices?: unknown } | undefined;
  if (!bs || typeof bs.pathPrefix !== 'string' || typeof bs.numDevices !== 'number') return undefined;
  const n = Math.max(0, Math.floor(bs.numDevices));
  return n > 0 ? Array.from({ length: n }, (_, i) => `${bs.pathPrefix as string}${i}`) : undefined;
}

/**
 * A role's `secret_keys` as KubeDirector renders them: name → value of the role's `secretKeys`. KubeDirector
 * stores them encrypted with the master key of its KubeDirectorConfig and decrypts them here, dropping
 * any it cannot decrypt; kd-connections reads no KubeDirectorConfig, so only entries with a plain `value`
 * (as submitted, when KubeDirector's webhook did not encrypt them) are rendered. Undefined when none.
 */
export function roleSecretKeys(cluster: KDCluster, role: string): Record<string, string> | undefined {
  const list = roleSpec(cluster, role)?.secretKeys;
  if (!Array.isArray(list)) return undefined;
  const entries: [string, string][] = [];
  for (const k of list as { name?: unknown; value?: unknown }[]) {
    if (typeof k?.name === 'string' && k.name !== '' && typeof k.value === 'string' && k.value !== '')
      entries.push([k.name, k.value]);
  }
  return entries.length > 0 ? goMap(entries) : undefined;
}

/**
 * The roles configmeta lists services for. A cluster's own document: the roles it declares plus any role
 * a member pod carries (KubeDirector lists a declared role's services even when it has no member yet).
 * An embedded (connected) cluster: only roles with members — KubeDirector reads those from the connected
 * cluster's status, which keeps a role while it has members (also while the last ones are going; here a
 * member whose pod is away still counts).
 */
function listedRoles(cluster: KDCluster, members: Member[], embedded: boolean): string[] {
  const declared = (cluster.spec?.roles ?? []).map((r) => r?.id).filter((x): x is string => typeof x === 'string');
  const roles = embedded ? declared.filter((r) => members.some((m) => m.role === r)) : declared;
  for (const m of members) if (!roles.includes(m.role)) roles.push(m.role);
  return roles;
}

/** The part of configmeta that describes one cluster; `prefix` roots its references (embedded clusters). */
export function renderClusterSection(
  cluster: KDCluster,
  app: KDApp,
  members: Member[],
  opts: { prefix?: string[]; secretKeys?: boolean; embedded?: boolean } = {},
): ClusterSection {
  const prefix = opts.prefix ?? [];
  const spec = app.spec ?? {};
  const distroId = spec.distroID ?? '';
  const appServices = (spec.services ?? []).filter((s) => s && typeof s.id === 'string');
  const byId = new Map(appServices.map((s) => [s.id, s]));
  const roles = listedRoles(cluster, members, opts.embedded ?? false);

  // services.<id>.1.<role>: app service order, every listed role whose roleServices name the service.
  const services: ClusterSection['services'] = {};
  for (const svc of appServices) {
    const withIt = roles.filter((r) => servicesOfRole(app, r).includes(svc.id));
    if (withIt.length === 0) continue;
    services[svc.id] = {
      [NODEGROUP]: goMap(withIt.map((r) => [r, ref(prefix, 'nodegroups', NODEGROUP, 'roles', r, 'services', svc.id)])),
    };
  }

  // nodegroups.1.roles.<role>: only roles with members (KubeDirector leaves empty roles out).
  const roleEntries: [string, RoleEntry][] = [];
  for (const role of roles) {
    const rm = members.filter((m) => m.role === role);
    if (rm.length === 0) continue;
    const fqdns = rm.map((m) => m.fqdn);
    const limits = roleSpec(cluster, role)?.resources?.limits ?? {};
    const secretKeys = opts.secretKeys ? roleSecretKeys(cluster, role) : undefined;
    const svcEntries: [string, ServiceEntry][] = [];
    for (const sid of servicesOfRole(app, role)) {
      const svc = byId.get(sid);
      if (!svc) continue;
      svcEntries.push([
        sid,
        {
          qualifiers: [],
          name: svc.label?.name ?? '',
          id: sid,
          hostnames: ref(prefix, 'nodegroups', NODEGROUP, 'roles', role, 'hostnames'),
          global_id: `${NODEGROUP}_${role}_${sid}`,
          fqdns: ref(prefix, 'nodegroups', NODEGROUP, 'roles', role, 'fqdns'),
          exported_service: typeof svc.exported_service === 'string' ? svc.exported_service : '',
          endpoints: endpointsOf(svc, fqdns),
          // KubeDirector's token is one it generated itself; none exists here, and none is invented.
          authToken: '',
        },
      ]);
    }
    roleEntries.push([
      role,
      {
        services: goMap(svcEntries),
        node_ids: rm.map((m) => m.id),
        hostnames: fqdns,
        fqdns,
        fqdn_mappings: goMap(rm.map((m) => [m.fqdn, m.id])),
        flavor: {
          storage: 'n/a',
          name: 'n/a',
          memory: memoryMiB(limits.memory),
          description: 'n/a',
          cores: cores(limits.cpu),
        },
        ...(secretKeys ? { secret_keys: secretKeys } : {}),
      },
    ]);
  }

  return {
    version: String(spec.configSchemaVersion ?? 0),
    services: goMap(Object.entries(services)),
    nodegroups: {
      [NODEGROUP]: {
        roles: goMap(roleEntries),
        distro_id: distroId,
        catalog_entry_version: spec.version ?? '',
        config_metadata: spec.config?.configMeta ? goMap(Object.entries(spec.config.configMeta)) : null,
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

/**
 * A connected cluster as another cluster's configmeta embeds it: one hop deep, no node. Its services keep
 * KubeDirector's `authToken` key (empty: no token exists here).
 */
export function renderEmbeddedCluster(c: ConnectedCluster, opts: { secretKeys?: boolean } = {}): EmbeddedCluster {
  return {
    ...renderClusterSection(c.cluster, c.app, c.members, {
      ...opts,
      prefix: ['connections', 'clusters', c.name],
      embedded: true,
    }),
    node: null,
    connections: { clusters: null, configmaps: null, secrets: null },
  };
}

function keptAnnotations(a: Record<string, string> | undefined): Record<string, string> | null {
  if (!a) return null;
  return goMap(Object.entries(a).filter(([k]) => !isDroppedAnnotation(k)));
}

const goBytesMap = (m: Record<string, string>): Record<string, string> =>
  goMap(Object.entries(m).map(([k, v]) => [k, goBytes(v)]));

// Entries are Go maps in KubeDirector, so their keys come out sorted: annotations, data, labels, metadata.
export function renderConfigMapEntry(cm: ConfigMapLike): ConnectedObjectEntry {
  return {
    annotations: keptAnnotations(cm.metadata.annotations),
    data: cm.data ? goMap(Object.entries(cm.data)) : null,
    labels: goMap(Object.entries(cm.metadata.labels ?? {})),
    metadata: { name: cm.metadata.name ?? '' },
  };
}

/**
 * A connected Secret in the public document: name, type label and keys, values empty and marked
 * redacted. Name and label values are Go []byte in KubeDirector's Secret entry, hence base64.
 */
export function renderSecretEntry(s: SecretLike): ConnectedObjectEntry {
  const keys = [...s.keys].sort();
  const type = s.metadata.labels?.[LABEL_SECRET_TYPE];
  return {
    annotations: {},
    data: Object.fromEntries(keys.map((k) => [k, ''])),
    labels: goBytesMap(type === undefined ? {} : { [LABEL_SECRET_TYPE]: type }),
    metadata: { name: goBytes(s.metadata.name ?? '') },
    redacted: true,
  };
}

/**
 * Entries grouped by their type label, each group in the order the cluster's spec lists the objects
 * (configcli merges a group in order, the last one winning, so the order decides which value an app
 * reads). `order` is that spec list; objects it does not name follow, by name.
 */
function groupBy<T extends { metadata: { name?: string; labels?: Record<string, string> } }>(
  items: T[],
  label: string,
  render: (t: T) => ConnectedObjectEntry,
  order: string[] | undefined,
): Record<string, ConnectedObjectEntry[]> {
  const out: [string, ConnectedObjectEntry[]][] = [];
  const at = (t: T) => {
    const i = (order ?? []).indexOf(t.metadata.name ?? '');
    return i < 0 ? Number.MAX_SAFE_INTEGER : i;
  };
  const byName = (a: T, b: T) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1);
  for (const item of [...items].sort((a, b) => at(a) - at(b) || byName(a, b))) {
    const group = item.metadata.labels?.[label];
    if (group === undefined) continue; // unlabeled objects are never rendered (fail closed)
    const list = out.find(([g]) => g === group)?.[1];
    if (list) list.push(render(item));
    else out.push([group, [render(item)]]);
  }
  return goMap(out);
}

/** `order`: the cluster's spec.connections, which fixes the order of ConfigMaps (and Secrets) of one type. */
export function renderConnections(
  connected: ConnectedObjects,
  opts: RenderOptions = {},
  order?: Connections,
): ConfigMetaConnections {
  return {
    clusters: goMap(
      connected.clusters.map((c) => [c.name, renderEmbeddedCluster(c, { secretKeys: opts.secretKeys === true })]),
    ),
    configmaps: groupBy(connected.configmaps, LABEL_CM_TYPE, renderConfigMapEntry, order?.configmaps),
    secrets: groupBy(connected.secrets, LABEL_SECRET_TYPE, opts.secretEntry ?? renderSecretEntry, order?.secrets),
  };
}

export function renderNode(cluster: KDCluster, app: KDApp, m: Member): NodeEntry {
  const paths = blockDevicePaths(cluster, m.role);
  return {
    role_id: m.role,
    nodegroup_id: NODEGROUP,
    id: m.id,
    hostname: m.fqdn,
    fqdn: m.fqdn,
    domain: m.domain,
    distro_id: app.spec?.distroID ?? '',
    depends_on: {},
    ...(paths ? { block_device_paths: paths } : {}),
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
  const out = new Map<string, string>();
  for (const [pod, d] of renderSplicedConfigMetaForMembers(cluster, app, members, connections)) out.set(pod, d.text);
  return out;
}

/**
 * As renderConfigMetaForMembers, with the splice (configmeta-splice.ts) naming the sections the private
 * Secret of `splice.version` replaces inside the pod.
 */
export function renderSplicedConfigMetaForMembers(
  cluster: KDCluster,
  app: KDApp,
  members: Member[],
  connections: ConfigMetaConnections,
  splice: { sections: Partial<Record<SpliceSection, number>>; version: string | undefined } = {
    sections: {},
    version: undefined,
  },
): Map<string, SplicedText> {
  const section = renderClusterSection(cluster, app, members);
  const out = new Map<string, SplicedText>();
  for (const m of members) {
    const doc: ConfigMeta = { ...section, node: renderNode(cluster, app, m), connections };
    out.set(m.pod, renderSpliced(doc as unknown as Record<string, unknown>, splice.sections, splice.version));
  }
  return out;
}
