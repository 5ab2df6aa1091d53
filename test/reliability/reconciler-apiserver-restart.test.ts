/**
 * Fault: the API server goes away under a running reconciler and comes back. On a control plane of this file's own: the reconciler is
 * settled; a ConfigMap is edited and the API server is stopped right after; it stays down ~10 s; it is
 * started again (same port, same etcd) and more changes are made at once. The reconciler process must
 * stay up (no crash, no restart), its watches must retry with growing backoff, /healthz (liveness) must
 * stay 200 throughout, and every change from before the stop and after the restart must be delivered.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { useDedicatedControlPlane } from '../support/dedicated-controlplane.js';
import { apply, configMap, kdApp, kdCluster, memberPod } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import {
  clusterStates,
  converged,
  sleep,
  startSettledReconciler,
  testClient,
  waitQuiet,
} from '../support/reconciler-state.js';
import type { KubeClient } from '@kd-connections/shared/runtime';
import { installCrds } from '../support/crds.js';
import { type ReconcilerProcess } from '../support/services.js';

const env = useDedicatedControlPlane();
let rec: ReconcilerProcess;
let client: KubeClient;

const INFORMERS = ['kdclusters', 'kdapps', 'configmaps', 'secrets', 'pods'];
// cluster → connected ConfigMaps; n1 has none (it only gets a new member after the restart).
const CLUSTERS: Record<string, string[]> = {
  m1: ['model'],
  m2: ['model'],
  b1: ['model', 'extra'],
  x1: ['extra'],
  n1: [],
};

const cmPath = (name: string) => `/api/v1/namespaces/${env.namespace}/configmaps/${name}`;

beforeAll(async () => {
  client = testClient(env);
  await installCrds(env);
  await apply(env, [
    kdApp('trainer', { category: 'training' }),
    configMap('model', { v: '1' }, 'model'),
    configMap('extra', { v: '1' }, 'extra'),
    ...Object.entries(CLUSTERS).map(([c, cms]) =>
      kdCluster(c, 'trainer', cms.length ? { configmaps: cms } : {}, ['controller'], 3),
    ),
    ...Object.keys(CLUSTERS).flatMap((c) => [memberPod(`${c}-0`, c), memberPod(`${c}-1`, c)]),
  ]);
  rec = await startSettledReconciler(env, client);
}, 240_000);

afterAll(async () => {
  await rec?.stop();
  client?.close();
});

describe('the API server restarted under the reconciler', () => {
  it('keeps the process alive and healthy, retries watches with growing backoff, and loses no change', async () => {
    const pid = rec.child.pid;
    const before = await clusterStates(env, client);
    for (const c of before.values()) expect(c.generator).toBe(0);

    // A change right before the stop: whether the reconciler got to it before the API server went
    // away is a matter of milliseconds; either way it must arrive in the end.
    await client.jsonPatch(cmPath('model'), [{ op: 'replace', path: '/data/v', value: '2' }]);
    const stopping = Date.now();
    await env.cp.stopApiServer();
    const stoppedAt = Date.now();

    // ~10 s without an API server: liveness must stay green (it must not depend on the API server).
    const health: number[] = [];
    while (Date.now() - stoppedAt < 10_000) {
      const r = await fetch(`http://127.0.0.1:${rec.port}/healthz`).catch(() => undefined);
      health.push(r?.status ?? 0);
      await sleep(250);
    }
    expect(rec.exited).toBe(false);
    const restarting = Date.now();
    await env.cp.startApiServer();
    const restartedAt = Date.now();

    // Changes right after the restart: a connected ConfigMap edited, a new member pod.
    await client.jsonPatch(cmPath('extra'), [{ op: 'replace', path: '/data/v', value: '2' }]);
    await client.request('POST', `/api/v1/namespaces/${env.namespace}/pods`, { body: memberPod('n1-2', 'n1') });
    const atRestart = await clusterStates(env, client);

    const final = await eventually(
      'every change delivered after the restart',
      async () => {
        const s = await clusterStates(env, client);
        const ok = [...s.values()].every(
          (c) =>
            converged(c) &&
            c.pods.every(
              (p) =>
                (!CLUSTERS[c.name]!.includes('model') || p.doc.connections.configmaps.model[0].data.v === '2') &&
                (!CLUSTERS[c.name]!.includes('extra') || p.doc.connections.configmaps.extra[0].data.v === '2'),
            ),
        );
        return ok && s.get('n1')!.pods.length === 3 ? s : undefined;
      },
      90_000,
    );
    const deliveredAt = Date.now();
    for (let i = 0; i < 4; i++) {
      const r = await fetch(`http://127.0.0.1:${rec.port}/healthz`);
      health.push(r.status);
    }

    // Nothing lost, nothing doubled: one bump per edit each cluster saw (b1 saw both edits; whether
    // they were one regeneration or two depends on whether the first was handled before the stop).
    const gen = (c: string) => final.get(c)!.generator;
    expect({ m1: gen('m1'), m2: gen('m2'), x1: gen('x1'), n1: gen('n1') }).toEqual({ m1: 1, m2: 1, x1: 1, n1: 0 });
    expect([1, 2]).toContain(gen('b1'));
    expect(final.get('n1')!.pods.map((p) => p.generator)).toEqual(['0', '0', '0']);
    expect(final.get('n1')!.pods.find((p) => p.name === 'n1-2')!.doc.node.fqdn).toBe(
      `n1-2.n1.${env.namespace}.svc.cluster.local`,
    );

    // The same process throughout: no crash, no restart; liveness 200 every time it was asked.
    expect(rec.exited).toBe(false);
    expect(rec.child.pid).toBe(pid);
    expect(rec.logs().filter((l) => l.msg === 'starting')).toHaveLength(1);
    expect(health.length).toBeGreaterThanOrEqual(30);
    expect(health.filter((s) => s !== 200)).toEqual([]);
    expect(await rec.metric('kd_reconciler_leader')).toBe(1);

    // Every informer's watch failed while the API server was down and retried with growing delays.
    const failures = rec
      .logs()
      .filter(
        (l) =>
          l.msg === 'list/watch failed; retrying' &&
          Date.parse(String(l.time)) >= stopping &&
          Date.parse(String(l.time)) <= restartedAt,
      );
    const backoff: Record<string, number[]> = {};
    for (const name of INFORMERS) {
      const mine = failures.filter((l) => l.informer === `${name}/${env.namespace}`);
      const delays = mine.map((l) => Number(l.retryInMs));
      const counts = mine.map((l) => Number(l.failures));
      backoff[name] = delays;
      expect(delays.length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < delays.length; i++) {
        expect(counts[i]).toBe(counts[i - 1]! + 1);
        expect(delays[i]).toBeGreaterThan(delays[i - 1]!);
      }
      expect(
        await rec.metric('kd_reconciler_watch_restarts_total', { informer: name, reason: 'error' }),
      ).toBeGreaterThanOrEqual(delays.length);
    }

    const quietMs = await waitQuiet([rec]);
    console.log(
      JSON.stringify({
        apiServerStopMs: stoppedAt - stopping,
        downMs: restartedAt - stoppedAt,
        apiServerStartMs: restartedAt - restarting,
        deliveredAfterRestartMs: deliveredAt - restartedAt,
        quietAfterMs: quietMs,
        healthzProbes: health.length,
        watchBackoffMs: backoff,
        leadership: rec
          .logs()
          .filter((l) => /leader|leading/.test(String(l.msg)))
          .map((l) => `${l.time} ${l.msg}`),
        b1Generator: gen('b1'),
        modelPodsAtNewGeneratorRightAfterRestart: [...atRestart.values()]
          .filter((c) => CLUSTERS[c.name]!.includes('model'))
          .flatMap((c) => c.pods)
          .filter((p) => p.doc?.connections.configmaps.model[0].data.v === '2').length,
        watchRestarts: {
          error: await rec.metric('kd_reconciler_watch_restarts_total', { reason: 'error' }),
          gone: await rec.metric('kd_reconciler_watch_restarts_total', { reason: 'gone' }),
        },
      }),
    );
  }, 180_000);
});
