/**
 * The in-pod differential: what a member container reads of configmeta under the real KubeDirector and
 * under kd-connections, for the same topology, made comparable and compared.
 *
 * Each side runs on its own API server (their CRDs share names), so pod names, the headless Service,
 * the namespace and cluster uids necessarily differ: they are replaced, in both documents, by
 * placeholders derived from the documents themselves (a member is `<cluster:role#i>`, i its place in its
 * role's fqdns list). Node ids, order and every other value stay as read. What remains different must be
 * one of the reasons in shared/test/kubedirector-differences.ts, or the test fails.
 */
import type { Json } from '../../shared/test/configcli-reader.js';
import { ALLOWED, diff, isObj, type View } from '../../shared/test/kubedirector-differences.js';
import { catIn, execIn, type InContainer, type Kubectl } from '../images/configcli-image.js';

export const CONFIGMETA = '/etc/guestconfig/configmeta.json';

const at = (v: Json | undefined, ...path: string[]): Json | undefined =>
  path.reduce<Json | undefined>((o, k) => (isObj(o) ? o[k] : undefined), v);

/** What one member container reads: the file with cat (as root, as the app user) and configcli answers. */
export interface MemberViews {
  /** The member's pod (replaced by its placeholder once normalized). */
  pod: string;
  /** cat as the container's user (root) and as the app user: the parsed document. */
  cat: Record<View, Json>;
  /** `configcli -g <key>` as root: output and exit code, per key. */
  configcli: Record<string, string>;
}

/** One step of a side: every member's views, by member placeholder (`<cluster:role#i>`). */
export type Snapshot = Map<string, MemberViews>;

/**
 * The names a side's API objects give its clusters, read from the API (never from the documents being
 * compared): each cluster's uid and headless Service, the namespace, and each role's member pods in
 * node-id order.
 */
export interface SideNames {
  namespace: string;
  clusters: Record<string, { uid: string; service: string; roles: Record<string, string[]> }>;
}

/** Real name → placeholder: `<uid:cluster>`, `<service:cluster>`, `<namespace>`, `<cluster:role#i>`. */
export function namesOf(side: SideNames): Map<string, string> {
  const names = new Map<string, string>([[side.namespace, '<namespace>']]);
  for (const [cluster, c] of Object.entries(side.clusters)) {
    names.set(c.uid, `<uid:${cluster}>`);
    names.set(c.service, `<service:${cluster}>`);
    for (const [role, pods] of Object.entries(c.roles))
      pods.forEach((p, i) => names.set(p, `<${cluster}:${role}#${i}>`));
  }
  return names;
}

/** `text` with every whole name (not part of a longer DNS label) replaced by its placeholder. */
export function replaceNames(text: string, names: Map<string, string>): string {
  const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const sorted = [...names.keys()].filter(Boolean).sort((a, b) => b.length - a.length);
  if (sorted.length === 0) return text;
  const re = new RegExp(`(?<![A-Za-z0-9-])(?:${sorted.map(esc).join('|')})(?![A-Za-z0-9-])`, 'g');
  return text.replace(re, (m) => names.get(m)!);
}

const normalized = (views: MemberViews, names: Map<string, string>): MemberViews =>
  JSON.parse(replaceNames(JSON.stringify(views), names)) as MemberViews;

/** The placeholder of a member, from the API's names; a pod the API does not list as a member fails. */
function memberKey(pod: string, names: Map<string, string>): string {
  const key = names.get(pod);
  if (!key?.includes('#')) throw new Error(`pod ${pod} is not a member the API lists`);
  return key;
}

/** The configcli keys read in every member: the namespaces, the node, and each connected object type. */
export function configcliKeys(doc: Json): string[] {
  const keys = ['version', 'node', 'node.role_id', 'node.id', 'node.fqdn', 'node.hostname', 'node.domain'];
  keys.push('node.distro_id', 'cluster', 'cluster.name', 'cluster.id', 'distros', 'services', 'connections');
  for (const kind of ['clusters', 'configmaps', 'secrets']) {
    keys.push(`connections.${kind}`);
    const byName = at(doc, 'connections', kind);
    for (const name of Object.keys(isObj(byName) ? byName : {})) keys.push(`connections.${kind}.${name}`);
  }
  return keys;
}

const SEP = '\u241e';

/**
 * Reads what `pod` holds: cat as root and as the app user, then (unless `configcli` is false) one exec
 * running configcli per key as root.
 */
export async function readMember(k: Kubectl, pod: InContainer, o: { configcli?: boolean } = {}): Promise<MemberViews> {
  const root = JSON.parse(await catIn(k, pod, CONFIGMETA)) as Json;
  const app = JSON.parse(await catIn(k, { ...pod, as: 'app' }, CONFIGMETA)) as Json;
  if (o.configcli === false) return { pod: pod.pod, cat: { root, 'non-root': app }, configcli: {} };
  const keys = configcliKeys(root);
  // One exec, the real configcli once per key; the separator line carries the key and its exit code.
  const script = `for k in "$@"; do out=$(configcli -g "$k" 2>&1); printf '${SEP}%s %s\\n%s\\n' "$k" "$?" "$out"; done`;
  const r = await execIn(k, pod, ['sh', '-c', script, 'sh', ...keys]);
  if (r.code !== 0) throw new Error(`configcli in ${pod.pod} exited ${r.code}: ${r.stderr}`);
  const configcli: Record<string, string> = {};
  for (const part of r.stdout.split(SEP).slice(1)) {
    const nl = part.indexOf('\n');
    const [key, rc] = part.slice(0, nl).split(' ');
    configcli[key!] = `exit ${rc}: ${part.slice(nl + 1).replace(/\n$/, '')}`;
  }
  return { pod: pod.pod, cat: { root, 'non-root': app }, configcli };
}

/**
 * Every member's views, keyed by member placeholder; names normalized. Two pods with one placeholder, or
 * a pod that is no member, fail (a Map would hide the one).
 */
export function snapshotOf(members: MemberViews[], side: SideNames): Snapshot {
  const names = namesOf(side);
  const snapshot: Snapshot = new Map(members.map((m) => [memberKey(m.pod, names), normalized(m, names)]));
  if (snapshot.size !== members.length)
    throw new Error(`members read: ${members.map((m) => m.pod).join(', ')}; distinct members: ${snapshot.size}`);
  return snapshot;
}

/**
 * A snapshot read until two reads in a row agree. KubeDirector rewrites configmeta.json in place (`tee
 * <file>` through exec), so a read during one of its rewrites — it rewrites a member's file when a
 * connected cluster changes, also with the same content — sees a truncated document: configcli then fails
 * with a traceback.
 */
export async function settledSnapshot(
  read: () => Promise<MemberViews[]>,
  side: SideNames,
  tries = 8,
): Promise<Snapshot> {
  let previous: string | undefined;
  let last = '';
  for (let i = 0; i < tries; i++) {
    try {
      const s = snapshotOf(await read(), side);
      const text = JSON.stringify([...s]);
      if (text === previous) return s;
      previous = text;
    } catch (e) {
      // A truncated document (JSON.parse of cat) during a rewrite: read again.
      previous = undefined;
      last = (e as Error).message;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`the members' documents did not hold still for two reads in ${tries}${last ? ` (${last})` : ''}`);
}

/** The snapshot with the cat views only (to compare with members read without configcli). */
export const withoutConfigcli = (s: Snapshot): Snapshot =>
  new Map([...s].map(([k, v]) => [k, { ...v, configcli: {} }]));

/** A difference that one of the allowed reasons explains, as the docs table shows it. */
export interface Explained {
  reason: string;
  why: string;
  field: string;
  kd: Json | undefined;
  ours: Json | undefined;
}

/**
 * KubeDirector's snapshot vs kd-connections': the same members; per member and view, every document
 * difference explained by an ALLOWED reason; every configcli answer equal. Returns what is unexplained and
 * what was explained.
 */
export function compareSnapshots(kd: Snapshot, ours: Snapshot): { unexplained: string[]; explained: Explained[] } {
  const unexplained: string[] = [];
  const explained: Explained[] = [];
  const members = [...new Set([...kd.keys(), ...ours.keys()])].sort();
  for (const m of members) {
    const a = kd.get(m);
    const b = ours.get(m);
    if (!a || !b) {
      unexplained.push(`${m}: a member only ${a ? 'KubeDirector' : 'kd-connections'} has`);
      continue;
    }
    for (const view of ['root', 'non-root'] as const) {
      for (const d of diff(a.cat[view], b.cat[view])) {
        const reason = ALLOWED.find((r) => (r.views ?? [view]).includes(view) && r.matches(d));
        const field = d.path.join('.');
        if (reason) explained.push({ reason: reason.name, why: reason.why, field, kd: d.kd, ours: d.ours });
        else
          unexplained.push(
            `${m} cat as ${view === 'root' ? 'root' : 'app'} ${field}: KubeDirector ${JSON.stringify(d.kd)}, ours ${JSON.stringify(d.ours)}`,
          );
      }
    }
    for (const key of [...new Set([...Object.keys(a.configcli), ...Object.keys(b.configcli)])].sort()) {
      if (a.configcli[key] !== b.configcli[key])
        unexplained.push(
          `${m} configcli -g ${key}: KubeDirector ${JSON.stringify(a.configcli[key])}, ours ${JSON.stringify(b.configcli[key])}`,
        );
    }
  }
  return { unexplained, explained };
}

const cell = (v: Json | undefined) => {
  const s = v === undefined ? '(absent)' : JSON.stringify(v);
  return (s.length > 70 ? `${s.slice(0, 67)}…` : s).replace(/\|/g, '\\|');
};

/**
 * The docs table: one row per reason that explained a difference, with its first field (in sorted
 * order, so the table is the same every run) and both values there.
 */
export function differencesTable(explained: Explained[]): string {
  const first = new Map<string, Explained>();
  // Plain code-unit order (not the locale's), so the table is the same on every machine.
  const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
  for (const e of [...explained].sort((x, y) => cmp(x.reason, y.reason) || cmp(x.field, y.field)))
    if (!first.has(e.reason)) first.set(e.reason, e);
  const rows = [...first.values()].map(
    (e) =>
      `| \`${e.reason}\` | \`${e.field.replace(/\|/g, '\\|')}\` | ${cell(e.kd)} | ${cell(e.ours)} | ${e.why.replace(/\|/g, '\\|')} |`,
  );
  return [
    '| difference | field (first of its kind) | KubeDirector | kd-connections | why |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
