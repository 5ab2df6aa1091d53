/**
 * Secret values reach only root in the pod: the reconciler writes one private Secret per cluster with
 * Secret connections (kd-configmeta-private-<cluster>, owned by the kdcluster), holding the private
 * document configcli merges as root and the platform file it needs beside it. On the real control plane:
 * the Secret appears with the values and the owner reference, follows a value change with one guarded
 * patch, is not rewritten across a restart when nothing changed (audit log), goes away when the cluster
 * no longer connects a Secret; a user with view rights reads no value anywhere they can list; a Secret of
 * that name someone else made is never used or changed, and status and events name it. The pods
 * are created by the test (no node): the in-container check is the node test's business.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { useTestEnv } from '../support/cluster.js';
import { countByResource, writes } from '../support/audit.js';
import { installCrds } from '../support/crds.js';
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
import { viewOnly } from '../support/view-only.js';
import { startReconciler, type ReconcilerProcess } from '../support/services.js';

const env = useTestEnv();
const VIEWER = 'private-configmeta-viewer';
const PRIVATE = 'kd-configmeta-private-nb';
const VALUE_1 = 'pw-first-7f3c1a';
const VALUE_2 = 'pw-second-9d2e4b';
const b64 = (s: string) => Buffer.from(s).toString('base64');
let rec: ReconcilerProcess;

interface PrivateSecret {
  metadata: { uid: string; resourceVersion: string; labels: Record<string, string>; ownerReferences: any[] };
  data: Record<string, string>;
}
const privateSecret = async (): Promise<PrivateSecret | undefined> => {
  const r = await env.kubectl(['get', 'secret', PRIVATE, '-o', 'json']);
  return r.code === 0 ? (JSON.parse(r.stdout) as PrivateSecret) : undefined;
};
const files = (s: PrivateSecret) => ({
  doc: JSON.parse(Buffer.from(s.data['priv_configmeta.json']!, 'base64').toString()),
  platform: Buffer.from(s.data['platform.json']!, 'base64').toString(),
});
const tokenIn = async () => {
  const s = await privateSecret();
  return s && files(s).doc.connections.secrets.creds[0].data.token;
};
const reconcilerWrites = (since: Date) =>
  writes(env.info.auditLogPath, { namespace: env.namespace, since, userAgent: 'kd-connections-reconciler' }).filter(
    (e) => e.objectRef?.resource !== 'leases' && e.objectRef?.resource !== 'events',
  );
const synced = async (name: string) => {
  const c = await getJson(env, ['kdcluster', name]);
  const ok = (c.status?.conditions ?? []).some(
    (x: { type: string; status: string }) => x.type === 'ConfigMetaSynced' && x.status === 'True',
  );
  return ok && c.status?.lastConfigMetaGenerator === (c.spec?.configMetaGenerator ?? 0) ? c : undefined;
};
const quiet = () => new Promise((r) => setTimeout(r, 1500));

beforeAll(async () => {
  await installCrds(env);
  await apply(env, [
    ...viewOnly(VIEWER),
    kdApp('nb', { category: 'notebook', connectable_to: [{ category: 'training' }] }),
    kdApp('trainer', { category: 'training' }),
    configMap('model', { path: '/models/v1' }),
    secret('creds', { token: VALUE_1 }, 'creds'),
    kdCluster('t', 'trainer'),
    kdCluster('nb', 'nb', { clusters: ['t'], configmaps: ['model'], secrets: ['creds'] }),
    memberPod('t-0', 't'),
    memberPod('nb-0', 'nb'),
  ]);
  rec = await startReconciler(env);
  await rec.waitForLog((l) => l.msg === 'became leader');
  for (const c of ['nb', 't']) await eventually(`${c} synced`, () => synced(c));
}, 120_000);

afterAll(async () => {
  await rec?.stop();
});

describe('the private Secret of a cluster with a Secret connection', () => {
  it('appears with the values, owned by the kdcluster, labelled as its private configmeta', async () => {
    const s = await eventually('private Secret written', privateSecret);
    const nb = await getJson(env, ['kdcluster', 'nb']);
    expect(s.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        name: 'nb',
        uid: nb.metadata.uid,
        controller: true,
        blockOwnerDeletion: false,
      },
    ]);
    expect(s.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'kd-connections',
      'kd-connections.hpe.com/private-configmeta-of': 'nb',
    });
    const { doc, platform } = files(s);
    expect(JSON.parse(platform)).toEqual({});
    expect(doc.connections.secrets.creds[0].data).toEqual({ token: b64(VALUE_1) });
    // Whole sections (configcli merges shallowly): the public document's clusters and ConfigMaps too.
    const pub = (await podConfigMeta(env, 'nb-0'))!.doc;
    expect(doc.connections.clusters).toEqual(pub.connections.clusters);
    expect(doc.connections.configmaps).toEqual(pub.connections.configmaps);
    expect(pub.connections.secrets.creds[0]).toMatchObject({ data: { token: '' }, redacted: true });
  });

  it('a cluster without a Secret connection has none', async () => {
    const r = await env.kubectl(['get', 'secret', 'kd-configmeta-private-t']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('NotFound');
  });

  it('follows a value change with one patch, alongside the regeneration (the minimum for such a cluster)', async () => {
    await quiet();
    const since = new Date();
    await kubectlOk(env, [
      'patch',
      'secret',
      'creds',
      '--type=merge',
      '-p',
      JSON.stringify({ stringData: { token: VALUE_2 } }),
    ]);
    await eventually('private Secret has the new value', async () =>
      (await tokenIn()) === b64(VALUE_2) ? true : undefined,
    );
    await eventually('nb regenerated', async () =>
      (await synced('nb'))?.spec.configMetaGenerator === 1 ? true : undefined,
    );
    await quiet();
    const w = reconcilerWrites(since);
    expect(countByResource(w)).toEqual({
      kubedirectorclusters: 1,
      'kubedirectorclusters/status': 1,
      pods: 1,
      secrets: 1,
    });
    expect(w.filter((e) => e.objectRef?.resource === 'secrets').map((e) => [e.verb, e.objectRef?.name])).toEqual([
      ['patch', PRIVATE],
    ]);
  });

  it('a ConfigMap change rewrites it too: it carries the whole connections section', async () => {
    await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/models/v2"}}']);
    await eventually('private document has the new ConfigMap', async () => {
      const s = await privateSecret();
      return s && files(s).doc.connections.configmaps.model[0].data.path === '/models/v2' ? true : undefined;
    });
  });
});

describe('what a view-only user can read', () => {
  it('no Secret at all, the private one included', async () => {
    for (const what of ['secret/creds', `secret/${PRIVATE}`, 'secrets']) {
      const r = await env.kubectl(['auth', 'can-i', 'get', what, `--as=${VIEWER}`]);
      expect([what, r.stdout.trim()]).toEqual([what, 'no']);
    }
    const r = await env.kubectl(['get', 'secret', PRIVATE, `--as=${VIEWER}`]);
    expect(r.stderr).toContain('Forbidden');
  });

  it('no value in anything they can list: pods (annotations), kdclusters (status), events, ConfigMaps', async () => {
    await eventually('nb settled', () => synced('nb'));
    const seen: string[] = [];
    for (const kind of [
      'pods',
      'kubedirectorclusters',
      'kubedirectorapps',
      'events',
      'events.events.k8s.io',
      'configmaps',
      'services',
      'leases',
    ])
      seen.push(await kubectlOk(env, ['get', kind, '-o', 'json', `--as=${VIEWER}`]));
    const text = seen.join('\n');
    expect(text).toContain('kubedirector.hpe.com/configmeta'); // the listing did include the annotations
    for (const v of [VALUE_1, VALUE_2, b64(VALUE_1), b64(VALUE_2)]) expect(text).not.toContain(v);
    for (const v of [VALUE_1, VALUE_2, b64(VALUE_1), b64(VALUE_2)]) expect(rec.output()).not.toContain(v);
  });
});

describe('restart and removal', () => {
  it('a restart with nothing changed writes nothing, the private Secret included', async () => {
    for (const c of ['nb', 't']) await eventually(`${c} settled`, () => synced(c));
    await quiet();
    const before = (await privateSecret())!.metadata.resourceVersion;
    await rec.stop('SIGTERM');
    const since = new Date();
    rec = await startReconciler(env);
    await rec.waitForLog((l) => l.msg === 'became leader');
    await eventually('initial reconciles done', async () =>
      (await rec.metric('kd_reconciler_reconciles_total')) >= 2 ? true : undefined,
    );
    await quiet();
    expect(reconcilerWrites(since)).toEqual([]);
    expect((await privateSecret())!.metadata.resourceVersion).toBe(before);
  });

  it('is re-created when someone deletes it', async () => {
    const old = (await privateSecret())!.metadata.uid;
    await kubectlOk(env, ['delete', 'secret', PRIVATE]);
    const s = await eventually('re-created', async () => {
      const x = await privateSecret();
      return x && x.metadata.uid !== old ? x : undefined;
    });
    expect(files(s).doc.connections.secrets.creds[0].data.token).toBe(b64(VALUE_2));
  });

  it('is written again when someone edits its data by hand, and a Warning says who (one patch)', async () => {
    await quiet();
    const before = (await privateSecret())!;
    const forged = JSON.stringify({ connections: { secrets: { creds: [{ data: { token: b64('forged') } }] } } });
    const since = new Date();
    await kubectlOk(env, [
      'patch',
      'secret',
      PRIVATE,
      '--type=merge',
      '-p',
      JSON.stringify({ data: { 'priv_configmeta.json': b64(forged) } }),
    ]);
    const repaired = await eventually('written again', async () => {
      const s = (await privateSecret())!;
      return s.data['priv_configmeta.json'] === before.data['priv_configmeta.json'] &&
        s.metadata.resourceVersion !== before.metadata.resourceVersion
        ? s
        : undefined;
    });
    expect(repaired.data).toEqual(before.data);
    const event = await eventually('a PrivateSecretEdited Warning', async () => {
      const list = await getJson(env, ['events.events.k8s.io']);
      return list.items.find((e: any) => e.reason === 'PrivateSecretEdited' && e.regarding?.name === 'nb');
    });
    expect(event.type).toBe('Warning');
    expect(event.note).toContain(`${PRIVATE} was changed by kubectl-patch`);
    expect(event.note).not.toContain('forged');
    await quiet();
    const w = reconcilerWrites(since).filter((e) => e.objectRef?.resource === 'secrets');
    expect(w.map((e) => [e.verb, e.objectRef?.name, e.responseStatus?.code])).toEqual([['patch', PRIVATE, 200]]);
  });

  it('disappears when the cluster no longer connects a Secret (one delete)', async () => {
    await quiet();
    const since = new Date();
    await kubectlOk(env, [
      'patch',
      'kdcluster',
      'nb',
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/spec/connections/secrets"}]',
    ]);
    await eventually('private Secret gone', async () => ((await privateSecret()) === undefined ? true : undefined));
    const w = reconcilerWrites(since).filter((e) => e.objectRef?.resource === 'secrets');
    expect(w.map((e) => [e.verb, e.objectRef?.name, e.responseStatus?.code])).toEqual([['delete', PRIVATE, 200]]);
  });
});

describe("a Secret of the private Secret's name that someone else made", () => {
  const SQUAT = 'kd-configmeta-private-sq';
  const FORGED = 'forged-3b9e11';
  const splice = async (pod: string) =>
    ((await getJson(env, ['pod', pod])).metadata?.annotations ?? {})['kd-connections.hpe.com/configmeta-splice'] as
      string | undefined;
  const condition = async () => {
    const c = await getJson(env, ['kdcluster', 'sq']);
    return (c.status?.conditions ?? []).find((x: { type: string }) => x.type === 'ConfigMetaSynced') as
      { status: string; reason: string; message: string } | undefined;
  };

  it('is never used or changed; ConfigMetaSynced and a Warning name it; the pods get no private half', async () => {
    // Made first, without the reconciler's label or an owner: the reconciler's create meets a 409.
    await apply(env, [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: SQUAT },
        stringData: { 'priv_configmeta.json': `{"token":"${FORGED}"}`, 'platform.json': '{}', version: 'x' },
      },
    ]);
    const before = await getJson(env, ['secret', SQUAT]);
    await apply(env, [kdCluster('sq', 'nb', { secrets: ['creds'] }), memberPod('sq-0', 'sq')]);
    const c = await eventually('ConfigMetaSynced names the Secret', async () => {
      const x = await condition();
      return x?.reason === 'PrivateSecretNotOwned' ? x : undefined;
    });
    expect(c.status).toBe('False');
    expect(c.message).toContain(`Secret ${env.namespace}/${SQUAT} is not this kdcluster's private configmeta Secret`);
    expect(c.message).toContain('it has no label kd-connections.hpe.com/private-configmeta-of=sq');
    const events = await kubectlOk(env, [
      'get',
      'events',
      '--field-selector',
      'reason=PrivateSecretNotOwned',
      '-o',
      'json',
    ]);
    expect(
      JSON.parse(events).items.map((e: { involvedObject: { name: string }; type: string }) => [
        e.type,
        e.involvedObject.name,
      ]),
    ).toContainEqual(['Warning', 'sq']);
    // The member got its document, without a private half (no version for the sidecar to join).
    const doc = await eventually('sq-0 has configmeta', () => podConfigMeta(env, 'sq-0'));
    expect(doc.doc.connections.secrets.creds[0]).toMatchObject({ data: { token: '' }, redacted: true });
    expect(await splice('sq-0')).toBe('');
    // Retries went on meanwhile (checked with backoff), and the Secret is as it was made.
    await quiet();
    const after = await getJson(env, ['secret', SQUAT]);
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.data).toEqual(before.data);
    expect(after.metadata.ownerReferences).toBeUndefined();
  });

  it('once it is deleted, the reconciler creates its own and the pods name its version', async () => {
    await kubectlOk(env, ['delete', 'secret', SQUAT]);
    const own = await eventually('own private Secret', async () => {
      const r = await env.kubectl(['get', 'secret', SQUAT, '-o', 'json']);
      const s = r.code === 0 ? (JSON.parse(r.stdout) as PrivateSecret) : undefined;
      return s?.metadata.ownerReferences?.length ? s : undefined;
    });
    expect(own.metadata.labels['kd-connections.hpe.com/private-configmeta-of']).toBe('sq');
    const version = Buffer.from(own.data.version!, 'base64').toString();
    await eventually('the pod names its version', async () =>
      (await splice('sq-0'))?.split(' ')[1] === version ? true : undefined,
    );
    await eventually('ConfigMetaSynced True', async () => ((await condition())?.status === 'True' ? true : undefined));
  });
});
