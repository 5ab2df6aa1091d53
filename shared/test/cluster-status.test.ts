/** The status a reconcile writes: conditions, transition times, generator bookkeeping. */
import { describe, expect, it } from '@jest/globals';
import {
  CONDITION_CONFIGMETA_SYNCED,
  CONDITION_CONNECTIONS_RESOLVED,
  CONDITION_READY,
  CONDITION_RECONCILING,
  CONDITION_STALLED,
  buildStatus,
  isDeliveryComplete,
  setCondition,
  type StatusInput,
} from '../src/plan/cluster-status.js';
import type { Member } from '../src/configmeta/members.js';
import type { Condition, ConnectionStatus, KDClusterStatus } from '../src/domain/types.js';

const T0 = '2024-05-01T10:00:00Z';
const T1 = '2024-05-01T10:05:00Z';
const T2 = '2024-05-01T10:09:00Z';

const member = (pod: string, ready = true): Member => ({
  pod,
  role: 'controller',
  id: pod,
  fqdn: `${pod}.x`,
  domain: 'x',
  ready,
  present: true,
});
const CONNECTED: ConnectionStatus[] = [
  { kind: 'Cluster', name: 'training', state: 'Connected', contentHash: 'aaaa' },
  { kind: 'ConfigMap', name: 'cm1', state: 'Connected', contentHash: 'bbbb' },
];

const input = (over: Partial<StatusInput> = {}): StatusInput => ({
  previous: undefined,
  generation: 3,
  connections: CONNECTED,
  hash: 'h1',
  members: [member('p0'), member('p1', false)],
  delivery: { generator: 2, synced: ['p0', 'p1'], failed: {} },
  now: T0,
  ...over,
});

const cond = (s: KDClusterStatus, type: string): Condition => s.conditions!.find((c) => c.type === type)!;

describe('setCondition', () => {
  it('adds a condition and stamps the transition time', () => {
    expect(setCondition(undefined, { type: 'A', status: 'True', reason: 'R', message: 'm' }, T0)).toEqual([
      { type: 'A', status: 'True', reason: 'R', message: 'm', lastTransitionTime: T0 },
    ]);
  });

  it('keeps the transition time while the status stays, even when reason and message change', () => {
    const before = setCondition(undefined, { type: 'A', status: 'False', reason: 'R1', message: 'm1' }, T0);
    const after = setCondition(before, { type: 'A', status: 'False', reason: 'R2', message: 'm2' }, T1);
    expect(after).toEqual([{ type: 'A', status: 'False', reason: 'R2', message: 'm2', lastTransitionTime: T0 }]);
  });

  it('moves the transition time when the status flips, and leaves other conditions alone', () => {
    let list = setCondition(undefined, { type: 'A', status: 'False', reason: 'R', message: 'm' }, T0);
    list = setCondition(list, { type: 'B', status: 'True', reason: 'R', message: 'm' }, T0);
    list = setCondition(list, { type: 'A', status: 'True', reason: 'R', message: 'm' }, T1);
    expect(list.map((c) => [c.type, c.status, c.lastTransitionTime])).toEqual([
      ['A', 'True', T1],
      ['B', 'True', T0],
    ]);
  });

  it('does not modify the list it was given', () => {
    const before = setCondition(undefined, { type: 'A', status: 'False', reason: 'R', message: 'm' }, T0);
    const copy = structuredClone(before);
    setCondition(before, { type: 'A', status: 'True', reason: 'R', message: 'm' }, T1);
    expect(before).toEqual(copy);
  });
});

describe('buildStatus', () => {
  it('a complete delivery records the generator and hash; both conditions True', () => {
    const s = buildStatus(input());
    expect(s).toMatchObject({
      observedGeneration: 3,
      lastConfigMetaGenerator: 2,
      connectionsHash: 'h1',
      connections: CONNECTED,
      members: { total: 2, ready: 1, synced: 2 },
      connectionsSummary: '2/2',
      membersSummary: '1/2',
    });
    expect(cond(s, CONDITION_CONNECTIONS_RESOLVED)).toEqual({
      type: 'ConnectionsResolved',
      status: 'True',
      reason: 'AllConnected',
      message: '2/2 connections connected',
      lastTransitionTime: T0,
      observedGeneration: 3,
    });
    expect(cond(s, CONDITION_CONFIGMETA_SYNCED)).toEqual({
      type: 'ConfigMetaSynced',
      status: 'True',
      reason: 'Synced',
      message: 'configmeta generator 2 written to 2/2 member pods',
      lastTransitionTime: T0,
      observedGeneration: 3,
    });
  });

  it('lastConfigMetaGenerator (and the hash) only advance when delivery completes', () => {
    const first = buildStatus(input());
    const partial = buildStatus(
      input({
        previous: first,
        hash: 'h2',
        delivery: { generator: 3, synced: ['p0'], failed: { p1: 'the server rejected our request' } },
        now: T1,
      }),
    );
    expect(partial.lastConfigMetaGenerator).toBe(2);
    expect(partial.connectionsHash).toBe('h1');
    expect(partial.members).toEqual({ total: 2, ready: 1, synced: 1 });
    expect(cond(partial, CONDITION_CONFIGMETA_SYNCED)).toMatchObject({
      status: 'False',
      reason: 'PodPatchFailed',
      message: 'configmeta generator 3 written to 1/2 member pods; failed: p1 (the server rejected our request)',
      lastTransitionTime: T1,
    });

    // Not every member synced, without failures (e.g. a pod still pending): still not complete.
    const pending = buildStatus(
      input({ previous: first, hash: 'h2', delivery: { generator: 3, synced: ['p0'], failed: {} }, now: T1 }),
    );
    expect(pending.lastConfigMetaGenerator).toBe(2);
    expect(pending.connectionsHash).toBe('h1');

    const done = buildStatus(
      input({ previous: partial, hash: 'h2', delivery: { generator: 3, synced: ['p0', 'p1'], failed: {} }, now: T2 }),
    );
    expect(done.lastConfigMetaGenerator).toBe(3);
    expect(done.connectionsHash).toBe('h2');
    expect(cond(done, CONDITION_CONFIGMETA_SYNCED)).toMatchObject({
      status: 'True',
      reason: 'Synced',
      lastTransitionTime: T2,
    });
  });

  it('too large: nothing recorded, the condition says why', () => {
    const s = buildStatus(input({ delivery: { generator: 2, synced: [], failed: {}, tooLargeBytes: 300_000 } }));
    expect(s).not.toHaveProperty('lastConfigMetaGenerator');
    expect(s).not.toHaveProperty('connectionsHash');
    expect(cond(s, CONDITION_CONFIGMETA_SYNCED)).toMatchObject({
      status: 'False',
      reason: 'ConfigMetaTooLarge',
      message:
        'configmeta is 300000 bytes and does not fit in a pod annotation (annotations are limited to 262144 bytes in total); nothing was written',
    });
  });

  it('connection problems: one reason when all share a state, ConnectionProblems otherwise', () => {
    const missing: ConnectionStatus[] = [
      { kind: 'Cluster', name: 'ghost', state: 'Missing', message: 'cluster "ghost" not found in namespace "ml"' },
      { kind: 'ConfigMap', name: 'cm1', state: 'Connected' },
    ];
    const one = buildStatus(input({ connections: missing }));
    expect(cond(one, CONDITION_CONNECTIONS_RESOLVED)).toMatchObject({
      status: 'False',
      reason: 'Missing',
      message: 'cluster ghost: Missing (cluster "ghost" not found in namespace "ml")',
    });
    expect(one.connectionsSummary).toBe('1/2');
    const mixed = buildStatus(input({ connections: [...missing, { kind: 'Secret', name: 's', state: 'Unlabeled' }] }));
    expect(cond(mixed, CONDITION_CONNECTIONS_RESOLVED)).toMatchObject({
      status: 'False',
      reason: 'ConnectionProblems',
      message: 'cluster ghost: Missing (cluster "ghost" not found in namespace "ml"); secret s: Unlabeled',
    });
  });

  it('no connections and no members', () => {
    const s = buildStatus(input({ connections: [], members: [], delivery: { generator: 0, synced: [], failed: {} } }));
    expect(cond(s, CONDITION_CONNECTIONS_RESOLVED).message).toBe('no connections');
    expect(cond(s, CONDITION_CONFIGMETA_SYNCED).message).toBe('no member pods yet (generator 0)');
    expect(s.lastConfigMetaGenerator).toBe(0);
    expect(s.membersSummary).toBe('0/0');
  });

  it('app not found: both conditions False, nothing recorded', () => {
    const prev = buildStatus(input());
    const s = buildStatus(
      input({ previous: prev, appProblem: 'app "x" not found', delivery: undefined, hash: 'h9', now: T1 }),
    );
    expect(s.lastConfigMetaGenerator).toBe(2);
    expect(s.connectionsHash).toBe('h1');
    expect(cond(s, CONDITION_CONNECTIONS_RESOLVED)).toMatchObject({
      status: 'False',
      reason: 'AppNotFound',
      message: 'app "x" not found',
      lastTransitionTime: T1,
    });
    expect(cond(s, CONDITION_CONFIGMETA_SYNCED)).toMatchObject({ status: 'False', reason: 'AppNotFound' });
  });

  it('an unchanged reconcile rebuilds an identical status (no write needed)', () => {
    const first = buildStatus(input());
    const again = buildStatus(input({ previous: first, now: T2 }));
    expect(again).toEqual(first);
  });

  it('keeps status fields it does not own', () => {
    const s = buildStatus(input({ previous: { state: 'configured', lastConfigMetaGenerator: 1 } }));
    expect(s.state).toBe('configured');
  });

  it('isDeliveryComplete', () => {
    const ms = [member('a'), member('b')];
    expect(isDeliveryComplete(undefined, ms)).toBe(false);
    expect(isDeliveryComplete({ generator: 1, synced: ['a', 'b'], failed: {} }, ms)).toBe(true);
    expect(isDeliveryComplete({ generator: 1, synced: ['a'], failed: {} }, ms)).toBe(false);
    // Complete means every member holds it, not merely as many pods as there are members.
    expect(isDeliveryComplete({ generator: 1, synced: ['a', 'gone'], failed: {} }, ms)).toBe(false);
    expect(isDeliveryComplete({ generator: 1, synced: [], failed: {} }, [])).toBe(true);
    expect(isDeliveryComplete({ generator: 1, synced: ['a', 'b'], failed: { c: 'x' } }, ms)).toBe(false);
    expect(isDeliveryComplete({ generator: 1, synced: ['a', 'b'], failed: {}, tooLargeBytes: 1 }, ms)).toBe(false);
  });
});

describe('the kstatus summary (Ready, Reconciling, Stalled)', () => {
  const types = (s: KDClusterStatus) => s.conditions!.map((c) => c.type);

  it('Ready=True only with every connection resolved and every member holding this generation', () => {
    const s = buildStatus(input());
    expect(cond(s, CONDITION_READY)).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Ready',
      message: '2/2 connections connected; configmeta generator 2 written to 2/2 member pods',
      lastTransitionTime: T0,
      observedGeneration: 3,
    });
    expect(types(s)).not.toContain(CONDITION_RECONCILING);
    expect(types(s)).not.toContain(CONDITION_STALLED);
  });

  it('a member still without this generation (no failure): Ready=False, Reconciling=True', () => {
    const s = buildStatus(input({ delivery: { generator: 2, synced: ['p0'], failed: {} } }));
    expect(cond(s, CONDITION_READY)).toMatchObject({
      status: 'False',
      reason: 'DeliveryPending',
      observedGeneration: 3,
    });
    expect(cond(s, CONDITION_RECONCILING)).toMatchObject({ status: 'True', reason: 'DeliveryPending' });
    expect(types(s)).not.toContain(CONDITION_STALLED);
  });

  it('a pod write failed (retried with backoff): Reconciling, not Stalled; cleared once delivered', () => {
    const failed = buildStatus(
      input({ delivery: { generator: 2, synced: ['p0'], failed: { p1: 'pod changed since it was read' } } }),
    );
    expect(cond(failed, CONDITION_READY)).toMatchObject({ status: 'False', reason: 'PodPatchFailed' });
    expect(cond(failed, CONDITION_RECONCILING)).toMatchObject({
      status: 'True',
      reason: 'PodPatchFailed',
      message: expect.stringContaining('p1 (pod changed since it was read)'),
      observedGeneration: 3,
    });
    const done = buildStatus(input({ previous: failed, now: T1 }));
    expect(cond(done, CONDITION_READY)).toMatchObject({ status: 'True', lastTransitionTime: T1 });
    expect(types(done)).not.toContain(CONDITION_RECONCILING);
  });

  it.each([
    ['a missing connection', { connections: [{ kind: 'ConfigMap', name: 'gone', state: 'Missing' }] }, 'Missing'],
    [
      'configmeta too large',
      { delivery: { generator: 2, synced: [], failed: {}, tooLargeBytes: 300_000 } },
      'ConfigMetaTooLarge',
    ],
    [
      'pods without the configmeta volume',
      { delivery: { generator: 2, synced: ['p0', 'p1'], failed: {}, missingVolume: ['p1'] } },
      'PodsMissingConfigMetaVolume',
    ],
    ['the app not found', { appProblem: 'app "x" not found', delivery: undefined }, 'AppNotFound'],
  ] as [string, Partial<StatusInput>, string][])('%s needs the user: Ready=False, Stalled=True', (_, over, reason) => {
    const s = buildStatus(input(over));
    expect(cond(s, CONDITION_READY)).toMatchObject({ status: 'False', reason, observedGeneration: 3 });
    expect(cond(s, CONDITION_STALLED)).toMatchObject({ status: 'True', reason, observedGeneration: 3 });
    expect(types(s)).not.toContain(CONDITION_RECONCILING);
  });

  it('connections are reported before delivery when both fail', () => {
    const s = buildStatus(
      input({
        connections: [{ kind: 'Cluster', name: 'ghost', state: 'NotConnectable' }],
        delivery: { generator: 2, synced: [], failed: { p0: 'x' } },
      }),
    );
    expect(cond(s, CONDITION_READY)).toMatchObject({
      reason: 'NotConnectable',
      message: 'cluster ghost: NotConnectable',
    });
  });

  it('a new generation re-stamps observedGeneration on Ready, keeping its transition time', () => {
    const first = buildStatus(input());
    const next = buildStatus(input({ previous: first, generation: 4, now: T1 }));
    expect(next.observedGeneration).toBe(4);
    expect(cond(next, CONDITION_READY)).toMatchObject({
      status: 'True',
      observedGeneration: 4,
      lastTransitionTime: T0,
    });
  });
});
