/**
 * Fault: the leader loses its lease while alive — paused mid fan-out (SIGSTOP) for longer than the lease,
 * so the standby takes over, then resumed (SIGCONT) with a pod patch's answer waiting for it. A former
 * leader must make no further write: its renew deadline has passed, so it steps down the moment it runs
 * again, and the reconcile in flight is cut before its next write. Two reconcilers with a short lease,
 * 30 clusters × 3 member pods connected to one ConfigMap; the witness is the API server's audit log.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeClient } from '@kd-connections/shared/runtime';
import { useTestEnv } from '../support/cluster.js';
import { allPodsHold, interruptFanOut, startFanOut } from '../support/reconciler-fan-out.js';
import { clusterStates, reconcilerWrites, sleep, testClient, waitQuiet } from '../support/reconciler-state.js';
import { type ReconcilerProcess } from '../support/services.js';

const env = useTestEnv();
let client: KubeClient;
let leader: ReconcilerProcess;
let standby: ReconcilerProcess;
let totalPods: number;

beforeAll(async () => {
  client = testClient(env);
  const f = await startFanOut(env, client, { prefix: 'l', app: 'lost', leader: 'paused-a', standby: 'standby-b' });
  ({ leader, standby } = f);
  totalPods = f.clusters.length * f.pods;
}, 240_000);

afterAll(async () => {
  leader?.child.kill('SIGCONT');
  await leader?.stop();
  await standby?.stop();
  client?.close();
});

describe('a leader that lost its lease while paused', () => {
  it('steps down as soon as it runs again and makes no further write; the new leader finishes the fan-out', async () => {
    const pausedAfter = await interruptFanOut(env, client, leader, () => leader.child.kill('SIGSTOP'));
    const pausedAt = Date.now();
    const paused = await clusterStates(env, client);
    const atNew = [...paused.values()].flatMap((c) => c.pods).filter((p) => p.generator === '1').length;
    expect(atNew).toBeGreaterThan(0);
    expect(atNew).toBeLessThan(totalPods);

    const tookOver = await standby.waitForLog((l) => l.msg === 'became leader', 30_000);
    // Let the new leader work a little before the old one wakes up, as a real pause would.
    await sleep(1000);
    const resumedAt = new Date();
    leader.child.kill('SIGCONT');
    const stepped = await leader.waitForLog((l) => l.msg === 'stopped leading', 15_000);

    const final = await allPodsHold(env, client, '2');
    await waitQuiet([standby]);
    await sleep(1000); // the audit log is written as requests complete

    // The witness: nothing written by the former leader once it ran again (events included).
    const w = reconcilerWrites(env, resumedAt);
    const byOld = w.filter((e) => e.userAgent?.includes('paused-a'));
    expect(byOld.map((e) => `${e.verb} ${e.requestURI} ${e.responseStatus?.code}`)).toEqual([]);
    expect(stepped.reason).toBe('renew deadline passed');
    expect(Number(stepped.sinceLastRenewMs)).toBeGreaterThanOrEqual(3000);
    expect(await leader.metric('kd_reconciler_leader')).toBe(0);
    // It stays a follower: the standby keeps the lease.
    const lease = await client.get<any>(
      `/apis/coordination.k8s.io/v1/namespaces/${env.namespace}/leases/kd-connections-reconciler`,
    );
    expect(lease.spec.holderIdentity).toBe('standby-b');

    // The outcome is whole: each cluster bumped once and every pod at that generator.
    for (const c of final.values()) {
      expect(c.generator).toBe(1);
      expect(c.pods.map((p) => p.generator)).toEqual(c.pods.map(() => '1'));
    }

    console.log(
      JSON.stringify({
        leaderPodWritesWhenPaused: pausedAfter,
        podsAtNewGeneratorWhenPaused: atNew,
        takeoverAfterPauseMs: Date.parse(String(tookOver.time)) - pausedAt,
        stepDownAfterResumeMs: Date.parse(String(stepped.time)) - resumedAt.getTime(),
        stepDown: { reason: stepped.reason, sinceLastRenewMs: stepped.sinceLastRenewMs },
        reconcilesCutShort: await leader.metric('kd_reconciler_reconciles_total', { result: 'aborted' }),
        writesByOldLeaderAfterResume: byOld.length,
        writesByStandbyAfterResume: w.filter((e) => e.userAgent?.includes('standby-b')).length,
      }),
    );
  }, 180_000);
});
