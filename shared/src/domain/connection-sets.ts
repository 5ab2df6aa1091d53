import { CONNECTION_LISTS, type ConnectionList, type Connections } from './types.js';

export type ConnectionSets = Record<ConnectionList, Set<string>>;

/** The connection lists as sets: order and repeats carry no meaning. */
export function connectionSets(connections: Connections | undefined | null): ConnectionSets {
  // Not an array (a mutating webhook sees objects before schema validation): no entries, never a throw.
  const list = (l: ConnectionList) => {
    const items: unknown = connections?.[l];
    return new Set(Array.isArray(items) ? items.filter((x): x is string => typeof x === 'string') : []);
  };
  return { clusters: list('clusters'), configmaps: list('configmaps'), secrets: list('secrets') };
}

export function hasConnections(connections: Connections | undefined | null): boolean {
  const s = connectionSets(connections);
  return CONNECTION_LISTS.some((l) => s[l].size > 0);
}

export interface ConnectionDiff {
  added: Record<ConnectionList, string[]>;
  removed: Record<ConnectionList, string[]>;
  changed: boolean;
}

/** What changed between two connection specs, compared as sets (sorted output, for stable messages). */
export function diffConnections(
  before: Connections | undefined | null,
  after: Connections | undefined | null,
): ConnectionDiff {
  const a = connectionSets(before);
  const b = connectionSets(after);
  const added = {} as Record<ConnectionList, string[]>;
  const removed = {} as Record<ConnectionList, string[]>;
  let changed = false;
  for (const l of CONNECTION_LISTS) {
    added[l] = [...b[l]].filter((n) => !a[l].has(n)).sort();
    removed[l] = [...a[l]].filter((n) => !b[l].has(n)).sort();
    if (added[l].length || removed[l].length) changed = true;
  }
  return { added, removed, changed };
}
