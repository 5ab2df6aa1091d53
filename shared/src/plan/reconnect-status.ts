/**
 * What the reconnect hook's record says to the user: the MembersReconnected condition, the events of a
 * round, and the status patch that records it (plan-reconnect.ts plans the reads and runs).
 */
import { describeFailure, HOOK_LOG_CHARS, hookOutputExcerpt } from './hook-output.js';
import { setCondition, type ConditionInput } from './cluster-status.js';
import { clusterTarget } from './connection-changes.js';
import type { EventInput, EventTarget } from '../runtime/event-recorder.js';
import { pointer, type PatchOp } from '../primitives/json-patch.js';
import {
  CONDITION_MEMBERS_RECONNECTED,
  LISTED_PODS,
  REASON_RECONNECT_FAILED,
  RECONNECT_CONTAINER,
  RECONNECT_MAX_ATTEMPTS,
  RECONNECT_STARTSCRIPT,
  failing,
  gaveUp,
  type HookResult,
  type MemberReconnects,
  type ReconnectMember,
} from './plan-reconnect.js';
import type { Condition, KDCluster, MemberReconnect, RosterJournal } from '../domain/types.js';

/** The condition naming the members whose hook fails (first ten, then a count). */
export function reconnectCondition(record: MemberReconnects, generation: number | undefined): ConditionInput {
  const bad = Object.keys(record)
    .filter((p) => failing(record[p]!))
    .sort();
  const base = { type: CONDITION_MEMBERS_RECONNECTED, observedGeneration: generation };
  if (bad.length === 0) {
    return { ...base, status: 'True', reason: 'NoFailures', message: 'no reconnect hook is failing' };
  }
  const listed = bad
    .slice(0, LISTED_PODS)
    .map((p) => {
      const e = record[p]!;
      const end = gaveUp(e) ? ', given up until the next change' : '';
      return `${p} (generator ${e.failedGenerator}: ${e.message ?? 'failed'}, ${e.failures ?? 1} attempt(s)${end})`;
    })
    .join(', ');
  const more = bad.length > LISTED_PODS ? ` and ${bad.length - LISTED_PODS} more` : '';
  return {
    ...base,
    status: 'False',
    reason: REASON_RECONNECT_FAILED,
    message: `${RECONNECT_STARTSCRIPT} --reconnect failed in ${bad.length} member pod(s): ${listed}${more}; retried with backoff, at most ${RECONNECT_MAX_ATTEMPTS} attempts per change`,
  };
}

/**
 * One event per hook run, regarding the pod, related to the cluster; failures carry the output's tail,
 * and the last attempt says it was the last (`record`: the state after these results).
 */
export function reconnectEvents(
  cluster: KDCluster,
  members: ReconnectMember[],
  results: HookResult[],
  record: MemberReconnects = {},
): EventInput[] {
  const related = clusterTarget(cluster);
  const uid = new Map(members.map((m) => [m.pod, m.uid]));
  return results.map(({ pod, generator, outcome }) => {
    const regarding: EventTarget = {
      apiVersion: 'v1',
      kind: 'Pod',
      namespace: cluster.metadata.namespace,
      name: pod,
      uid: uid.get(pod),
    };
    const what = `${RECONNECT_STARTSCRIPT} --reconnect in pod ${pod} (container ${RECONNECT_CONTAINER}) for configmeta generator ${generator}`;
    if (outcome.ok)
      return {
        regarding,
        related,
        type: 'Normal',
        reason: 'Reconnected',
        action: 'Reconnect',
        note: `${what} succeeded`,
      };
    const tail = outcome.stderrTail
      ? `; end of stderr (connected Secret values masked; the last ${HOOK_LOG_CHARS} characters are in the reconciler's log line "reconnect hook ran"): ${hookOutputExcerpt(outcome.stderrTail, [])}`
      : '';
    return {
      regarding,
      related,
      type: 'Warning',
      reason: REASON_RECONNECT_FAILED,
      action: 'Reconnect',
      note: `${what} failed: ${describeFailure(outcome)}${last(record[pod])}${tail}`,
    };
  });
}

function last(e: MemberReconnect | undefined): string {
  return e && gaveUp(e)
    ? `; that was attempt ${e.failures} of ${RECONNECT_MAX_ATTEMPTS}: given up until a newer configmeta generator reaches the pod`
    : '';
}

/**
 * The /status patch recording `record` and the condition, or [] when status already says it. Guarded
 * by the uid and the current value of each field it replaces (the resourceVersion when a field is
 * absent), so a spec edit while hooks ran does not refuse the record of what ran.
 */
export function reconnectStatusPatch(
  cluster: KDCluster,
  record: MemberReconnects,
  condition: ConditionInput | ConditionInput[],
  now: string,
  journal?: RosterJournal,
): PatchOp[] {
  const status = cluster.status;
  const conditions: Condition[] = [condition]
    .flat()
    .reduce<Condition[] | undefined>((all, c) => setCondition(all, c, now), status?.conditions)!;
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const changes: PatchOp[] = [];
  const guard: PatchOp[] = [];
  const field = (key: 'memberReconnects' | 'conditions' | 'rosterChanges', value: unknown) => {
    const current = status?.[key];
    if (same(current, value)) return;
    if (current === undefined) {
      if (cluster.metadata.resourceVersion)
        guard.push({ op: 'test', path: '/metadata/resourceVersion', value: cluster.metadata.resourceVersion });
    } else guard.push({ op: 'test', path: pointer('status', key), value: current });
    changes.push({ op: 'add', path: pointer('status', key), value });
  };
  if (!status) {
    if (!cluster.metadata.resourceVersion) throw new Error('refusing an unguarded /status patch: no resourceVersion');
    return [
      ...uidTest(cluster),
      { op: 'test', path: '/metadata/resourceVersion', value: cluster.metadata.resourceVersion },
      {
        op: 'add',
        path: '/status',
        value: { memberReconnects: record, conditions, ...(journal ? { rosterChanges: journal } : {}) },
      },
    ];
  }
  field('memberReconnects', record);
  if (journal) field('rosterChanges', journal);
  field('conditions', conditions);
  if (changes.length === 0) return [];
  const unique = guard.filter((g, i) => guard.findIndex((h) => same(h, g)) === i);
  return [...uidTest(cluster), ...unique, ...changes];
}

function uidTest(cluster: KDCluster): PatchOp[] {
  return cluster.metadata.uid ? [{ op: 'test', path: '/metadata/uid', value: cluster.metadata.uid }] : [];
}
