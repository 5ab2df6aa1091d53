/**
 * The reconciler on the real control plane: configmeta delivery to member pods, generator bumps, status,
 * multi-namespace watches, restarts and leader election. One reconciler process per file, watching this
 * file's namespaces only; pods are created by the test with the member labels (nothing schedules them).
 * No admission webhook is registered here: the reconciler is the only writer besides the test.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { useTestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { countByResource, writes } from '../support/audit.js';
import {
  apply,
  configMap,
  getJson,
  kdApp,
  kdCluster,
  kubectlOk,
  memberPod,
  podConfigMeta,
  secret,
} from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { installCrds } from '../support/crds.js';
import { type ReconcilerProcess, startReconciler } from '../support/services.js';

const env = useTestEnv();
const other = `${env.namespace}-other`.slice(0, 63);
let rec: ReconcilerProcess;

const generator = async (name: string, ns?: string) =>
  (await getJson(env, ['kdcluster', name], ns)).spec?.configMetaGenerator as number | undefined;
const status = async (name: string, ns?: string) => (await getJson(env, ['kdcluster', name], ns)).status ?? {};
const synced = async (name: string, ns?: string) => {
  const s = await status(name, ns);
  const c = (s.conditions ?? []).find((x: { type: string }) => x.type === 'ConfigMetaSynced');
  return c?.status === 'True' && s.lastConfigMetaGenerator === ((await generator(name, ns)) ?? 0) ? s : undefined;
};
const reconcilerWrites = (since: Date, namespace = env.namespace) =>
  writes(env.info.auditLogPath, { namespace, since, userAgent: 'kd-connections-reconciler' }).filter(
    (e) => e.objectRef?.resource !== 'leases',
  );

beforeAll(async () => {
  await installCrds(env);
  await createNamespace(env.kc, other, {});
  for (const ns of [env.namespace, other]) {
    await apply(
      env,
      [
        kdApp('nb', { category: 'notebook', connectable_to: [{ category: 'training' }] }),
        kdApp('trainer', { category: 'training' }),
        configMap('model', { path: '/models/v1' }),
        secret('creds', { token: 'initial-secret-value-1' }),
      ],
      ns,
    );
  }
  await apply(env, [
    kdCluster('t', 'trainer', {}, ['worker'], 3),
    kdCluster('a', 'nb', { clusters: ['t'], configmaps: ['model'], secrets: ['creds'] }),
    kdCluster('b', 'trainer', { configmaps: ['model'] }, ['controller'], 2),
    kdCluster('c', 'trainer'),
    memberPod('a-0', 'a'),
    memberPod('t-0', 't', 'worker'),
    memberPod('t-1', 't', 'worker'),
    memberPod('b-0', 'b'),
  ]);
  await apply(env, [kdCluster('a', 'trainer', { configmaps: ['model'] }), memberPod('a-0', 'a')], other);
  rec = await startReconciler(env, { args: [`--watch-namespaces=${env.namespace},${other}`] });
  await rec.waitForLog((l) => l.msg === 'became leader');
  for (const c of ['a', 'b', 'c', 't']) await eventually(`cluster ${c} synced`, () => synced(c));
  await eventually('other/a synced', () => synced('a', other));
}, 120_000);

afterAll(async () => {
  await rec?.stop();
  await env.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: other })
    .catch(() => undefined);
});

describe('first sight', () => {
  it('initializes status and delivers configmeta without bumping any generator', async () => {
    // Created without the admission webhook, so no generator was ever set; the reconciler must not invent one.
    for (const c of ['a', 'b', 'c', 't']) expect(await generator(c)).toBeUndefined();
    const s = await status('a');
    expect(s.lastConfigMetaGenerator).toBe(0);
    expect(s.connectionsHash).toMatch(/^[0-9a-f]{64}$/);
    expect(
      s.connections.map((c: { kind: string; name: string; state: string }) => `${c.kind}/${c.name}=${c.state}`),
    ).toEqual(['Cluster/t=Connected', 'ConfigMap/model=Connected', 'Secret/creds=Connected']);
    const cm = await podConfigMeta(env, 'a-0');
    expect(cm?.generator).toBe('0');
    expect(cm?.doc.connections.configmaps.model[0].data).toEqual({ path: '/models/v1' });
    expect(Object.keys(cm?.doc.connections.clusters ?? {})).toEqual(['t']);
    expect(cm?.doc.connections.clusters.t.nodegroups['1'].roles.worker.fqdns).toHaveLength(2);
  });
});

describe('a connected ConfigMap changes', () => {
  it('bumps exactly the clusters in that namespace that list it, and every member pod gets the new data', async () => {
    const before = {
      a: (await generator('a')) ?? 0,
      b: (await generator('b')) ?? 0,
      otherA: (await generator('a', other)) ?? 0,
    };
    await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/models/v2"}}']);
    await eventually(
      'a and b regenerated',
      async () =>
        (await synced('a')) &&
        (await synced('b')) &&
        (await generator('a')) === before.a + 1 &&
        (await generator('b')) === before.b + 1,
    );
    for (const pod of ['a-0', 'b-0']) {
      const cm = await podConfigMeta(env, pod);
      expect(cm?.doc.connections.configmaps.model[0].data.path).toBe('/models/v2');
      expect(cm?.generator).toBe(String(before.a + 1));
    }
    // Not listed: untouched. Same name in the other namespace: untouched.
    expect(await generator('c')).toBeUndefined();
    expect(await generator('t')).toBeUndefined();
    expect((await generator('a', other)) ?? 0).toBe(before.otherA);

    const events = await getJson(env, ['events.events.k8s.io']);
    const notes = events.items.map(
      (e: { regarding: { name: string }; note: string }) => `${e.regarding.name}: ${e.note}`,
    );
    expect(notes).toContain(`a: connected configmap model changed; configMetaGenerator ${before.a} → ${before.a + 1}`);
    expect(notes).toContain(
      `model: cluster a uses this as a connection; requested configmeta regeneration (generator ${before.a + 1})`,
    );
    expect(notes).toContain(`a: configmeta generator ${before.a + 1} written to 1/1 member pods`);
  });

  it('costs one bump, one status write and one patch per member pod: the minimum (cluster with three pods)', async () => {
    await apply(env, [
      configMap('w3-conf', { v: '1' }, 'settings'),
      kdCluster('w3', 'trainer', { configmaps: ['w3-conf'] }, ['worker'], 3),
    ]);
    await apply(
      env,
      ['w3-0', 'w3-1', 'w3-2'].map((p) => memberPod(p, 'w3', 'worker')),
    );
    await eventually('w3 synced with 3 members', async () =>
      (await synced('w3'))?.members?.synced === 3 ? true : undefined,
    );
    // Let the reconciler go quiet, then count only what this edit causes.
    await new Promise((r) => setTimeout(r, 1500));
    const since = new Date();
    await kubectlOk(env, ['patch', 'configmap', 'w3-conf', '--type=merge', '-p', '{"data":{"v":"2"}}']);
    await eventually('w3 regenerated', async () => (await generator('w3')) === 1 && (await synced('w3')));
    await new Promise((r) => setTimeout(r, 1500));
    const w = reconcilerWrites(since).filter((e) => e.objectRef?.resource !== 'events');
    const byResource = countByResource(w);
    expect(byResource).toEqual({ kubedirectorclusters: 1, 'kubedirectorclusters/status': 1, pods: 3 });
    expect(w.every((e) => e.verb === 'patch' && e.responseStatus?.code === 200)).toBe(true);
    expect(new Set(w.filter((e) => e.objectRef?.resource === 'pods').map((e) => e.objectRef?.name))).toEqual(
      new Set(['w3-0', 'w3-1', 'w3-2']),
    );
  });
});

describe('a connected Secret changes', () => {
  it('regenerates with the Secret keys but never its values (redacted by default)', async () => {
    const g = (await generator('a')) ?? 0;
    await kubectlOk(env, [
      'patch',
      'secret',
      'creds',
      '--type=merge',
      '-p',
      '{"stringData":{"token":"rotated-secret-value-2","user":"robot"}}',
    ]);
    await eventually('a regenerated', async () => (await generator('a')) === g + 1 && (await synced('a')));
    const cm = await podConfigMeta(env, 'a-0');
    expect(cm?.doc.connections.secrets.creds).toEqual([
      {
        // Name and label values base64, as KubeDirector encodes them (Go []byte).
        metadata: { name: Buffer.from('creds').toString('base64') },
        labels: { 'kubedirector.hpe.com/secretType': Buffer.from('creds').toString('base64') },
        annotations: {},
        data: { token: '', user: '' },
        redacted: true,
      },
    ]);
    const pod = await kubectlOk(env, ['get', 'pod', 'a-0', '-o', 'json']);
    for (const v of [
      'rotated-secret-value-2',
      'initial-secret-value-1',
      Buffer.from('rotated-secret-value-2').toString('base64'),
    ]) {
      expect(pod).not.toContain(v);
      expect(rec.output()).not.toContain(v);
    }
    expect(JSON.stringify(await status('a'))).not.toContain('rotated-secret-value-2');
  });

  it('a metadata-only write to the Secret (a server-side apply taking over its fields) changes nothing', async () => {
    await eventually('a settled', () => synced('a'));
    const g = await generator('a');
    const before = await getJson(env, ['secret', 'creds']);
    const same = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'creds', labels: before.metadata.labels },
      data: before.data,
    };
    await kubectlOk(env, ['apply', '--server-side', '--force-conflicts', '--field-manager=gitops', '-f', '-'], {
      input: JSON.stringify(same),
    });
    const after = await getJson(env, ['secret', 'creds']);
    expect(after.metadata.resourceVersion).not.toBe(before.metadata.resourceVersion); // managedFields moved
    await new Promise((r) => setTimeout(r, 2000));
    expect(await generator('a')).toBe(g);
  });
});

describe('a connected cluster changes', () => {
  it('a new member of t reaches a, which connects to t (one hop)', async () => {
    const g = (await generator('a')) ?? 0;
    await apply(env, [memberPod('t-2', 't', 'worker')]);
    await eventually('a sees three members of t', async () => {
      const cm = await podConfigMeta(env, 'a-0');
      return cm?.doc.connections.clusters.t.nodegroups['1'].roles.worker.fqdns.length === 3 ? cm : undefined;
    });
    expect(await generator('a')).toBe(g + 1);
    const embedded = (await podConfigMeta(env, 'a-0'))!.doc.connections.clusters.t;
    // One hop: the embedded cluster carries no connections of its own and no node.
    expect(embedded.connections).toEqual({ clusters: null, configmaps: null, secrets: null });
    expect(embedded.node).toBeNull();
    expect(embedded.nodegroups['1'].roles.worker.node_ids).toEqual(['1', '2', '3']);
    // t's own pods got t's new configmeta without a bump of t (members are not connections).
    expect(await generator('t')).toBeUndefined();
    await eventually(
      't-0 lists three workers',
      async () => (await podConfigMeta(env, 't-0'))?.doc.nodegroups['1'].roles.worker.fqdns.length === 3,
    );
  });

  it('two clusters connected to each other converge and then stay quiet', async () => {
    await apply(env, [
      kdCluster('x', 'trainer', { clusters: ['y'] }, ['controller'], 2),
      kdCluster('y', 'trainer', { clusters: ['x'] }),
      memberPod('x-0', 'x'),
      memberPod('y-0', 'y'),
    ]);
    // Creation order decides how often each was regenerated while the other's pods appeared; wait for that to settle.
    await eventually('x and y hold each other', async () => {
      const [cx, cy] = [await podConfigMeta(env, 'x-0'), await podConfigMeta(env, 'y-0')];
      return (
        cx?.doc.connections.clusters.y?.nodegroups['1'].roles.controller.fqdns.length === 1 &&
        cy?.doc.connections.clusters.x?.nodegroups['1'].roles.controller.fqdns.length === 1 &&
        (await synced('x')) &&
        (await synced('y'))
      );
    });
    const before = { x: (await generator('x')) ?? 0, y: (await generator('y')) ?? 0 };
    // A change in x's members reaches y once; y's regeneration does not bounce back to x.
    await apply(env, [memberPod('x-1', 'x')]);
    await eventually(
      'y sees x-1',
      async () =>
        (await podConfigMeta(env, 'y-0'))?.doc.connections.clusters.x.nodegroups['1'].roles.controller.fqdns.length ===
        2,
    );
    await eventually('x and y synced again', async () => (await synced('x')) && (await synced('y')));
    const settled = { x: (await generator('x')) ?? 0, y: (await generator('y')) ?? 0 };
    expect(settled).toEqual({ x: before.x, y: before.y + 1 });
    const since = new Date();
    await new Promise((r) => setTimeout(r, 5000));
    expect(
      reconcilerWrites(since).filter((e) => ['x', 'y', 'x-0', 'x-1', 'y-0'].includes(e.objectRef?.name ?? '')),
    ).toEqual([]);
    expect({ x: (await generator('x')) ?? 0, y: (await generator('y')) ?? 0 }).toEqual(settled);
  });
});

describe('deletion and re-creation', () => {
  it('a deleted connected ConfigMap leaves configmeta promptly, status says Missing, re-creating restores it', async () => {
    await apply(env, [
      configMap('gone-soon', { k: 'v' }, 'extra'),
      kdCluster('d', 'trainer', { configmaps: ['gone-soon'] }),
      memberPod('d-0', 'd'),
    ]);
    await eventually(
      'd-0 holds the ConfigMap',
      async () => (await podConfigMeta(env, 'd-0'))?.doc.connections.configmaps.extra?.length === 1,
    );
    await kubectlOk(env, ['delete', 'configmap', 'gone-soon']);
    await eventually(
      'gone from configmeta',
      async () =>
        (await podConfigMeta(env, 'd-0'))?.doc.connections.configmaps.extra === undefined ? true : undefined,
      15_000,
    );
    const s = await status('d');
    expect(s.connections).toEqual([
      {
        kind: 'ConfigMap',
        name: 'gone-soon',
        state: 'Missing',
        message: `configmap "gone-soon" not found in namespace "${env.namespace}"`,
      },
    ]);
    expect(s.conditions.find((c: { type: string }) => c.type === 'ConnectionsResolved')).toMatchObject({
      status: 'False',
      reason: 'Missing',
    });
    await apply(env, [configMap('gone-soon', { k: 'back' }, 'extra')]);
    await eventually(
      'restored',
      async () => (await podConfigMeta(env, 'd-0'))?.doc.connections.configmaps.extra?.[0]?.data.k === 'back',
    );
    expect((await status('d')).connections[0].state).toBe('Connected');
  });
});

describe('connectable_to tightened later', () => {
  it('leaves the now-forbidden connection out of configmeta and reports it', async () => {
    await apply(env, [
      kdApp('strict', { category: 'notebook', connectable_to: [{ category: 'training' }] }),
      kdCluster('s', 'strict', { clusters: ['t'] }),
      memberPod('s-0', 's'),
    ]);
    await eventually('s has t', async () =>
      (await podConfigMeta(env, 's-0'))?.doc.connections.clusters.t ? true : undefined,
    );
    await kubectlOk(env, [
      'patch',
      'kdapp',
      'strict',
      '--type=json',
      '-p',
      '[{"op":"replace","path":"/spec/connectable_to","value":[{"category":"streaming"}]}]',
    ]);
    await eventually('t left out', async () =>
      (await podConfigMeta(env, 's-0'))?.doc.connections.clusters.t === undefined ? true : undefined,
    );
    const s = await status('s');
    expect(s.connections[0]).toMatchObject({ kind: 'Cluster', name: 't', state: 'NotConnectable' });
    expect(s.connections[0].message).toContain('allowed: {category: "streaming"}');
    expect(s.conditions.find((c: { type: string }) => c.type === 'ConnectionsResolved')).toMatchObject({
      status: 'False',
      reason: 'NotConnectable',
    });
  });
});

describe('pods and generators', () => {
  it('a pod created later receives the current configmeta', async () => {
    const g = (await generator('b')) ?? 0;
    await apply(env, [memberPod('b-1', 'b')]);
    const cm = await eventually('b-1 has configmeta', () => podConfigMeta(env, 'b-1'));
    expect(cm.generator).toBe(String(g));
    expect(cm.doc.node.fqdn).toBe(`b-1.b.${env.namespace}.svc.cluster.local`);
    expect(cm.doc.connections.configmaps.model[0].data.path).toBe('/models/v2');
  });

  it('a user raising the generator by hand forces exactly one regeneration', async () => {
    await eventually('b settled', () => synced('b'));
    const g = (await generator('b')) ?? 0;
    const since = new Date();
    await kubectlOk(env, [
      'patch',
      'kdcluster',
      'b',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { configMetaGenerator: g + 1 } }),
    ]);
    await eventually(
      'b delivered the forced generator',
      async () => (await synced('b'))?.lastConfigMetaGenerator === g + 1,
    );
    for (const pod of ['b-0', 'b-1']) expect((await podConfigMeta(env, pod))?.generator).toBe(String(g + 1));
    await new Promise((r) => setTimeout(r, 1500));
    expect(await generator('b')).toBe(g + 1); // no extra bump by the reconciler
    expect(countByResource(reconcilerWrites(since).filter((e) => e.objectRef?.resource !== 'events'))).toEqual({
      pods: 2,
      'kubedirectorclusters/status': 1,
    });
  });
});

describe('a ConfigMap of the same name in another namespace', () => {
  it('triggers only the clusters of its own namespace', async () => {
    const here = { a: await generator('a'), b: await generator('b') };
    const there = (await generator('a', other)) ?? 0;
    await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/other/v9"}}'], {
      namespace: other,
    });
    await eventually(
      'other/a regenerated',
      async () => (await generator('a', other)) === there + 1 && (await synced('a', other)),
    );
    await new Promise((r) => setTimeout(r, 1000));
    expect({ a: await generator('a'), b: await generator('b') }).toEqual(here);
    expect((await podConfigMeta(env, 'a-0'))?.doc.connections.configmaps.model[0].data.path).toBe('/models/v2');
  });
});

describe('a member pod the pod webhook missed', () => {
  it('gets the annotation, but ConfigMetaSynced=False and one Warning event name it; the restart below writes nothing', async () => {
    // As if created while admission was down: no configmeta volume, so the file can never appear.
    await apply(env, [kdCluster('mv', 'trainer'), memberPod('mv-0', 'mv', 'controller', { mutated: false })]);
    const cond = await eventually('mv reports the pod', async () => {
      const c = ((await status('mv')).conditions ?? []).find((x: { type: string }) => x.type === 'ConfigMetaSynced');
      return c?.reason === 'PodsMissingConfigMetaVolume' ? c : undefined;
    });
    expect(cond.status).toBe('False');
    expect(cond.message).toContain(': mv-0.');
    expect(cond.message).toContain('kubectl delete pod');
    expect((await podConfigMeta(env, 'mv-0'))?.generator).toBe('0');
    await new Promise((r) => setTimeout(r, 1500));
    const events = (await getJson(env, ['events.events.k8s.io'])).items.filter(
      (e: { regarding: { name: string }; reason: string }) =>
        e.regarding.name === 'mv' && e.reason === 'PodsMissingConfigMetaVolume',
    );
    expect(events).toHaveLength(1);
    expect(events[0].type).toBe('Warning');
    expect(events[0].note).toContain('mv-0');
  });
});

describe('restart and leadership', () => {
  it('a restart with nothing changed makes zero writes', async () => {
    for (const c of ['a', 'b', 'c', 't', 'x', 'y']) await eventually(`${c} settled`, () => synced(c));
    await rec.stop('SIGTERM');
    const since = new Date();
    rec = await startReconciler(env, { args: [`--watch-namespaces=${env.namespace},${other}`] });
    await rec.waitForLog((l) => l.msg === 'became leader');
    // Every cluster is reconciled on becoming leader; give that time to finish.
    await eventually('initial reconciles done', async () =>
      (await rec.metric('kd_reconciler_reconciles_total')) >= 8 ? true : undefined,
    );
    await new Promise((r) => setTimeout(r, 2000));
    expect([...reconcilerWrites(since), ...reconcilerWrites(since, other)]).toEqual([]);
    expect(await rec.metric('kd_reconciler_api_writes_total')).toBe(0);
    // The end of the initial lists returned their memory: one full collection, logged with its figures.
    expect(await rec.metric('kd_reconciler_heap_releases_total', { reason: 'caches synced' })).toBe(1);
    const released = await rec.waitForLog((l) => l.msg === 'released memory');
    expect(released).toMatchObject({ reason: 'caches synced' });
    expect(released.heapUsedAfterMiB as number).toBeLessThanOrEqual(released.heapUsedBeforeMiB as number);
  });

  it('two reconcilers with leader election never both write, and the standby takes over on shutdown', async () => {
    const second = await startReconciler(env, { args: [`--watch-namespaces=${env.namespace},${other}`] });
    try {
      await second.waitForLog((l) => l.msg === 'synced' && l.informer === 'kdclusters/' + env.namespace);
      const since = new Date();
      await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/models/v3"}}']);
      await eventually(
        'a regenerated by the leader',
        async () => (await podConfigMeta(env, 'a-0'))?.doc.connections.configmaps.model[0].data.path === '/models/v3',
      );
      expect(second.logs().some((l) => l.msg === 'became leader')).toBe(false);
      const agents = new Set(reconcilerWrites(since).map((e) => e.userAgent));
      expect([...agents]).toEqual([`kd-connections-reconciler/${rec.identity}`]);

      // Graceful shutdown releases the lease: the standby leads within a few retry periods.
      await rec.stop('SIGTERM');
      await second.waitForLog((l) => l.msg === 'became leader', 15_000);
      const handover = new Date();
      await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/models/v4"}}']);
      await eventually(
        'a regenerated by the new leader',
        async () => (await podConfigMeta(env, 'a-0'))?.doc.connections.configmaps.model[0].data.path === '/models/v4',
      );
      const after = new Set(reconcilerWrites(handover).map((e) => e.userAgent));
      expect([...after]).toEqual([`kd-connections-reconciler/${second.identity}`]);
    } finally {
      await second.stop();
    }
  });
});
