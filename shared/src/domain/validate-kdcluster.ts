/**
 * Validation of a KubeDirectorCluster's connections. Reports every violation at once,
 * each with its field path. Lookup-free rules (names, duplicates, self, generator) are also CEL rules
 * in the CRD, so the API server enforces them when the webhook is down; they are repeated here so a
 * single answer names everything and so the rules are testable in one place. Each connection is judged
 * by the classifier the reconciler uses too; this file adds the added-vs-kept policy.
 */
import { observeCluster, observeObject, selfConnectionMessage, type Verdict } from './classify-connection.js';
import { connectionSets, type ConnectionSets } from './connection-sets.js';
import type { FieldError, RuleResult } from './field-errors.js';
import { generatorValueError } from './generator.js';
import { jsonEqual } from '../primitives/json-equal.js';
import { appSearchDescription, resolveApp, type Lookup, type ResolvedApp, type RuleOptions } from './lookup.js';
import { invalidObjectName, LABEL_VALUE_MAX, SHOWN_NAME_MAX } from './names.js';
import { SCHEMA_LIMITS, tooManyItems } from './schema-limits.js';
import { shortJson } from '../primitives/short-json.js';
import { CONNECTION_LISTS, KIND_OF_LIST, LABEL_KDCLUSTER, type ConnectionList, type KDCluster } from './types.js';

export interface ClusterReview {
  operation: 'CREATE' | 'UPDATE';
  object: KDCluster;
  oldObject?: KDCluster;
}

/** How far the cycle check follows connections before giving up (it only produces a warning). */
const CYCLE_SEARCH_LIMIT = 64;

export async function validateCluster(review: ClusterReview, lookup: Lookup, opts: RuleOptions): Promise<RuleResult> {
  const errors: FieldError[] = [];
  const warnings: string[] = [];
  const { object, oldObject, operation } = review;
  const ns = object.metadata?.namespace ?? '';
  const name = object.metadata?.name ?? '';
  const spec = object.spec;

  // Finalizer removal and other writes during deletion must never be blocked.
  if (object.metadata?.deletionTimestamp) return { errors, warnings };
  // Member pods carry the cluster's name as a label value: a longer name could never have a member
  // (KubeDirector's own pods fail the same way, later). Only on create: an existing object stays editable.
  if (operation === 'CREATE' && typeof name === 'string' && name.length > LABEL_VALUE_MAX) {
    errors.push({
      field: 'metadata.name',
      message: `${shortJson(name, SHOWN_NAME_MAX)} has ${name.length} characters; a KubeDirectorCluster's name must be at most ${LABEL_VALUE_MAX}, because its member pods carry it in the label ${LABEL_KDCLUSTER}`,
    });
  }
  if (spec === undefined || spec === null || typeof spec !== 'object') {
    errors.push({ field: 'spec', message: 'required' });
    return { errors, warnings };
  }
  const oldSpec = operation === 'UPDATE' ? oldObject?.spec : undefined;
  // KubeDirector's shortcut: an update that leaves the spec alone (labels, annotations) has nothing to check.
  if (operation === 'UPDATE' && oldSpec && jsonEqual(spec, oldSpec)) return { errors, warnings };
  // Lists longer than the schema allows never reach the API server's storage: refused before any
  // lookup (a review posted straight to the service could otherwise ask for thousands of reads).
  const oversized = oversizedLists(spec.connections);
  if (oversized.length > 0) return { errors: [...errors, ...oversized], warnings };

  // The cluster's own app: required on create and when the app reference changes; otherwise a
  // missing app must not block an unrelated update, so it only warns.
  const appChanged = !oldSpec || oldSpec.app !== spec.app || oldSpec.appCatalog !== spec.appCatalog;
  // A name no object can have is not looked up (a megabyte of it would not even fit in a request line).
  const badApp = typeof spec.app === 'string' && spec.app !== '' ? invalidObjectName(spec.app) : undefined;
  const own = badApp ? undefined : await resolveApp(lookup, ns, spec, opts.systemNamespace);
  if (!own) {
    const msg = badApp
      ? `${shortJson(spec.app, SHOWN_NAME_MAX)} ${badApp}`
      : `app "${String(spec.app)}" not found ${appSearchDescription(ns, spec.appCatalog, opts.systemNamespace)}`;
    if (appChanged) errors.push({ field: 'spec.app', message: msg });
    else warnings.push(`spec.app: ${msg}; connections cannot be checked against its connectable_to`);
  }

  const sets = connectionSets(spec.connections);
  const before = connectionSets(oldSpec?.connections);
  const ctx: ListContext = { namespace: ns, self: name, spec, own, before, lookup, opts, errors, warnings };
  for (const list of CONNECTION_LISTS) await checkList(list, spec.connections?.[list], ctx);

  errors.push(...checkGenerator(oldSpec?.configMetaGenerator, spec.configMetaGenerator));

  const addedClusters = [...sets.clusters].filter((c) => !before.clusters.has(c) && c !== name);
  if (errors.length === 0 && addedClusters.length > 0) {
    const cycle = await findCycle(name, ns, addedClusters, lookup);
    if (cycle)
      warnings.push(
        `spec.connections.clusters: connection cycle ${cycle.join(' → ')}; allowed (each cluster sees the others one hop deep)`,
      );
  }
  return { errors, warnings };
}

interface ListContext {
  namespace: string;
  self: string;
  /** The connecting cluster's spec (its app reference names a missing app). */
  spec: { app?: unknown; appCatalog?: unknown };
  own: ResolvedApp | undefined;
  before: ConnectionSets;
  lookup: Lookup;
  opts: RuleOptions;
  errors: FieldError[];
  warnings: string[];
}

/**
 * One connection list: names, duplicates and self-connection (lookup-free), then the classifier's
 * verdict with the webhook's policy: an added connection that is not Connected is refused; one that
 * was there before only warns, so a dangling connection never blocks an unrelated update. Without the
 * cluster's own app no cluster connection is Connected, so none can be added (the verdict names the app).
 */
async function checkList(list: ConnectionList, value: unknown, ctx: ListContext): Promise<void> {
  const { errors, warnings } = ctx;
  const items: unknown[] = Array.isArray(value) ? value : [];
  const seen = new Map<string, number>();
  for (const [i, item] of items.entries()) {
    const field = `spec.connections.${list}[${i}]`;
    const problem = entryProblem(list, item, i, seen, ctx.self);
    if (problem) {
      errors.push(problem);
      continue;
    }
    const n = item as string;
    const added = !ctx.before[list].has(n);
    const verdict = await checkConnection(list, n, ctx, ctx.lookup, ctx.opts);
    if (verdict.state !== 'Connected') {
      if (added) errors.push({ field, message: verdict.message ?? verdict.state });
      else warnings.push(`${field}: ${verdict.message}; kept because it was connected before this change`);
    } else if (added && verdict.note) {
      warnings.push(`${field}: ${verdict.note}`);
    }
  }
}

/**
 * What is wrong with one list entry without looking anything up: its name, a repeat (`seen` collects
 * the names so far), a self-connection (also a CEL rule: refused even when it was there before).
 */
function entryProblem(
  list: ConnectionList,
  item: unknown,
  i: number,
  seen: Map<string, number>,
  self: string,
): FieldError | undefined {
  const field = `spec.connections.${list}[${i}]`;
  const bad = invalidObjectName(item);
  if (bad) return { field, message: `${shortJson(item, SHOWN_NAME_MAX)} ${bad}` };
  const n = item as string;
  const first = seen.get(n);
  if (first !== undefined) return { field, message: `duplicate entry "${n}" (also at index ${first})` };
  seen.set(n, i);
  if (list === 'clusters' && n === self) return { field, message: selfConnectionMessage(n) };
  return undefined;
}

/**
 * The problems the kdcluster CRD's schema and CEL rules refuse on their own (names, repeats in the
 * set-type lists, self-connection, a generator lowered or of the wrong type). The API server checks the
 * schema after the mutating webhooks and before the validating ones, so when one of these is present
 * the validating webhook never sees the request: the mutating webhook uses this to know when it must
 * answer with every problem itself. Empty for a deletion in progress or an update that keeps spec.
 */
export function lookupFreeErrors(review: ClusterReview): FieldError[] {
  const { object, oldObject, operation } = review;
  const spec = object.spec;
  if (object.metadata?.deletionTimestamp || spec === undefined || spec === null || typeof spec !== 'object') return [];
  const oldSpec = operation === 'UPDATE' ? oldObject?.spec : undefined;
  if (operation === 'UPDATE' && oldSpec && jsonEqual(spec, oldSpec)) return [];
  const oversized = oversizedLists(spec.connections);
  if (oversized.length > 0) return oversized;
  const errors: FieldError[] = [];
  const self = object.metadata?.name ?? '';
  for (const list of CONNECTION_LISTS) {
    const value: unknown = spec.connections?.[list];
    const seen = new Map<string, number>();
    (Array.isArray(value) ? value : []).forEach((item: unknown, i) => {
      const problem = entryProblem(list, item, i, seen, self);
      if (problem) errors.push(problem);
    });
  }
  errors.push(...checkGenerator(oldSpec?.configMetaGenerator, spec.configMetaGenerator));
  return errors;
}

/** Connection lists longer than the schema's maxItems, one error each. */
function oversizedLists(connections: unknown): FieldError[] {
  if (connections === null || typeof connections !== 'object') return [];
  const errors: FieldError[] = [];
  for (const list of CONNECTION_LISTS) {
    const many = tooManyItems((connections as Record<string, unknown>)[list], SCHEMA_LIMITS.connectionItems);
    if (many) errors.push({ field: `spec.connections.${list}`, message: many });
  }
  return errors;
}

/** configMetaGenerator counts requested regenerations: a client may raise it (a forced refresh), never lower it. */
function checkGenerator(was: unknown, now: unknown): FieldError[] {
  const invalid = generatorValueError(now);
  if (invalid) return [invalid];
  if (typeof was !== 'number') return [];
  if (now === undefined || now === null) {
    return [
      {
        field: 'spec.configMetaGenerator',
        message: `may not be removed (it is ${was}); leave it out of manifests and the webhook keeps it`,
      },
    ];
  }
  if (typeof now === 'number' && now < was) {
    return [
      {
        field: 'spec.configMetaGenerator',
        message: `may not be lowered (from ${was} to ${now}); it counts configmeta regenerations and only goes up`,
      },
    ];
  }
  return [];
}

/** What the classifier says of one connection, as the webhook reports it. */
async function checkConnection(
  list: ConnectionList,
  name: string,
  review: { namespace: string; self: string; spec: ListContext['spec']; own: ResolvedApp | undefined },
  lookup: Lookup,
  opts: RuleOptions,
): Promise<Verdict> {
  const { namespace, self, spec, own } = review;
  if (list === 'clusters') return (await observeCluster(lookup, namespace, self, name, own, opts, spec)).verdict;
  return (await observeObject(lookup, KIND_OF_LIST[list] as 'ConfigMap' | 'Secret', namespace, name, opts)).verdict;
}

/** A path from `self` back to `self` through the newly added clusters, if one exists. */
async function findCycle(self: string, ns: string, start: string[], lookup: Lookup): Promise<string[] | undefined> {
  const visited = new Set<string>();
  const queue: string[][] = start.map((s) => [self, s]);
  while (queue.length > 0 && visited.size < CYCLE_SEARCH_LIMIT) {
    const path = queue.shift()!;
    const at = path[path.length - 1]!;
    if (visited.has(at)) continue;
    visited.add(at);
    const c = await lookup.getCluster(ns, at);
    for (const next of [...connectionSets(c?.spec?.connections).clusters].sort()) {
      if (next === self) return [...path, self];
      if (!visited.has(next)) queue.push([...path, next]);
    }
  }
  return undefined;
}
