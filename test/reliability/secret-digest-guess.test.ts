/**
 * A user who may view clusters, pods and events but not Secrets must not recover a
 * low-entropy Secret value offline. A Secret holding a 4-digit PIN is connected, then rotated to another
 * PIN (a regeneration, with its events); everything such a user can read is collected with their own
 * rights and every one of the 10,000 PINs is tried against every digest-like string in it. The digest
 * key is a Secret the reconciler creates once and reads on each restart, and never logs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { apply, getJson, kdApp, kdCluster, kubectlOk, memberPod, secret } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { viewOnly } from '../support/view-only.js';
import { startReconciler, type ReconcilerProcess } from '../support/services.js';
import { guessFourDigits } from '../support/secret-guess.js';

const env = useTestEnv();
const VIEWER = 'digest-guess-viewer';
const KEY_SECRET = 'kd-connections-digest-key';
let rec: ReconcilerProcess;

const asViewer = (args: string[]) => kubectlOk(env, [...args, `--as=${VIEWER}`]);
const clusterStatus = async () => (await getJson(env, ['kdcluster', 'pinned'])).status ?? {};
const synced = async (generator: number) => {
  const s = await clusterStatus();
  const ok = (s.conditions ?? []).some(
    (c: { type: string; status: string }) => c.type === 'ConfigMetaSynced' && c.status === 'True',
  );
  return ok && s.lastConfigMetaGenerator === generator ? s : undefined;
};

beforeAll(async () => {
  await installCrds(env);
  await apply(env, [
    ...viewOnly(VIEWER),
    kdApp('nb', { category: 'notebook' }),
    secret('pin', { pin: '4821' }, 'db'),
    kdCluster('pinned', 'nb', { secrets: ['pin'] }),
    memberPod('pinned-0', 'pinned'),
  ]);
  rec = await startReconciler(env);
  await rec.waitForLog((l) => l.msg === 'became leader');
  await eventually('cluster synced', () => synced(0));
  // Rotate to another PIN: a regeneration, its events, and a new connectionsHash.
  await kubectlOk(env, ['patch', 'secret', 'pin', '--type=merge', '-p', '{"stringData":{"pin":"0735"}}']);
  await eventually('regenerated after the rotation', () => synced(1), 60_000);
}, 120_000);

afterAll(async () => {
  await rec?.stop();
});

describe('a view-only user and a 4-digit Secret value', () => {
  it('cannot read the Secret', async () => {
    const r = await env.kubectl(['auth', 'can-i', 'get', 'secret/pin', `--as=${VIEWER}`]);
    expect(r.stdout.trim()).toBe('no');
  });

  it('cannot guess either PIN from status, events and pod annotations', async () => {
    const clusters = await asViewer(['get', 'kubedirectorclusters.kubedirector.hpe.com', '-o', 'json']);
    const readable = [
      clusters,
      await asViewer(['get', 'pods', '-o', 'json']),
      await asViewer(['get', 'events.events.k8s.io', '-o', 'json']),
      await asViewer(['get', 'events', '-o', 'json']),
    ].join('\n');
    const status = JSON.parse(clusters).items[0].status;
    // The material is there: a hash over the connections, the regeneration's events, the pod's configmeta.
    expect(status.connectionsHash).toMatch(/^[0-9a-f]{64}$/);
    expect(status.connections).toEqual([{ kind: 'Secret', name: 'pin', state: 'Connected' }]);
    expect(readable).toContain('connected secret pin changed');
    const pod = await getJson(env, ['pod', 'pinned-0']);
    const entry = JSON.parse(pod.metadata.annotations['kubedirector.hpe.com/configmeta']).connections.secrets.db[0];
    expect(entry).toEqual({
      // Name and type label are base64, as KubeDirector renders them (Go []byte).
      metadata: { name: Buffer.from('pin').toString('base64') },
      labels: { 'kubedirector.hpe.com/secretType': Buffer.from('db').toString('base64') },
      annotations: {},
      data: { pin: '' },
      redacted: true,
    });
    // The uid is public too (events name it); the guess gets it, the key it does not.
    const uid = (await getJson(env, ['secret', 'pin'])).metadata.uid as string;
    const target = { readable, name: 'pin', dataKey: 'pin', uid, entry };
    expect(readable.match(/[0-9a-f]{16,}/g)?.length ?? 0).toBeGreaterThan(0);
    expect(guessFourDigits(target)).toBeUndefined();
    // With the reconciler's key the same guess succeeds: status depends on the value only through the key.
    const key = Buffer.from((await getJson(env, ['secret', KEY_SECRET])).data.key as string, 'base64');
    expect(guessFourDigits({ ...target, key })).toBe('0735');
  });

  it('the key Secret is created once, read on restart (no write), and never logged', async () => {
    const before = await getJson(env, ['secret', KEY_SECRET]);
    expect(before.immutable).toBe(true);
    const key = before.data.key as string;
    expect(Buffer.from(key, 'base64')).toHaveLength(32);
    const firstOutput = rec.output();
    await rec.stop();
    rec = await startReconciler(env);
    await rec.waitForLog((l) => l.msg === 'became leader');
    // Synced again with the same key: the same connectionsHash, no regeneration.
    await eventually('restarted reconciler synced', () => synced(1));
    const after = await getJson(env, ['secret', KEY_SECRET]);
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(firstOutput).toContain('created the Secret digest key');
    expect(rec.logs().some((l) => l.msg === 'created the Secret digest key')).toBe(false);
    for (const text of [firstOutput, rec.output()]) {
      expect(text).not.toContain(key);
      expect(text).not.toContain(Buffer.from(key, 'base64').toString('hex'));
    }
  });
});
