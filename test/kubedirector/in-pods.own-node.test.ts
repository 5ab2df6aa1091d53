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
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
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
    services: [],
    roles: [
      { id: 'main', cardinality: '1' },
      { id: 'worker', cardinality: '0+' },
    ],
    config: {
      selectedRoles: ['main', 'worker'],
      roleServices: [
        { roleID: 'main', serviceIDs: [] },
        { roleID: 'worker', serviceIDs: [] },
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
    480_000,
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
  });

  test('members 1 → 3: every member is re-delivered a document listing all of them', async () => {
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(kdCluster(2)) }), 'scale the workers to 2');
    const members = await configuredMembers(3);
    for (const m of members) {
      const where = { pod: m.pod, namespace: env.namespace };
      const doc = await eventually(
        `${m.pod} lists 2 workers`,
        async () => {
          const d = JSON.parse(await catIn(env, where, '/etc/guestconfig/configmeta.json')) as {
            nodegroups: Record<string, { roles: Record<string, { fqdns: string[] }> }>;
            node: { role_id: string };
          };
          return d.nodegroups['1']?.roles['worker']?.fqdns.length === 2 ? d : undefined;
        },
        240_000,
        1000,
      );
      expect(doc.node.role_id).toBe(m.role);
      expect(await configcliValue(env, where, 'node.role_id')).toBe(m.role);
    }
  });

  test('the hand-written port (shared/test/kubedirector-reference.ts) renders exactly what KubeDirector delivered', async () => {
    // Built from what KubeDirector itself reads: its kdcluster (spec + status members), its kdapp.
    const get = async (kind: string, name: string) =>
      JSON.parse(ok(await env.kubectl(['get', kind, name, '-o', 'json']), `get ${kind} ${name}`).stdout) as {
        spec: object;
        status?: { clusterService?: string; roles?: { id: string; members?: { pod: string; nodeID: number }[] }[] };
      };
    const app = await get('kubedirectorapp', APP);
    const state = async (name: string) => {
      const cr = await get('kubedirectorcluster', name);
      return {
        cluster: cr as unknown as KDCluster,
        app: app as unknown as KDApp,
        clusterService: cr.status?.clusterService ?? '',
        roles: (cr.status?.roles ?? []).map((r) => ({
          id: r.id,
          members: (r.members ?? []).map((m) => ({ pod: m.pod, nodeID: m.nodeID })),
        })),
      };
    };
    const world: KdWorld = {
      namespace: env.namespace,
      clusters: { [CLUSTER]: await state(CLUSTER), [OTHER]: await state(OTHER) },
      configMaps: { [CM]: (await get('configmap', CM)) as never },
      secrets: { [SECRET]: (await get('secret', SECRET)) as never },
    };
    const diffs: string[] = [];
    for (const r of world.clusters[CLUSTER]!.roles)
      for (const m of r.members) {
        const real = JSON.parse(
          await catIn(env, { pod: m.pod, namespace: env.namespace }, '/etc/guestconfig/configmeta.json'),
        ) as Json;
        const port = kubedirectorConfigmeta(world, CLUSTER, m.pod);
        diffs.push(...jsonDiff(real, port).map((d) => `${m.pod} ${d}`));
      }
    expect(diffs).toEqual([]);
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
