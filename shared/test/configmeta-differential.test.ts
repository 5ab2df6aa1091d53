/**
 * Differential test: for a table of clusters, every member's configmeta as kd-connections renders it
 * (resolve → render, the reconciler's path) is compared field by field — key order included, since
 * configcli lists keys in file order — with the document KubeDirector's rules give for the same objects
 * (kubedirector-reference.ts). Two views are compared: what any process reads (the public document) and
 * what configcli gives root (the private document merged over it, configcli's shallow dict.update).
 * Every difference must match one entry of ALLOWED (kubedirector-differences.ts) for that view, and every entry must be needed
 * by some case (so the list never goes stale).
 */
import { describe, expect, it } from '@jest/globals';
import { membersOf } from '../src/configmeta/members.js';
import { renderConfigMetaForMembers, renderConnections } from '../src/configmeta/render-configmeta.js';
import { renderPrivateFiles } from '../src/configmeta/render-private-configmeta.js';
import { resolveConnections } from '../src/plan/resolve-connections.js';
import type { ConfigMapLike, Connections, KDApp, KDCluster, KDClusterRole } from '../src/domain/types.js';
import type { Json } from './configcli-reader.js';
import {
  MemoryWorld,
  NS,
  SYSTEM_NS,
  app,
  cluster,
  configMap,
  exampleApps,
  exampleDocs,
  pod,
  secret,
} from './fixtures.js';
import { ALLOWED, LAST_APPLIED, diff, type View } from './kubedirector-differences.js';
import { kubedirectorConfigmeta, type KdClusterState, type KdMember, type KdWorld } from './kubedirector-reference.js';

// ---- the table ----------------------------------------------------------------------------------

interface ClusterCase {
  name: string;
  app: string;
  roles: KDClusterRole[];
  /** role → [pod, nodeID] in KubeDirector's status order (creation). */
  members: Record<string, [string, number][]>;
  lastNodeID: number;
  connections?: Connections;
}

interface SecretCase {
  name: string;
  type: string;
  plain: Record<string, string>;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

interface Case {
  title: string;
  apps: KDApp[];
  clusters: ClusterCase[];
  configMaps: ConfigMapLike[];
  secrets: SecretCase[];
  /** The clusters whose members' documents are compared. */
  own: string[];
}

const service = (c: string) => `kdhs-${c}`;

/** Members numbered as KubeDirector does when it creates a cluster: role by role, from 1. */
function freshMembers(name: string, roles: KDClusterRole[]): Pick<ClusterCase, 'members' | 'lastNodeID'> {
  let last = 0;
  const members: ClusterCase['members'] = {};
  roles.forEach((r, ri) => {
    members[r.id] = Array.from({ length: r.members ?? 0 }, (_, i) => [`kdss-${name}-${ri}-${i}`, ++last]);
  });
  return { members, lastNodeID: last };
}

function examplesCase(): Case {
  const clusters = exampleDocs('40-clusters.yaml').map((d) => {
    const c = d as unknown as KDCluster;
    const roles = c.spec.roles ?? [];
    return {
      name: c.metadata.name!,
      app: c.spec.app,
      roles,
      connections: c.spec.connections,
      ...freshMembers(c.metadata.name!, roles),
    };
  });
  const configMaps = exampleDocs('20-configmaps.yaml').map((d) => {
    const m = d as unknown as ConfigMapLike;
    return configMap(m.metadata.name!, m.metadata.labels?.['kubedirector.hpe.com/cmType'], m.data);
  });
  const secrets = exampleDocs('30-secrets.yaml').map((d) => {
    const s = d as unknown as {
      metadata: { name: string; labels: Record<string, string> };
      stringData: Record<string, string>;
    };
    return { name: s.metadata.name, type: s.metadata.labels['kubedirector.hpe.com/secretType']!, plain: s.stringData };
  });
  return { title: 'examples/', apps: exampleApps(), clusters, configMaps, secrets, own: clusters.map((c) => c.name) };
}

/** KubeDirector example-catalog shapes: several roles, scaled members, ids past 9, every endpoint kind. */
function catalogCase(): Case {
  const spark = app('spark-221', {
    distroID: 'bluedata/spark221e2',
    version: '2.7',
    configSchemaVersion: 7,
    roles: [{ id: 'controller' }, { id: 'worker' }, { id: 'jupyter' }, { id: 'edge' }],
    services: [
      { id: 'ssh', label: { name: 'SSH' }, endpoint: { port: 22, isDashboard: false } },
      { id: 'spark', label: { name: 'Spark master' }, endpoint: { port: 7077, urlScheme: 'spark' } },
      {
        id: 'spark-master-ui',
        label: { name: 'Spark master UI' },
        endpoint: { port: 8080, urlScheme: 'http', path: '/ui', isDashboard: true },
      },
      { id: 'jupyter-nb', label: { name: 'Jupyter' }, endpoint: { port: 8888, urlScheme: 'http', hasAuthToken: true } },
      {
        id: 'livy',
        label: { name: 'Livy' },
        exported_service: 'livy',
        endpoint: { port: 8998, urlScheme: 'http', path: '/sessions' },
      },
      { id: 'metrics', label: { name: 'Metrics' } },
    ],
    config: {
      configMeta: { zeta: '1', alpha: '2' },
      roleServices: [
        { roleID: 'controller', serviceIDs: ['ssh', 'spark', 'spark-master-ui', 'metrics'] },
        { roleID: 'worker', serviceIDs: ['ssh', 'metrics'] },
        { roleID: 'jupyter', serviceIDs: ['ssh', 'jupyter-nb'] },
        { roleID: 'edge', serviceIDs: ['ssh', 'livy'] },
      ],
      selectedRoles: ['controller', 'worker', 'jupyter', 'edge'],
    },
  });
  const kafka = app('kafka-broker', {
    distroID: 'bluedata/kafka',
    version: '1.0',
    roles: [{ id: 'zookeeper' }, { id: 'broker' }, { id: 'rest' }],
    services: [
      { id: 'zk', label: { name: 'ZooKeeper' }, endpoint: { port: 2181 } },
      { id: 'kafka', label: { name: 'Kafka' }, endpoint: { port: 9092, urlScheme: 'kafka' } },
    ],
    config: {
      roleServices: [
        { roleID: 'zookeeper', serviceIDs: ['zk'] },
        { roleID: 'broker', serviceIDs: ['kafka'] },
        { roleID: 'rest', serviceIDs: ['kafka'] },
      ],
    },
  });
  // Workers scaled 12 → 9 → 11 (a StatefulSet drops its highest ordinals): ids 2..13 given, ordinals 9..11
  // gone with ids 11..13, ordinals 9 and 10 back as 14 and 15 (ids past 9, gaps).
  const workerIds = [2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 15];
  const sparkRoles: KDClusterRole[] = [
    {
      id: 'controller',
      members: 1,
      resources: { limits: { cpu: '1500m', memory: '1.5Gi' } },
      // As submitted (plain value) and as KubeDirector's webhook leaves one (encrypted with its master key).
      secretKeys: [
        { name: 'admin-password', value: 'adm1n' },
        { name: 'legacy-token', encryptedValue: 'q83vEjRWeJA=' },
      ],
    },
    { id: 'worker', members: workerIds.length, resources: { requests: { cpu: '2', memory: '4Gi' } } },
    { id: 'jupyter', members: 0 },
    {
      id: 'edge',
      members: 2,
      resources: { limits: { cpu: '4', memory: '1G' } },
      blockStorage: { pathPrefix: '/dev/kdblock', numDevices: 2, storageClassName: 'block' },
    },
  ];
  const sparkCluster: ClusterCase = {
    name: 'spark',
    app: 'spark-221',
    roles: sparkRoles,
    members: {
      controller: [['kdss-ctl-0', 1]],
      worker: workerIds.map((id, i) => [`kdss-wrk-${i}`, id]),
      jupyter: [],
      edge: [
        ['kdss-edge-0', 16],
        ['kdss-edge-1', 17],
      ],
    },
    lastNodeID: 17,
    connections: {
      clusters: ['kafka'],
      configmaps: ['spark-site', 'hive-site', 'model-a', 'core-site'],
      secrets: ['db-b', 'db-a'],
    },
  };
  const kafkaCluster: ClusterCase = {
    name: 'kafka',
    app: 'kafka-broker',
    roles: [
      {
        id: 'zookeeper',
        members: 3,
        resources: { limits: { cpu: '1', memory: '2Gi' } },
        secretKeys: [{ name: 'zk-digest', value: 'super:xyz' }],
      },
      { id: 'broker', members: 3, resources: { limits: { cpu: '2', memory: '8Gi' } } },
      // No members: its services are listed in kafka's own document, not where spark embeds kafka.
      { id: 'rest', members: 0 },
    ],
    members: {
      zookeeper: [
        ['kdss-zk-0', 1],
        ['kdss-zk-1', 2],
        ['kdss-zk-2', 3],
      ],
      broker: [
        ['kdss-kb-0', 4],
        ['kdss-kb-1', 5],
        ['kdss-kb-2', 11],
      ],
    },
    lastNodeID: 11,
  };
  const annotations = { [LAST_APPLIED]: '{"kind":"ConfigMap"}', 'example.com/owner': 'team-a' };
  return {
    title: 'catalog-shaped spark + kafka',
    apps: [spark, kafka],
    clusters: [sparkCluster, kafkaCluster],
    configMaps: [
      configMap('core-site', 'hadoop-config', { 'fs.defaultFS': 'hdfs://nn:8020' }),
      configMap('hive-site', 'hadoop-config', { 'hive.metastore.uris': 'thrift://hms:9083' }, { annotations }),
      configMap('spark-site', 'hadoop-config', { 'spark.master': 'k8s' }, { labels: { team: 'b', app: 'x' } }),
      configMap('model-a', 'model', undefined),
    ],
    secrets: [
      { name: 'db-a', type: 'db', plain: { user: 'a', password: 'pa' } },
      {
        name: 'db-b',
        type: 'db',
        plain: { user: 'b' },
        labels: { tier: 'gold' },
        annotations: { 'example.com/rotated': '2024' },
      },
    ],
    own: ['spark', 'kafka'],
  };
}

// ---- both sides from one case ---------------------------------------------------------------------

function kdWorld(c: Case): KdWorld {
  const apps = new Map(c.apps.map((a) => [a.metadata.name!, a]));
  const clusters: Record<string, KdClusterState> = {};
  for (const cc of c.clusters) {
    const kc = cluster(cc.name, cc.app, {
      roles: cc.roles,
      ...(cc.connections ? { connections: cc.connections } : {}),
    });
    clusters[cc.name] = {
      cluster: kc,
      app: apps.get(cc.app)!,
      clusterService: service(cc.name),
      // KubeDirector's status keeps a role only while it has members (roles.go handleRoleCreate/Delete).
      roles: cc.roles
        .filter((r) => (cc.members[r.id] ?? []).length > 0)
        .map((r) => ({
          id: r.id,
          members: (cc.members[r.id] ?? []).map(([pod, nodeID]): KdMember => {
            const bs = r.blockStorage as { pathPrefix: string; numDevices: number } | undefined;
            return {
              pod,
              nodeID,
              ...(bs
                ? { blockDevicePaths: Array.from({ length: bs.numDevices }, (_, i) => `${bs.pathPrefix}${i}`) }
                : {}),
            };
          }),
        })),
    };
  }
  return {
    namespace: NS,
    clusters,
    configMaps: Object.fromEntries(c.configMaps.map((m) => [m.metadata.name!, m])),
    secrets: Object.fromEntries(
      c.secrets.map((s) => {
        // KubeDirector reads the whole Secret: data as the API server returns it (base64).
        const { metadata } = secret(s.name, s.type, s.plain, { labels: s.labels, annotations: s.annotations });
        const data = Object.fromEntries(
          Object.entries(s.plain).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
        );
        return [s.name, { metadata, data }];
      }),
    ),
  };
}

/** pod → the document each view reads: the public one, and root's (private merged over it, as configcli does). */
async function kdConnectionsDocs(c: Case, own: string): Promise<Map<string, Record<View, Json>>> {
  const world = new MemoryWorld({
    apps: c.apps,
    configMaps: c.configMaps,
    // As the reconciler's cache holds them: with the values (used for the private document only).
    secrets: c.secrets.map((s) =>
      secret(s.name, s.type, s.plain, { labels: s.labels, annotations: s.annotations, withValues: true }),
    ),
  });
  for (const cc of c.clusters) {
    const all = Object.entries(cc.members).flatMap(([role, ms]) => ms.map(([p, id]) => ({ role, p, id })));
    world.addCluster(
      cluster(cc.name, cc.app, {
        roles: cc.roles,
        ...(cc.connections ? { connections: cc.connections } : {}),
        status: {
          members: { total: all.length, ready: all.length, synced: 0 },
          lastNodeID: cc.lastNodeID,
          nodeIDs: Object.fromEntries(all.map((m) => [m.p, m.id])),
        },
      }),
    );
    for (const m of all) world.addPod(pod(m.p, cc.name, m.role, { hostname: m.p, subdomain: service(cc.name) }));
  }
  const self = world.clusters.get(`${NS}/${own}`)!;
  const ownApp = world.apps.get(`${NS}/${self.spec.app}`)!;
  const resolved = await resolveConnections(self, { app: ownApp, namespace: NS }, world, {
    systemNamespace: SYSTEM_NS,
  });
  const members = membersOf(self, ownApp, await world.podsOf(NS, own));
  const docs = renderConfigMetaForMembers(
    self,
    ownApp,
    members,
    renderConnections(resolved.connected, {}, self.spec.connections),
  );
  const priv = renderPrivateFiles(resolved.connected, self.spec.connections, { cluster: self, app: ownApp, members });
  const views = new Map<string, Record<View, Json>>();
  for (const [podName, text] of docs) {
    const root = JSON.parse(text) as Record<string, Json>;
    if (priv) Object.assign(root, JSON.parse(priv.platform), JSON.parse(priv.configmeta));
    views.set(podName, { 'non-root': JSON.parse(text) as Json, root });
  }
  return views;
}

// ---- the test -----------------------------------------------------------------------------------

const CASES = [examplesCase(), catalogCase()];
const used = new Set<string>();

describe('configmeta: kd-connections vs KubeDirector rules, field by field', () => {
  for (const c of CASES) {
    it(c.title, async () => {
      const kd = kdWorld(c);
      let compared = 0;
      for (const own of c.own) {
        const docs = await kdConnectionsDocs(c, own);
        const expectedPods = kd.clusters[own]!.roles.flatMap((r) => r.members.map((m) => m.pod)).sort();
        expect([...docs.keys()].sort()).toEqual(expectedPods);
        for (const [podName, views] of docs) {
          for (const view of ['non-root', 'root'] as const) {
            const unexplained: string[] = [];
            for (const d of diff(kubedirectorConfigmeta(kd, own, podName), views[view])) {
              const allowed = ALLOWED.find((a) => (a.views ?? [view]).includes(view) && a.matches(d));
              if (allowed) used.add(allowed.name);
              else
                unexplained.push(
                  `${view} ${d.path.join('.')}: KubeDirector ${JSON.stringify(d.kd)}, ours ${JSON.stringify(d.ours)}`,
                );
            }
            expect(unexplained).toEqual([]);
            compared++;
          }
        }
      }
      expect(compared).toBeGreaterThan(0);
    });
  }

  it('every allowed difference is needed by some case (the list is not stale)', () => {
    expect(ALLOWED.map((a) => a.name).filter((n) => !used.has(n))).toEqual([]);
  });

  it('the comparison catches a difference that is not allowed', () => {
    const kd: Json = { nodegroups: { '1': { roles: { w: { node_ids: ['1', '2'] } } } }, b: 1, a: 2 };
    const ours: Json = { nodegroups: { '1': { roles: { w: { node_ids: ['2', '1'] } } } }, a: 2, b: 1 };
    const found = diff(kd, ours);
    expect(found.map((d) => d.path.join('.'))).toEqual(['nodegroups.1.roles.w.node_ids']);
    expect(found.filter((d) => !ALLOWED.some((a) => a.matches(d)))).toHaveLength(1);
    expect(diff({ b: 1, a: 2 }, { a: 2, b: 1 }).map((d) => d.path.join('.'))).toEqual(['<key order>']);
  });
});
