/**
 * The rules check a kdcluster's connections one after another; on cache misses that is one live read
 * after another (a hundred missing ConfigMaps took a hundred round trips in a row). Before they run, the
 * review's objects are asked for through the review's memoizing lookup, a few at a time, so the rules
 * then find the answers waiting. Failures are left for the rules, which meet the same answer.
 */
import {
  CONNECTION_LISTS,
  invalidObjectName,
  SCHEMA_LIMITS,
  type AppLookup,
  type KDCluster,
  type RuleOptions,
} from '@kd-connections/shared/domain';

/** Lookups of one review in flight at once. */
export const REVIEW_LOOKUPS_AT_ONCE = 8;

/** Asks for exactly what the rules will ask for: valid names, no self-connection, Secrets only when enabled. */
export async function prefetchConnections(
  cluster: KDCluster,
  lookup: AppLookup,
  rules: RuleOptions,
  atOnce = REVIEW_LOOKUPS_AT_ONCE,
): Promise<void> {
  const self = cluster.metadata?.name;
  const ns = cluster.metadata?.namespace;
  const connections = cluster.spec?.connections as Record<string, unknown> | undefined;
  if (typeof ns !== 'string' || connections === null || typeof connections !== 'object') return;
  const asks: (() => Promise<unknown>)[] = [];
  for (const list of CONNECTION_LISTS) {
    const names = connections[list];
    // An oversized list is refused without lookups; a wrong type is the rules' to report.
    if (!Array.isArray(names)) continue;
    if (names.length > SCHEMA_LIMITS.connectionItems) return;
    if (list === 'secrets' && rules.secretConnections === false) continue;
    for (const name of names) {
      if (invalidObjectName(name) !== undefined || (list === 'clusters' && name === self)) continue;
      if (list === 'clusters') asks.push(() => lookup.getCluster(ns, name));
      else if (list === 'configmaps') asks.push(() => lookup.getConfigMap(ns, name));
      else asks.push(() => lookup.getSecret(ns, name));
    }
  }
  let next = 0;
  const worker = async () => {
    while (next < asks.length) {
      try {
        await asks[next++]!();
      } catch {
        return; // the rules meet the same failure (the memo keeps it) and report it
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, asks.length) }, worker));
}
