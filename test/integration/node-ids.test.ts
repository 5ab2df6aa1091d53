/**
 * Stable node ids against a real API server: the reconciler records them in status (lastNodeID, nodeIDs),
 * a member keeps its id when others leave or join, a member "-10" is numbered after "-9", and a released
 * id is never handed out again.
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
const ids = async () =>
  ((await getJson(env, ['kdcluster', 'z'])).status ?? {}) as { lastNodeID?: number; nodeIDs?: Record<string, number> };
const nodeId = async (pod: string) => (await podConfigMeta(env, pod))?.doc.node.id as string | undefined;

beforeAll(async () => {
  await installCrds(env);
  await apply(env, [
    kdApp('kafka', { category: 'streaming', roles: ['broker'] }),
    kdCluster('z', 'kafka', {}, ['broker']),
  ]);
  await apply(env, pods([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
  rec = await startReconciler(env, { args: [`--watch-namespaces=${env.namespace}`] });
  await rec.waitForLog((l) => l.msg === 'became leader');
}, 120_000);

afterAll(async () => {
  await rec?.stop();
});

it('ids are recorded in status, kept when members leave and join, and never reused', async () => {
  const first = await eventually('eleven ids recorded', async () => {
    const s = await ids();
    return Object.keys(s.nodeIDs ?? {}).length === 11 ? s : undefined;
  });
  expect(first.lastNodeID).toBe(11);
  expect(first.nodeIDs).toMatchObject({ 'z-0': 1, 'z-2': 3, 'z-9': 10, 'z-10': 11 });
  await eventually('z-10 holds id 11', async () => (await nodeId('z-10')) === '11');

  // z-5 leaves (its ordinal is past the declared size of 1, so its id is released): nobody is renumbered.
  await kubectlOk(env, ['delete', 'pod', 'z-5', '--wait=true']);
  const after = await eventually('z-5 released', async () => {
    const s = await ids();
    return s.nodeIDs && !('z-5' in s.nodeIDs) && Object.keys(s.nodeIDs).length === 10 ? s : undefined;
  });
  const { ['z-5']: _gone, ...rest } = first.nodeIDs!;
  expect(after.nodeIDs).toEqual(rest);
  expect(after.lastNodeID).toBe(11);
  expect(await nodeId('z-10')).toBe('11');
  expect(await nodeId('z-6')).toBe('7');

  // z-5 comes back and z-11 joins: new ids past every id ever given.
  await apply(env, pods([5, 11]));
  const again = await eventually('z-5 and z-11 numbered', async () => {
    const s = await ids();
    return s.nodeIDs?.['z-5'] !== undefined && s.nodeIDs['z-11'] !== undefined ? s : undefined;
  });
  expect([again.nodeIDs!['z-5'], again.nodeIDs!['z-11'], again.lastNodeID]).toEqual([12, 13, 13]);
  await eventually('z-5 holds id 12', async () => (await nodeId('z-5')) === '12');
  expect(await nodeId('z-10')).toBe('11');
});
