/**
 * Fault: the leader reconciler is killed in the middle of a fan-out; the new leader must finish it with
 * no duplicate notification for the same generation and no lost one.
 * Two reconcilers with leader election (a short lease through --leader-elect-lease-duration/--leader-elect-renew-deadline/
 * --leader-elect-retry-period), 30 clusters × 3 member pods connected to one ConfigMap. The ConfigMap is edited; once
 * the leader has patched some but not all pods it is frozen (SIGSTOP, to pin the moment and check the
 * partial state) and killed (SIGKILL: no lease release, no cleanup). The standby must take over when the
 * lease expires and finish: every cluster's generator rose by exactly one, every pod holds that
 * generator and the new content, each bump and each pod patch happened exactly once across both.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeClient } from '@kd-connections/shared/runtime';
import { useTestEnv } from '../support/cluster.js';
import { eventually } from '../support/processes.js';
import { allPodsHold, interruptFanOut, startFanOut } from '../support/reconciler-fan-out.js';
import { clusterStates, reconcilerWrites, testClient, waitQuiet } from '../support/reconciler-state.js';
import { type ReconcilerProcess, startReconciler } from '../support/services.js';

const env = useTestEnv();
let client: KubeClient;
let leader: ReconcilerProcess;
let standby: ReconcilerProcess;
let CLUSTERS: string[];
let TOTAL_PODS: number;
const PODS = 3;

beforeAll(async () => {
  client = testClient(env);
  ({
    leader,
    standby,
    clusters: CLUSTERS,
  } = await startFanOut(env, client, {
    prefix: 'f',
    app: 'fan',
    leader: 'leader-a',
    standby: 'standby-b',
    pods: PODS,
  }));
  TOTAL_PODS = CLUSTERS.length * PODS;
}, 240_000);

afterAll(async () => {
  await leader?.stop('SIGKILL');
  await standby?.stop();
  client?.close();
});

describe('the leader killed mid-fan-out', () => {
  it('the standby takes over after the lease expires; no generator is skipped or repeated, no pod patched twice', async () => {
    expect(standby.logs().some((l) => l.msg === 'became leader')).toBe(false);
    const before = await clusterStates(env, client);
    expect([...before.values()].map((c) => c.generator)).toEqual(CLUSTERS.map(() => 0));

    const since = new Date();
    // Freeze the leader as soon as it has patched a few pods of this fan-out.
    const frozenAfter = await interruptFanOut(env, client, leader, () => leader.child.kill('SIGSTOP'));
    const frozen = await clusterStates(env, client);
    leader.child.kill('SIGKILL');
    const killedAt = Date.now();
    const atNew = [...frozen.values()].flatMap((c) => c.pods).filter((p) => p.generator === '1').length;
    const bumped = [...frozen.values()].filter((c) => c.generator === 1).length;
    // Mid-fan-out for real: some pods hold the new generator, others do not yet.
    expect(atNew).toBeGreaterThan(0);
    expect(atNew).toBeLessThan(TOTAL_PODS);

    const tookOver = await standby.waitForLog((l) => l.msg === 'became leader', 30_000);
    const takeoverMs = Date.parse(String(tookOver.time)) - killedAt;
    const final = await allPodsHold(env, client, '2');
    const doneAt = Date.now();
    await waitQuiet([standby]);

    // No generator skipped or repeated: each cluster rose by exactly one, and that is what its pods and
    // its status hold.
    for (const c of final.values()) {
      expect(c.generator).toBe(before.get(c.name)!.generator + 1);
      expect(c.status.lastConfigMetaGenerator).toBe(c.generator);
      expect(c.pods.map((p) => p.generator)).toEqual(c.pods.map(() => String(c.generator)));
    }
    // The witness outside both processes: exactly one successful bump per cluster and one successful
    // patch per pod across the two reconcilers; the standby wrote nothing before the leader died.
    const w = reconcilerWrites(env, since, { events: false });
    const ok = w.filter((e) => (e.responseStatus?.code ?? 0) < 300);
    const names = (resource: string) =>
      ok.filter((e) => e.objectRef?.resource === resource && !e.objectRef.subresource).map((e) => e.objectRef!.name);
    expect(names('kubedirectorclusters').sort()).toEqual(CLUSTERS);
    expect(names('pods').sort()).toEqual(CLUSTERS.flatMap((c) => Array.from({ length: PODS }, (_, j) => `${c}-${j}`)));
    const byStandby = w.filter((e) => e.userAgent?.includes('standby-b'));
    const byLeader = w.filter((e) => e.userAgent?.includes('leader-a'));
    expect(byStandby.length).toBeGreaterThan(0);
    expect(byStandby.filter((e) => Date.parse(e.requestReceivedTimestamp) < killedAt)).toEqual([]);
    // The Lease records the new holder with the configured duration.
    const lease = await client.get<any>(
      `/apis/coordination.k8s.io/v1/namespaces/${env.namespace}/leases/kd-connections-reconciler`,
    );
    expect(lease.spec).toMatchObject({ holderIdentity: 'standby-b', leaseDurationSeconds: 5 });

    console.log(
      JSON.stringify({
        leaderPodWritesWhenFrozen: frozenAfter,
        podsAtNewGeneratorWhenKilled: atNew,
        clustersBumpedWhenKilled: bumped,
        takeoverAfterKillMs: takeoverMs,
        allPodsCurrentAfterKillMs: doneAt - killedAt,
        writesByLeader: byLeader.length,
        writesByStandby: byStandby.length,
        failedWrites: w.filter((e) => (e.responseStatus?.code ?? 0) >= 300).length,
        leaseTransitions: lease.spec.leaseTransitions,
      }),
    );
  }, 180_000);

  it('refuses lease timings that would let a leader outlive its lease', async () => {
    // No namespace: only these flags (and the kubeconfig and metrics address) are given.
    const p = await startReconciler(
      { info: env.info },
      { args: ['--leader-elect-lease-duration=5s', '--leader-elect-renew-deadline=5s'] },
    );
    await eventually('exited at once', () => p.exited, 15_000);
    expect(await p.stop()).toBe(2);
    expect(p.output()).toContain('--leader-elect-renew-deadline must be less than --leader-elect-lease-duration');
  });
});
