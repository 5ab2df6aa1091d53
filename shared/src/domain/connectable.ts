/**
 * `connectable_to` of a KubeDirectorApp: which clusters a cluster of this app may connect to.
 * Absent: no restriction (KubeDirector compatibility). Empty: no cluster connections at all.
 * A connected cluster is allowed when its app matches any entry; an entry matches when all of
 * its fields match. `version` is either an exact version or a semver range.
 */
import semver from 'semver';
import { BoundedMemo } from '../primitives/bounded-memo.js';
import { SCHEMA_LIMITS } from './schema-limits.js';
import type { ConnectableToEntry, KDApp, KDAppSpec } from './types.js';

const EXACT_VERSION = /^v?\d+(\.\d+)*([-+][0-9A-Za-z.+-]+)?$/;
const NUMERIC_VERSION = /^\d+(\.\d+)*$/;

export type VersionSpec = { kind: 'exact'; value: string } | { kind: 'range'; range: string };

/**
 * Every review checks the same few entries of the same apps: each text is parsed once. The memos are
 * keyed by review text, so they are bounded in bytes, and texts longer than the schema allows (which a
 * review posted straight to the service can carry; the rules refuse them first) are never kept.
 */
const MEMO_ENTRIES = 1000;
const MEMO_BYTES = 1024 * 1024;
const parsedSpecs = new BoundedMemo<VersionSpec | undefined>(MEMO_ENTRIES, MEMO_BYTES, SCHEMA_LIMITS.version, 256);
const parsedVersions = new BoundedMemo<semver.SemVer | null>(MEMO_ENTRIES, MEMO_BYTES, SCHEMA_LIMITS.version, 256);
// A parsed range holds its comparators: counted at a generous 2 KiB each (128 characters make few).
const ranges = new BoundedMemo<semver.Range>(MEMO_ENTRIES, 4 * MEMO_BYTES, SCHEMA_LIMITS.version * 4, 2048);

/** Parses the version field of an entry; undefined when it is neither a version nor a valid range. */
export function parseVersionSpec(spec: string): VersionSpec | undefined {
  return parsedSpecs.get(spec, parseVersionSpecUncached);
}

function parseVersionSpecUncached(spec: string): VersionSpec | undefined {
  const s = spec.trim();
  if (s === '') return undefined;
  if (EXACT_VERSION.test(s)) return { kind: 'exact', value: s };
  const range = semver.validRange(s, { loose: true });
  return range === null ? undefined : { kind: 'range', range };
}

function loose(version: string): semver.SemVer | null {
  return parsedVersions.get(
    version,
    (v) => semver.parse(v, { loose: true }) ?? semver.coerce(v, { includePrerelease: true }),
  );
}

function rangeOf(range: string): semver.Range {
  return ranges.get(range, (r) => new semver.Range(r, { loose: true }));
}

/** What the memos hold, for tests: entries and counted bytes. */
export function versionMemoSizes(): { entries: number; bytes: number } {
  const all = [parsedSpecs, parsedVersions, ranges];
  return { entries: all.reduce((n, m) => n + m.size, 0), bytes: all.reduce((n, m) => n + m.keptBytes, 0) };
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
