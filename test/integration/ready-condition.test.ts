/**
 * The kdcluster Ready condition through `kubectl wait`, on the real control plane with the reconciler
 * running: Ready once connections resolve and configmeta is delivered; Ready=False with Stalled=True when
 * a connected ConfigMap disappears, and back; and no answer from an older generation (kubectl compares
 * the condition's observedGeneration with metadata.generation). No admission webhook is registered.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { apply, configMap, getJson, kdApp, kdCluster, kubectlOk, memberPod } from '../support/kd-objects.js';
import { type ReconcilerProcess, startReconciler } from '../support/services.js';

const env = useTestEnv();
let rec: ReconcilerProcess | undefined;

const wait = (condition: string, timeout = '60s') =>
  env.kubectl(['wait', `--for=condition=${condition}`, 'kdcluster/r', `--timeout=${timeout}`]);
const conditions = async () => {
  const c = await getJson(env, ['kdcluster', 'r']);
  const byType = Object.fromEntries(
    ((c.status?.conditions ?? []) as { type: string }[]).map((x) => [x.type, x as Record<string, unknown>]),
  );
  return { generation: c.metadata.generation as number, observed: c.status?.observedGeneration as number, byType };
};

beforeAll(async () => {
  await installCrds(env);
  await apply(env, [
    kdApp('nb', { category: 'notebook' }),
    configMap('model', { path: '/models/v1' }),
    configMap('extra', { path: '/extra' }),
    kdCluster('r', 'nb', { configmaps: ['model'] }),
    memberPod('r-0', 'r'),
  ]);
  rec = await startReconciler(env);
}, 120_000);

afterAll(async () => {
  await rec?.stop();
});

describe('kubectl wait --for=condition=Ready', () => {
  it('returns once connections resolve and configmeta is delivered, for the current generation', async () => {
    const r = await wait('Ready');
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout).toContain('condition met');
    const { generation, observed, byType } = await conditions();
    expect(observed).toBe(generation);
    expect(byType.Ready).toMatchObject({ status: 'True', reason: 'Ready', observedGeneration: generation });
    expect(byType).not.toHaveProperty('Stalled');
    expect(byType).not.toHaveProperty('Reconciling');
  });

  it('a connected ConfigMap deleted: Ready=False and Stalled=True; recreated: Ready again, Stalled gone', async () => {
    const delivered = () => rec!.metric('kd_reconciler_configmeta_delivery_latency_seconds_count');
    const deliveriesBefore = await delivered();
    await kubectlOk(env, ['delete', 'configmap', 'model']);
    const stalled = await wait('Stalled');
    expect({ code: stalled.code, stderr: stalled.stderr }).toEqual({ code: 0, stderr: '' });
    expect((await wait('Ready=false', '10s')).code).toBe(0);
    const { byType } = await conditions();
    expect(byType.Ready).toMatchObject({ status: 'False', reason: 'Missing' });
    expect(byType.Stalled).toMatchObject({ status: 'True', reason: 'Missing' });

    await apply(env, [configMap('model', { path: '/models/v2' })]);
    expect((await wait('Ready')).code).toBe(0);
    expect((await conditions()).byType).not.toHaveProperty('Stalled');
    // Both changes reached the member pod (the connection gone, then back): each delivery was timed.
    expect(await delivered()).toBeGreaterThanOrEqual(deliveriesBefore + 2);
    const q = { controller: 'kubedirectorcluster', name: 'kubedirectorcluster' };
    expect(await rec!.metric('workqueue_adds_total', q)).toBeGreaterThan(0);
    expect(await rec!.metric('controller_runtime_reconcile_total', { result: 'success' })).toBeGreaterThan(0);
    expect(await rec!.metric('leader_election_master_status')).toBe(1);
  });

  it('a spec change the reconciler has not seen: Ready=True of the old generation does not satisfy the wait', async () => {
    expect((await wait('Ready')).code).toBe(0);
    await rec!.stop();
    rec = undefined;
    await kubectlOk(env, [
      'patch',
      'kdcluster',
      'r',
      '--type=json',
      '-p',
      JSON.stringify([{ op: 'add', path: '/spec/connections/configmaps/-', value: 'extra' }]),
    ]);
    const before = await conditions();
    expect(before.byType.Ready).toMatchObject({ status: 'True' });
    expect(before.byType.Ready!.observedGeneration).toBeLessThan(before.generation);
    const stale = await wait('Ready', '3s');
    expect(stale.code).not.toBe(0);
    expect(stale.stderr).toMatch(/timed out/);

    rec = await startReconciler(env);
    expect((await wait('Ready')).code).toBe(0);
    const after = await conditions();
    expect(after.observed).toBe(after.generation);
    expect(after.byType.Ready).toMatchObject({ status: 'True', observedGeneration: after.generation });
  });
});
