/**
 * The reconnect signal, planned: KubeDirector runs an app's `startscript --reconnect` in a member after
 * its connections changed (never at setup, where `--configure` runs instead), and only for roles that
 * have a config package. Here the change is "the member's /etc/guestconfig file holds a newer generator".
 *
 * Per member (status.memberReconnects, keyed by pod name, tied to the pod's uid) we keep the generator
 * its app was set up or last reconnected with:
 *  - first sighting of a pod (no entry for its uid): the generator annotated on it then is recorded as
 *    its baseline; no hook — the app starts on that document or a later one, and a later one gets one
 *    run more rather than one too few (KubeDirector's own preference);
 *  - a running member whose annotated generator is above the recorded one has its file read (in the
 *    sidecar); when the file holds a generator above the recorded one, the hook runs once for it
 *    (several quick changes: one run, for what the file holds); below or equal: the file has not been
 *    swapped yet, read again shortly;
 *  - success records the file's generator; failure keeps the old one, counts it and backs off.
 * A replaced pod (same name, new uid) starts from a new baseline, so old generators never run again.
 *
 * Gated on the member having the document (its file holds the generator; the sidecar writes that file
 * only once the document, private half included, is in place) and the pod running — not on Ready: an app
 * that is not Ready until a connection changes must still hear of that change (KubeDirector's "ready"
 * member state means configured, not the pod's Ready condition).
 */
import { describeFailure, type HookOutcome } from './hook-output.js';
import { isMemberOf } from '../configmeta/members.js';
import {
  ANNOTATION_CONFIGMETA_ROSTER,
  GENERATOR_FILE,
  GUESTCONFIG_DIR,
  ROSTER_FILE,
  SIDECAR_SOURCE_DIR,
  SOURCE_ROSTER_ITEM,
} from '../domain/guestconfig-layout.js';
import { changesPending, rosterBaseline, rosterDigest } from './plan-roster-changes.js';
import {
  ANNOTATION_CONFIGMETA_GENERATOR,
  LABEL_ROLE,
  type KDApp,
  type MemberReconnect,
  type PodLike,
  type RosterJournal,
} from '../domain/types.js';

/** KubeDirector's hook: the app's config package startscript, in the container named `app`. */
export const RECONNECT_CONTAINER = 'app';
export const RECONNECT_STARTSCRIPT = '/opt/guestconfig/*/startscript';
export const RECONNECT_COMMAND = ['sh', '-c', `${RECONNECT_STARTSCRIPT} --reconnect`];
/**
 * Prints the generator file's line, then the roster digest beside it: empty while the document that
 * carries one is not in place yet, `-` when the pod's projection has no roster item (a sidecar injected
 * before there was one, which never writes the file).
 */
export const READ_FILES_COMMAND = [
  'sh',
  '-c',
  'cat "$1" && echo && if [ -e "$2" ]; then cat "$2"; elif [ ! -e "$3" ]; then echo -; fi',
  'read-files',
  `${GUESTCONFIG_DIR}/${GENERATOR_FILE}`,
  `${GUESTCONFIG_DIR}/${ROSTER_FILE}`,
  `${SIDECAR_SOURCE_DIR}/${SOURCE_ROSTER_ITEM}`,
];

export const CONDITION_MEMBERS_RECONNECTED = 'MembersReconnected';
export const REASON_RECONNECT_FAILED = 'ReconnectFailed';
/** How soon a member whose file still holds an older generator is read again. */
export const FILE_RECHECK_MS = 1000;
/** Retry of a failed hook: base · 2^(failures-1), capped. */
export const RECONNECT_BACKOFF_BASE_MS = 1000;
export const RECONNECT_BACKOFF_MAX_MS = 5 * 60_000;
/**
 * Attempts of one member's hook for one generator (1 + 2 + … + 64 s = 127 s of backoff between them). After the
 * last the member is left alone — condition and event say so — until a newer generator reaches it.
 */
export const RECONNECT_MAX_ATTEMPTS = 8;
/** Members a condition or event names before it gives a count. */
export const LISTED_PODS = 10;

export type MemberReconnects = Record<string, MemberReconnect>;

/** A member pod as the reconnect planner sees it. */
export interface ReconnectMember {
  pod: string;
  uid: string;
  role: string;
  /** The pod is Running (its containers can be exec'd into); its Ready condition does not matter. */
  running: boolean;
  /** The generator annotated on the pod (what it is being delivered); undefined before the first delivery. */
  delivered?: number;
  /** The roster digest annotated on the pod (the roster its document lists), when there is one. */
  roster?: string;
}

/**
 * What reading the member's files gave: the generator and roster digest the file in its container holds
 * (no roster: its sidecar predates ROSTER_FILE), or why they could not be read.
 */
export type FileRead = { generator: number; roster?: string } | { error: string };

export interface HookResult {
  pod: string;
  generator: number;
  outcome: HookOutcome;
}

/**
 * The roles whose members get the hook: KubeDirector's rule for config packages — a role's own
 * `configPackage` when the key is there (null: none), else the app's `defaultConfigPackage`.
 */
export function rolesWithConfigPackage(app: KDApp): Set<string> {
  const fallback = app.spec.defaultConfigPackage != null;
  const roles = new Set<string>();
  for (const r of app.spec.roles ?? []) {
    const has = 'configPackage' in r ? r.configPackage != null : fallback;
    if (has && typeof r.id === 'string') roles.add(r.id);
  }
  return roles;
}

/**
 * The members of `clusterName` among `pods`, with what the reconnect planner reads of each. With the seat
 * holders the last delivery recorded, only pods holding a seat: a pod beyond the seats keeps the last
 * document it had, but is no member to notify, and its entry is dropped (it starts afresh if it is seated
 * again, so it never hears of its own leaving and joining).
 */
export function reconnectMembersOf(
  clusterName: string,
  pods: PodLike[],
  seatHolders?: Readonly<Record<string, unknown>>,
): ReconnectMember[] {
  return pods
    .filter((p) => isMemberOf(p, clusterName) && p.metadata.uid)
    .filter((p) => !seatHolders || Object.hasOwn(seatHolders, p.metadata.name ?? ''))
    .map((p) => {
      const text = p.metadata.annotations?.[ANNOTATION_CONFIGMETA_GENERATOR];
      const roster = p.metadata.annotations?.[ANNOTATION_CONFIGMETA_ROSTER];
      const n = text === undefined ? NaN : Number(text);
      return {
        pod: p.metadata.name ?? '',
        uid: p.metadata.uid!,
        role: p.metadata.labels![LABEL_ROLE]!,
        running: p.status?.phase === 'Running',
        ...(Number.isSafeInteger(n) && n >= 0 ? { delivered: n } : {}),
        ...(roster ? { roster } : {}),
      };
    });
}

function backoffLeftMs(failures: number | undefined, last: string | undefined, now: Date): number {
  if (!failures || !last) return 0;
  const delay = Math.min(RECONNECT_BACKOFF_MAX_MS, RECONNECT_BACKOFF_BASE_MS * 2 ** (failures - 1));
  return Math.max(0, Date.parse(last) + delay - now.getTime());
}

/** Milliseconds until a failing member may be retried (0: now): its reconnect's and its notification's backoff. */
export function retryInMs(entry: MemberReconnect, now: Date): number {
  const change = entry.changeFailure && !entry.changeFailure.gaveUp ? entry.changeFailure : undefined;
  return Math.max(
    backoffLeftMs(entry.failures, entry.lastFailureTime, now),
    backoffLeftMs(change?.failures, change?.lastFailureTime, now),
  );
}

/** The member is due a look at its files: a newer generator, or membership changes its annotation lists. */
function due(m: ReconnectMember, e: MemberReconnect, journal: RosterJournal | undefined): boolean {
  const reconnect = m.delivered !== undefined && m.delivered > e.generator && !gaveUpOn(e, m.delivered);
  const changes = changesPending(e, journal) && m.roster === rosterDigest(journal!.roster);
  return reconnect || changes;
}

export interface ReadPlan {
  /** The recorded state before any hook: baselines added, entries of gone or replaced pods dropped. */
  record: MemberReconnects;
  /** Members whose file must be read: running, delivered something not announced yet, not backing off. */
  read: string[];
  /** The role of each member read. */
  roles: Record<string, string>;
}

/**
 * Step 1: whose files to read. Only members of roles with a config package are tracked. A member's
 * membership baseline (rosterSeq) is the change its annotated document is at (rosterBaseline): its app
 * starts on that document or a later one, and hears of the changes after it.
 */
export function planReconnectReads(
  members: ReconnectMember[],
  recorded: MemberReconnects | undefined,
  hookRoles: ReadonlySet<string>,
  now: Date,
  journal?: RosterJournal,
): ReadPlan {
  const record: MemberReconnects = {};
  const read: string[] = [];
  const roles: Record<string, string> = {};
  const baseline = (m: ReconnectMember) => {
    const seq = journal && rosterBaseline(journal, m.roster);
    return seq === undefined ? {} : { rosterSeq: seq };
  };
  for (const m of members) {
    if (!hookRoles.has(m.role)) continue;
    const prev = recorded?.[m.pod];
    if (!prev || prev.uid !== m.uid) {
      if (m.delivered !== undefined) record[m.pod] = { uid: m.uid, generator: m.delivered, ...baseline(m) };
      continue;
    }
    const e = prev.rosterSeq === undefined ? { ...prev, ...baseline(m) } : prev;
    record[m.pod] = e;
    if (!m.running || !due(m, e, journal)) continue;
    if (retryInMs(e, now) === 0) {
      read.push(m.pod);
      roles[m.pod] = m.role;
    }
  }
  return { record, read: read.sort(), roles };
}

export interface RunPlan {
  /** Hooks to run: each member once, for the generator its file holds. */
  run: { pod: string; generator: number }[];
  /** Members whose file still holds the recorded generator (or older): read again after FILE_RECHECK_MS. */
  waiting: string[];
  /** Members whose file could not be read (no sidecar, not running): pod → why. Not retried by timer. */
  unreadable: Record<string, string>;
}

/** Step 2: given what each file read holds, which hooks run. */
export function planReconnectRuns(record: MemberReconnects, reads: Record<string, FileRead>): RunPlan {
  const plan: RunPlan = { run: [], waiting: [], unreadable: {} };
  for (const pod of Object.keys(reads).sort()) {
    const r = reads[pod]!;
    const entry = record[pod];
    if (!entry) continue;
    if ('error' in r) plan.unreadable[pod] = r.error;
    else if (r.generator > entry.generator && !gaveUpOn(entry, r.generator))
      plan.run.push({ pod, generator: r.generator });
    else plan.waiting.push(pod);
  }
  return plan;
}

/**
 * When to look again after a pass: a running member still behind what it was delivered is read again after
 * FILE_RECHECK_MS (its file is not swapped yet, or moved on while the hook ran), or when its backoff
 * ends; `unreadable` members only on the next event. Undefined: nothing pending.
 */
export function nextReconnectCheckMs(
  members: ReconnectMember[],
  record: MemberReconnects,
  unreadable: ReadonlySet<string>,
  now: Date,
  journal?: RosterJournal,
): number | undefined {
  let next: number | undefined;
  for (const m of members) {
    const e = record[m.pod];
    if (!e || e.uid !== m.uid || !m.running || unreadable.has(m.pod)) continue;
    if (!due(m, e, journal)) continue;
    const ms = retryInMs(e, now) || FILE_RECHECK_MS;
    next = Math.min(next ?? ms, ms);
  }
  return next;
}

/** Step 3: the recorded state after the hooks ran. */
export function recordReconnectResults(record: MemberReconnects, results: HookResult[], now: Date): MemberReconnects {
  const next = { ...record };
  for (const { pod, generator, outcome } of results) {
    const prev = next[pod];
    if (!prev) continue;
    // The membership fields (rosterSeq, changeFailure) are not this hook's: kept as they are.
    const { failedGenerator: _g, failures: _f, lastFailureTime: _t, message: _m, ...others } = prev;
    if (outcome.ok) {
      next[pod] = { ...others, generator };
      continue;
    }
    next[pod] = {
      ...others,
      generator: prev.generator,
      failedGenerator: generator,
      failures: (prev.failedGenerator === generator ? (prev.failures ?? 0) : 0) + 1,
      lastFailureTime: now.toISOString(),
      message: describeFailure(outcome),
    };
  }
  return next;
}

/** True while a member's hook for its newest generator has not succeeded after a failure. */
export function failing(e: MemberReconnect): boolean {
  return e.failedGenerator !== undefined && e.failedGenerator > e.generator;
}

/** Whether the hook failed RECONNECT_MAX_ATTEMPTS times for the newest generator `delivered` can bring. */
export function gaveUp(e: MemberReconnect): boolean {
  return failing(e) && (e.failures ?? 0) >= RECONNECT_MAX_ATTEMPTS;
}

/** Given up, and nothing newer than the generator it gave up on was delivered since. */
function gaveUpOn(e: MemberReconnect, delivered: number): boolean {
  return gaveUp(e) && delivered <= e.failedGenerator!;
}
