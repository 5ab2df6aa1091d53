/**
 * Validation of a KubeDirectorCluster's connections (DESIGN §4). Reports every violation at once,
 * each with its field path. Lookup-free rules (names, duplicates, self, generator) are also CEL rules
 * in the CRD, so the API server enforces them when the webhook is down; they are repeated here so a
 * single answer names everything and so the rules are testable in one place.
 */
import { describeAllowed, describeApp, isConnectable } from './connectable.js';
import { connectionSets } from './connection-sets.js';
import { isDeepStrictEqual } from 'node:util';
import type { FieldError, RuleResult } from './field-errors.js';
import { appSearchDescription, resolveApp, type Lookup, type ResolvedApp, type RuleOptions } from './lookup.js';
import { invalidObjectName } from './names.js';
import {
  CONNECTION_LISTS,
  LABEL_CM_TYPE,
  LABEL_SECRET_TYPE,
  type ConnectionList,
  type KDCluster,
  type MetaObject,
} from './types.js';

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
  if (spec === undefined || spec === null || typeof spec !== 'object') {
    return { errors: [{ field: 'spec', message: 'required' }], warnings };
  }
  const oldSpec = operation === 'UPDATE' ? oldObject?.spec : undefined;
  // KubeDirector's shortcut: an update that leaves the spec alone (labels, annotations) has nothing to check.
  if (operation === 'UPDATE' && oldSpec && isDeepStrictEqual(spec, oldSpec)) return { errors, warnings };

  // The cluster's own app: required on create and when the app reference changes; otherwise a
  // missing app must not block an unrelated update, so it only warns.
  const appChanged = !oldSpec || oldSpec.app !== spec.app || oldSpec.appCatalog !== spec.appCatalog;
  const own = await resolveApp(lookup, ns, spec, opts.systemNamespace);
  if (!own) {
    const msg = `app "${String(spec.app)}" not found ${appSearchDescription(ns, spec.appCatalog, opts.systemNamespace)}`;
    if (appChanged) errors.push({ field: 'spec.app', message: msg });
    else warnings.push(`spec.app: ${msg}; connections cannot be checked against its connectable_to`);
  }

  const sets = connectionSets(spec.connections);
  const before = connectionSets(oldSpec?.connections);
  const lists = spec.connections ?? {};

  for (const list of CONNECTION_LISTS) {
    const items: unknown[] = Array.isArray(lists[list]) ? (lists[list] as unknown[]) : [];
    const seen = new Map<string, number>();
    for (const [i, item] of items.entries()) {
      const field = `spec.connections.${list}[${i}]`;
      const bad = invalidObjectName(item);
      if (bad) {
        errors.push({ field, message: `${JSON.stringify(item)} ${bad}` });
        continue;
      }
      const n = item as string;
      const first = seen.get(n);
      if (first !== undefined) {
        errors.push({ field, message: `duplicate entry "${n}" (also at index ${first})` });
        continue;
      }
      seen.set(n, i);
      if (list === 'clusters' && n === name) {
        errors.push({ field, message: `a cluster cannot connect to itself ("${n}")` });
        continue;
      }
      const added = !before[list].has(n);
      const problem = await checkConnection(list, n, ns, own, lookup, opts);
      if (problem.error) {
        if (added) errors.push({ field, message: problem.error });
        else warnings.push(`${field}: ${problem.error}; kept because it was connected before this change`);
      } else if (added && problem.warning) {
        warnings.push(`${field}: ${problem.warning}`);
      }
    }
  }

  // configMetaGenerator counts requested regenerations: a client may raise it (a forced refresh), never lower it.
  const was = oldSpec?.configMetaGenerator;
  const now = spec.configMetaGenerator;
  if (typeof was === 'number') {
    if (now === undefined || now === null) {
      errors.push({
        field: 'spec.configMetaGenerator',
        message: `may not be removed (it is ${was}); leave it out of manifests and the webhook keeps it`,
      });
    } else if (typeof now === 'number' && now < was) {
      errors.push({
        field: 'spec.configMetaGenerator',
        message: `may not be lowered (from ${was} to ${now}); it counts configmeta regenerations and only goes up`,
      });
    }
  }

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

interface ConnectionCheck {
  error?: string;
  warning?: string;
}

async function checkConnection(
  list: ConnectionList,
  name: string,
  ns: string,
  own: ResolvedApp | undefined,
  lookup: Lookup,
  opts: RuleOptions,
): Promise<ConnectionCheck> {
  if (list === 'configmaps') return labelled('configmap', await lookup.getConfigMap(ns, name), name, ns, LABEL_CM_TYPE);
  if (list === 'secrets') {
    if (opts.secretConnections === false) {
      return { error: `secret connections are disabled in this installation (chart value secretConnections.enabled)` };
    }
    return labelled('secret', await lookup.getSecret(ns, name), name, ns, LABEL_SECRET_TYPE);
  }
  const target = await lookup.getCluster(ns, name);
  if (!target) return { error: `cluster "${name}" not found in namespace "${ns}"` };
  const ready = target.status?.members?.ready ?? 0;
  const warning =
    ready > 0
      ? undefined
      : `cluster "${name}" has no ready members yet; its section of configmeta fills in as they come up`;
  // Without our own app there is nothing to check against (reported at spec.app).
  if (!own) return { warning };
  const rules = own.app.spec?.connectable_to;
  if (rules === undefined || rules === null) return { warning };
  const targetApp = await resolveApp(lookup, ns, target.spec ?? {}, opts.systemNamespace);
  if (!targetApp) {
    return {
      error: `cluster "${name}" uses app "${String(target.spec?.app)}", which was not found ${appSearchDescription(ns, target.spec?.appCatalog, opts.systemNamespace)}; it cannot be checked against connectable_to of app "${own.app.metadata.name}"`,
    };
  }
  const verdict = isConnectable(own.app.spec, targetApp.app.spec);
  if (verdict.allowed) return { warning };
  const ownName = `app "${own.app.metadata.name}"`;
  const why =
    verdict.reason === 'empty'
      ? `${ownName} allows no cluster connections (connectable_to is empty)`
      : `connectable_to of ${ownName} does not allow it; allowed: ${describeAllowed(own.app.spec)}`;
  return { error: `cluster "${name}" uses ${describeApp(targetApp.app)}: ${why}` };
}

function labelled(
  kind: 'configmap' | 'secret',
  obj: MetaObject | undefined,
  name: string,
  ns: string,
  label: string,
): ConnectionCheck {
  if (!obj) return { error: `${kind} "${name}" not found in namespace "${ns}"` };
  const labels = obj.metadata?.labels ?? {};
  if (!(label in labels)) {
    return {
      error: `${kind} "${name}" lacks label ${label}; add it (its value groups the ${kind === 'configmap' ? 'ConfigMap' : 'Secret'} in configmeta) to make it connectable`,
    };
  }
  return {};
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
