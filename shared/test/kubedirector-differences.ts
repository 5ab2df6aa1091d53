/**
 * How kd-connections' configmeta may differ from KubeDirector's, and why: the field-by-field comparison
 * and the list of allowed differences, shared by the unit-level differential test (kd-connections'
 * renderer vs the hand-written port, many topologies) and the in-pod one (kd-connections' delivered
 * documents vs the real KubeDirector's, test/kubedirector/in-pods.own-node.test.ts).
 */
import type { Json } from './configcli-reader.js';
import { DECRYPTED_BY_KUBEDIRECTOR, GENERATED_TOKEN } from './kubedirector-reference.js';

type Obj = { [k: string]: Json };
export interface Diff {
  path: string[];
  kd: Json | undefined;
  ours: Json | undefined;
}

export const isObj = (v: Json | undefined): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const same = (a: Json | undefined, b: Json | undefined) => JSON.stringify(a) === JSON.stringify(b);

/** Differences between two documents: objects field by field (a key-order change is one diff), values whole. */
export function diff(kd: Json | undefined, ours: Json | undefined, path: string[] = []): Diff[] {
  if (isObj(kd) && isObj(ours)) {
    const keys = [...new Set([...Object.keys(kd), ...Object.keys(ours)])];
    const out = keys.flatMap((k) => diff(kd[k], ours[k], [...path, k]));
    const common = (o: Obj, other: Obj) => Object.keys(o).filter((k) => k in other);
    if (out.length === 0 && !same(common(kd, ours), common(ours, kd))) {
      out.push({ path: [...path, '<key order>'], kd: Object.keys(kd), ours: Object.keys(ours) });
    }
    return out;
  }
  // Lists of entries (ConfigMaps of a type) element by element; lists of strings whole.
  if (Array.isArray(kd) && Array.isArray(ours) && kd.length === ours.length && [...kd, ...ours].every(isObj)) {
    return kd.flatMap((x, i) => diff(x, ours[i], [...path, String(i)]));
  }
  return same(kd, ours) ? [] : [{ path, kd, ours }];
}

export const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
const under = (d: Diff, ...prefix: (string | RegExp)[]) =>
  prefix.every((p, i) => (typeof p === 'string' ? d.path[i] === p : p.test(d.path[i] ?? '')));

/** Who reads: any process (the public document) or root (what configcli gives root). */
export type View = 'non-root' | 'root';

export interface AllowedDifference {
  name: string;
  why: string;
  /** The views it applies to (default both). */
  views?: View[];
  matches: (d: Diff) => boolean;
}

/**
 * The allowed differences. The first four are the documented bug fixes; the rest are remaining
 * differences, each with its reason.
 */
export const ALLOWED: AllowedDifference[] = [
  {
    name: 'connected-member-repeated',
    why: 'KubeDirector (Go 1.18 range variable) lists the last member of a connected role once per member; every member appears once here',
    matches: (d) =>
      under(d, 'connections', 'clusters', /./, 'nodegroups', '1', 'roles') &&
      Array.isArray(d.kd) &&
      Array.isArray(d.ours) &&
      d.kd.length === d.ours.length &&
      d.kd.every((x) => same(x, (d.ours as Json[]).at(-1))),
  },
  {
    name: 'connected-fqdn-mappings-collapsed',
    why: 'the same KubeDirector bug leaves one fqdn_mappings entry (the last member) per connected role',
    matches: (d) =>
      under(d, 'connections', 'clusters', /./, 'nodegroups', '1', 'roles', /./, 'fqdn_mappings') &&
      d.path.length === 9 &&
      d.kd === undefined &&
      typeof d.ours === 'string',
  },
  {
    name: 'connected-refkeys-prefixed',
    why: "KubeDirector leaves a connected cluster's per-role and config_metadata references unprefixed, so they resolve in the host cluster; here they point into the connected cluster",
    matches: (d) =>
      under(d, 'connections', 'clusters') &&
      d.path.at(-1) === 'bdvlibrefkey' &&
      Array.isArray(d.kd) &&
      same(d.ours, ['connections', 'clusters', d.path[2]!, ...d.kd]),
  },
  {
    name: 'last-applied-dropped',
    why: "kubectl's last-applied-configuration annotation is never copied (for a Secret it quotes the values; for a ConfigMap it doubles the size)",
    matches: (d) =>
      under(d, 'connections', /^(configmaps|secrets)$/, /./, /^\d+$/, 'annotations') &&
      // The one key, or the whole map when it was the only annotation (then null here, as with none).
      (d.path[5] === LAST_APPLIED ||
        (d.path.length === 5 &&
          isObj(d.kd) &&
          Object.keys(d.kd).every((k) => k === LAST_APPLIED) &&
          (d.ours === null || (isObj(d.ours) && Object.keys(d.ours).length === 0)))),
  },
  {
    name: 'secret-values-not-public',
    why: 'Secret values never enter the public document (they reach root in the container through the private file); the public entry keeps name, type label and keys',
    views: ['non-root'],
    matches: (d) =>
      under(d, 'connections', 'secrets', /./, /^\d+$/) &&
      (d.path[4] === 'data' ||
        d.path[4] === 'redacted' ||
        (/^(labels|annotations)$/.test(d.path[4] ?? '') && d.ours === undefined) ||
        (d.path.length === 5 && d.path[4] === '<key order>')),
  },
  {
    name: 'secret-keys-private',
    why: 'role secret_keys are values: they reach root through the private file (its nodegroups / connections sections), never the public document',
    views: ['non-root'],
    matches: (d) => d.path.at(-1) === 'secret_keys' && d.ours === undefined,
  },
  {
    name: 'secret-keys-encrypted-dropped',
    why: "remaining: a secretKeys entry KubeDirector's webhook encrypted (encryptedValue) is decrypted by KubeDirector with the master key of its KubeDirectorConfig; kd-connections reads no KubeDirectorConfig and drops it, as KubeDirector drops one it cannot decrypt",
    views: ['root'],
    matches: (d) => d.path.at(-2) === 'secret_keys' && d.kd === DECRYPTED_BY_KUBEDIRECTOR && d.ours === undefined,
  },
  {
    name: 'auth-token-not-generated',
    why: 'remaining: KubeDirector generates a random token for hasAuthToken endpoints, keeps it in status.roles[].members[].authToken and annotates the member Service; kd-connections creates no Services, reads none, keeps no KubeDirector member status, and invents no token (authToken is "")',
    matches: (d) => d.path.at(-1) === 'authToken' && d.kd === GENERATED_TOKEN && d.ours === '',
  },
];
