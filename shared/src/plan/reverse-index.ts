/**
 * Which clusters connect to a given object: "kind namespace/name" → cluster keys. Always
 * namespace-qualified — KubeDirector matched by name across namespaces and woke the wrong clusters.
 */
import { connectionSets } from '../domain/connection-sets.js';
import { objectKey, splitKey } from '../primitives/object-key.js';
import { CONNECTION_LISTS, KIND_OF_LIST, type ConnectionKind, type Connections } from '../domain/types.js';

const ref = (kind: ConnectionKind, key: string) => `${kind} ${key}`;

/** An object some cluster connected to and none does any more. */
export interface ReleasedRef {
  kind: ConnectionKind;
  /** namespace/name */
  key: string;
}

export class ReverseIndex {
  private readonly dependents = new Map<string, Set<string>>();
  private readonly refsOf = new Map<string, string[]>();

  /**
   * Records what the cluster `clusterKey` (namespace/name) connects to, replacing what it had. Returns
   * the objects no cluster connects to any more (a cache of their content can let them go).
   */
  set(clusterKey: string, connections: Connections | undefined): ReleasedRef[] {
    const before = this.refsOf.get(clusterKey) ?? [];
    this.unlink(clusterKey);
    const { namespace } = splitKey(clusterKey);
    const sets = connectionSets(connections);
    const refs: string[] = [];
    for (const list of CONNECTION_LISTS) {
      for (const name of sets[list]) refs.push(ref(KIND_OF_LIST[list], objectKey(namespace, name)));
    }
    for (const r of refs) {
      let s = this.dependents.get(r);
      if (!s) this.dependents.set(r, (s = new Set()));
      s.add(clusterKey);
    }
    if (refs.length > 0) this.refsOf.set(clusterKey, refs);
    return this.released(before);
  }

  /** Forgets the cluster; returns the objects no cluster connects to any more. */
  delete(clusterKey: string): ReleasedRef[] {
    const before = this.refsOf.get(clusterKey) ?? [];
    this.unlink(clusterKey);
    return this.released(before);
  }

  private unlink(clusterKey: string): void {
    for (const r of this.refsOf.get(clusterKey) ?? []) {
      const s = this.dependents.get(r);
      s?.delete(clusterKey);
      if (s && s.size === 0) this.dependents.delete(r);
    }
    this.refsOf.delete(clusterKey);
  }

  private released(refs: string[]): ReleasedRef[] {
    return refs
      .filter((r) => !this.dependents.has(r))
      .map((r) => {
        const i = r.indexOf(' ');
        return { kind: r.slice(0, i) as ConnectionKind, key: r.slice(i + 1) };
      });
  }

  /** Whether any cluster connects to `kind namespace/name`. */
  has(kind: ConnectionKind, key: string): boolean {
    return this.dependents.has(ref(kind, key));
  }

  /** Keys of the clusters that list `kind namespace/name`, sorted. */
  dependentsOf(kind: ConnectionKind, key: string): string[] {
    return [...(this.dependents.get(ref(kind, key)) ?? [])].sort();
  }

  get size(): number {
    return this.refsOf.size;
  }
}
