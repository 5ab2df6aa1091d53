/**
 * Stable node ids, KubeDirector's rule: a member keeps its id for life, a new member gets the next id
 * after the highest ever handed out (`lastNodeID`), and an id is never reused. Apps key identities on
 * them (ZooKeeper myid, Kafka broker.id), so scaling a role must never renumber anyone.
 *
 * Members are keyed by pod name, as KubeDirector keys them (a pod recreated under its name — a
 * StatefulSet restart — is the same member). The state lives in the kdcluster's status
 * (`status.lastNodeID`, `status.nodeIDs`).
 */

export interface NodeIdState {
  /** The highest id ever handed out; never goes down. */
  lastNodeID: number;
  /** Pod name → id, for the current members. */
  nodeIDs: Record<string, number>;
}

/** The stored state, cleaned: non-positive, non-integer and repeated ids are dropped. Never throws. */
export function readNodeIdState(status: { lastNodeID?: unknown; nodeIDs?: unknown } | undefined): NodeIdState {
  const raw = status?.nodeIDs;
  const nodeIDs: Record<string, number> = {};
  const seen = new Set<number>();
  if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
    for (const [pod, id] of Object.entries(raw as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1 || seen.has(id)) continue;
      seen.add(id);
      nodeIDs[pod] = id;
    }
  }
  const last =
    typeof status?.lastNodeID === 'number' && Number.isSafeInteger(status.lastNodeID) ? status.lastNodeID : 0;
  return { lastNodeID: Math.max(last, 0, ...seen), nodeIDs };
}

/**
 * Pod names in the order new members are numbered: KubeDirector numbers a role's new members by their
 * StatefulSet index, so numeric runs compare as numbers ("x-2" before "x-10").
 */
export function compareMemberNames(a: string, b: string): number {
  const pa = a.split(/(\d+)/);
  const pb = b.split(/(\d+)/);
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    if (i % 2 === 1) {
      const d = Number(x) - Number(y);
      if (d !== 0) return d < 0 ? -1 : 1;
    }
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
}

/**
 * The ids of `members` (pod names, in the order new ones are to be numbered): kept ids stay, new
 * members get lastNodeID + 1, + 2, …. A member that left keeps its id in the map while `retain` says
 * it may come back under its name (a restarting StatefulSet pod); otherwise its id is dropped — and
 * never handed out again.
 */
export function assignNodeIds(
  previous: NodeIdState,
  members: string[],
  retain: (pod: string) => boolean = () => false,
): NodeIdState {
  let last = previous.lastNodeID;
  const nodeIDs: Record<string, number> = {};
  for (const pod of members) {
    if (Object.hasOwn(nodeIDs, pod)) continue;
    nodeIDs[pod] = Object.hasOwn(previous.nodeIDs, pod) ? previous.nodeIDs[pod]! : ++last;
  }
  for (const [pod, id] of Object.entries(previous.nodeIDs)) {
    if (!Object.hasOwn(nodeIDs, pod) && retain(pod)) nodeIDs[pod] = id;
  }
  return {
    lastNodeID: last,
    nodeIDs: Object.fromEntries(Object.entries(nodeIDs).sort(([x], [y]) => (x < y ? -1 : 1))),
  };
}

/**
 * `retain` for a cluster: a departed pod named like a StatefulSet member (`<name>-<ordinal>`) whose
 * ordinal is below the largest declared role size is expected back under its name (KubeDirector keeps a
 * member, and its id, until the role shrinks). Other names are released when the pod goes.
 */
export function statefulSetRetention(declaredSizes: number[]): (pod: string) => boolean {
  const max = Math.max(0, ...declaredSizes.filter((n) => Number.isSafeInteger(n)));
  return (pod) => {
    const m = /-(\d+)$/.exec(pod);
    return m !== null && Number(m[1]) < max;
  };
}
