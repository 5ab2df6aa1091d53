/**
 * Which clusters connect to a given object: "kind namespace/name" → cluster keys. Always
 * namespace-qualified — KubeDirector matched by name across namespaces and woke the wrong clusters.
 */
import { connectionSets } from './connection-sets.js';
import { CONNECTION_LISTS, KIND_OF_LIST, objectKey, splitKey, type ConnectionKind, type Connections } from './types.js';

const ref = (kind: ConnectionKind, key: string) => `${kind} ${key}`;

export class ReverseIndex {
  private readonly dependents = new Map<string, Set<string>>();
  private readonly refsOf = new Map<string, string[]>();

  /** Records what the cluster `clusterKey` (namespace/name) connects to, replacing what it had. */
  set(clusterKey: string, connections: Connections | undefined): void {
    this.delete(clusterKey);
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
  }

  delete(clusterKey: string): void {
    for (const r of this.refsOf.get(clusterKey) ?? []) {
      const s = this.dependents.get(r);
      s?.delete(clusterKey);
      if (s && s.size === 0) this.dependents.delete(r);
    }
    this.refsOf.delete(clusterKey);
  }

  /** Keys of the clusters that list `kind namespace/name`, sorted. */
  dependentsOf(kind: ConnectionKind, key: string): string[] {
    return [...(this.dependents.get(ref(kind, key)) ?? [])].sort();
  }

  get size(): number {
    return this.refsOf.size;
  }
}
