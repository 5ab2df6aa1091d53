/**
 * Seats and stable node ids against a real API server: the reconciler records them in status (lastNodeID,
 * nodeIDs, seatHolders); a member "-10" is numbered after "-9"; a member whose pod is deleted keeps its
 * seat, id and place in the others' documents until its pod is back; lowering `members` releases the seats
 * past it (a pod still there is reported, not listed) and their ids are never handed out again.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { apply, getJson, kdApp, kdCluster, kubectlOk, memberPod, podConfigMeta } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { startReconciler, type ReconcilerProcess } from '../support/services.js';

const env = useTestEnv();
let rec: ReconcilerProcess;

const pods = (ordinals: number[]) => ordinals.map((i) => memberPod(`z-${i}`, 'z', 'broker'));
interface Status {
  lastNodeID?: number;
  nodeIDs?: Record<string, number>;
  seatHolders?: Record<string, { role: string; fqdn: string }>;
  conditions?: { type: string; status: string; reason: string; message: string }[];
}
const status = async () => ((await getJson(env, ['kdcluster', 'z'])).status ?? {}) as Status;
const seated = async () => (await status()).conditions?.find((c) => c.type === 'MembersSeated');
const nodeId = async (pod: string) => (await podConfigMeta(env, pod))?.doc.node.id as string | undefined;
const listedIds = async (pod: string) =>
  (await podConfigMeta(env, pod))?.doc.nodegroups['1'].roles.broker.node_ids as string[] | undefined;
const setMembers = (n: number) =>
  kubectlOk(env, [
    'patch',
    'kdcluster',
    'z',
    '--type=json',
    '-p',
    JSON.stringify([{ op: 'replace', path: '/spec/roles/0/members', value: n }]),
  ]);
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

beforeAll(async () => {
  await installCrds(env);
  await apply(env, [
    kdApp('kafka', { category: 'streaming', roles: ['broker'] }),
    kdCluster('z', 'kafka', {}, ['broker'], 11),
  ]);
  await apply(env, pods(range(11)));
  rec = await startReconciler(env, { args: [`--watch-namespaces=${env.namespace}`] });
  await rec.waitForLog((l) => l.msg === 'became leader');
}, 120_000);

afterAll(async () => {
  await rec?.stop();
});

it('ids and seats are recorded in status, kept while a pod is away, released by a shrink and never reused', async () => {
  const first = await eventually('eleven ids recorded', async () => {
    const s = await status();
    return Object.keys(s.nodeIDs ?? {}).length === 11 ? s : undefined;
  });
  expect(first.lastNodeID).toBe(11);
  expect(first.nodeIDs).toMatchObject({ 'z-0': 1, 'z-2': 3, 'z-9': 10, 'z-10': 11 });
  expect(first.seatHolders?.['z-5']).toEqual({ role: 'broker', fqdn: `z-5.z.${env.namespace}.svc.cluster.local` });
  await eventually('z-10 holds id 11', async () => (await nodeId('z-10')) === '11');
  const all = range(11).map((i) => String(i + 1));
  expect(await listedIds('z-0')).toEqual(all);

  // z-5's pod goes away (its StatefulSet would bring it back): it keeps its seat and id, and nobody's
  // document changes.
  const z0 = (await getJson(env, ['pod', 'z-0'])).metadata.annotations;
  await kubectlOk(env, ['delete', 'pod', 'z-5', '--wait=true']);
  await eventually('MembersSeated says z-5 is away', async () => (await seated())?.reason === 'MembersAway');
  expect((await status()).nodeIDs).toEqual(first.nodeIDs);
  expect((await getJson(env, ['pod', 'z-0'])).metadata.annotations).toEqual(z0);
  await apply(env, pods([5]));
  await eventually('z-5 back with id 6', async () => (await nodeId('z-5')) === '6');
  expect(await listedIds('z-5')).toEqual(all);

  // members 11 → 9: seats 9 and 10 are released; z-9 and z-10, still there, are reported, not listed.
  await setMembers(9);
  const shrunk = await eventually('seats 9 and 10 released', async () => {
    const s = await status();
    return s.nodeIDs && Object.keys(s.nodeIDs).length === 9 ? s : undefined;
  });
  expect(shrunk.lastNodeID).toBe(11);
  expect(shrunk.conditions?.find((c) => c.type === 'MembersSeated')).toMatchObject({ reason: 'PodsBeyondSeats' });
  expect(shrunk.conditions?.find((c) => c.type === 'MembersSeated')?.message).toContain(
    'z-10: ordinal 10 is beyond the 9 seat(s)',
  );
  await eventually('z-0 lists nine members', async () => (await listedIds('z-0'))?.length === 9);
  await kubectlOk(env, ['delete', 'pod', 'z-9', 'z-10', '--wait=true']);

  // members 9 → 12: the new seats get new ids, past every id ever given.
  await setMembers(12);
  await apply(env, pods([9, 10, 11]));
  const grown = await eventually('three new ids', async () => {
    const s = await status();
    return s.nodeIDs && Object.keys(s.nodeIDs).length === 12 ? s : undefined;
  });
  expect([grown.nodeIDs!['z-9'], grown.nodeIDs!['z-10'], grown.nodeIDs!['z-11'], grown.lastNodeID]).toEqual([
    12, 13, 14, 14,
  ]);
  await eventually('z-10 holds id 13', async () => (await nodeId('z-10')) === '13');
  expect(await nodeId('z-8')).toBe('9');
  expect(await seated()).toMatchObject({ status: 'True', reason: 'Seated' });
});
