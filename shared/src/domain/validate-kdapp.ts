/**
 * Validation of a KubeDirectorApp's `connectable_to`: well-formed entries, and a warning when an update
 * tightens it, or a (re-)created app's rules forbid, existing connections of the clusters that use it.
 */
import { isConnectable, describeApp, parseVersionSpec } from './connectable.js';
import { connectionSets } from './connection-sets.js';
import type { FieldError, RuleResult } from './field-errors.js';
import { resolveApp, type AppLookup, type Lookup, type RuleOptions } from './lookup.js';
import { SCHEMA_LIMITS, tooLong, tooManyItems } from './schema-limits.js';
import { shortJson } from '../primitives/short-json.js';
import type { KDApp } from './types.js';

export interface AppReview {
  operation: 'CREATE' | 'UPDATE';
  object: KDApp;
  oldObject?: KDApp;
}

const ENTRY_FIELDS = ['category', 'distroID', 'version'] as const;

/** The schema's maxLength of each field, checked before the field is used (a version is parsed). */
const MAX_LENGTH = {
  category: SCHEMA_LIMITS.category,
  distroID: SCHEMA_LIMITS.distroID,
  version: SCHEMA_LIMITS.version,
} as const;

export function checkConnectableTo(value: unknown): FieldError[] {
  const errors: FieldError[] = [];
  if (value === undefined || value === null) return errors;
  if (!Array.isArray(value)) return [{ field: 'spec.connectable_to', message: 'must be a list of entries' }];
  // Longer than the schema allows: refused as a whole, before any entry is looked at.
  const many = tooManyItems(value, SCHEMA_LIMITS.connectableToItems);
  if (many) return [{ field: 'spec.connectable_to', message: many }];
  for (const [i, entry] of value.entries()) {
    const at = `spec.connectable_to[${i}]`;
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      errors.push({ field: at, message: 'must be an object with one or more of category, distroID, version' });
      continue;
    }
    const e = entry as Record<string, unknown>;
    const present = ENTRY_FIELDS.filter((k) => e[k] !== undefined);
    if (present.length === 0) {
      errors.push({
        field: at,
        message: 'empty entry matches no cluster; give at least one of category, distroID, version',
      });
      continue;
    }
    let usable = true;
    for (const k of present) {
      const long = tooLong(e[k], MAX_LENGTH[k]);
      if (long) {
        errors.push({ field: `${at}.${k}`, message: long });
        usable = false;
      } else if (typeof e[k] !== 'string' || (e[k] as string).trim() === '') {
        errors.push({ field: `${at}.${k}`, message: `must be a non-empty string, not ${shortJson(e[k], 64)}` });
        usable = false;
      }
    }
    if (usable && typeof e.version === 'string' && !parseVersionSpec(e.version)) {
      errors.push({
        field: `${at}.version`,
        message: `${JSON.stringify(e.version)} is neither a version (e.g. "2.4.5") nor a valid semver range (e.g. ">=2.4 <3")`,
      });
    }
  }
  return errors;
}

export async function validateApp(review: AppReview, lookup: AppLookup, opts: RuleOptions): Promise<RuleResult> {
  const { object, oldObject, operation } = review;
  const spec = object.spec;
  if (spec === undefined || spec === null || typeof spec !== 'object')
    return { errors: [{ field: 'spec', message: 'required' }], warnings: [] };
  const errors = checkConnectableTo(spec.connectable_to);
  for (const k of ENTRY_FIELDS) {
    const long = tooLong(spec[k], MAX_LENGTH[k]);
    if (long) errors.push({ field: `spec.${k}`, message: long });
  }
  if (
    spec.category !== undefined &&
    !tooLong(spec.category, MAX_LENGTH.category) &&
    (typeof spec.category !== 'string' || spec.category.trim() === '')
  ) {
    errors.push({
      field: 'spec.category',
      message: `must be a non-empty string, not ${shortJson(spec.category, 64)}`,
    });
  }
  const warnings: string[] = [];
  if (errors.length === 0 && (operation === 'CREATE' || oldObject?.spec)) {
    const forbidden = await newlyForbidden(object, operation === 'UPDATE' ? oldObject : undefined, lookup, opts);
    if (forbidden.length > 0) warnings.push(forbiddenWarning(object.metadata.name ?? '', forbidden, opts));
  }
  return { errors, warnings };
}

/**
 * The warning about connections an app change forbids. It goes to whoever changes the app, who may not be
 * allowed to see kdclusters in other namespaces (a system-catalog app is used from every namespace): those
 * are only counted, never named, so the answer reveals no namespace or cluster name the requester could
 * not list. Connections in the app's own namespace are named.
 */
function forbiddenWarning(app: string, forbidden: ForbiddenConnection[], opts: RuleOptions): string {
  const named = forbidden.filter((f) => f.local).map((f) => f.text);
  const elsewhere = forbidden.length - named.length;
  const hidden =
    `${elsewhere} in other namespaces (not named: this answer goes to whoever changes the app, who may not see ` +
    `those clusters; an administrator lists them with kubectl get kdclusters -A)`;
  const what = named.length === 0 ? `: ${hidden}` : `: ${named.join('; ')}${elsewhere > 0 ? `; and ${hidden}` : ''}`;
  const tail = opts.kubedirector
    ? "They stay in the clusters' specs and KubeDirector keeps delivering them; remove them from those specs"
    : "They stay in the clusters' specs but are left out of configmeta (status NotConnectable) until allowed again";
  return `connectable_to of app "${app}" now forbids ${forbidden.length} existing connection(s)${what}. ${tail}`;
}

interface ForbiddenConnection {
  text: string;
  /** In the app's own namespace. */
  local: boolean;
}

/**
 * Existing cluster connections of clusters using this app that the new rules forbid and the old ones
 * allowed; with no old app (a CREATE, e.g. an app deleted and re-created), every one the new rules forbid.
 */
async function newlyForbidden(
  app: KDApp,
  old: KDApp | undefined,
  appLookup: AppLookup,
  opts: RuleOptions,
): Promise<ForbiddenConnection[]> {
  const appNs = app.metadata.namespace ?? '';
  // Clusters resolve their app as if this one were stored already (on CREATE it is not yet).
  const lookup: Pick<Lookup, 'getApp' | 'getCluster'> = {
    getApp: (ns, name) =>
      ns === appNs && name === app.metadata.name ? Promise.resolve(app) : appLookup.getApp(ns, name),
    getCluster: (ns, name) => appLookup.getCluster(ns, name),
  };
  // A system-catalog app can be used from any namespace; a local one only from its own.
  const clusters = await appLookup.listClusters(appNs === opts.systemNamespace ? undefined : appNs);
  const out: ForbiddenConnection[] = [];
  for (const c of clusters) {
    if (c.spec?.app !== app.metadata.name) continue;
    const cns = c.metadata.namespace ?? '';
    const resolved = await resolveApp(lookup, cns, c.spec, opts.systemNamespace);
    if (!resolved || resolved.namespace !== appNs) continue; // uses another app of the same name
    for (const target of [...connectionSets(c.spec.connections).clusters].sort()) {
      const t = await lookup.getCluster(cns, target);
      if (!t) continue;
      const tApp = await resolveApp(lookup, cns, t.spec ?? {}, opts.systemNamespace);
      if (!tApp) continue;
      const allowedBefore = !old || isConnectable(old.spec, tApp.app.spec).allowed;
      if (allowedBefore && !isConnectable(app.spec, tApp.app.spec).allowed) {
        out.push({
          text: `${cns}/${c.metadata.name} → cluster "${target}" (${describeApp(tApp.app)})`,
          local: cns === appNs,
        });
      }
    }
  }
  return out;
}
