/**
 * Validation of a KubeDirectorApp's `connectable_to` (DESIGN §4): well-formed entries, and a warning
 * when an update tightens it so that existing connections become forbidden.
 */
import { isConnectable, describeApp, parseVersionSpec } from './connectable.js';
import { connectionSets } from './connection-sets.js';
import type { FieldError, RuleResult } from './field-errors.js';
import { resolveApp, type AppLookup, type RuleOptions } from './lookup.js';
import type { KDApp } from './types.js';

export interface AppReview {
  operation: 'CREATE' | 'UPDATE';
  object: KDApp;
  oldObject?: KDApp;
}

const ENTRY_FIELDS = ['category', 'distroID', 'version'] as const;

export function checkConnectableTo(value: unknown): FieldError[] {
  const errors: FieldError[] = [];
  if (value === undefined || value === null) return errors;
  if (!Array.isArray(value)) return [{ field: 'spec.connectable_to', message: 'must be a list of entries' }];
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
    for (const k of present) {
      if (typeof e[k] !== 'string' || (e[k] as string).trim() === '') {
        errors.push({ field: `${at}.${k}`, message: `must be a non-empty string, not ${JSON.stringify(e[k])}` });
      }
    }
    if (typeof e.version === 'string' && e.version.trim() !== '' && !parseVersionSpec(e.version)) {
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
  if (spec.category !== undefined && (typeof spec.category !== 'string' || spec.category.trim() === '')) {
    errors.push({
      field: 'spec.category',
      message: `must be a non-empty string, not ${JSON.stringify(spec.category)}`,
    });
  }
  const warnings: string[] = [];
  if (errors.length === 0 && operation === 'UPDATE' && oldObject?.spec) {
    const forbidden = await newlyForbidden(object, oldObject, lookup, opts);
    if (forbidden.length > 0) {
      warnings.push(
        `connectable_to of app "${object.metadata.name}" now forbids ${forbidden.length} existing connection(s): ${forbidden.join('; ')}. ` +
          "They stay in the clusters' specs but are left out of configmeta (status NotConnectable) until allowed again",
      );
    }
  }
  return { errors, warnings };
}

/** Existing cluster connections of clusters using this app that the old rules allowed and the new ones do not. */
async function newlyForbidden(app: KDApp, old: KDApp, lookup: AppLookup, opts: RuleOptions): Promise<string[]> {
  const appNs = app.metadata.namespace ?? '';
  // A system-catalog app can be used from any namespace; a local one only from its own.
  const clusters = await lookup.listClusters(appNs === opts.systemNamespace ? undefined : appNs);
  const out: string[] = [];
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
      if (isConnectable(old.spec, tApp.app.spec).allowed && !isConnectable(app.spec, tApp.app.spec).allowed) {
        out.push(`${cns}/${c.metadata.name} → cluster "${target}" (${describeApp(tApp.app)})`);
      }
    }
  }
  return out;
}
