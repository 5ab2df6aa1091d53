/**
 * The fixture of the leader fault tests: clusters × member pods connected to one ConfigMap `shared`
 * (key `settings`, value "1"), a leader and a warm standby with a short lease (5 s instead of 15 s keeps
 * the tests short; the mechanism is the same), first delivery done and both quiet. One cluster at a time
 * and one pod patch at a time per cluster stretch a fan-out so a fault lands in its middle.
 */
import type { KubeClient } from '@kd-connections/shared/runtime';
import type { TestEnv } from './cluster.js';
import { apply, configMap, kdApp, kdCluster, memberPod } from './kd-objects.js';
import { eventually } from './processes.js';
import { clusterStates, converged, waitQuiet, type ClusterState } from './reconciler-state.js';
import { installCrds } from './crds.js';
import { type ReconcilerProcess, startReconciler } from './services.js';

export const FAN_OUT_ARGS = [
  '--leader-elect-lease-duration=5s',
  '--leader-elect-renew-deadline=3s',
  '--leader-elect-retry-period=1s',
  '--concurrency=1',
  '--pod-concurrency=1',
];

export interface FanOut {
  clusters: string[];
  pods: number;
  leader: ReconcilerProcess;
  standby: ReconcilerProcess;
}

/** Creates the objects: `clusters` kdclusters named prefix00… with `pods` member pods each. */
export async function applyFanOut(
  env: TestEnv,
  o: { prefix: string; app: string; clusters?: number; pods?: number },
): Promise<{ clusters: string[]; pods: number }> {
  const clusters = Array.from({ length: o.clusters ?? 30 }, (_, i) => `${o.prefix}${String(i).padStart(2, '0')}`);
  const pods = o.pods ?? 3;
  await installCrds(env);
  await apply(env, [
    kdApp(o.app, { category: 'training', roles: ['worker'] }),
    configMap('shared', { v: '1' }, 'settings'),
    ...clusters.map((c) => kdCluster(c, o.app, { configmaps: ['shared'] }, ['worker'], pods)),
    ...clusters.flatMap((c) => Array.from({ length: pods }, (_, j) => memberPod(`${c}-${j}`, c, 'worker'))),
  ]);
  return { clusters, pods };
}

/** Waits until every cluster has converged and the reconcilers are quiet. */
export async function settled(env: TestEnv, client: KubeClient, recs: ReconcilerProcess[]): Promise<void> {
  await eventually(
    'first delivery to every pod',
    async () => [...(await clusterStates(env, client)).values()].every(converged),
    90_000,
  );
  await waitQuiet(recs);
}

export async function startFanOut(
  env: TestEnv,
  client: KubeClient,
  o: { prefix: string; app: string; leader: string; standby: string; clusters?: number; pods?: number },
): Promise<FanOut> {
  const { clusters, pods } = await applyFanOut(env, o);
  const leader = await startReconciler(env, { identity: o.leader, args: FAN_OUT_ARGS });
  await leader.waitForLog((l) => l.msg === 'became leader', 60_000);
  const standby = await startReconciler(env, { identity: o.standby, args: FAN_OUT_ARGS });
  await standby.waitReady(60_000);
  await settled(env, client, [leader, standby]);
  return { clusters, pods, leader, standby };
}

/** Edits the ConfigMap to `value` and calls `interrupt` once the leader has patched `atLeast` pods. */
export async function interruptFanOut(
  env: TestEnv,
  client: KubeClient,
  leader: ReconcilerProcess,
  interrupt: () => unknown,
  value = '2',
  atLeast = 10,
): Promise<number> {
  const podWrites = () => leader.metric('kd_reconciler_api_writes_total', { kind: 'pod', result: 'ok' });
  const base = await podWrites();
  await client.jsonPatch(`/api/v1/namespaces/${env.namespace}/configmaps/shared`, [
    { op: 'replace', path: '/data/v', value },
  ]);
  return eventually(
    'leader started the fan-out',
    async () => {
      const n = (await podWrites()) - base;
      if (n < atLeast) return undefined;
      interrupt();
      return n;
    },
    60_000,
    5,
  );
}

/** Waits until every cluster has converged with every pod holding `value` from `shared`. */
export function allPodsHold(
  env: TestEnv,
  client: KubeClient,
  value: string,
  timeoutMs = 60_000,
): Promise<Map<string, ClusterState>> {
  return eventually(
    'every pod holds the new configmeta',
    async () => {
      const s = await clusterStates(env, client);
      return [...s.values()].every(
        (c) => converged(c) && c.pods.every((p) => p.doc.connections.configmaps.settings[0].data.v === value),
      )
        ? s
        : undefined;
    },
    timeoutMs,
  );
}
