/**
 * KubeDirector's membership notifications, planned: when a role's members change, every other member of a
 * role with a config package has its `startscript --addnodes|--delnodes --nodegroup 1 --role R --fqdns …`
 * run once (KubeDirector's `queueNotify` and `syncMemberNotifies`, pkg/controller/kubedirectorcluster/members.go).
 *
 * The roster is what every document lists (role → member DNS names, status.seatHolders after a delivery).
 * A journal in status (status.rosterChanges) turns each roster change into numbered changes, one per role
 * and direction; each member records the last change it was told of (memberReconnects[pod].rosterSeq). A
 * member hears of its pending changes, in order, only once the file in its container lists the journal's
 * current roster: the delivery annotates each pod with a digest of the roster its document lists, the
 * sidecar copies that digest to ROSTER_FILE after swapping the document in, and the reconciler reads it
 * there. A member's first document already lists everyone, so it hears of no change before it (as in
 * KubeDirector, where a member being created is configured, not notified).
 */
import { describeFailure, type HookOutcome } from './hook-output.js';
import { sha256Hex } from '../primitives/hash.js';
import { clusterTarget } from './connection-changes.js';
import type { ConditionInput } from './cluster-status.js';
import type { EventInput } from '../runtime/event-recorder.js';
import type { ChangeFailure, KDApp, KDCluster, MemberReconnect, RosterChange, RosterJournal } from '../domain/types.js';

export const CONDITION_MEMBERS_NOTIFIED = 'MembersNotified';
export const REASON_NOTIFY_FAILED = 'NotifyFailed';
/** Attempts of one member's notification of one change; then it is given up (condition and event say so). */
export const NOTIFY_MAX_ATTEMPTS = 8;
/** Changes kept for members that have not heard of them; past this the oldest are dropped (and logged). */
export const MAX_PENDING_CHANGES = 32;
const LISTED_PODS = 10;
const LISTED_FQDNS = 10;

/** Ordinal-aware order (`x-2` before `x-10`), the order a StatefulSet's members come in. */
const byName = (a: string, b: string) => a.localeCompare(b, 'en', { numeric: true });

/** Role → its members' DNS names, in ordinal order; roles in key order. */
export function rosterOf(members: Iterable<{ role: string; fqdn: string }>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const m of members) (out[m.role] ??= []).push(m.fqdn);
  return Object.fromEntries(
    Object.keys(out)
      .sort()
      .map((r) => [r, [...new Set(out[r])].sort(byName)]),
  );
}

/** A roster in rosterOf's order, however it came (status, a caller). */
const normalized = (roster: Record<string, string[]>) =>
  rosterOf(Object.entries(roster).flatMap(([role, f]) => f.map((fqdn) => ({ role, fqdn }))));

/** What the roster annotation and ROSTER_FILE hold: a digest of the roster a document lists. */
export function rosterDigest(roster: Record<string, string[]>): string {
  return sha256Hex(JSON.stringify(normalized(roster))).slice(0, 32);
}

/**
 * The journal once `roster` is what the documents list. The first roster starts it at change 0 (members
 * then are its baseline); a different one appends, role by role in `roleOrder` (the app's), the members
 * that left (delnodes) and then those that joined (addnodes).
 */
export function journalRoster(
  prev: RosterJournal | undefined,
  roster: Record<string, string[]>,
  roleOrder: readonly string[] = [],
): RosterJournal {
  const now = normalized(roster);
  if (!prev) return { seq: 0, roster: now, changes: [] };
  if (rosterDigest(prev.roster) === rosterDigest(now)) return prev;
  const roles = [...new Set([...roleOrder, ...Object.keys(prev.roster).sort(), ...Object.keys(now).sort()])];
  const changes = [...prev.changes];
  let seq = prev.seq;
  for (const role of roles) {
    const before = new Set(prev.roster[role] ?? []);
    const after = new Set(now[role] ?? []);
    const left = [...before].filter((f) => !after.has(f));
    const joined = [...after].filter((f) => !before.has(f));
    if (left.length > 0) changes.push({ seq: ++seq, op: 'delnodes', role, fqdns: left });
    if (joined.length > 0) changes.push({ seq: ++seq, op: 'addnodes', role, fqdns: joined });
  }
  // The last change of the update carries the digest of the roster it leads to (rosterBaseline reads it).
  changes[changes.length - 1] = { ...changes.at(-1)!, roster: rosterDigest(now) };
  return { seq, roster: now, changes };
}

/**
 * The journal without the changes every tracked member has heard of (or gave up on), and at most
 * MAX_PENDING_CHANGES of the rest. Members without a rosterSeq hold nothing back.
 */
export function trimJournal(journal: RosterJournal, record: Record<string, MemberReconnect>): RosterJournal {
  const seqs = Object.values(record)
    .map((e) => e.rosterSeq)
    .filter((s): s is number => s !== undefined);
  const heard = seqs.length > 0 ? Math.min(...seqs) : journal.seq;
  const changes = journal.changes.filter((c) => c.seq > heard).slice(-MAX_PENDING_CHANGES);
  return changes.length === journal.changes.length ? journal : { ...journal, changes };
}

/**
 * The events each role's startscript is run for: the role's `eventList`, else the app's
 * `defaultEventList` (KubeDirector's webhook copies it into the roles); undefined: every event.
 */
export function subscribedEvents(app: KDApp): Map<string, ReadonlySet<string> | undefined> {
  const out = new Map<string, ReadonlySet<string> | undefined>();
  for (const r of app.spec.roles ?? []) {
    const list = Array.isArray(r.eventList) ? r.eventList : app.spec.defaultEventList;
    out.set(r.id, Array.isArray(list) ? new Set(list) : undefined);
  }
  return out;
}

/**
 * The change a member's document is at, from the roster digest annotated on its pod: the journal's current
 * one, else the latest kept change that led to that roster; undefined when the journal does not know it
 * (yet: its roster is newer than the journal). A member first seen late is thus told of the changes after
 * the document it started with, as long as the journal keeps them.
 */
export function rosterBaseline(journal: RosterJournal, digest: string | undefined): number | undefined {
  if (digest === undefined) return undefined;
  if (digest === rosterDigest(journal.roster)) return journal.seq;
  return journal.changes.findLast((c) => c.roster === digest)?.seq;
}

/** True when the member's record waits for changes that the documents now list. */
export function changesPending(e: MemberReconnect, journal: RosterJournal | undefined): boolean {
  return journal !== undefined && e.rosterSeq !== undefined && journal.seq > e.rosterSeq;
}

/**
 * The changes a member can be told of, given that its file lists the current roster: a member that joined
 * and left again since the member's last roster (an addnodes, then a delnodes of it) was never in that
 * member's documents, so neither is announced to it. (Left and came back is announced: the member's
 * documents listed it before and after, but not the same member.)
 */
export function visibleChanges(pending: readonly RosterChange[]): RosterChange[] {
  const unseen = new Map<number, Set<string>>();
  pending.forEach((c, i) => {
    if (c.op !== 'addnodes') return;
    for (const f of c.fqdns) {
      const next = pending.slice(i + 1).find((d) => d.role === c.role && d.fqdns.includes(f));
      if (next?.op !== 'delnodes') continue;
      for (const seq of [c.seq, next.seq]) unseen.set(seq, (unseen.get(seq) ?? new Set()).add(f));
    }
  });
  return pending
    .map((c) => (unseen.has(c.seq) ? { ...c, fqdns: c.fqdns.filter((f) => !unseen.get(c.seq)!.has(f)) } : c))
    .filter((c) => c.fqdns.length > 0);
}

/** What a member's notification pass holds: the changes to announce, in order, and how far that takes it. */
export interface NotifyRun {
  pod: string;
  changes: RosterChange[];
  /** The member's rosterSeq once every change in `changes` was announced (unsubscribed ones are passed over). */
  through: number;
  /** Changes that were dropped from the journal before this member heard of them. */
  missed: number;
}

/**
 * Whose changes to announce, given the roster digest each member's file holds (undefined: its sidecar
 * writes no ROSTER_FILE — injected by an earlier version). A member's file that lists another roster is
 * not notified yet (`waiting`): the journal's changes would not all be in it.
 */
export function planNotifications(
  record: Record<string, MemberReconnect>,
  files: Record<string, { roster?: string }>,
  journal: RosterJournal | undefined,
  roleOf: Record<string, string>,
  subscribed: Map<string, ReadonlySet<string> | undefined>,
): { run: NotifyRun[]; waiting: string[]; noRosterFile: string[] } {
  const out = { run: [] as NotifyRun[], waiting: [] as string[], noRosterFile: [] as string[] };
  if (!journal) return out;
  const current = rosterDigest(journal.roster);
  for (const pod of Object.keys(files).sort()) {
    const e = record[pod];
    if (!e || !changesPending(e, journal)) continue;
    const roster = files[pod]!.roster;
    if (roster === undefined) out.noRosterFile.push(pod);
    else if (roster !== current) out.waiting.push(pod);
    else {
      const events = subscribed.get(roleOf[pod] ?? '');
      const pending = journal.changes.filter((c) => c.seq > e.rosterSeq!);
      const first = pending[0]?.seq ?? journal.seq + 1;
      out.run.push({
        pod,
        changes: visibleChanges(pending).filter((c) => !events || events.has(c.op)),
        through: journal.seq,
        missed: Math.max(0, first - e.rosterSeq! - 1),
      });
    }
  }
  return out;
}

/** How one member's announcements went: outcomes in order; the first failure ends the member's pass. */
export interface NotifyResult {
  pod: string;
  through: number;
  ran: { change: RosterChange; outcome: HookOutcome }[];
}

/** The record after the announcements: success moves rosterSeq on; failures back off, then are given up. */
export function recordNotifyResults(
  record: Record<string, MemberReconnect>,
  results: NotifyResult[],
  now: Date,
): Record<string, MemberReconnect> {
  const next = { ...record };
  for (const { pod, through, ran } of results) {
    const prev = next[pod];
    if (!prev) continue;
    const failed = ran.find((r) => !r.outcome.ok);
    if (!failed) {
      // A given-up failure stays on show until a later announcement succeeds.
      const keep = prev.changeFailure?.gaveUp && ran.length === 0 ? { changeFailure: prev.changeFailure } : {};
      const { changeFailure: _, ...rest } = prev;
      next[pod] = { ...rest, ...keep, rosterSeq: through };
      continue;
    }
    const same = prev.changeFailure?.seq === failed.change.seq && !prev.changeFailure.gaveUp;
    const failures = (same ? prev.changeFailure!.failures : 0) + 1;
    const gaveUp = failures >= NOTIFY_MAX_ATTEMPTS;
    const failure: ChangeFailure = {
      seq: failed.change.seq,
      failures,
      lastFailureTime: now.toISOString(),
      message: `--${failed.change.op} for role ${failed.change.role}: ${describeFailure(failed.outcome)}`,
      ...(gaveUp ? { gaveUp: true } : {}),
    };
    // Given up: the member moves past the change it never heard of; else it stays before it.
    const heard = gaveUp ? failed.change.seq : failed.change.seq - 1;
    next[pod] = { ...prev, rosterSeq: heard, changeFailure: failure };
  }
  return next;
}

/** The condition naming the members whose announcement fails or was given up (first ten, then a count). */
export function notifyCondition(
  record: Record<string, MemberReconnect>,
  generation: number | undefined,
): ConditionInput {
  const bad = Object.keys(record)
    .filter((p) => record[p]!.changeFailure)
    .sort();
  const base = { type: CONDITION_MEMBERS_NOTIFIED, observedGeneration: generation };
  if (bad.length === 0)
    return {
      ...base,
      status: 'True',
      reason: 'NoFailures',
      message: 'no --addnodes/--delnodes notification is failing',
    };
  const listed = bad
    .slice(0, LISTED_PODS)
    .map((p) => {
      const f = record[p]!.changeFailure!;
      const end = f.gaveUp ? ', given up' : '';
      return `${p} (change ${f.seq}, ${f.message}, ${f.failures} attempt(s)${end})`;
    })
    .join(', ');
  const more = bad.length > LISTED_PODS ? ` and ${bad.length - LISTED_PODS} more` : '';
  return {
    ...base,
    status: 'False',
    reason: REASON_NOTIFY_FAILED,
    message: `startscript membership notifications failed in ${bad.length} member pod(s): ${listed}${more}; retried with backoff, at most ${NOTIFY_MAX_ATTEMPTS} attempts per change`,
  };
}

/**
 * KubeDirector's notify command, `startscript --<op> --nodegroup 1 --role <role> --fqdns <a,b,…>`: a shell
 * expands the startscript's glob, and the arguments reach it as they are ("$@"), never parsed by that
 * shell — and the pod write policy can allow the command by its fixed words.
 */
export function notifyCommand(startscript: string, change: RosterChange): string[] {
  return [
    'sh',
    '-c',
    `${startscript} "$@"`,
    'startscript',
    `--${change.op}`,
    '--nodegroup',
    '1',
    '--role',
    change.role,
    '--fqdns',
    change.fqdns.join(','),
  ];
}

function fqdnList(fqdns: string[]): string {
  const more = fqdns.length > LISTED_FQDNS ? ` and ${fqdns.length - LISTED_FQDNS} more` : '';
  return fqdns.slice(0, LISTED_FQDNS).join(',') + more;
}

/** One event per announcement run, regarding the pod, related to the cluster. */
export function notifyEvents(
  cluster: KDCluster,
  uidOf: (pod: string) => string | undefined,
  results: NotifyResult[],
  record: Record<string, MemberReconnect>,
  describe: { startscript: string; container: string; stderr: (o: HookOutcome) => string },
): EventInput[] {
  const related = clusterTarget(cluster);
  const out: EventInput[] = [];
  for (const { pod, ran } of results) {
    const regarding = {
      apiVersion: 'v1',
      kind: 'Pod',
      namespace: cluster.metadata.namespace,
      name: pod,
      uid: uidOf(pod),
    };
    for (const { change, outcome } of ran) {
      const action = change.op === 'addnodes' ? 'AddNodes' : 'DelNodes';
      const what = `${describe.startscript} --${change.op} --role ${change.role} --fqdns ${fqdnList(change.fqdns)} in pod ${pod} (container ${describe.container}) for membership change ${change.seq}`;
      if (outcome.ok) {
        out.push({ regarding, related, type: 'Normal', reason: 'Notified', action, note: `${what} succeeded` });
        continue;
      }
      const f = record[pod]?.changeFailure;
      const last =
        f?.gaveUp && f.seq === change.seq
          ? `; that was attempt ${f.failures} of ${NOTIFY_MAX_ATTEMPTS}: given up, the member moves on without it`
          : '';
      out.push({
        regarding,
        related,
        type: 'Warning',
        reason: REASON_NOTIFY_FAILED,
        action,
        note: `${what} failed: ${describeFailure(outcome)}${last}${describe.stderr(outcome)}`,
      });
    }
  }
  return out;
}
