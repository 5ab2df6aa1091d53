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
 * The ids of `members` (pod names, in the order new ones are to be numbered): kept ids stay, new
 * members get lastNodeID + 1, + 2, …. A member not listed loses its id, which is never handed out again
 * (a member whose pod restarts is still listed: seats.ts keeps its seat).
 */
export function assignNodeIds(previous: NodeIdState, members: string[]): NodeIdState {
  let last = previous.lastNodeID;
  const nodeIDs: Record<string, number> = {};
  for (const pod of members) {
    if (Object.hasOwn(nodeIDs, pod)) continue;
    nodeIDs[pod] = Object.hasOwn(previous.nodeIDs, pod) ? previous.nodeIDs[pod]! : ++last;
  }
  return {
    lastNodeID: last,
    nodeIDs: Object.fromEntries(Object.entries(nodeIDs).sort(([x], [y]) => (x < y ? -1 : 1))),
  };
}
