/**
 * The reconcile planner: which writes a reconcile makes (generator bump, pod patches, status) and which
 * events it posts, decided from an observation without any I/O.
 */
import { describe, expect, it } from '@jest/globals';
import { ANNOTATIONS_SIZE_LIMIT } from '../src/configmeta/annotation-size.js';
import { decideBump } from '../src/domain/generator.js';
import { membersOf } from '../src/configmeta/members.js';
import { deliveryOutcome, planReconcile, planStatus, type Observation } from '../src/plan/plan-reconcile.js';
import { resolveConnections } from '../src/plan/resolve-connections.js';
import { trimPod } from '../src/configmeta/trim-object.js';
import { ANNOTATION_CONFIGMETA_ROSTER } from '../src/domain/guestconfig-layout.js';
import {
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
  ANNOTATION_CONFIGMETA_VOLUME,
  type KDCluster,
} from '../src/domain/types.js';
import { NS, SYSTEM_NS, cluster, pod, uidFor } from './fixtures.js';
import { scenario } from './scenario.js';

const OPTS = { systemNamespace: SYSTEM_NS };
const NOW = '2026-12-02T12:00:00.000Z';

async function observe(mutate: (c: KDCluster) => void = () => {}, appFound = true): Promise<Observation> {
  const s = scenario();
  mutate(s.notebook);
  const own = appFound ? { app: s.app, namespace: NS } : undefined;
  const resolved = await resolveConnections(s.notebook, own, s.world, OPTS);
  const pods = (await s.world.podsOf(NS, 'notebook')).map((p) => trimPod(p as never));
  const members = membersOf(s.notebook, own?.app, pods);
  return { cluster: s.notebook, own, resolved, members, pods, now: NOW };
}

describe('decideBump', () => {
  const withStatus = (generator: number | undefined, status: KDCluster['status']) => {
    const c = cluster('nb', 'x', generator === undefined ? {} : { generator });
    c.metadata.resourceVersion = '77';
    c.status = status;
    return c;
  };

  it('first sight (no connectionsHash yet): no bump', () => {
    expect(decideBump(withStatus(1, {}), 'h1')).toBeUndefined();
  });

  it('a regeneration is pending (generator above lastConfigMetaGenerator): no second bump', () => {
    expect(decideBump(withStatus(3, { lastConfigMetaGenerator: 2, connectionsHash: 'h0' }), 'h1')).toBeUndefined();
  });

  it('the hash is unchanged: no bump', () => {
    expect(decideBump(withStatus(2, { lastConfigMetaGenerator: 2, connectionsHash: 'h1' }), 'h1')).toBeUndefined();
  });

  it('the hash changed: test the generator and replace it with generator + 1', () => {
    expect(decideBump(withStatus(2, { lastConfigMetaGenerator: 2, connectionsHash: 'h0' }), 'h1')).toEqual({
      from: 2,
      to: 3,
      ops: [
        { op: 'test', path: '/metadata/uid', value: uidFor('KubeDirectorCluster', NS, 'nb') },
        { op: 'test', path: '/spec/configMetaGenerator', value: 2 },
        { op: 'replace', path: '/spec/configMetaGenerator', value: 3 },
      ],
    });
  });

  it('no generator yet: guarded by the resourceVersion, and added', () => {
    expect(decideBump(withStatus(undefined, { connectionsHash: 'h0', lastConfigMetaGenerator: 0 }), 'h1')?.ops).toEqual(
      [
        { op: 'test', path: '/metadata/uid', value: uidFor('KubeDirectorCluster', NS, 'nb') },
        { op: 'test', path: '/metadata/resourceVersion', value: '77' },
        { op: 'add', path: '/spec/configMetaGenerator', value: 1 },
      ],
    );
  });
});

describe('planReconcile', () => {
  it('first sight: one patch per member pod, no bump, no events', async () => {
    const plan = planReconcile(await observe(), OPTS);
    expect(plan.bump).toBeUndefined();
    expect(plan.generator).toBe(1);
    expect(plan.podWrites.map((w) => w.pod)).toEqual(['kdss-nb-0']);
    expect(plan.podWrites[0]!.ops.some((op) => op.op === 'test')).toBe(true);
    expect(plan.events).toEqual([]);
  });

  it("the cluster's own app is missing: nothing to write but status, which says why", async () => {
    const o = await observe(() => {}, false);
    const plan = planReconcile(o, OPTS);
    expect(plan.appProblem).toBe(
      'app "jupyter-notebook" not found in namespace "ml" or in the system catalog (namespace "kd-system")',
    );
    expect(plan.podWrites).toEqual([]);
    const ops = planStatus(o.cluster, o, plan.appProblem, undefined);
    expect(JSON.stringify(ops)).toContain('AppNotFound');
  });

  it('changed content: a bump, the pods brought to the new generator, events naming the cause on both objects', async () => {
    const o = await observe((c) => {
      c.status = { connectionsHash: 'stale', lastConfigMetaGenerator: 1, connections: [] };
    });
    const plan = planReconcile(o, OPTS);
    expect(plan.bump).toMatchObject({ from: 1, to: 2 });
    expect(plan.generator).toBe(2);
    expect(plan.bump!.events[0]).toMatchObject({ reason: 'ConnectionChanged', type: 'Normal' });
    expect(plan.bump!.events[0]!.note).toContain('configMetaGenerator 1 → 2');
    expect(plan.bump!.events.slice(1).map((e) => [e.regarding.kind, e.reason])).toEqual([
      ['KubeDirectorCluster', 'ConnectionUsed'],
      ['ConfigMap', 'ConnectionUsed'],
      ['Secret', 'ConnectionUsed'],
    ]);
  });

  it('skips a pod that already holds the current configmeta', async () => {
    const first = await observe();
    const ops = planReconcile(first, OPTS).podWrites[0]!.ops;
    // The pod has no annotations yet: the patch adds the whole map.
    const add = ops.find((op) => op.op === 'add' && op.path === '/metadata/annotations') as {
      value: Record<string, string>;
    };
    const holds = {
      [ANNOTATION_CONFIGMETA_GENERATOR]: add.value[ANNOTATION_CONFIGMETA_GENERATOR]!,
      [ANNOTATION_CONFIGMETA_HASH]: add.value[ANNOTATION_CONFIGMETA_HASH]!,
      [ANNOTATION_CONFIGMETA_ROSTER]: add.value[ANNOTATION_CONFIGMETA_ROSTER]!,
    };
    const o = { ...first, pods: first.pods.map((p) => ({ ...p, metadata: { ...p.metadata, annotations: holds } })) };
    const plan = planReconcile(o, OPTS);
    expect(plan.podWrites).toEqual([]);
    expect(plan.synced).toEqual(['kdss-nb-0']);
    // A pod written before the roster digest existed (0.1.0) gets it added, and nothing else changes.
    const { [ANNOTATION_CONFIGMETA_ROSTER]: digest, ...older } = holds;
    const upgraded = planReconcile(
      { ...first, pods: first.pods.map((p) => ({ ...p, metadata: { ...p.metadata, annotations: older } })) },
      OPTS,
    );
    // (The cache holds no document text, so the write carries it again: the same text, the same hash.)
    const written = Object.fromEntries(
      upgraded.podWrites[0]!.ops.filter((op) => op.op === 'add').map((op) => [
        op.path,
        (op as { value: unknown }).value,
      ]),
    );
    expect(written['/metadata/annotations/kd-connections.hpe.com~1configmeta-roster']).toBe(digest);
    expect(written).not.toHaveProperty(['/metadata/annotations/kubedirector.hpe.com~1configmeta-hash']);
    expect(written).not.toHaveProperty(['/metadata/annotations/kubedirector.hpe.com~1configmeta-generator']);
  });

  it('configmeta that does not fit beside the other annotations: no pod write at all, a Warning event', async () => {
    const o = await observe();
    const big = trimPod(
      pod('kdss-nb-0', 'notebook', 'controller', {
        hostname: 'kdss-nb-0',
        subdomain: 'kdhs-nb',
        annotations: { other: 'x'.repeat(ANNOTATIONS_SIZE_LIMIT - 100) },
      }) as never,
    );
    const plan = planReconcile({ ...o, pods: [big] }, OPTS);
    expect(plan.podWrites).toEqual([]);
    expect(plan.tooLargeBytes).toBeGreaterThan(0);
    expect(plan.events).toEqual([
      expect.objectContaining({
        type: 'Warning',
        reason: 'ConfigMetaTooLarge',
        note: expect.stringContaining('262144'),
      }),
    ]);
  });
});

describe('deliveryOutcome and planStatus', () => {
  it('a failed pod write: a Warning naming the pod, and status records no completed generator', async () => {
    const o = await observe();
    const plan = planReconcile(o, OPTS);
    const { delivery, events } = deliveryOutcome(plan, { written: [], failed: { 'kdss-nb-0': 'boom' } }, o);
    expect(events).toEqual([
      expect.objectContaining({
        type: 'Warning',
        reason: 'ConfigMetaDeliveryFailed',
        note: 'configmeta generator 1 written to 0/1 member pods; failed: kdss-nb-0 (boom)',
      }),
    ]);
    const ops = planStatus(o.cluster, o, undefined, delivery);
    expect(JSON.stringify(ops)).toContain('PodPatchFailed');
    expect(JSON.stringify(ops)).not.toContain('lastConfigMetaGenerator');
  });

  it('all pods written: ConfigMetaDelivered; a status that already says it all needs no write', async () => {
    const o = await observe();
    const plan = planReconcile(o, OPTS);
    const { delivery, events } = deliveryOutcome(plan, { written: ['kdss-nb-0'], failed: {} }, o);
    expect(events.map((e) => e.reason)).toEqual(['ConfigMetaDelivered']);
    const ops = planStatus(o.cluster, o, undefined, delivery);
    expect(ops.length).toBeGreaterThan(0);
    // Apply the planned status and plan again: nothing left to write.
    const status = (ops.find((op) => op.op !== 'test' && op.path === '/status') as { value: KDCluster['status'] })
      ?.value;
    const after = { ...o, cluster: { ...o.cluster, status } };
    expect(planStatus(after.cluster, after, undefined, delivery)).toEqual([]);
  });

  it('records the node ids the members were rendered with, behind the identity preconditions', async () => {
    const o = await observe();
    const plan = planReconcile(o, OPTS);
    const { delivery } = deliveryOutcome(plan, { written: ['kdss-nb-0'], failed: {} }, o);
    const ops = planStatus(o.cluster, o, undefined, delivery);
    expect(ops[0]).toMatchObject({ op: 'test', path: '/metadata/uid' });
    const status = (ops.find((op) => op.op !== 'test' && op.path === '/status') as { value: KDCluster['status'] })
      ?.value;
    expect(status).toMatchObject({ lastNodeID: 1, nodeIDs: { 'kdss-nb-0': 1 } });
  });

  it('Ready follows the failed write to a retried success: only the changed conditions, behind preconditions', async () => {
    const o = await observe((c) => {
      c.metadata.generation = 5;
    });
    const plan = planReconcile(o, OPTS);
    const failed = deliveryOutcome(plan, { written: [], failed: { 'kdss-nb-0': 'boom' } }, o).delivery;
    const first = planStatus(o.cluster, o, undefined, failed);
    const status = (first.find((op) => op.op !== 'test' && op.path === '/status') as { value: KDCluster['status'] })
      .value!;
    const byType = (s: KDCluster['status']) => Object.fromEntries(s!.conditions!.map((c) => [c.type, c]));
    expect(byType(status)).toMatchObject({
      Ready: { status: 'False', reason: 'PodPatchFailed', observedGeneration: 5 },
      Reconciling: { status: 'True', reason: 'PodPatchFailed', observedGeneration: 5 },
    });
    expect(status.observedGeneration).toBe(5);

    const after = {
      ...o,
      cluster: { ...o.cluster, metadata: { ...o.cluster.metadata, resourceVersion: '9' }, status },
    };
    const ok = deliveryOutcome(planReconcile(after, OPTS), { written: ['kdss-nb-0'], failed: {} }, after).delivery;
    const second = planStatus(after.cluster, after, undefined, ok);
    expect(second.slice(0, 2)).toEqual([
      { op: 'test', path: '/metadata/uid', value: o.cluster.metadata.uid },
      { op: 'test', path: '/metadata/resourceVersion', value: '9' },
    ]);
    const conditions = second.find((op) => op.op === 'add' && op.path === '/status/conditions') as {
      value: NonNullable<KDCluster['status']>['conditions'];
    };
    expect(conditions.value!.map((c) => [c.type, c.status])).toEqual([
      ['ConnectionsResolved', 'True'],
      ['MembersSeated', 'True'],
      ['ConfigMetaSynced', 'True'],
      ['Ready', 'True'],
    ]);
  });
});

describe('member pods without the configmeta volume', () => {
  const bare = (name: string, annotations?: Record<string, string>) =>
    trimPod(
      pod(name, 'notebook', 'controller', {
        hostname: name,
        subdomain: 'kdhs-nb',
        withoutConfigMetaVolume: true,
        ...(annotations ? { annotations } : {}),
      }) as never,
    );

  it('trimPod keeps one flag, not the volumes; a pod with the volume or opted out carries none', () => {
    expect(bare('kdss-nb-0').spec).toEqual({
      hostname: 'kdss-nb-0',
      subdomain: 'kdhs-nb',
      missingConfigMetaVolume: true,
    });
    const mutated = trimPod(pod('kdss-nb-0', 'notebook', 'controller') as never);
    expect(mutated.spec).not.toHaveProperty('missingConfigMetaVolume');
    expect(mutated.spec).not.toHaveProperty('volumes');
    expect(bare('kdss-nb-0', { [ANNOTATION_CONFIGMETA_VOLUME]: 'false' }).spec).not.toHaveProperty(
      'missingConfigMetaVolume',
    );
  });

  it('still get the annotation; ConfigMetaSynced is False naming them and what to do; one Warning event', async () => {
    const o = { ...(await observe()), pods: [bare('kdss-nb-0')] };
    const plan = planReconcile(o, OPTS);
    expect(plan.podWrites.map((w) => w.pod)).toEqual(['kdss-nb-0']);
    expect(plan.missingVolume).toEqual(['kdss-nb-0']);
    const { delivery, events } = deliveryOutcome(plan, { written: ['kdss-nb-0'], failed: {} }, o);
    expect(events).toEqual([
      expect.objectContaining({ reason: 'ConfigMetaDelivered' }),
      expect.objectContaining({
        type: 'Warning',
        reason: 'PodsMissingConfigMetaVolume',
        note: expect.stringMatching(/^1 member pod\(s\) have no configmeta volume.*: kdss-nb-0\..*kubectl delete pod/),
      }),
    ]);
    const ops = planStatus(o.cluster, o, undefined, delivery);
    const status = (ops.find((op) => op.op !== 'test' && op.path === '/status') as { value: KDCluster['status'] })
      .value!;
    const synced = status.conditions!.find((c) => c.type === 'ConfigMetaSynced');
    expect(synced).toMatchObject({ status: 'False', reason: 'PodsMissingConfigMetaVolume' });
    expect(synced!.message).toContain('kdss-nb-0');
    // The annotation was delivered: the regeneration is complete even though the file cannot appear.
    expect(status.lastConfigMetaGenerator).toBe(1);

    // Steady state (or a restart): status already says it, so no event and no status write.
    const add = plan.podWrites[0]!.ops.find((op) => op.op === 'add' && op.path === '/metadata/annotations') as {
      value: Record<string, string>;
    };
    const holds = {
      [ANNOTATION_CONFIGMETA_GENERATOR]: add.value[ANNOTATION_CONFIGMETA_GENERATOR]!,
      [ANNOTATION_CONFIGMETA_HASH]: add.value[ANNOTATION_CONFIGMETA_HASH]!,
      [ANNOTATION_CONFIGMETA_ROSTER]: add.value[ANNOTATION_CONFIGMETA_ROSTER]!,
    };
    const pods = o.pods.map((p) => ({ ...p, metadata: { ...p.metadata, annotations: holds } }));
    const after = { ...o, pods, cluster: { ...o.cluster, status } };
    const again = planReconcile(after, OPTS);
    expect(again.podWrites).toEqual([]);
    const next = deliveryOutcome(again, { written: [], failed: {} }, after);
    expect(next.events).toEqual([]);
    expect(planStatus(after.cluster, after, undefined, next.delivery)).toEqual([]);
  });

  it('the message lists ten pods and counts the rest; a changed set posts a new event', async () => {
    const o = await observe();
    const names = Array.from({ length: 12 }, (_, i) => `kdss-nb-${String(i).padStart(2, '0')}`);
    const members = names.map((n) => ({ ...o.members[0]!, pod: n }));
    const pods = names.map((n) => bare(n));
    const obs = { ...o, members, pods };
    const plan = planReconcile(obs, OPTS);
    const { delivery, events } = deliveryOutcome(plan, { written: names, failed: {} }, obs);
    const note = events.find((e) => e.reason === 'PodsMissingConfigMetaVolume')!.note;
    expect(note).toContain('kdss-nb-09 and 2 more.');
    expect(note).not.toContain('kdss-nb-10');
    const status = (
      planStatus(obs.cluster, obs, undefined, delivery).find((op) => op.op !== 'test' && op.path === '/status') as {
        value: KDCluster['status'];
      }
    ).value;
    // One pod recreated through the webhook: the set changed, so the Warning is posted again.
    const fewer = {
      ...obs,
      cluster: { ...obs.cluster, status },
      pods: [trimPod(pod(names[0]!, 'notebook', 'controller') as never), ...pods.slice(1)],
    };
    const next = deliveryOutcome(planReconcile(fewer, OPTS), { written: [], failed: {} }, fewer);
    expect(next.events.find((e) => e.reason === 'PodsMissingConfigMetaVolume')?.note).toContain('11 member pod(s)');
  });
});
