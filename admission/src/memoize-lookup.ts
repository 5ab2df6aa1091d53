/**
 * A per-review view of a Lookup that answers each question once: the rules ask for the same app once
 * per connected cluster, and on a cache miss every repeat would be another live read.
 */
import type { AppLookup } from '@kd-connections/shared';

export function memoizeLookup(lookup: AppLookup): AppLookup {
  const seen = new Map<string, Promise<unknown>>();
  const once = <T>(key: string, load: () => Promise<T>): Promise<T> => {
    let p = seen.get(key) as Promise<T> | undefined;
    if (!p) {
      p = load();
      seen.set(key, p);
    }
    return p;
  };
  return {
    getApp: (ns, name) => once(`app/${ns}/${name}`, () => lookup.getApp(ns, name)),
    getCluster: (ns, name) => once(`cluster/${ns}/${name}`, () => lookup.getCluster(ns, name)),
    getConfigMap: (ns, name) => once(`configmap/${ns}/${name}`, () => lookup.getConfigMap(ns, name)),
    getSecret: (ns, name) => once(`secret/${ns}/${name}`, () => lookup.getSecret(ns, name)),
    listClusters: (ns) => once(`clusters/${ns ?? '*'}`, () => lookup.listClusters(ns)),
  };
}
