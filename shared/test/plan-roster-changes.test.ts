/** KubeDirector's --addnodes/--delnodes, planned: the journal, who hears of what, and when. */
import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  journalRoster,
  MAX_PENDING_CHANGES,
  notifyCommand,
  notifyCondition,
  notifyEvents,
  NOTIFY_MAX_ATTEMPTS,
  planNotifications,
  recordNotifyResults,
  rosterDigest,
  rosterOf,
  subscribedEvents,
  trimJournal,
  visibleChanges,
  type NotifyResult,
} from '../src/plan/plan-roster-changes.js';
import {
  planReconnectReads,
  reconnectMembersOf,
  recordReconnectResults,
  retryInMs,
  type ReconnectMember,
} from '../src/plan/plan-reconnect.js';
import type { HookOutcome } from '../src/plan/hook-output.js';
import type { MemberReconnect, RosterJournal } from '../src/domain/types.js';
import { app, cluster, pod } from './fixtures.js';

const NOW = new Date('2026-12-07T09:00:00Z');
const f = (pod: string) => `${pod}.c.ns.svc.cluster.local`;
const roster = (r: Record<string, string[]>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.map(f)]));
const TWO = roster({ controller: ['c-0'], worker: ['w-0', 'w-1'] });
const THREE = roster({ controller: ['c-0'], worker: ['w-0', 'w-1', 'w-2'] });
const ALL_EVENTS = new Map([
  ['controller', undefined],
  ['worker', undefined],
]);

describe('the roster and its digest', () => {
  it('is role → DNS names in ordinal order, whatever order the members come in', () => {
    const r = rosterOf([
      { role: 'w', fqdn: 'w-10.x' },
      { role: 'c', fqdn: 'c-0.x' },
      { role: 'w', fqdn: 'w-2.x' },
    ]);
    expect(r).toEqual({ c: ['c-0.x'], w: ['w-2.x', 'w-10.x'] });
    expect(rosterDigest(r)).toBe(rosterDigest({ w: ['w-10.x', 'w-2.x'], c: ['c-0.x'] }));
    expect(rosterDigest(r)).not.toBe(rosterDigest({ c: ['c-0.x'], w: ['w-2.x'] }));
    // A member moving between roles is a different roster.
    expect(rosterDigest({ a: ['x'], b: [] })).not.toBe(rosterDigest({ a: [], b: ['x'] }));
  });
});

describe('the journal', () => {
  it('starts at change 0 with no change; the same roster again changes nothing', () => {
    const j = journalRoster(undefined, TWO);
    expect(j).toEqual({ seq: 0, roster: TWO, changes: [] });
    expect(journalRoster(j, structuredClone(TWO))).toBe(j);
  });

  it('a role that grows is one addnodes change naming the members that joined', () => {
    const j = journalRoster(journalRoster(undefined, TWO), THREE, ['controller', 'worker']);
    expect(j.seq).toBe(1);
    expect(j.changes).toEqual([
      { seq: 1, op: 'addnodes', role: 'worker', fqdns: [f('w-2')], roster: rosterDigest(THREE) },
    ]);
    const back = journalRoster(j, TWO, ['controller', 'worker']);
    expect(back.changes.at(-1)).toEqual({
      seq: 2,
      op: 'delnodes',
      role: 'worker',
      fqdns: [f('w-2')],
      roster: rosterDigest(TWO),
    });
  });

  it('several roles in the app’s role order, departures before arrivals within a role', () => {
    const before = roster({ controller: ['c-0'], worker: ['w-0'] });
    const after = roster({ controller: ['c-0', 'c-1'], worker: ['x-0'] });
    const j = journalRoster(journalRoster(undefined, before), after, ['worker', 'controller']);
    expect(j.changes.map((c) => [c.seq, c.op, c.role, c.fqdns])).toEqual([
      [1, 'delnodes', 'worker', [f('w-0')]],
      [2, 'addnodes', 'worker', [f('x-0')]],
      [3, 'addnodes', 'controller', [f('c-1')]],
    ]);
  });

  it('keeps only what some member has not heard of, and at most MAX_PENDING_CHANGES', () => {
    let j = journalRoster(undefined, TWO);
    for (let i = 0; i < 3; i++) j = journalRoster(journalRoster(j, THREE), TWO);
    expect(j.changes.map((c) => c.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    const rec = (rosterSeq?: number): MemberReconnect => ({
      uid: 'u',
      generator: 1,
      ...(rosterSeq !== undefined ? { rosterSeq } : {}),
    });
    expect(trimJournal(j, { a: rec(4), b: rec(2), c: rec() }).changes.map((c) => c.seq)).toEqual([3, 4, 5, 6]);
    expect(trimJournal(j, { a: rec(6) }).changes).toEqual([]);
    expect(trimJournal(j, {}).changes).toEqual([]);
    for (let i = 0; i < MAX_PENDING_CHANGES; i++) j = journalRoster(journalRoster(j, THREE), TWO);
    const kept = trimJournal(j, { a: rec(0) }).changes;
    expect(kept).toHaveLength(MAX_PENDING_CHANGES);
    expect(kept.at(-1)!.seq).toBe(j.seq);
  });
});

describe('who hears of what', () => {
  const j1: RosterJournal = journalRoster(journalRoster(undefined, TWO), THREE, ['controller', 'worker']);
  const current = rosterDigest(THREE);
  const member = (pod: string, o: Partial<ReconnectMember> = {}): ReconnectMember => ({
    pod,
    uid: `uid-${pod}`,
    role: pod.startsWith('c') ? 'controller' : 'worker',
    running: true,
    delivered: 1,
    roster: current,
    ...o,
  });

  it('a member first seen with the current roster has it as its baseline: it hears of nothing before', () => {
    const reads = planReconnectReads([member('w-2')], undefined, new Set(['worker']), NOW, j1);
    expect(reads.record['w-2']).toEqual({ uid: 'uid-w-2', generator: 1, rosterSeq: 1 });
    expect(reads.read).toEqual([]);
  });

  it('a member first seen with an older document starts from the change it is at, and hears the later ones', () => {
    // Its document lists TWO (the roster before change 1): baseline 0, so change 1 is still due to it.
    const behind = member('w-0', { roster: rosterDigest(TWO) });
    const j = journalRoster(journalRoster(journalRoster(undefined, roster({ controller: ['c-0'] })), TWO), THREE);
    expect(j.changes.map((c) => [c.seq, c.roster])).toEqual([
      [1, rosterDigest(TWO)],
      [2, rosterDigest(THREE)],
    ]);
    const reads = planReconnectReads([behind], undefined, new Set(['worker']), NOW, j);
    expect(reads.record['w-0']).toEqual({ uid: 'uid-w-0', generator: 1, rosterSeq: 1 });
    // A document the journal does not know yet (newer): no baseline until it does.
    const unknown = planReconnectReads(
      [member('w-0', { roster: 'f'.repeat(32) })],
      undefined,
      new Set(['worker']),
      NOW,
      j,
    );
    expect(unknown.record['w-0']).toEqual({ uid: 'uid-w-0', generator: 1 });
    const later = planReconnectReads([member('w-0')], unknown.record, new Set(['worker']), NOW, j1);
    expect(later.record['w-0']!.rosterSeq).toBe(1);
  });

  it('an earlier member is read once its annotation lists the new roster, and not before', () => {
    const recorded = { 'c-0': { uid: 'uid-c-0', generator: 1, rosterSeq: 0 } };
    const hooks = new Set(['controller']);
    expect(planReconnectReads([member('c-0', { roster: rosterDigest(TWO) })], recorded, hooks, NOW, j1).read).toEqual(
      [],
    );
    const reads = planReconnectReads([member('c-0')], recorded, hooks, NOW, j1);
    expect(reads.read).toEqual(['c-0']);
    expect(reads.roles).toEqual({ 'c-0': 'controller' });
    // Not running: no read (its app cannot be told anything).
    expect(planReconnectReads([member('c-0', { running: false })], recorded, hooks, NOW, j1).read).toEqual([]);
  });

  it('runs the pending changes once the file lists the current roster; waits while it lists another', () => {
    const record = { 'c-0': { uid: 'uid-c-0', generator: 1, rosterSeq: 0 } };
    const roles = { 'c-0': 'controller' };
    const waiting = planNotifications(record, { 'c-0': { roster: rosterDigest(TWO) } }, j1, roles, ALL_EVENTS);
    expect(waiting).toEqual({ run: [], waiting: ['c-0'], noRosterFile: [] });
    const ready = planNotifications(record, { 'c-0': { roster: current } }, j1, roles, ALL_EVENTS);
    expect(ready.run).toEqual([{ pod: 'c-0', changes: j1.changes, through: 1, missed: 0 }]);
    // A sidecar from before the roster file: named, so the pass can say why nothing ran.
    expect(planNotifications(record, { 'c-0': {} }, j1, roles, ALL_EVENTS).noRosterFile).toEqual(['c-0']);
  });

  it('a role whose eventList leaves out an event is passed over it (KubeDirector’s eventList)', () => {
    const a = app('a', {
      defaultEventList: ['configure'],
      roles: [{ id: 'controller', eventList: ['configure', 'addnodes'] }, { id: 'worker' }],
    });
    const events = subscribedEvents(a);
    expect([...events.get('controller')!]).toEqual(['configure', 'addnodes']);
    expect([...events.get('worker')!]).toEqual(['configure']);
    expect(subscribedEvents(app('b', { roles: [{ id: 'x' }] })).get('x')).toBeUndefined();
    const record = { 'w-0': { uid: 'uid-w-0', generator: 1, rosterSeq: 0 } };
    const plan = planNotifications(record, { 'w-0': { roster: current } }, j1, { 'w-0': 'worker' }, events);
    expect(plan.run).toEqual([{ pod: 'w-0', changes: [], through: 1, missed: 0 }]);
    expect(recordNotifyResults(record, [{ pod: 'w-0', through: 1, ran: [] }], NOW)['w-0']!.rosterSeq).toBe(1);
  });

  it('counts the changes dropped from the journal before the member heard of them', () => {
    const trimmed = { ...j1, changes: [] };
    const plan = planNotifications(
      { x: { uid: 'u', generator: 1, rosterSeq: 0 } },
      { x: { roster: current } },
      trimmed,
      {},
      ALL_EVENTS,
    );
    expect(plan.run).toEqual([{ pod: 'x', changes: [], through: 1, missed: 1 }]);
  });
});

describe('the outcome', () => {
  const change = { seq: 3, op: 'addnodes' as const, role: 'worker', fqdns: [f('w-2'), f('w-3')] };
  const fail: HookOutcome = { ok: false, exitCode: 2, stderrTail: 'no quorum' };
  const base = { 'c-0': { uid: 'u', generator: 1, rosterSeq: 2 } };
  const run = (record: Record<string, MemberReconnect>, outcome: HookOutcome, now = NOW) =>
    recordNotifyResults(record, [{ pod: 'c-0', through: 3, ran: [{ change, outcome }] }], now);

  it('KubeDirector’s command line; the arguments reach the startscript as they are, not parsed by the shell', () => {
    const cmd = notifyCommand('/opt/guestconfig/*/startscript', change);
    expect(cmd).toEqual([
      'sh',
      '-c',
      '/opt/guestconfig/*/startscript "$@"',
      'startscript',
      '--addnodes',
      '--nodegroup',
      '1',
      '--role',
      'worker',
      '--fqdns',
      `${f('w-2')},${f('w-3')}`,
    ]);
    // Run for real with a script that prints its arguments one per line.
    const dir = mkdtempSync(join(tmpdir(), 'kd-notify-'));
    writeFileSync(join(dir, 'startscript'), '#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n', { mode: 0o755 });
    const odd = { ...change, role: "it's $(id) `x`" };
    const [sh, ...args] = notifyCommand(`${dir}/*`, odd);
    const out = execFileSync(sh!, args, { encoding: 'utf8' });
    rmSync(dir, { recursive: true });
    expect(out.split('\n').slice(0, -1)).toEqual([
      '--addnodes',
      '--nodegroup',
      '1',
      '--role',
      odd.role,
      '--fqdns',
      `${f('w-2')},${f('w-3')}`,
    ]);
  });

  it('success moves the member on; a failure keeps it before the change and backs off', () => {
    expect(run(base, { ok: true })['c-0']).toEqual({ uid: 'u', generator: 1, rosterSeq: 3 });
    const failed = run(base, fail)['c-0']!;
    expect(failed).toMatchObject({
      rosterSeq: 2,
      changeFailure: { seq: 3, failures: 1, message: '--addnodes for role worker: exit code 2' },
    });
    expect(retryInMs(failed, NOW)).toBe(1000);
    const again = run({ 'c-0': failed }, fail, new Date(NOW.getTime() + 1000))['c-0']!;
    expect(again.changeFailure!.failures).toBe(2);
    expect(retryInMs(again, new Date(NOW.getTime() + 1000))).toBe(2000);
    expect(run({ 'c-0': again }, { ok: true })['c-0']).toEqual({ uid: 'u', generator: 1, rosterSeq: 3 });
  });

  it(`gives up after ${NOTIFY_MAX_ATTEMPTS} attempts: the member moves past the change, condition and event say so`, () => {
    let rec: Record<string, MemberReconnect> = base;
    for (let i = 0; i < NOTIFY_MAX_ATTEMPTS; i++) rec = run(rec, fail);
    expect(rec['c-0']).toMatchObject({
      rosterSeq: 3,
      changeFailure: { seq: 3, failures: NOTIFY_MAX_ATTEMPTS, gaveUp: true },
    });
    expect(retryInMs(rec['c-0']!, NOW)).toBe(0);
    const cond = notifyCondition(rec, 4);
    expect(cond).toMatchObject({
      type: 'MembersNotified',
      status: 'False',
      reason: 'NotifyFailed',
      observedGeneration: 4,
    });
    expect(cond.message).toContain(
      `c-0 (change 3, --addnodes for role worker: exit code 2, ${NOTIFY_MAX_ATTEMPTS} attempt(s), given up)`,
    );
    const results: NotifyResult[] = [{ pod: 'c-0', through: 3, ran: [{ change, outcome: fail }] }];
    const [event] = notifyEvents(cluster('c', 'a'), () => 'uid-c-0', results, rec, {
      startscript: 'S',
      container: 'app',
      stderr: (o) => (o.ok ? '' : `; stderr: ${o.stderrTail}`),
    });
    expect(event).toMatchObject({
      type: 'Warning',
      reason: 'NotifyFailed',
      action: 'AddNodes',
      regarding: { name: 'c-0', uid: 'uid-c-0' },
    });
    expect(event!.note).toBe(
      `S --addnodes --role worker --fqdns ${f('w-2')},${f('w-3')} in pod c-0 (container app) for membership change 3 failed: exit code 2; that was attempt ${NOTIFY_MAX_ATTEMPTS} of ${NOTIFY_MAX_ATTEMPTS}: given up, the member moves on without it; stderr: no quorum`,
    );
    // Shown until a later announcement to that member succeeds; nothing to run keeps it shown.
    expect(recordNotifyResults(rec, [{ pod: 'c-0', through: 3, ran: [] }], NOW)['c-0']!.changeFailure).toBeDefined();
    const next = { ...change, seq: 4 };
    const cleared = recordNotifyResults(
      rec,
      [{ pod: 'c-0', through: 4, ran: [{ change: next, outcome: { ok: true } }] }],
      NOW,
    );
    expect(cleared['c-0']).toEqual({ uid: 'u', generator: 1, rosterSeq: 4 });
    expect(notifyCondition(cleared, 4)).toMatchObject({ status: 'True', reason: 'NoFailures' });
  });

  it('the first failure ends the member’s turn: later changes wait for it', () => {
    const later = { ...change, seq: 4, op: 'delnodes' as const };
    const rec = recordNotifyResults(
      { 'c-0': { uid: 'u', generator: 1, rosterSeq: 2 } },
      [
        {
          pod: 'c-0',
          through: 4,
          ran: [
            { change, outcome: { ok: true } },
            { change: later, outcome: fail },
          ],
        },
      ],
      NOW,
    );
    expect(rec['c-0']).toMatchObject({ rosterSeq: 3, changeFailure: { seq: 4, failures: 1 } });
  });
});

describe('what a member whose file caught up late is told', () => {
  const add = (seq: number, ...fqdns: string[]) => ({ seq, op: 'addnodes' as const, role: 'worker', fqdns });
  const del = (seq: number, ...fqdns: string[]) => ({ seq, op: 'delnodes' as const, role: 'worker', fqdns });

  it('nothing of a member that joined and left again before its file caught up (never in its documents)', () => {
    expect(visibleChanges([add(1, 'x'), del(2, 'x')])).toEqual([]);
    expect(visibleChanges([add(1, 'x', 'y'), del(2, 'x')])).toEqual([add(1, 'y')]);
    // Another role's member of the same name is another member.
    expect(visibleChanges([add(1, 'x'), { ...del(2, 'x'), role: 'controller' }])).toHaveLength(2);
  });

  it('a member that left and came back is announced both ways (its documents listed another one before)', () => {
    expect(visibleChanges([del(1, 'x'), add(2, 'x')])).toEqual([del(1, 'x'), add(2, 'x')]);
    expect(visibleChanges([add(1, 'x'), del(2, 'x'), add(3, 'x')])).toEqual([add(3, 'x')]);
  });
});

describe('beside --reconnect', () => {
  it('a --reconnect result keeps the member’s place in the journal and its notification failure', () => {
    const changeFailure = { seq: 3, failures: 2, lastFailureTime: NOW.toISOString(), message: 'm' };
    const rec = { p: { uid: 'u', generator: 4, rosterSeq: 2, changeFailure } };
    const ok = recordReconnectResults(rec, [{ pod: 'p', generator: 5, outcome: { ok: true } }], NOW);
    expect(ok.p).toEqual({ uid: 'u', generator: 5, rosterSeq: 2, changeFailure });
    const failed = recordReconnectResults(rec, [{ pod: 'p', generator: 5, outcome: { ok: false, exitCode: 1 } }], NOW);
    expect(failed.p).toMatchObject({ generator: 4, failedGenerator: 5, failures: 1, rosterSeq: 2, changeFailure });
    // And success clears only the reconnect failure.
    const cleared = recordReconnectResults(failed, [{ pod: 'p', generator: 5, outcome: { ok: true } }], NOW);
    expect(cleared.p).toEqual({ uid: 'u', generator: 5, rosterSeq: 2, changeFailure });
  });

  it('only seated pods are tracked: a labelled pod beyond the seats is dropped, so it starts afresh if seated again', () => {
    const pods = [pod('x-0', 'x', 'worker'), pod('x-1', 'x', 'worker'), pod('x-2', 'x', 'worker')];
    expect(reconnectMembersOf('x', pods).map((m) => m.pod)).toEqual(['x-0', 'x-1', 'x-2']);
    const seated = { 'x-0': { role: 'worker', fqdn: 'a' }, 'x-1': { role: 'worker', fqdn: 'b' } };
    expect(reconnectMembersOf('x', pods, seated).map((m) => m.pod)).toEqual(['x-0', 'x-1']);
  });
});
