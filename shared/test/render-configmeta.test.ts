/**
 * configmeta rendering: golden files for a cluster with a connected cluster, a ConfigMap and a
 * Secret, and explicit checks that KubeDirector's bugs are fixed.
 *
 * Regenerate the goldens with `UPDATE_GOLDEN=1` and review the diff: a golden is only right once a person
 * has checked it against reference §2.5.
 */
import { describe, expect, it } from '@jest/globals';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ANNOTATIONS_SIZE_LIMIT, annotationsSize } from '../src/configmeta/annotation-size.js';
import {
  blockDevicePaths,
  endpointsOf,
  renderClusterSection,
  renderConfigMapEntry,
  renderConfigMetaForMembers,
  renderConnections,
  renderSecretEntry,
} from '../src/configmeta/render-configmeta.js';
import { cores, memoryMiB } from '../src/configmeta/go-encoding.js';
import { membersOf } from '../src/configmeta/members.js';
import { configMap, secret, exampleApps, cluster, pod, NS } from './fixtures.js';
import { LAST_APPLIED, render, scenario } from './scenario.js';

function golden(name: string, actual: unknown): void {
  const path = fileURLToPath(new URL(`./golden/${name}`, import.meta.url));
  if (process.env.UPDATE_GOLDEN === '1') {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, JSON.stringify(actual, null, 2) + '\n');
  }
  if (!existsSync(path)) throw new Error(`golden file ${path} is missing: run with UPDATE_GOLDEN=1 and review it`);
  expect(actual).toEqual(JSON.parse(readFileSync(path, 'utf8')));
}

const EMPTY = { clusters: [], configmaps: [], secrets: [] };

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Every bdvlibrefkey array inside `value`, with the JSON path where it sits. */
function refkeys(value: Json, at: string[] = []): { at: string[]; key: string[] }[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => refkeys(v, [...at, String(i)]));
  if (value === null || typeof value !== 'object') return [];
  const out: { at: string[]; key: string[] }[] = [];
  for (const [k, v] of Object.entries(value)) {
    if (k === 'bdvlibrefkey') out.push({ at, key: v as string[] });
    else out.push(...refkeys(v, [...at, k]));
  }
  return out;
}

/** Follows a refkey from the document root. */
function deref(doc: Json, key: string[]): Json | undefined {
  let cur: Json | undefined = doc;
  for (const k of key) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur)) return undefined;
    cur = cur[k];
  }
  return cur;
}

function keysDeep(value: Json): string[] {
  if (Array.isArray(value)) return value.flatMap(keysDeep);
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([k, v]) => [k, ...keysDeep(v)]);
}

describe('configmeta golden files', () => {
  it('redacted Secret values (the default)', async () => {
    const { docs } = await render(scenario());
    expect([...docs.keys()]).toEqual(['kdss-nb-0']);
    golden('configmeta-notebook-redacted.json', JSON.parse(docs.get('kdss-nb-0')!));
  });

  it('the private document (Secret values, root only in the pod)', async () => {
    const r = await render(scenario());
    golden('private-configmeta-notebook.json', JSON.parse(r.private!.configmeta));
  });
});

describe('configmeta: KubeDirector bugs are fixed', () => {
  it('every member of a connected role appears once (KubeDirector repeated the last one)', async () => {
    const { docs } = await render(scenario());
    const doc = JSON.parse(docs.get('kdss-nb-0')!);
    const roles = doc.connections.clusters.training.nodegroups['1'].roles;
    // Role keys in Go's map order, as KubeDirector writes them.
    expect(Object.keys(roles)).toEqual(['LoadBalancer', 'RESTServer']);
    expect(roles.RESTServer.fqdns).toEqual([
      'kdss-tr-0.kdhs-tr.ml.svc.cluster.local',
      'kdss-tr-1.kdhs-tr.ml.svc.cluster.local',
    ]);
    expect(roles.RESTServer.node_ids).toEqual(['1', '2']);
    expect(roles.LoadBalancer.node_ids).toEqual(['3']);
    expect(roles.RESTServer.services['api-server'].endpoints).toEqual([
      'http://kdss-tr-0.kdhs-tr.ml.svc.cluster.local:10001',
      'http://kdss-tr-1.kdhs-tr.ml.svc.cluster.local:10001',
    ]);
    const all = [...roles.RESTServer.fqdns, ...roles.LoadBalancer.fqdns];
    expect(new Set(all).size).toBe(all.length);
    // The terminating pod is not a member.
    expect(JSON.stringify(doc)).not.toContain('kdss-tr-3');
  });

  it('every reference inside an embedded cluster points into that cluster and resolves', async () => {
    const { docs } = await render(scenario());
    const doc = JSON.parse(docs.get('kdss-nb-0')!) as Json;
    const embedded = deref(doc, ['connections', 'clusters', 'training'])!;
    const inner = refkeys(embedded);
    // services, per-role service hostnames/fqdns, distros and cluster.config_metadata all carry refkeys.
    expect(inner.length).toBeGreaterThanOrEqual(8);
    for (const { key } of inner) {
      expect(key.slice(0, 3)).toEqual(['connections', 'clusters', 'training']);
      expect(deref(doc, key)).toBeDefined();
    }
    // ...and the host cluster's own refkeys stay unprefixed and resolve in the host part.
    const own = refkeys({ ...(doc as Record<string, Json>), connections: null });
    expect(own.length).toBeGreaterThan(0);
    for (const { key } of own) {
      expect(key[0]).not.toBe('connections');
      expect(deref(doc, key)).toBeDefined();
    }
  });

  it('embedded clusters keep the (empty) authToken key, carry no secret keys, no node, and are one hop deep', async () => {
    const { docs } = await render(scenario());
    const doc = JSON.parse(docs.get('kdss-nb-0')!);
    const embedded = doc.connections.clusters.training;
    // KubeDirector renders authToken for every service, connected clusters included (configcli would
    // raise KeyError otherwise); no token exists here, so it is empty — never invented.
    expect(embedded.nodegroups['1'].roles.RESTServer.services['api-server'].authToken).toBe('');
    expect(keysDeep(embedded)).not.toContain('secret_keys');
    expect(embedded.node).toBeNull();
    expect(embedded.connections).toEqual({ clusters: null, configmaps: null, secrets: null });
    // The cluster's own services keep KubeDirector's (empty) authToken field.
    expect(doc.nodegroups['1'].roles.controller.services['jupyter-nb'].authToken).toBe('');
  });

  it("kubectl's last-applied-configuration annotation is never copied", async () => {
    const r = await render(scenario());
    for (const text of [r.docs.get('kdss-nb-0')!, r.private!.configmeta]) {
      expect(text).not.toContain(LAST_APPLIED);
      const doc = JSON.parse(text);
      expect(doc.connections.configmaps.model[0].annotations).toEqual({ 'ml.example.com/owner': 'platform-team' });
      expect(doc.connections.secrets['source-control'][0].annotations).toEqual({});
    }
  });

  it('Secret values are absent when redacted: keys listed, values empty, entry marked', async () => {
    const { docs } = await render(scenario());
    // The world holds the values, but the public document never uses them.
    const text = docs.get('kdss-nb-0')!;
    for (const v of [
      's3cr3t',
      'alice',
      Buffer.from('s3cr3t').toString('base64'),
      Buffer.from('alice').toString('base64'),
    ]) {
      expect(text).not.toContain(v);
    }
    const entry = JSON.parse(text).connections.secrets['source-control'][0];
    // Name and label values are base64, as KubeDirector's Go []byte fields are written.
    expect(entry).toEqual({
      metadata: { name: Buffer.from('scm-creds').toString('base64') },
      labels: { 'kubedirector.hpe.com/secretType': Buffer.from('source-control').toString('base64') },
      annotations: {},
      data: { token: '', username: '' },
      redacted: true,
    });
  });

  it('the private document has the stored base64 values and the entry is not marked redacted', async () => {
    const r = await render(scenario());
    const entry = JSON.parse(r.private!.configmeta).connections.secrets['source-control'][0];
    expect(entry.data).toEqual({ token: 'czNjcjN0', username: 'YWxpY2U=' });
    expect(entry).not.toHaveProperty('redacted');
    // The name is base64, as KubeDirector encodes it.
    expect(Buffer.from(entry.metadata.name, 'base64').toString()).toBe('scm-creds');
  });
});

describe('configmeta: per-pod node section', () => {
  it('each member gets its own node entry and the same rest', () => {
    const [trainingApp] = exampleApps().filter((a) => a.metadata.name === 'training-engine');
    const c = cluster('training', 'training-engine', {
      roles: [
        { id: 'RESTServer', members: 2 },
        { id: 'LoadBalancer', members: 1 },
      ],
    });
    const pods = [
      pod('t-lb-0', 'training', 'LoadBalancer'),
      pod('t-1', 'training', 'RESTServer', { hostname: 'host-b', subdomain: 'svc-x' }),
      pod('t-0', 'training', 'RESTServer'),
    ];
    const members = membersOf(c, trainingApp, pods);
    const docs = renderConfigMetaForMembers(
      c,
      trainingApp!,
      members,
      renderConnections({ clusters: [], configmaps: [], secrets: [] }),
    );
    expect([...docs.keys()]).toEqual(['t-0', 't-1', 't-lb-0']);
    const nodes = [...docs.values()].map((t) => JSON.parse(t).node);
    expect(nodes).toEqual([
      {
        role_id: 'RESTServer',
        nodegroup_id: '1',
        id: '1',
        hostname: 't-0.training.ml.svc.cluster.local',
        fqdn: 't-0.training.ml.svc.cluster.local',
        domain: 'training.ml.svc.cluster.local',
        distro_id: 'hpecp/training-engine',
        depends_on: {},
      },
      {
        role_id: 'RESTServer',
        nodegroup_id: '1',
        id: '2',
        hostname: 'host-b.svc-x.ml.svc.cluster.local',
        fqdn: 'host-b.svc-x.ml.svc.cluster.local',
        domain: 'svc-x.ml.svc.cluster.local',
        distro_id: 'hpecp/training-engine',
        depends_on: {},
      },
      {
        role_id: 'LoadBalancer',
        nodegroup_id: '1',
        id: '3',
        hostname: 't-lb-0.training.ml.svc.cluster.local',
        fqdn: 't-lb-0.training.ml.svc.cluster.local',
        domain: 'training.ml.svc.cluster.local',
        distro_id: 'hpecp/training-engine',
        depends_on: {},
      },
    ]);
    const withoutNode = [...docs.values()].map((t) => ({ ...JSON.parse(t), node: null }));
    expect(withoutNode[1]).toEqual(withoutNode[0]);
    expect(withoutNode[2]).toEqual(withoutNode[0]);
    // Own cluster with no connections: empty maps, as KubeDirector renders them.
    expect(JSON.parse(docs.get('t-0')!).connections).toEqual({ clusters: {}, configmaps: {}, secrets: {} });
  });

  it('a cluster without member pods renders no document', () => {
    const [a] = exampleApps().filter((x) => x.metadata.name === 'kafka');
    const docs = renderConfigMetaForMembers(
      cluster('k', 'kafka'),
      a!,
      [],
      renderConnections({ clusters: [], configmaps: [], secrets: [] }),
    );
    expect(docs.size).toBe(0);
  });
});

describe('configmeta pieces', () => {
  it('ConfigMaps of one type follow the spec order (configcli merges them in order, the last one wins)', () => {
    const cms = [configMap('a-model', 'model', { v: 'a' }), configMap('z-model', 'model', { v: 'z' })];
    const conns = renderConnections(
      { clusters: [], configmaps: cms, secrets: [] },
      {},
      {
        configmaps: ['z-model', 'a-model'],
      },
    );
    expect(conns.configmaps.model!.map((e) => e.metadata.name)).toEqual(['z-model', 'a-model']);
    // Entry keys in Go's map order, as configcli lists them.
    expect(Object.keys(conns.configmaps.model![0]!)).toEqual(['annotations', 'data', 'labels', 'metadata']);
  });

  it('without a spec order, ConfigMaps and Secrets are grouped by their type label, by name; unlabeled ones are left out', () => {
    const conns = renderConnections({
      clusters: [],
      configmaps: [
        configMap('z-model', 'model', { a: '1' }),
        configMap('spark', 'spark-config', undefined),
        configMap('a-model', 'model', { b: '2' }),
        configMap('plain', undefined, { c: '3' }),
      ],
      secrets: [
        secret('s2', 'db', { p: 'x' }),
        secret('s1', 'db', { q: 'y' }),
        secret('nolabel', undefined, { r: 'z' }),
      ],
    });
    expect(Object.keys(conns.configmaps)).toEqual(['model', 'spark-config']);
    expect(conns.configmaps.model!.map((e) => e.metadata.name)).toEqual(['a-model', 'z-model']);
    expect(conns.configmaps['spark-config']![0]!.data).toBeNull();
    expect(conns.configmaps['spark-config']![0]!.annotations).toBeNull();
    expect(conns.secrets.db!.map((e) => Buffer.from(e.metadata.name, 'base64').toString())).toEqual(['s1', 's2']);
    expect(JSON.stringify(conns)).not.toContain('plain');
    expect(JSON.stringify(conns)).not.toContain('nolabel');
  });

  it('renders a ConfigMap entry in the KubeDirector shape', () => {
    expect(
      renderConfigMapEntry(
        configMap('m', 'model', { k: 'v' }, { labels: { team: 'x' }, annotations: { [LAST_APPLIED]: '{}' } }),
      ),
    ).toEqual({
      metadata: { name: 'm' },
      labels: { 'kubedirector.hpe.com/cmType': 'model', team: 'x' },
      annotations: {},
      data: { k: 'v' },
    });
  });

  it('the public entry is redacted even when the values are known', () => {
    const withValues = secret('s', 't', { a: '1' }, { withValues: true });
    expect(renderSecretEntry(withValues)).toMatchObject({ data: { a: '' }, redacted: true });
    expect(JSON.stringify(renderSecretEntry(withValues))).not.toContain('MQ==');
  });

  it('flavor: memory limit in whole MiB (floored) and cores rounded up, from limits only, "0" without', () => {
    expect(memoryMiB('4Gi')).toBe('4096');
    expect(memoryMiB('512Mi')).toBe('512');
    expect(memoryMiB('1G')).toBe('953');
    expect(memoryMiB('1048575')).toBe('0');
    expect(memoryMiB('1.5Mi')).toBe('1');
    expect(memoryMiB('2e9')).toBe('1907');
    expect(memoryMiB(1073741824)).toBe('1024');
    expect(memoryMiB(undefined)).toBe('0');
    expect(memoryMiB('lots')).toBe('0');
    expect(cores('500m')).toBe('1');
    expect(cores('1000m')).toBe('1');
    expect(cores('1001m')).toBe('2');
    expect(cores('2')).toBe('2');
    expect(cores('1.5')).toBe('2');
    expect(cores(3)).toBe('3');
    expect(cores('0')).toBe('0');
    expect(cores(undefined)).toBe('0');
    const [a] = exampleApps().filter((x) => x.metadata.name === 'kafka');
    const c = cluster('k', 'kafka', {
      roles: [
        {
          id: 'broker',
          members: 1,
          resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '3', memory: '8Gi' } },
        },
      ],
    });
    const section = renderClusterSection(c, a!, membersOf(c, a, [pod('k-0', 'k', 'broker')]));
    expect(section.nodegroups['1']!.roles.broker!.flavor).toEqual({
      storage: 'n/a',
      name: 'n/a',
      memory: '8192',
      description: 'n/a',
      cores: '3',
    });
  });

  it('a declared role without members is left out of nodegroups but keeps its services entry, as in KubeDirector', () => {
    const [a] = exampleApps().filter((x) => x.metadata.name === 'spark-streaming');
    const c = cluster('s', 'spark-streaming', {
      roles: [
        { id: 'controller', members: 1 },
        { id: 'worker', members: 0 },
      ],
    });
    const section = renderClusterSection(c, a!, membersOf(c, a, [pod('s-0', 's', 'controller')]));
    expect(Object.keys(section.nodegroups['1']!.roles)).toEqual(['controller']);
    expect(Object.keys(section.services['spark-worker']!['1']!)).toEqual(['worker']);
  });

  it('endpoints: scheme://fqdn:port, never the path; "://" without a scheme; null without a port', () => {
    const f = ['a.x.ml.svc.cluster.local', 'b.x.ml.svc.cluster.local'];
    expect(endpointsOf({ id: 's', endpoint: { port: 80, urlScheme: 'http', path: '/ui' } }, f)).toEqual([
      'http://a.x.ml.svc.cluster.local:80',
      'http://b.x.ml.svc.cluster.local:80',
    ]);
    expect(endpointsOf({ id: 's', endpoint: { port: 22 } }, f.slice(0, 1))).toEqual(['://a.x.ml.svc.cluster.local:22']);
    expect(endpointsOf({ id: 's' }, f)).toBeNull();
  });

  it('block_device_paths: <pathPrefix><i> for members of a role with block storage, absent otherwise', () => {
    const [a] = exampleApps().filter((x) => x.metadata.name === 'kafka');
    const c = cluster('k', 'kafka', {
      roles: [{ id: 'broker', members: 1, blockStorage: { pathPrefix: '/dev/kdblock', numDevices: 2 } }],
    });
    expect(blockDevicePaths(c, 'broker')).toEqual(['/dev/kdblock0', '/dev/kdblock1']);
    expect(blockDevicePaths(c, 'other')).toBeUndefined();
    const members = membersOf(c, a, [pod('k-0', 'k', 'broker')]);
    const doc = JSON.parse(renderConfigMetaForMembers(c, a!, members, renderConnections(EMPTY)).get('k-0')!);
    expect(doc.node.block_device_paths).toEqual(['/dev/kdblock0', '/dev/kdblock1']);
    const plain = cluster('k', 'kafka', { roles: [{ id: 'broker', members: 1 }] });
    const doc2 = JSON.parse(renderConfigMetaForMembers(plain, a!, members, renderConnections(EMPTY)).get('k-0')!);
    expect(doc2.node).not.toHaveProperty('block_device_paths');
  });

  it('measures annotations the way the API server limits them', () => {
    expect(ANNOTATIONS_SIZE_LIMIT).toBe(262144);
    expect(annotationsSize(undefined)).toBe(0);
    expect(annotationsSize({ ab: 'cde', 'x/é': 'ü' })).toBe(2 + 3 + 4 + 2);
  });
});

describe('configmeta namespace', () => {
  it('uses the cluster namespace in every DNS name', async () => {
    const { docs } = await render(scenario());
    const doc = JSON.parse(docs.get('kdss-nb-0')!);
    expect(doc.node.domain).toBe(`kdhs-nb.${NS}.svc.cluster.local`);
  });
});
