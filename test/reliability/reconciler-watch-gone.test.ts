/**
 * Fault: every watch of the reconciler answers 410 Gone: the informers must relist, with no duplicate
 * writes. On a control plane of this file's own with the API server's watch cache off,
 * watches are served by etcd, so compacting etcd's history makes a resume from an old resourceVersion
 * fail with 410, as in production after a long disconnect. The reconciler is settled; etcd's revision is
 * moved on by unrelated writes; the API server is stopped, etcd compacted, the API server started. The
 * informers must relist (the 'gone' restarts) and, the world being unchanged, the reconciler must make
 * zero writes; a ConfigMap edit afterwards must cost exactly the minimum writes.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeClient } from '@kd-connections/shared/runtime';
import { countByResource } from '../support/audit.js';
import { useDedicatedControlPlane } from '../support/dedicated-controlplane.js';
import { compactEtcd } from '../support/etcd.js';
import { apply, configMap, kdApp, kdCluster, memberPod, secret } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import {
  clusterStates,
  converged,
  reconcilerWrites,
  startSettledReconciler,
  testClient,
  waitQuiet,
} from '../support/reconciler-state.js';
import { installCrds } from '../support/crds.js';
import { type ReconcilerProcess } from '../support/services.js';

const env = useDedicatedControlPlane({ apiserverFlags: ['--watch-cache=false'] });
let rec: ReconcilerProcess;
let client: KubeClient;

// private-secrets: the reconciler's own per-cluster private configmeta Secrets (metadata only).
/** The first clusters also connect a Secret. */
const WITH_SECRET = 2;
const INFORMERS = ['kdclusters', 'kdapps', 'configmaps', 'secrets', 'private-secrets', 'pods'];
const CLUSTERS = ['g0', 'g1', 'g2', 'g3', 'g4', 'g5'];
const PODS_PER_CLUSTER = 2;

beforeAll(async () => {
  client = testClient(env);
  await installCrds(env);
  await apply(env, [
    kdApp('trainer', { category: 'training' }),
    configMap('model', { v: '1' }, 'model'),
    secret('creds', { token: 'gone-test-secret-value' }),
    ...CLUSTERS.map((c, i) =>
      kdCluster(
        c,
        'trainer',
        i < WITH_SECRET ? { configmaps: ['model'], secrets: ['creds'] } : { configmaps: ['model'] },
        ['controller'],
        PODS_PER_CLUSTER,
      ),
    ),
    ...CLUSTERS.flatMap((c) => Array.from({ length: PODS_PER_CLUSTER }, (_, j) => memberPod(`${c}-${j}`, c))),
  ]);
  rec = await startSettledReconciler(env, client);
}, 240_000);

afterAll(async () => {
  await rec?.stop();
  client?.close();
});

describe('a watch answering 410 Gone', () => {
  it('relists every informer, writes nothing for an unchanged world, then costs exactly the minimum for an edit', async () => {
    // Unrelated writes (unlabelled ConfigMaps: no informer of the reconciler sees them) move etcd's
    // revision past every resourceVersion the informers hold.
    for (let i = 0; i < 10; i++)
      await client.request('POST', `/api/v1/namespaces/${env.namespace}/configmaps`, {
        body: { metadata: { name: `unrelated-${i}` }, data: { i: String(i) } },
      });
    expect(await rec.metric('kd_reconciler_watch_restarts_total', { reason: 'gone' })).toBe(0);

    await env.cp.stopApiServer();
    const compactedAt = await compactEtcd(env.cp.etcdUrl);
    const restart = new Date();
    await env.cp.startApiServer();
    const restartedAt = Date.now();

    // Each informer resumes its watch from its old resourceVersion, gets 410 and relists.
    await eventually(
      'every informer relisted after 410 Gone',
      async () => {
        for (const name of INFORMERS)
          if ((await rec.metric('kd_reconciler_watch_restarts_total', { informer: name, reason: 'gone' })) < 1)
            return false;
        return true;
      },
      90_000,
    );
    const relistedAt = Date.now();
    const goneLogs = rec.logs().filter((l) => l.msg === 'watch expired (410 Gone); relisting');
    expect(new Set(goneLogs.map((l) => l.informer))).toEqual(new Set(INFORMERS.map((n) => `${n}/${env.namespace}`)));
    // The API server was away long enough for the leader to step down; it must lead again (and then
    // resync every cluster), so "no writes" below also covers a full level-triggered pass.
    await eventually('leading again', async () => (await rec.metric('kd_reconciler_leader')) === 1, 60_000);
    const quietMs = await waitQuiet([rec], 3000);

    // Nothing changed in the world: the relist and the resync wrote nothing (events included).
    const afterRestart = reconcilerWrites(env, restart);
    expect(afterRestart).toEqual([]);
    const states = await clusterStates(env, client);
    for (const c of states.values()) {
      expect(converged(c)).toBe(true);
      expect(c.generator).toBe(0);
    }

    // The watches work again: one edit costs 1 bump + 1 status write per cluster + 1 patch per pod, and
    // one patch of the private Secret of each cluster that connects a Secret (root's copy of the whole
    // `connections` section, the ConfigMap included).
    const since = new Date();
    await client.jsonPatch(`/api/v1/namespaces/${env.namespace}/configmaps/model`, [
      { op: 'replace', path: '/data/v', value: '2' },
    ]);
    await eventually(
      'edit delivered',
      async () =>
        [...(await clusterStates(env, client)).values()].every(
          (c) =>
            converged(c) &&
            c.generator === 1 &&
            c.pods.every((p) => p.doc.connections.configmaps.model[0].data.v === '2'),
        ),
      60_000,
    );
    await waitQuiet([rec], 2000);
    const w = reconcilerWrites(env, since, { events: false });
    expect(countByResource(w)).toEqual({
      kubedirectorclusters: CLUSTERS.length,
      'kubedirectorclusters/status': CLUSTERS.length,
      pods: CLUSTERS.length * PODS_PER_CLUSTER,
      secrets: WITH_SECRET,
    });
    expect(w.every((e) => e.verb === 'patch' && e.responseStatus?.code === 200)).toBe(true);
    expect(new Set(w.filter((e) => e.objectRef?.resource === 'pods').map((e) => e.objectRef?.name)).size).toBe(
      CLUSTERS.length * PODS_PER_CLUSTER,
    );

    console.log(
      JSON.stringify({
        compactedAtRevision: compactedAt,
        relistedAfterRestartMs: relistedAt - restartedAt,
        quietAfterRelistMs: quietMs,
        goneRestarts: await rec.metric('kd_reconciler_watch_restarts_total', { reason: 'gone' }),
        errorRestarts: await rec.metric('kd_reconciler_watch_restarts_total', { reason: 'error' }),
        writesAfterRestart: afterRestart.length,
        writesForEdit: countByResource(w),
        leadership: rec
          .logs()
          .filter((l) => /leader|leading/.test(String(l.msg)))
          .map((l) => `${l.time} ${l.msg}`),
      }),
    );
  }, 180_000);
});
