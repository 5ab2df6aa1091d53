/**
 * Members: the pods that fill a cluster's seats (spec.roles[].members; StatefulSet ordinals say which
 * pods), in KubeDirector's order, with stable node ids; a member whose pod is away keeps its place.
 */
import { describe, expect, it } from '@jest/globals';
import { isMemberOf, isPodReady, membershipOf, membersOf, seatStateOf } from '../src/configmeta/members.js';
import { minimumOf, ordinalOf, seatCounts } from '../src/configmeta/seats.js';
import { LABEL_KDCLUSTER, type KDCluster, type KDClusterRole, type PodLike } from '../src/domain/types.js';
import { app, cluster, pod } from './fixtures.js';

const sparkApp = app('spark', {
  roles: [
    { id: 'controller', cardinality: '1' },
    { id: 'worker', cardinality: '2+' },
    { id: 'jupyter', cardinality: '0+' },
  ],
});
const spark = cluster('spark', 'spark', {
  roles: [
    { id: 'worker', members: 2 },
    { id: 'controller', members: 1 },
  ],
});
/** The cluster after a delivery: status holds what `members` were rendered with. */
const delivered = (c: KDCluster, pods: PodLike[], roles?: KDClusterRole[]): KDCluster => ({
  ...c,
  spec: { ...c.spec, ...(roles ? { roles } : {}) },
  status: { ...seatStateOf(c, membersOf(c, sparkApp, pods)) },
});

describe('membersOf', () => {
  it('orders members by app role order, then node id; ids by role order, then ordinal', () => {
    const members = membersOf(spark, sparkApp, [
      pod('spark-w-1', 'spark', 'worker'),
      pod('spark-c-0', 'spark', 'controller'),
      pod('spark-w-0', 'spark', 'worker', { ready: false }),
    ]);
    expect(members).toEqual([
      {
        pod: 'spark-c-0',
        uid: expect.any(String),
        role: 'controller',
        id: '1',
        fqdn: 'spark-c-0.spark.ml.svc.cluster.local',
        domain: 'spark.ml.svc.cluster.local',
        ready: true,
        present: true,
      },
      {
        pod: 'spark-w-0',
        uid: expect.any(String),
        role: 'worker',
        id: '2',
        fqdn: 'spark-w-0.spark.ml.svc.cluster.local',
        domain: 'spark.ml.svc.cluster.local',
        ready: false,
        present: true,
      },
      {
        pod: 'spark-w-1',
        uid: expect.any(String),
        role: 'worker',
        id: '3',
        fqdn: 'spark-w-1.spark.ml.svc.cluster.local',
        domain: 'spark.ml.svc.cluster.local',
        ready: true,
        present: true,
      },
    ]);
  });

  it('a member -10 gets its id by ordinal, not by name order', () => {
    const c = cluster('kafka', 'kafka', { roles: [{ id: 'broker', members: 11 }] });
    const kafka = app('kafka', { roles: [{ id: 'broker' }] });
    const pods = Array.from({ length: 11 }, (_, i) => pod(`kafka-${i}`, 'kafka', 'broker'));
    expect(
      membersOf(c, kafka, pods)
        .map((m) => [m.pod, m.id])
        .slice(-2),
    ).toEqual([
      ['kafka-9', '10'],
      ['kafka-10', '11'],
    ]);
  });

  it('leaves out pods of other clusters, other namespaces, without a role label, or being deleted', () => {
    const noRole: PodLike = { metadata: { name: 'spark-x', namespace: 'ml', labels: { [LABEL_KDCLUSTER]: 'spark' } } };
    const members = membersOf(spark, sparkApp, [
      pod('spark-0', 'spark', 'controller'),
      pod('other-0', 'other', 'controller'),
      pod('spark-1', 'spark', 'worker', { namespace: 'team-b' }),
      pod('spark-w-0', 'spark', 'worker', { deleting: true }),
      noRole,
    ]);
    expect(members.map((m) => m.pod)).toEqual(['spark-0']);
  });

  it('follows spec.hostname and spec.subdomain, and the cluster domain option', () => {
    const [m] = membersOf(
      spark,
      sparkApp,
      [pod('spark-0', 'spark', 'controller', { hostname: 'h0', subdomain: 'kdhs-1' })],
      { clusterDomain: 'corp.example' },
    );
    expect(m).toMatchObject({ fqdn: 'h0.kdhs-1.ml.svc.corp.example', domain: 'kdhs-1.ml.svc.corp.example' });
  });

  it('roles the app does not know come after the known ones, in the cluster order; without the app, the cluster order', () => {
    const c = cluster('spark', 'spark', {
      roles: ['zeta', 'alpha', 'jupyter', 'controller'].map((id) => ({ id, members: 1 })),
    });
    const pods = [pod('z-0', 'spark', 'zeta'), pod('a-0', 'spark', 'alpha'), pod('j-0', 'spark', 'jupyter')];
    pods.push(pod('c-0', 'spark', 'controller'));
    expect(membersOf(c, sparkApp, pods).map((m) => [m.pod, m.id])).toEqual([
      ['c-0', '1'],
      ['j-0', '2'],
      ['z-0', '3'],
      ['a-0', '4'],
    ]);
    expect(membersOf(c, undefined, pods).map((m) => m.role)).toEqual(['zeta', 'alpha', 'jupyter', 'controller']);
  });
});

describe('seats: the spec says how many, StatefulSet ordinals say which pods', () => {
  it('seat counts: spec.roles[].members, else the app role cardinality minimum (KubeDirector defaults it so)', () => {
    const c = cluster('spark', 'spark', { roles: [{ id: 'worker' }, { id: 'controller', members: 1 }, { id: 'x' }] });
    expect([...seatCounts(c, sparkApp)]).toEqual([
      ['controller', 1],
      ['worker', 2],
      ['x', 0],
    ]);
    expect([minimumOf('3'), minimumOf('1+'), minimumOf('0+'), minimumOf('many'), minimumOf(2)]).toEqual([
      3,
      1,
      0,
      undefined,
      undefined,
    ]);
    expect([ordinalOf('web-0'), ordinalOf('web-12'), ordinalOf('web-012'), ordinalOf('web'), ordinalOf('a-b')]).toEqual(
      [0, 12, undefined, undefined, undefined],
    );
  });

  it('labelled pods beyond the seats are ignored and reported, each with the reason', () => {
    const m = membershipOf(spark, sparkApp, [
      pod('spark-c-0', 'spark', 'controller'),
      pod('spark-c-1', 'spark', 'controller'),
      pod('spark-w-0', 'spark', 'worker'),
      pod('other-w-0', 'spark', 'worker'),
      pod('spark-w-random', 'spark', 'worker'),
      pod('spark-j-0', 'spark', 'jupyter'),
    ]);
    expect(m.members.map((x) => x.pod)).toEqual(['spark-c-0', 'other-w-0']);
    expect(m.ignored).toEqual([
      { pod: 'spark-c-1', role: 'controller', why: expect.stringContaining('ordinal 1 is beyond the 1 seat(s)') },
      { pod: 'spark-j-0', role: 'jupyter', why: expect.stringContaining('"jupyter" is not one of the cluster') },
      { pod: 'spark-w-0', role: 'worker', why: 'seat 0 of role "worker" is held by other-w-0' },
      { pod: 'spark-w-random', role: 'worker', why: expect.stringContaining('does not end in a StatefulSet ordinal') },
    ]);
    expect(m.vacant).toEqual([{ role: 'worker', seat: 1 }]);
    expect(m.neverDelivered).toBe(true);
  });

  it('the recorded holder keeps its seat against a second pod of that ordinal', () => {
    const first = delivered(spark, [pod('spark-c-0', 'spark', 'controller'), pod('zz-w-0', 'spark', 'worker')]);
    const m = membershipOf(first, sparkApp, [
      pod('spark-c-0', 'spark', 'controller'),
      pod('aa-w-0', 'spark', 'worker'),
      pod('zz-w-0', 'spark', 'worker'),
    ]);
    expect(m.members.map((x) => x.pod)).toEqual(['spark-c-0', 'zz-w-0']);
    expect(m.ignored.map((i) => i.pod)).toEqual(['aa-w-0']);
    expect(m.neverDelivered).toBe(false);
    // Also while the holder's pod is away (restarting): the other pod still waits outside.
    const away = membershipOf(first, sparkApp, [
      pod('spark-c-0', 'spark', 'controller'),
      pod('aa-w-0', 'spark', 'worker'),
    ]);
    expect(away.members.map((x) => [x.pod, x.present])).toEqual([
      ['spark-c-0', true],
      ['zz-w-0', false],
    ]);
    expect(away.ignored).toEqual([{ pod: 'aa-w-0', role: 'worker', why: 'seat 0 of role "worker" is held by zz-w-0' }]);
  });

  it('a member whose pod restarts keeps its place, id and name in every document meanwhile', () => {
    const all = [pod('c-0', 'spark', 'controller'), pod('w-0', 'spark', 'worker'), pod('w-1', 'spark', 'worker')];
    const first = delivered(spark, all, undefined);
    const before = membersOf(first, sparkApp, all);
    for (const away of [
      [all[0]!, all[2]!], // w-0 gone, not recreated yet
      [all[0]!, pod('w-0', 'spark', 'worker', { deleting: true }), all[2]!], // w-0 being deleted
    ]) {
      const during = membersOf(first, sparkApp, away);
      expect(during.map(({ pod: p, id, fqdn, role }) => ({ p, id, fqdn, role }))).toEqual(
        before.map(({ pod: p, id, fqdn, role }) => ({ p, id, fqdn, role })),
      );
      expect(during.find((x) => x.pod === 'w-0')).toMatchObject({ present: false, ready: false });
      // Recording status meanwhile changes nothing: the seat and the id stay.
      expect(seatStateOf(first, during)).toEqual(first.status);
    }
    expect(membersOf(first, sparkApp, all)).toEqual(before);
  });

  it('a shrink releases the seats past the new count and their ids for good; a regrown seat gets a new id', () => {
    const pods = (n: number) => [
      pod('c-0', 'spark', 'controller'),
      ...Array.from({ length: n }, (_, i) => pod(`w-${i}`, 'spark', 'worker')),
    ];
    const four = delivered(
      {
        ...spark,
        spec: {
          ...spark.spec,
          roles: [
            { id: 'controller', members: 1 },
            { id: 'worker', members: 4 },
          ],
        },
      },
      pods(4),
    );
    expect(four.status).toMatchObject({ lastNodeID: 5, nodeIDs: { 'c-0': 1, 'w-0': 2, 'w-1': 3, 'w-2': 4, 'w-3': 5 } });
    // Spec says 2 workers; w-2 and w-3 are still terminating: no seat, not listed, not reported.
    const shrunk: KDCluster = {
      ...four,
      spec: {
        ...four.spec,
        roles: [
          { id: 'controller', members: 1 },
          { id: 'worker', members: 2 },
        ],
      },
    };
    const during = membershipOf(shrunk, sparkApp, [
      ...pods(2),
      pod('w-2', 'spark', 'worker', { deleting: true }),
      pod('w-3', 'spark', 'worker', { deleting: true }),
    ]);
    expect(during.members.map((m) => m.pod)).toEqual(['c-0', 'w-0', 'w-1']);
    expect(during.ignored).toEqual([]);
    const after: KDCluster = { ...shrunk, status: { ...seatStateOf(shrunk, during.members) } };
    expect(after.status).toMatchObject({ lastNodeID: 5, nodeIDs: { 'c-0': 1, 'w-0': 2, 'w-1': 3 } });
    const grown: KDCluster = {
      ...after,
      spec: {
        ...after.spec,
        roles: [
          { id: 'controller', members: 1 },
          { id: 'worker', members: 3 },
        ],
      },
    };
    expect(membersOf(grown, sparkApp, pods(3)).map((m) => [m.pod, m.id])).toEqual([
      ['c-0', '1'],
      ['w-0', '2'],
      ['w-1', '3'],
      ['w-2', '6'],
    ]);
  });

  it('with members absent or below the replicas, ids survive restarts: extra pods never take an id', () => {
    const noCount = cluster('spark', 'spark', { roles: [{ id: 'controller' }, { id: 'worker' }] });
    const pods = [
      pod('c-0', 'spark', 'controller'),
      pod('w-0', 'spark', 'worker'),
      pod('w-1', 'spark', 'worker'),
      pod('w-2', 'spark', 'worker'),
    ];
    const m = membershipOf(noCount, sparkApp, pods);
    // worker's cardinality "2+" gives 2 seats: w-2 is beyond them.
    expect(m.members.map((x) => [x.pod, x.id])).toEqual([
      ['c-0', '1'],
      ['w-0', '2'],
      ['w-1', '3'],
    ]);
    expect(m.ignored.map((i) => i.pod)).toEqual(['w-2']);
    const first: KDCluster = { ...noCount, status: { ...seatStateOf(noCount, m.members) } };
    // w-1 restarts while w-2 is still there: w-2 does not take its seat or id.
    const during = membershipOf(first, sparkApp, [pods[0]!, pods[1]!, pods[3]!]);
    expect(during.members.map((x) => [x.pod, x.id, x.present])).toEqual([
      ['c-0', '1', true],
      ['w-0', '2', true],
      ['w-1', '3', false],
    ]);
  });
});

describe('members a Parallel StatefulSet adds together get their ids in ordinal order', () => {
  const NOW = '2026-12-07T12:00:00.000Z';
  const born = (p: PodLike, secondsAgo: number): PodLike => ({
    ...p,
    metadata: { ...p.metadata, creationTimestamp: new Date(Date.parse(NOW) - secondsAgo * 1000).toISOString() },
  });
  const workers = (n: number): KDClusterRole[] => [
    { id: 'controller', members: 1 },
    { id: 'worker', members: n },
  ];
  // Delivered with one worker; the spec then asks for three.
  const one = delivered(spark, [pod('c-0', 'spark', 'controller'), pod('w-0', 'spark', 'worker')], workers(1));
  const three: KDCluster = { ...one, spec: { ...one.spec, roles: workers(3) } };
  const wait = { now: NOW, waitMs: 60_000 };

  it('a new pod seen before the one below it waits, and both are numbered in ordinal order once it comes', () => {
    const early = [
      pod('c-0', 'spark', 'controller'),
      pod('w-0', 'spark', 'worker'),
      born(pod('w-2', 'spark', 'worker'), 1),
    ];
    const m = membershipOf(three, sparkApp, early, wait);
    expect(m.members.map((x) => x.pod)).toEqual(['c-0', 'w-0']);
    expect(m.waiting).toEqual([{ pod: 'w-2', role: 'worker', seat: 2, until: '2026-12-07T12:00:59.000Z' }]);
    // Seat 2 has its pod: only seat 1 is reported empty, and w-2 is neither ignored nor a member yet.
    expect(m.vacant).toEqual([{ role: 'worker', seat: 1 }]);
    expect(m.ignored).toEqual([]);
    const all = membershipOf(three, sparkApp, [...early, born(pod('w-1', 'spark', 'worker'), 0)], wait);
    expect(all.waiting).toEqual([]);
    expect(all.members.map((x) => [x.pod, x.id])).toEqual([
      ['c-0', '1'],
      ['w-0', '2'],
      ['w-1', '3'],
      ['w-2', '4'],
    ]);
  });

  it('the wait ends with the pod 60 s old: it is numbered though the seat below is still empty', () => {
    const m = membershipOf(
      three,
      sparkApp,
      [pod('c-0', 'spark', 'controller'), pod('w-0', 'spark', 'worker'), born(pod('w-2', 'spark', 'worker'), 60)],
      wait,
    );
    expect(m.waiting).toEqual([]);
    expect(m.members.map((x) => [x.pod, x.id])).toEqual([
      ['c-0', '1'],
      ['w-0', '2'],
      ['w-2', '3'],
    ]);
    expect(m.vacant).toEqual([{ role: 'worker', seat: 1 }]);
  });

  it('no wait for a pod that has its id, before the first delivery, or without a clock and a wait', () => {
    const restarted: KDCluster = {
      ...three,
      status: {
        ...seatStateOf(
          three,
          membersOf(three, sparkApp, [
            pod('c-0', 'spark', 'controller'),
            pod('w-0', 'spark', 'worker'),
            pod('w-1', 'spark', 'worker'),
            pod('w-2', 'spark', 'worker'),
          ]),
        ),
      },
    };
    // w-1 is gone for good (no holder recorded for it here), w-2 keeps its id: nothing waits.
    const kept = membershipOf(
      {
        ...restarted,
        status: {
          ...restarted.status,
          seatHolders: {
            'c-0': { role: 'controller', fqdn: 'x' },
            'w-0': { role: 'worker', fqdn: 'y' },
            'w-2': { role: 'worker', fqdn: 'z' },
          },
        },
      },
      sparkApp,
      [pod('c-0', 'spark', 'controller'), pod('w-0', 'spark', 'worker'), born(pod('w-2', 'spark', 'worker'), 1)],
      wait,
    );
    expect(kept.waiting).toEqual([]);
    expect(kept.members.map((x) => [x.pod, x.id])).toEqual([
      ['c-0', '1'],
      ['w-0', '2'],
      ['w-2', '4'],
    ]);
    const fresh = { ...spark, spec: { ...spark.spec, roles: workers(3) } };
    const pods = [pod('c-0', 'spark', 'controller'), born(pod('w-2', 'spark', 'worker'), 1)];
    expect(membershipOf(fresh, sparkApp, pods, wait).waiting).toEqual([]);
    expect(
      membershipOf(three, sparkApp, [pod('w-0', 'spark', 'worker'), born(pod('w-2', 'spark', 'worker'), 1)]).waiting,
    ).toEqual([]);
  });
});

describe('upgrade from a status without seat holders (0.1.0 kept only nodeIDs)', () => {
  it('a member whose pod is away at the first reconcile keeps its id, named after its StatefulSet siblings', () => {
    const old: KDCluster = {
      ...cluster('spark', 'spark', { roles: [{ id: 'worker', members: 3 }] }),
      status: { lastNodeID: 3, nodeIDs: { 'w-0': 1, 'w-1': 2, 'w-2': 3 } },
    };
    const here = [
      pod('w-0', 'spark', 'worker', { subdomain: 'hs' }),
      pod('w-1', 'spark', 'worker', { subdomain: 'hs' }),
    ];
    const m = membershipOf(old, sparkApp, here);
    expect(m.members.map((x) => [x.pod, x.id, x.present, x.fqdn])).toEqual([
      ['w-0', '1', true, 'w-0.hs.ml.svc.cluster.local'],
      ['w-1', '2', true, 'w-1.hs.ml.svc.cluster.local'],
      ['w-2', '3', false, 'w-2.hs.ml.svc.cluster.local'],
    ]);
    const recorded = seatStateOf(old, m.members);
    expect(recorded.nodeIDs).toEqual({ 'w-0': 1, 'w-1': 2, 'w-2': 3 });
    expect(recorded.seatHolders['w-2']).toEqual({ role: 'worker', fqdn: 'w-2.hs.ml.svc.cluster.local' });
    // Back, it gets its own id again.
    const after: KDCluster = { ...old, status: { ...recorded } };
    expect(membersOf(after, sparkApp, [...here, pod('w-2', 'spark', 'worker')]).map((x) => x.id)).toEqual([
      '1',
      '2',
      '3',
    ]);
  });
});

describe('isMemberOf / isPodReady', () => {
  it('needs both labels and no deletion', () => {
    expect(isMemberOf(pod('a', 'spark', 'worker'), 'spark')).toBe(true);
    expect(isMemberOf(pod('a', 'spark', 'worker'), 'other')).toBe(false);
    expect(isMemberOf(pod('a', 'spark', 'worker', { deleting: true }), 'spark')).toBe(false);
    expect(isMemberOf({ metadata: { name: 'a' } }, 'spark')).toBe(false);
  });

  it('ready means the Ready condition is True', () => {
    expect(isPodReady(pod('a', 's', 'r'))).toBe(true);
    expect(isPodReady(pod('a', 's', 'r', { ready: false }))).toBe(false);
    expect(isPodReady({ metadata: {}, status: { phase: 'Running' } })).toBe(false);
    expect(isPodReady({ metadata: {} })).toBe(false);
  });
});
