/** Member pods of a cluster: labelled pods, whoever created them, in a stable order. */
import { describe, expect, it } from '@jest/globals';
import { isMemberOf, isPodReady, membersOf } from '../src/members.js';
import { LABEL_KDCLUSTER, type PodLike } from '../src/types.js';
import { app, cluster, pod } from './fixtures.js';

const sparkApp = app('spark', { roles: [{ id: 'controller' }, { id: 'worker' }, { id: 'jupyter' }] });
const spark = cluster('spark', 'spark', {
  roles: [
    { id: 'worker', members: 2 },
    { id: 'controller', members: 1 },
  ],
});

describe('membersOf', () => {
  it('orders members by app role order, then pod name, and numbers them from 1', () => {
    const members = membersOf(spark, sparkApp, [
      pod('spark-w-b', 'spark', 'worker'),
      pod('spark-c', 'spark', 'controller'),
      pod('spark-w-a', 'spark', 'worker', { ready: false }),
    ]);
    expect(members).toEqual([
      {
        pod: 'spark-c',
        uid: expect.any(String),
        role: 'controller',
        id: '1',
        fqdn: 'spark-c.spark.ml.svc.cluster.local',
        domain: 'spark.ml.svc.cluster.local',
        ready: true,
      },
      {
        pod: 'spark-w-a',
        uid: expect.any(String),
        role: 'worker',
        id: '2',
        fqdn: 'spark-w-a.spark.ml.svc.cluster.local',
        domain: 'spark.ml.svc.cluster.local',
        ready: false,
      },
      {
        pod: 'spark-w-b',
        uid: expect.any(String),
        role: 'worker',
        id: '3',
        fqdn: 'spark-w-b.spark.ml.svc.cluster.local',
        domain: 'spark.ml.svc.cluster.local',
        ready: true,
      },
    ]);
  });

  it('leaves out pods of other clusters, other namespaces, without a role label, or being deleted', () => {
    const noRole: PodLike = { metadata: { name: 'spark-x', namespace: 'ml', labels: { [LABEL_KDCLUSTER]: 'spark' } } };
    const members = membersOf(spark, sparkApp, [
      pod('spark-0', 'spark', 'controller'),
      pod('other-0', 'other', 'controller'),
      pod('spark-1', 'spark', 'worker', { namespace: 'team-b' }),
      pod('spark-2', 'spark', 'worker', { deleting: true }),
      noRole,
    ]);
    expect(members.map((m) => m.pod)).toEqual(['spark-0']);
  });

  it('follows spec.hostname and spec.subdomain, and the cluster domain option', () => {
    const [m] = membersOf(
      spark,
      sparkApp,
      [pod('spark-0', 'spark', 'controller', { hostname: 'h0', subdomain: 'kdhs-1' })],
      {
        clusterDomain: 'corp.example',
      },
    );
    expect(m).toMatchObject({ fqdn: 'h0.kdhs-1.ml.svc.corp.example', domain: 'kdhs-1.ml.svc.corp.example' });
  });

  it('roles unknown to the app come after the known ones, sorted', () => {
    const members = membersOf(spark, sparkApp, [
      pod('p1', 'spark', 'zeta'),
      pod('p2', 'spark', 'alpha'),
      pod('p3', 'spark', 'jupyter'),
      pod('p4', 'spark', 'controller'),
    ]);
    expect(members.map((m) => [m.pod, m.role, m.id])).toEqual([
      ['p4', 'controller', '1'],
      ['p3', 'jupyter', '2'],
      ['p2', 'alpha', '3'],
      ['p1', 'zeta', '4'],
    ]);
  });

  it('without the app, the cluster role order is used', () => {
    const members = membersOf(spark, undefined, [pod('a', 'spark', 'controller'), pod('b', 'spark', 'worker')]);
    expect(members.map((m) => m.role)).toEqual(['worker', 'controller']);
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
