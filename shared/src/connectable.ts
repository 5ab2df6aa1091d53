/**
 * `connectable_to` of a KubeDirectorApp: which clusters a cluster of this app may connect to.
 * Absent: no restriction (KubeDirector compatibility). Empty: no cluster connections at all.
 * A connected cluster is allowed when its app matches any entry; an entry matches when all of
 * its fields match. `version` is either an exact version or a semver range.
 */
import semver from 'semver';
import type { ConnectableToEntry, KDApp, KDAppSpec } from './types.js';

const EXACT_VERSION = /^v?\d+(\.\d+)*([-+][0-9A-Za-z.+-]+)?$/;
const NUMERIC_VERSION = /^\d+(\.\d+)*$/;

export type VersionSpec = { kind: 'exact'; value: string } | { kind: 'range'; range: string };

const parsedSpecs = new Map<string, VersionSpec | undefined>();

/** Parses the version field of an entry; undefined when it is neither a version nor a valid range. */
export function parseVersionSpec(spec: string): VersionSpec | undefined {
  // Every review checks the same few entries of the same apps: parse each text once (bounded memo).
  if (parsedSpecs.has(spec)) return parsedSpecs.get(spec);
  const parsed = parseVersionSpecUncached(spec);
  if (parsedSpecs.size >= 1000) parsedSpecs.clear();
  parsedSpecs.set(spec, parsed);
  return parsed;
}

function parseVersionSpecUncached(spec: string): VersionSpec | undefined {
  const s = spec.trim();
  if (s === '') return undefined;
  if (EXACT_VERSION.test(s)) return { kind: 'exact', value: s };
  const range = semver.validRange(s, { loose: true });
  return range === null ? undefined : { kind: 'range', range };
}

const parsedVersions = new Map<string, semver.SemVer | null>();
const ranges = new Map<string, semver.Range>();

function loose(version: string): semver.SemVer | null {
  let v = parsedVersions.get(version);
  if (v === undefined) {
    v = semver.parse(version, { loose: true }) ?? semver.coerce(version, { includePrerelease: true });
    if (parsedVersions.size >= 1000) parsedVersions.clear();
    parsedVersions.set(version, v);
  }
  return v;
}

function rangeOf(range: string): semver.Range {
  let r = ranges.get(range);
  if (!r) {
    r = new semver.Range(range, { loose: true });
    if (ranges.size >= 1000) ranges.clear();
    ranges.set(range, r);
  }
  return r;
}

export function versionMatches(spec: string, version: string | undefined): boolean {
  if (version === undefined) return false;
  const parsed = parseVersionSpec(spec);
  if (!parsed) return false;
  if (parsed.kind === 'exact') {
    const a = parsed.value.replace(/^v/, '');
    const b = version.trim().replace(/^v/, '');
    if (a === b) return true;
    // "2.4" and "2.4.0" name the same release; "2.4" and "2.4.1" do not, nor do "5.1.0.0" and "5.1.0.1"
    // (semver.coerce would drop the fourth part). Pre-release and build versions match only literally.
    if (!NUMERIC_VERSION.test(a) || !NUMERIC_VERSION.test(b)) return false;
    const pa = a.split('.').map(Number);
    const pb = b.split('.').map(Number);
    for (let i = 0; i < Math.max(pa.length, pb.length); i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return false;
    return true;
  }
  const v = loose(version);
  return v !== null && rangeOf(parsed.range).test(v);
}

export function entryMatches(entry: ConnectableToEntry, target: KDAppSpec): boolean {
  const fields = entryFields(entry);
  if (fields.length === 0) return false; // an empty entry matches nothing (and is refused on the kdapp)
  if (entry.category !== undefined && entry.category !== target.category) return false;
  if (entry.distroID !== undefined && entry.distroID !== target.distroID) return false;
  if (entry.version !== undefined && !versionMatches(entry.version, target.version)) return false;
  return true;
}

export function entryFields(entry: ConnectableToEntry): (keyof ConnectableToEntry)[] {
  return (['category', 'distroID', 'version'] as const).filter((k) => entry[k] !== undefined);
}

export type ConnectableVerdict = { allowed: true } | { allowed: false; reason: 'empty' | 'no-match' };

/** May a cluster of app `from` connect to a cluster of app `to`? */
export function isConnectable(from: KDAppSpec, to: KDAppSpec): ConnectableVerdict {
  const rules = from.connectable_to;
  if (rules === undefined || rules === null) return { allowed: true };
  if (rules.length === 0) return { allowed: false, reason: 'empty' };
  return rules.some((e) => entryMatches(e, to)) ? { allowed: true } : { allowed: false, reason: 'no-match' };
}

/** `{category: "training", version: ">=2.4 <3"}` */
export function describeEntry(entry: ConnectableToEntry): string {
  const parts = entryFields(entry).map((k) => `${k}: ${JSON.stringify(entry[k])}`);
  return `{${parts.join(', ')}}`;
}

/** `app "spark" (category "streaming", distroID "bluedata/spark", version "2.4.5")` */
export function describeApp(app: KDApp): string {
  const s = app.spec ?? {};
  const q = (v: unknown) => (v === undefined || v === null || v === '' ? 'none' : JSON.stringify(v));
  return `app "${app.metadata.name}" (category ${q(s.category)}, distroID ${q(s.distroID)}, version ${q(s.version)})`;
}

/** What `from` allows, for messages: `{category: "training"}, {distroID: "x"}` or a sentence for the edge cases. */
export function describeAllowed(from: KDAppSpec): string {
  const rules = from.connectable_to;
  if (rules === undefined || rules === null) return 'any cluster (connectable_to is not set)';
  if (rules.length === 0) return 'no cluster connections (connectable_to is empty)';
  return rules.map(describeEntry).join(', ');
}
