/** The reconnect signal's decisions: who gets `startscript --reconnect`, for which generator, and when. */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import {
  CONDITION_MEMBERS_RECONNECTED,
  FILE_RECHECK_MS,
  nextReconnectCheckMs,
  planReconnectReads,
  planReconnectRuns,
  reconnectMembersOf,
  recordReconnectResults,
  retryInMs,
  rolesWithConfigPackage,
  RECONNECT_BACKOFF_BASE_MS,
  RECONNECT_BACKOFF_MAX_MS,
  RECONNECT_MAX_ATTEMPTS,
  type FileRead,
  type MemberReconnects,
  type ReconnectMember,
} from '../src/plan/plan-reconnect.js';
import { reconnectCondition, reconnectEvents, reconnectStatusPatch } from '../src/plan/reconnect-status.js';
import type { HookOutcome } from '../src/plan/hook-output.js';
import {
  journalRoster,
  MAX_PENDING_CHANGES,
  NOTIFY_MAX_ATTEMPTS,
  recordNotifyResults,
} from '../src/plan/plan-roster-changes.js';
import { ANNOTATION_CONFIGMETA_GENERATOR } from '../src/domain/types.js';
import { app, cluster, pod } from './fixtures.js';

const NOW = new Date('2026-12-03T09:00:00Z');
const HOOK_ROLES = new Set(['controller']);
const member = (name: string, delivered?: number, o: Partial<ReconnectMember> = {}): ReconnectMember => ({
  pod: name,
  uid: `uid-${name}`,
  role: 'controller',
  running: true,
  ...(delivered !== undefined ? { delivered } : {}),
  ...o,
});

/** One whole pass as the reconciler makes it: reads planned, files read, hooks run, results recorded. */
function pass(
  members: ReconnectMember[],
  recorded: MemberReconnects | undefined,
  files: Record<string, number>,
  outcome: (pod: string) => HookOutcome = () => ({ ok: true }),
  now = NOW,
) {
  const reads = planReconnectReads(members, recorded, HOOK_ROLES, now);
  const fileReads: Record<string, FileRead> = Object.fromEntries(
    reads.read.map((p) => [p, files[p] === undefined ? { error: 'no such container' } : { generator: files[p]! }]),
  );
  const runs = planReconnectRuns(reads.record, fileReads);
  const results = runs.run.map((r) => ({ ...r, outcome: outcome(r.pod) }));
  const record = recordReconnectResults(reads.record, results, now);
  return { reads, runs, results, record };
}

describe('when the reconnect hook runs', () => {
  it('not on a member’s first delivery: the generator it was first seen with is its baseline', () => {
    const p = pass([member('a-0', 3), member('a-1')], undefined, { 'a-0': 3 });
    expect(p.reads.read).toEqual([]);
    expect(p.runs.run).toEqual([]);
    // Nothing delivered yet to a-1: no entry until there is.
    expect(p.record).toEqual({ 'a-0': { uid: 'uid-a-0', generator: 3 } });
  });

  it('once for one change, and not again for the same generator', () => {
    const recorded = { 'a-0': { uid: 'uid-a-0', generator: 3 } };
    const first = pass([member('a-0', 4)], recorded, { 'a-0': 4 });
    expect(first.reads.read).toEqual(['a-0']);
    expect(first.runs.run).toEqual([{ pod: 'a-0', generator: 4 }]);
    expect(first.record['a-0']).toEqual({ uid: 'uid-a-0', generator: 4 });
    const again = pass([member('a-0', 4)], first.record, { 'a-0': 4 });
    expect(again.reads.read).toEqual([]);
    expect(again.runs.run).toEqual([]);
    expect(nextReconnectCheckMs([member('a-0', 4)], again.record, new Set(), NOW)).toBeUndefined();
  });

  it('two quick changes: one run, for the generator the file holds', () => {
    const recorded = { 'a-0': { uid: 'uid-a-0', generator: 3 } };
    const p = pass([member('a-0', 5)], recorded, { 'a-0': 5 });
    expect(p.runs.run).toEqual([{ pod: 'a-0', generator: 5 }]);
    expect(p.record['a-0']!.generator).toBe(5);
  });

  it('waits for the file: delivered but not yet swapped in → no run, read again shortly', () => {
    const recorded = { 'a-0': { uid: 'uid-a-0', generator: 3 } };
    const members = [member('a-0', 4)];
    const p = pass(members, recorded, { 'a-0': 3 });
    expect(p.runs.run).toEqual([]);
    expect(p.runs.waiting).toEqual(['a-0']);
    expect(p.record['a-0']!.generator).toBe(3);
    expect(nextReconnectCheckMs(members, p.record, new Set(), NOW)).toBe(FILE_RECHECK_MS);
    // The file moved on while the hook ran: one more look.
    const ran = pass([member('a-0', 6)], recorded, { 'a-0': 5 });
    expect(ran.record['a-0']!.generator).toBe(5);
    expect(nextReconnectCheckMs([member('a-0', 6)], ran.record, new Set(), NOW)).toBe(FILE_RECHECK_MS);
  });

  it('not in a member that is not running, nor in one whose file cannot be read (no timer for it)', () => {
    const recorded = { 'a-0': { uid: 'uid-a-0', generator: 3 }, 'a-1': { uid: 'uid-a-1', generator: 3 } };
    const members = [member('a-0', 4, { running: false }), member('a-1', 4)];
    const p = pass(members, recorded, {});
    expect(p.reads.read).toEqual(['a-1']);
    expect(p.runs.unreadable).toEqual({ 'a-1': 'no such container' });
    expect(p.runs.run).toEqual([]);
    expect(nextReconnectCheckMs(members, p.record, new Set(['a-1']), NOW)).toBeUndefined();
  });

  it('a failure keeps the old generator, is named in the condition, backs off, and is retried until it succeeds', () => {
    const recorded = { 'a-0': { uid: 'uid-a-0', generator: 3 } };
    const members = [member('a-0', 4)];
    const failed = pass(members, recorded, { 'a-0': 4 }, () => ({ ok: false, exitCode: 2, stderrTail: 'boom' }));
    expect(failed.record['a-0']).toEqual({
      uid: 'uid-a-0',
      generator: 3,
      failedGenerator: 4,
      failures: 1,
      lastFailureTime: NOW.toISOString(),
      message: 'exit code 2',
    });
    const cond = reconnectCondition(failed.record, 1);
    expect(cond).toMatchObject({ type: CONDITION_MEMBERS_RECONNECTED, status: 'False', reason: 'ReconnectFailed' });
    expect(cond.message).toContain('a-0 (generator 4: exit code 2, 1 attempt(s))');
    // Backing off: not read again before the delay, and the pass says when to come back.
    expect(pass(members, failed.record, { 'a-0': 4 }).reads.read).toEqual([]);
    expect(nextReconnectCheckMs(members, failed.record, new Set(), NOW)).toBe(RECONNECT_BACKOFF_BASE_MS);
    // After it: retried; a second failure doubles the delay.
    const later = new Date(NOW.getTime() + RECONNECT_BACKOFF_BASE_MS);
    const second = pass(members, failed.record, { 'a-0': 4 }, () => ({ ok: false, timedOutMs: 500 }), later);
    expect(second.runs.run).toEqual([{ pod: 'a-0', generator: 4 }]);
    expect(second.record['a-0']).toMatchObject({ failures: 2, message: 'no answer within 500 ms: abandoned' });
    expect(retryInMs(second.record['a-0']!, later)).toBe(2 * RECONNECT_BACKOFF_BASE_MS);
    // Success clears the failure and the condition.
    const evenLater = new Date(later.getTime() + 2 * RECONNECT_BACKOFF_BASE_MS);
    const ok = pass(members, second.record, { 'a-0': 4 }, () => ({ ok: true }), evenLater);
    expect(ok.record['a-0']).toEqual({ uid: 'uid-a-0', generator: 4 });
    expect(reconnectCondition(ok.record, 1)).toMatchObject({ status: 'True', reason: 'NoFailures' });
  });

  it(`gives up after ${RECONNECT_MAX_ATTEMPTS} attempts for one change: not read, no timer, the condition and the last event say so; a newer generator tries again`, () => {
    const members = [member('a-0', 4)];
    let record: MemberReconnects = { 'a-0': { uid: 'uid-a-0', generator: 3 } };
    let now = NOW;
    let lastPass: ReturnType<typeof pass> | undefined;
    for (let i = 1; i <= RECONNECT_MAX_ATTEMPTS; i++) {
      lastPass = pass(members, record, { 'a-0': 4 }, () => ({ ok: false, exitCode: 9 }), now);
      expect(lastPass.runs.run).toEqual([{ pod: 'a-0', generator: 4 }]);
      record = lastPass.record;
      now = new Date(now.getTime() + retryInMs(record['a-0']!, now));
    }
    expect(record['a-0']).toMatchObject({ failedGenerator: 4, failures: RECONNECT_MAX_ATTEMPTS });
    const [lastEvent] = reconnectEvents(cluster('c', 'a'), members, lastPass!.results, record);
    expect(lastEvent!.note).toContain(
      `exit code 9; that was attempt ${RECONNECT_MAX_ATTEMPTS} of ${RECONNECT_MAX_ATTEMPTS}: given up until a newer configmeta generator reaches the pod`,
    );
    const far = new Date(now.getTime() + 24 * 3600_000);
    expect(pass(members, record, { 'a-0': 4 }, undefined, far).reads.read).toEqual([]);
    expect(nextReconnectCheckMs(members, record, new Set(), far)).toBeUndefined();
    expect(reconnectCondition(record, 1).message).toContain(
      `a-0 (generator 4: exit code 9, ${RECONNECT_MAX_ATTEMPTS} attempt(s), given up until the next change)`,
    );
    // An earlier attempt's event does not say it was the last.
    const early = { 'a-0': { ...record['a-0']!, failures: 1 } };
    expect(reconnectEvents(cluster('c', 'a'), members, lastPass!.results, early)[0]!.note).not.toContain('given up');
    // The next change is tried afresh.
    const next = pass([member('a-0', 5)], record, { 'a-0': 5 }, () => ({ ok: true }), far);
    expect(next.runs.run).toEqual([{ pod: 'a-0', generator: 5 }]);
    expect(next.record['a-0']).toEqual({ uid: 'uid-a-0', generator: 5 });
  });

  it('backoff is capped', () => {
    const e = { uid: 'u', generator: 1, failedGenerator: 2, failures: 40, lastFailureTime: NOW.toISOString() };
    expect(retryInMs(e, NOW)).toBe(RECONNECT_BACKOFF_MAX_MS);
  });

  it('a failure for a newer generator counts afresh', () => {
    const recorded = {
      'a-0': { uid: 'uid-a-0', generator: 3, failedGenerator: 4, failures: 5, lastFailureTime: '2026-01-01T00:00:00Z' },
    };
    const p = pass([member('a-0', 5)], recorded, { 'a-0': 5 }, () => ({ ok: false, exitCode: 1 }));
    expect(p.record['a-0']).toMatchObject({ failedGenerator: 5, failures: 1 });
  });

  it('a replaced pod (same name, new uid) starts from a new baseline: old generators never run again', () => {
    const recorded = {
      'a-0': { uid: 'uid-old', generator: 3, failedGenerator: 4, failures: 2, lastFailureTime: NOW.toISOString() },
      'gone-0': { uid: 'uid-gone-0', generator: 1 },
    };
    const p = pass([member('a-0', 4)], recorded, { 'a-0': 4 });
    expect(p.reads.read).toEqual([]);
    expect(p.runs.run).toEqual([]);
    expect(p.record).toEqual({ 'a-0': { uid: 'uid-a-0', generator: 4 } });
    expect(reconnectCondition(p.record, 1).status).toBe('True');
  });

  it('never for roles without a config package (KubeDirector’s rule: the role’s own, else the app default)', () => {
    const withDefault = app('a', {
      defaultConfigPackage: { packageURL: 'file:///opt/configs/appconfig.tgz' },
      roles: [
        { id: 'controller' },
        { id: 'worker', configPackage: null },
        { id: 'edge', configPackage: { packageURL: 'x' } },
      ],
    });
    expect([...rolesWithConfigPackage(withDefault)].sort()).toEqual(['controller', 'edge']);
    const without = app('b', { roles: [{ id: 'controller' }, { id: 'edge', configPackage: { packageURL: 'x' } }] });
    expect([...rolesWithConfigPackage(without)]).toEqual(['edge']);
    expect(rolesWithConfigPackage(app('c', { defaultConfigPackage: null, roles: [{ id: 'x' }] })).size).toBe(0);

    const recorded = { 'w-0': { uid: 'uid-w-0', generator: 1 } };
    const p = pass([member('w-0', 2, { role: 'worker' })], recorded, { 'w-0': 2 });
    expect(p.reads.read).toEqual([]);
    expect(p.record).toEqual({});
  });
});

describe('reconnect inputs and outputs', () => {
  it('reads members from pods: uid, role, whether it runs (Ready or not) and the annotated generator', () => {
    const gen7 = { annotations: { [ANNOTATION_CONFIGMETA_GENERATOR]: '7' } };
    const pods = [
      pod('c-controller-0', 'c', 'controller', gen7),
      // Not Ready (say, until a connection changes): still told of the change.
      pod('c-controller-1', 'c', 'controller', { ...gen7, ready: false }),
      pod('c-controller-3', 'c', 'controller', { ...gen7, phase: 'Pending' }),
      pod('c-controller-2', 'c', 'controller', { deleting: true }),
      pod('other-0', 'other', 'controller'),
    ];
    const m = reconnectMembersOf('c', pods);
    expect(m.map((x) => [x.pod, x.running, x.delivered])).toEqual([
      ['c-controller-0', true, 7],
      ['c-controller-1', true, 7],
      ['c-controller-3', false, 7],
    ]);
    expect(m[0]!.uid).toBe(pods[0]!.metadata.uid);
  });

  it('events name the pod (regarding it) and carry the exit code and the stderr tail', () => {
    const c = cluster('c', 'a');
    const members = [member('c-controller-0', 4)];
    const [fail, ok] = reconnectEvents(c, members, [
      {
        pod: 'c-controller-0',
        generator: 4,
        outcome: { ok: false, exitCode: 3, stderrTail: 'x'.repeat(1000) + 'END' },
      },
      { pod: 'c-controller-0', generator: 5, outcome: { ok: true } },
    ]);
    expect(fail).toMatchObject({
      type: 'Warning',
      reason: 'ReconnectFailed',
      regarding: { kind: 'Pod', name: 'c-controller-0', uid: 'uid-c-controller-0' },
      related: { kind: 'KubeDirectorCluster', name: 'c' },
    });
    expect(fail!.note).toContain('exit code 3');
    expect(fail!.note).toMatch(/END$/);
    expect(fail!.note.length).toBeLessThan(600);
    expect(ok).toMatchObject({ type: 'Normal', reason: 'Reconnected' });
  });

  it('the status patch is guarded by uid and the values it replaces, and empty when nothing changes', () => {
    const record = { 'c-controller-0': { uid: 'u0', generator: 4 } };
    const cond = reconnectCondition(record, 1);
    const fresh = cluster('c', 'a', { status: { conditions: [] } });
    const ops = reconnectStatusPatch(fresh, record, cond, NOW.toISOString());
    expect(ops.slice(0, 3)).toEqual([
      { op: 'test', path: '/metadata/uid', value: fresh.metadata.uid },
      { op: 'test', path: '/metadata/resourceVersion', value: '200' },
      { op: 'test', path: '/status/conditions', value: [] },
    ]);
    expect(ops.filter((o) => o.op === 'add').map((o) => o.path)).toEqual([
      '/status/memberReconnects',
      '/status/conditions',
    ]);
    const written = cluster('c', 'a', {
      status: {
        memberReconnects: record,
        conditions: [{ ...cond, lastTransitionTime: NOW.toISOString() }],
      },
    });
    expect(reconnectStatusPatch(written, record, cond, NOW.toISOString())).toEqual([]);
    const next = { 'c-controller-0': { uid: 'u0', generator: 5 } };
    const ops2 = reconnectStatusPatch(written, next, reconnectCondition(next, 1), NOW.toISOString());
    expect(ops2).toEqual([
      { op: 'test', path: '/metadata/uid', value: written.metadata.uid },
      { op: 'test', path: '/status/memberReconnects', value: record },
      { op: 'add', path: '/status/memberReconnects', value: next },
    ]);
  });
});

describe('the kdcluster CRD keeps what the planner records', () => {
  it('status.memberReconnects has every field an entry can carry (nothing pruned)', () => {
    const crdPath = fileURLToPath(
      new URL('../../charts/kd-connections/files/crds/kubedirector.hpe.com_kubedirectorclusters.yaml', import.meta.url),
    );
    const crd = parse(readFileSync(crdPath, 'utf8'));
    const entry = crd.spec.versions[0].schema.openAPIV3Schema.properties.status.properties.memberReconnects;
    const failed = recordReconnectResults(
      { p: { uid: 'u', generator: 1 } },
      [{ pod: 'p', generator: 2, outcome: { ok: false, exitCode: 1 } }],
      NOW,
    );
    const change = { seq: 1, op: 'addnodes' as const, role: 'r', fqdns: ['a'] };
    let notified: MemberReconnects = failed;
    for (let i = 0; i < NOTIFY_MAX_ATTEMPTS; i++)
      notified = recordNotifyResults(
        notified,
        [{ pod: 'p', through: 1, ran: [{ change, outcome: { ok: false } }] }],
        NOW,
      );
    const props = entry.additionalProperties.properties;
    expect(Object.keys(props).sort()).toEqual(Object.keys(notified.p!).sort());
    expect(Object.keys(props.changeFailure.properties).sort()).toEqual(Object.keys(notified.p!.changeFailure!).sort());
    expect(entry.additionalProperties.required).toEqual(['uid', 'generator']);
    const journal = crd.spec.versions[0].schema.openAPIV3Schema.properties.status.properties.rosterChanges;
    const j = journalRoster(journalRoster(undefined, { r: [] }), { r: ['a'] });
    expect(Object.keys(journal.properties).sort()).toEqual(Object.keys(j).sort());
    expect(Object.keys(journal.properties.changes.items.properties).sort()).toEqual(Object.keys(j.changes[0]!).sort());
    expect(journal.properties.changes.maxItems).toBeGreaterThanOrEqual(MAX_PENDING_CHANGES);
  });
});
