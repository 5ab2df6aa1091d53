/**
 * Fault: two writers race on the same clusters (conflict storms): no bump may be lost. Leader election is not fencing, so two reconcilers
 * writing at once must be harmless. Here they run WITHOUT leader election (both write all the time)
 * while a user changes connection lists with kubectl (no admission webhook is registered, so only the
 * reconcilers bump generators) and connected ConfigMaps are edited, in a bounded loop. In the end every
 * cluster must converge on the final state (pods hold the configmeta of the last edits, status synced,
 * generators above where they started, and quiet afterwards), and the refused writes must show up as
 * precondition failures that were retried — never as lost updates.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeClient } from '@kd-connections/shared/runtime';
import { useTestEnv } from '../support/cluster.js';
import { apply, configMap, kdApp, kdCluster, kubectlOk, memberPod } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import {
  clusterStates,
  converged,
  reconcilerWrites,
  sleep,
  testClient,
  waitQuiet,
  type ClusterState,
} from '../support/reconciler-state.js';
import { installCrds } from '../support/crds.js';
import { type ReconcilerProcess, startReconciler } from '../support/services.js';

const env = useTestEnv();
let client: KubeClient;
let racers: ReconcilerProcess[] = [];

const CLUSTERS = ['r0', 'r1', 'r2', 'r3'];
const CMS = ['cm-a', 'cm-b', 'cm-c'];
// The connection sets a user switches between (a cluster never holds an empty set here).
const SETS = [['cm-a'], ['cm-a', 'cm-b'], ['cm-b', 'cm-c'], ['cm-c'], ['cm-a', 'cm-c'], ['cm-a', 'cm-b', 'cm-c']];
const ROUNDS = 10;

const WRITE_KINDS = ['kdcluster', 'kdcluster_status', 'pod'];
const sum = async (name: string, labels: Record<string, string>) =>
  (await Promise.all(racers.map((r) => r.metric(name, labels)))).reduce((a, b) => a + b, 0);

/** Does the cluster's every pod hold exactly these ConfigMaps with these values? */
function holds(c: ClusterState, cms: string[], values: Record<string, string>): boolean {
  return c.pods.every((p) => {
    const got = p.doc?.connections?.configmaps ?? {};
    return (
      Object.keys(got).sort().join() === [...cms].sort().join() &&
      cms.every((cm) => got[cm]?.[0]?.metadata?.name === cm && got[cm][0].data.v === values[cm])
    );
  });
}

beforeAll(async () => {
  client = testClient(env);
  await installCrds(env);
  await apply(env, [
    kdApp('trainer', { category: 'training' }),
    // Each ConfigMap is its own configmeta group (cmType = its name), so a pod shows which it holds.
    ...CMS.map((cm) => configMap(cm, { v: '0' }, cm)),
    ...CLUSTERS.map((c) => kdCluster(c, 'trainer', { configmaps: ['cm-a'] }, ['controller'], 2)),
    ...CLUSTERS.flatMap((c) => [memberPod(`${c}-0`, c), memberPod(`${c}-1`, c)]),
  ]);
  racers = [
    await startReconciler(env, { identity: 'racer-1', leaderElect: false }),
    await startReconciler(env, { identity: 'racer-2', leaderElect: false }),
  ];
  for (const r of racers) await r.waitReady(60_000);
  await eventually(
    'first delivery (by two racing writers already)',
    async () => [...(await clusterStates(env, client)).values()].every(converged),
    60_000,
  );
  await waitQuiet(racers);
}, 180_000);

afterAll(async () => {
  for (const r of racers) await r.stop();
  client?.close();
});

describe('two writers racing', () => {
  it('converge on the last edits with no lost bump; refused writes are retried, never lost', async () => {
    const initial = await clusterStates(env, client);
    const since = new Date();
    const conflictsBefore = await sum('kd_reconciler_api_writes_total', { result: 'conflict' });
    const connections: Record<string, string[]> = Object.fromEntries(CLUSTERS.map((c) => [c, ['cm-a']]));
    const values: Record<string, string> = Object.fromEntries(CMS.map((cm) => [cm, '0']));

    // A deterministic sequence of concurrent user edits: each round changes one cluster's connections
    // (kubectl, as a user would) and one ConfigMap's data at the same moment, then pauses briefly.
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < ROUNDS; i++) {
      const cluster = CLUSTERS[i % CLUSTERS.length]!;
      const set = SETS[(i * 5 + 1) % SETS.length]!;
      const cm = CMS[i % CMS.length]!;
      connections[cluster] = set;
      values[cm] = `round-${i}`;
      await Promise.all([
        kubectlOk(env, [
          'patch',
          'kdcluster',
          cluster,
          '--type=merge',
          '-p',
          JSON.stringify({ spec: { connections: { configmaps: set } } }),
        ]),
        client.jsonPatch(`/api/v1/namespaces/${env.namespace}/configmaps/${cm}`, [
          { op: 'replace', path: '/data/v', value: `round-${i}` },
        ]),
      ]);
      await sleep(100 + Math.floor(random() * 300));
    }
    const editedAt = Date.now();

    const final = await eventually(
      'every cluster converged on the last edits',
      async () => {
        const s = await clusterStates(env, client);
        return CLUSTERS.every((c) => {
          const st = s.get(c)!;
          return (
            converged(st) &&
            [...(st.connections.configmaps ?? [])].sort().join() === [...connections[c]!].sort().join() &&
            holds(st, connections[c]!, values)
          );
        })
          ? s
          : undefined;
      },
      120_000,
    );
    const convergedAt = Date.now();
    // ...and it stays that way: no writer keeps undoing the other (no livelock, no late bump).
    await waitQuiet(racers, 3000);
    const settled = await clusterStates(env, client);
    for (const c of CLUSTERS) {
      expect(settled.get(c)!.generator).toBe(final.get(c)!.generator);
      expect(converged(settled.get(c)!)).toBe(true);
      expect(holds(settled.get(c)!, connections[c]!, values)).toBe(true);
      // No lost bump: every cluster saw changes, and its generator moved on from where it started.
      expect(settled.get(c)!.generator).toBeGreaterThan(initial.get(c)!.generator);
      expect(settled.get(c)!.status.lastConfigMetaGenerator).toBe(settled.get(c)!.generator);
    }

    // Both wrote; the writes one of them lost were refused by their preconditions (409, or 422 for a
    // failed JSON Patch test), counted as conflicts and retried — and the retries converged above.
    const w = reconcilerWrites(env, since, { events: false });
    const agents = new Set(w.filter((e) => (e.responseStatus?.code ?? 0) < 300).map((e) => e.userAgent));
    expect(agents).toEqual(new Set(['kd-connections-reconciler/racer-1', 'kd-connections-reconciler/racer-2']));
    const refused = w.filter((e) => (e.responseStatus?.code ?? 0) >= 300);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.filter((e) => ![409, 422].includes(e.responseStatus?.code ?? 0))).toEqual([]);
    const conflicts = (await sum('kd_reconciler_api_writes_total', { result: 'conflict' })) - conflictsBefore;
    expect(conflicts).toBe(refused.length);
    let otherFailures = 0;
    for (const kind of WRITE_KINDS)
      otherFailures += await sum('kd_reconciler_api_writes_total', { kind, result: 'error' });
    expect(otherFailures).toBe(0);
    expect(await sum('kd_reconciler_reconciles_total', { result: 'error' })).toBeGreaterThan(0);

    console.log(
      JSON.stringify({
        rounds: ROUNDS,
        convergedAfterLastEditMs: convergedAt - editedAt,
        generators: Object.fromEntries(
          CLUSTERS.map((c) => [c, `${initial.get(c)!.generator}→${settled.get(c)!.generator}`]),
        ),
        writes: w.length,
        refusedByPrecondition: refused.length,
        refusedByKind: refused.reduce<Record<string, number>>((m, e) => {
          const k = `${e.objectRef?.resource}${e.objectRef?.subresource ? '/' + e.objectRef.subresource : ''}`;
          m[k] = (m[k] ?? 0) + 1;
          return m;
        }, {}),
        reconcileErrors: await sum('kd_reconciler_reconciles_total', { result: 'error' }),
      }),
    );
  }, 180_000);
});
