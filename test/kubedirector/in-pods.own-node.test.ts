/**
 * The real KubeDirector operator delivering into real containers: a control plane and a node of this
 * file's own (KubeDirector's CRDs are cluster-scoped and share names with the project's, so it cannot
 * share the suite's API server; a kubelet joins one API server), the loopback guard first, then
 * KubeDirector managing a kdcluster whose every role runs the configcli test image.
 *
 * How KubeDirector is made to deliver without downloading anything: it writes
 * /etc/guestconfig/configmeta.json only into members of a role WITH a config package. Before fetching the
 * package it checks `test -f "/opt/guestconfig/*\/startscript"` — an argv with no shell, so the `*` is a
 * literal directory name — and skips the download when that file exists. The role mounts a Secret (its
 * own `secret` field) holding a no-op startscript at /opt/guestconfig/* with mode 0755, so the package
 * URL is never dialed and KubeDirector goes on to its configure run (`sh -c '/opt/guestconfig/*\/startscript
 * --configure'`, where the shell glob finds the same file). configcli is already in the image
 * (/usr/bin/configcli), so KubeDirector injects none.
 *
 * Project `own-node` (jest.config.js), run alone — one kubelet per machine; .ci/run does it after npm test:
 *   KD_TEST_OWN_NODE=1 KD_TEST_NODE=0 flock /tmp/kd-node.lock npm run test:jest -- --selectProjects own-node
 */
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { startNode, type NodeHandle } from '../controlplane/node.js';
import { importImage } from '../controlplane/containerd.js';
import { CONFIGCLI_IMAGE, catIn, configcliImage, configcliValue } from '../images/configcli-image.js';
import { useDedicatedControlPlane } from '../support/dedicated-controlplane.js';
import {
  installKubeDirector,
  installLoopbackGuard,
  kubedirectorBinary,
  startKubeDirector,
  type KubeDirectorProcess,
} from '../support/kubedirector-operator.js';
import { eventually, ok } from '../support/processes.js';
import { isLoopback, samplePeers } from '../support/socket-peers.js';
import { ctrBinary } from '../node/node-support.js';
import { kubedirectorConfigmeta, type KdWorld } from '../../shared/test/kubedirector-reference.js';
import type { Json } from '../../shared/test/configcli-reader.js';
import type { KDApp, KDCluster } from '../../shared/src/types.js';

// KubeDirector's reconcile passes and pod starts take tens of seconds on a loaded 2-core machine.
jest.setTimeout(600_000);

const env = useDedicatedControlPlane();
let node: NodeHandle | undefined;
let kd: KubeDirectorProcess | undefined;
let sampler: { stop(): string[] } | undefined;

const APP = 'kd-configcli';
const CLUSTER = 'kd-one';
const STARTSCRIPT_SECRET = 'kd-tests-startscript';

const kdApp = {
  apiVersion: 'kubedirector.hpe.com/v1beta1',
  kind: 'KubeDirectorApp',
  metadata: { name: APP },
  spec: {
    label: { name: 'configcli test app', description: 'every role runs the real configcli on Debian' },
    distroID: 'kd-tests/configcli',
    version: '1.0',
    configSchemaVersion: 7,
    defaultImageRepoTag: CONFIGCLI_IMAGE,
    // Never fetched: the startscript is already in place (see the file comment).
    defaultConfigPackage: { packageURL: 'file:///kd-tests/never-fetched.tgz', useNewSetupLayout: false },
    systemdRequired: false,
    // One service with a port: a member of an app with none gets Service "n/a" (zeroPortsService), and
    // KubeDirector then cannot shrink its role — deleting Service "n/a" fails, members stay `deleting`.
    services: [{ id: 'svc', label: { name: 'svc' }, endpoint: { port: 8080, isDashboard: false } }],
    roles: [
      { id: 'main', cardinality: '1' },
      { id: 'worker', cardinality: '0+' },
    ],
    config: {
      selectedRoles: ['main', 'worker'],
      roleServices: [
        { roleID: 'main', serviceIDs: ['svc'] },
        { roleID: 'worker', serviceIDs: ['svc'] },
      ],
    },
  },
};

const role = (id: string, members: number) => ({
  id,
  members,
  resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
  secret: { name: STARTSCRIPT_SECRET, defaultMode: 0o755, mountPath: '/opt/guestconfig/*' },
});

const OTHER = 'kd-two';
const CM = 'kd-cm';
const SECRET = 'kd-secret';
const kdCluster = (workers: number, connections?: object, name = CLUSTER) => ({
  apiVersion: 'kubedirector.hpe.com/v1beta1',
  kind: 'KubeDirectorCluster',
  metadata: { name },
  spec: {
    app: APP,
    serviceType: 'ClusterIP',
    roles: [role('main', 1), role('worker', workers)],
    ...(connections ? { connections } : {}),
  },
});

interface KdClusterStatus {
  state?: string;
  roles?: { id: string; members?: { pod: string; nodeID: number; state: string }[] }[];
}

async function clusterStatus(): Promise<KdClusterStatus> {
  const r = ok(await env.kubectl(['get', 'kubedirectorcluster', CLUSTER, '-o', 'json']), 'get the kdcluster');
  return (JSON.parse(r.stdout) as { status?: KdClusterStatus }).status ?? {};
}

/** Waits until KubeDirector reports the cluster configured with `n` members, all configured. */
async function configuredMembers(n: number): Promise<{ pod: string; nodeID: number; role: string }[]> {
  return eventually(
    `kdcluster ${CLUSTER} configured with ${n} members`,
    async () => {
      const s = await clusterStatus();
      const members = (s.roles ?? []).flatMap((r) => (r.members ?? []).map((m) => ({ ...m, role: r.id })));
      if (s.state !== 'configured' || members.length !== n || members.some((m) => m.state !== 'configured'))
        return undefined;
      return members.map(({ pod, nodeID, role }) => ({ pod, nodeID, role }));
    },
    240_000,
    1000,
  ).catch(async (e: Error) => {
    throw new Error(`${e.message}\nstatus: ${JSON.stringify(await clusterStatus())}\n${kd?.output().slice(-4000)}`);
  });
}

beforeAll(async () => {
  const built = await kubedirectorBinary();
  await installLoopbackGuard(env);
  node = await startNode(env.cp.info(), { taint: false });
  await node.ready;
  await importImage(ctrBinary(), node.containerdSocket, configcliImage().archive);
  await installKubeDirector(env, built.deploy);
  sampler = samplePeers(() => [env.cp.pids().apiserver, kd?.pid].filter((p): p is number => p !== undefined));
  kd = await startKubeDirector(env, built.bin);
  ok(
    await env.kubectl([
      'create',
      'secret',
      'generic',
      STARTSCRIPT_SECRET,
      '--from-literal=startscript=#!/bin/bash\nexit 0\n',
    ]),
    'create the startscript Secret',
  );
  ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdApp) }), 'apply the kdapp');
}, 900_000);

afterAll(async () => {
  sampler?.stop();
  await env.kubectl(['delete', 'kubedirectorcluster', '--all', '--wait=false']).catch(() => undefined);
  await kd?.stop();
  const traces = await node?.stop();
  if (traces?.length) throw new Error(`the node left traces: ${traces.join('; ')}`);
}, 180_000);

describe('KubeDirector delivers configmeta.json into configcli containers', () => {
  test('one member: its own document, read with cat and with the real configcli', async () => {
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdCluster(0)) }), 'apply the kdcluster');
    const [m] = await configuredMembers(1);
    const where = { pod: m!.pod, namespace: env.namespace };
    const doc = JSON.parse(await catIn(env, where, '/etc/guestconfig/configmeta.json')) as {
      node: { role_id: string; nodegroup_id: string; hostname: string };
      cluster: { name: string };
    };
    expect(doc.node.role_id).toBe('main');
    expect(doc.cluster.name).toBe(CLUSTER);
    expect(await configcliValue(env, where, 'node.role_id')).toBe('main');
    expect(await configcliValue(env, where, 'cluster.name')).toBe(CLUSTER);
    await untilPortMatches([CLUSTER]);
  });

  test('members 1 → 4 → 2: after each step every member holds what the port renders', async () => {
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdCluster(3)) }), 'scale the workers to 3');
    const four = await configuredMembers(4);
    await untilPortMatches([CLUSTER]);
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdCluster(1)) }), 'scale the workers to 1');
    const two = await configuredMembers(2);
    await untilPortMatches([CLUSTER]);
    // KubeDirector keeps node ids: the remaining members are members of the 4 with the same ids.
    for (const m of two) expect(four).toContainEqual(m);
    for (const m of two) expect(await configcliValue(env, inPod(m.pod), 'node.role_id')).toBe(m.role);
  });

  test('connections to a cluster (one hop), a ConfigMap and a Secret', async () => {
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdCluster(0, undefined, OTHER)) }), OTHER);
    ok(await env.kubectl(['create', 'configmap', CM, '--from-literal=greeting=hello', '--from-literal=n=1']), CM);
    ok(await env.kubectl(['label', 'configmap', CM, 'kubedirector.hpe.com/cmType=settings']), `label ${CM}`);
    ok(await env.kubectl(['create', 'secret', 'generic', SECRET, '--from-literal=password=s3cr3t']), SECRET);
    ok(await env.kubectl(['label', 'secret', SECRET, 'kubedirector.hpe.com/secretType=creds']), `label ${SECRET}`);
    const connections = { clusters: [OTHER], configmaps: [CM], secrets: [SECRET] };
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdCluster(1, connections)) }), 'connect');
    const members = await configuredMembers(2);
    await untilPortMatches([CLUSTER, OTHER], (doc, c) => c !== CLUSTER || JSON.stringify(doc).includes('"settings"'));
    for (const m of members) {
      expect(await configcliValue(env, inPod(m.pod), 'connections.clusters')).toBe(OTHER);
      expect(await configcliValue(env, inPod(m.pod), 'connections.configmaps')).toBe('settings');
      expect(await configcliValue(env, inPod(m.pod), 'connections.secrets')).toBe('creds');
    }
  });

  test('a cycle: the connected cluster connects back', async () => {
    ok(
      await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdCluster(0, { clusters: [CLUSTER] }, OTHER)) }),
      'connect kd-two back to kd-one',
    );
    await untilPortMatches([CLUSTER, OTHER], (doc, cluster) =>
      cluster === OTHER ? JSON.stringify(doc).includes(`"${CLUSTER}"`) : true,
    );
  });

  test('an edit of each connected object is re-delivered', async () => {
    ok(
      await env.kubectl(['patch', 'configmap', CM, '--type=merge', '-p', JSON.stringify({ data: { greeting: 'hi' } })]),
      'edit the ConfigMap',
    );
    const pw = Buffer.from('changed').toString('base64');
    ok(
      await env.kubectl(['patch', 'secret', SECRET, '--type=merge', '-p', JSON.stringify({ data: { password: pw } })]),
      'edit the Secret',
    );
    await untilPortMatches([CLUSTER, OTHER], (doc, cluster) =>
      cluster === CLUSTER ? JSON.stringify(doc).includes('"hi"') && JSON.stringify(doc).includes(pw) : true,
    );
  });

  test('no socket of KubeDirector or the API server ever reached an address off loopback', () => {
    const seen = sampler!.stop();
    sampler = undefined;
    expect(seen.some((s) => s.startsWith(`${kd!.pid} `))).toBe(true);
    expect(seen.filter((s) => !isLoopback(s.split(' ')[1]!))).toEqual([]);
  });
});

/** Field-by-field differences (objects by key, key order included; other values whole), as `path: real ≠ port`. */
function jsonDiff(a: Json | undefined, b: Json | undefined, path = ''): string[] {
  const isObj = (v: Json | undefined): v is { [k: string]: Json } =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    const out = keys.flatMap((k) => jsonDiff(a[k], b[k], `${path}.${k}`));
    const order = (o: object, other: object) =>
      Object.keys(o)
        .filter((k) => k in other)
        .join(',');
    if (out.length === 0 && order(a, b) !== order(b, a))
      out.push(`${path} <key order>: ${order(a, b)} ≠ ${order(b, a)}`);
    return out;
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [`${path}: ${JSON.stringify(a)} ≠ ${JSON.stringify(b)}`];
}

const inPod = (pod: string) => ({ pod, namespace: env.namespace });

interface KdObject {
  spec: object;
  status?: { clusterService?: string; roles?: { id: string; members?: { pod: string; nodeID: number }[] }[] };
}

/** The world as KubeDirector reads it from the API server: kdclusters (spec + status members), kdapp, objects. */
async function currentWorld(): Promise<KdWorld> {
  const list = async (kind: string) =>
    (
      JSON.parse(ok(await env.kubectl(['get', kind, '-o', 'json']), `list ${kind}`).stdout) as {
        items: (KdObject & { metadata: { name: string } })[];
      }
    ).items;
  const app = (await list('kubedirectorapp')).find((a) => a.metadata.name === APP)!;
  const clusters: KdWorld['clusters'] = {};
  for (const cr of await list('kubedirectorcluster'))
    clusters[cr.metadata.name] = {
      cluster: cr as unknown as KDCluster,
      app: app as unknown as KDApp,
      clusterService: cr.status?.clusterService ?? '',
      roles: (cr.status?.roles ?? []).map((r) => ({
        id: r.id,
        members: (r.members ?? []).map((m) => ({ pod: m.pod, nodeID: m.nodeID })),
      })),
    };
  const byName = <T extends { metadata: { name: string } }>(items: T[]) =>
    Object.fromEntries(items.map((i) => [i.metadata.name, i])) as never;
  return {
    namespace: env.namespace,
    clusters,
    configMaps: byName(await list('configmap')),
    secrets: byName(await list('secret')),
  };
}

/** Differences between every member's real document and the port's, for the given clusters. */
async function portDiffs(
  clusters: string[],
  ready: (doc: Json, cluster: string) => boolean = () => true,
): Promise<string[]> {
  const world = await currentWorld();
  const diffs: string[] = [];
  for (const name of clusters) {
    for (const r of world.clusters[name]?.roles ?? [])
      for (const m of r.members) {
        const real = JSON.parse(await catIn(env, inPod(m.pod), '/etc/guestconfig/configmeta.json')) as Json;
        if (!ready(real, name)) diffs.push(`${m.pod}: not re-delivered yet`);
        diffs.push(...jsonDiff(real, kubedirectorConfigmeta(world, name, m.pod)).map((d) => `${m.pod} ${d}`));
      }
  }
  return diffs;
}

/**
 * Polls until every member of the clusters holds exactly what the hand-written port renders from the
 * current objects (KubeDirector delivers asynchronously); fails with the last differences.
 */
async function untilPortMatches(clusters: string[], ready?: (doc: Json, cluster: string) => boolean): Promise<void> {
  let last: string[] = [];
  const end = Date.now() + 300_000;
  for (;;) {
    last = await portDiffs(clusters, ready).catch((e: Error) => [`error: ${e.message}`]);
    if (last.length === 0) return;
    if (Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 2000));
  }
  expect(last).toEqual([]);
}
