/**
 * A per-review view of a Lookup that answers each question once: the rules ask for the same app once
 * per connected cluster, and on a cache miss every repeat would be another live read. It also bounds
 * the review's reads: at most `maxLookups` distinct questions, and none once the review's deadline has
 * passed (the decision already went out; whatever is still running stops at its next question).
 */
import type { AppLookup } from '@kd-connections/shared/domain';

/** Thrown to the rules when a review may ask no more; webhook.ts turns it into a denial. */
export class LookupBudgetError extends Error {
  constructor(readonly why: 'budget' | 'deadline') {
    super(why === 'budget' ? 'too many lookups for one review' : 'the review is past its deadline');
  }
}

export interface ReviewLookupOptions {
  /** Distinct questions one review may ask (default: unbounded). */
  maxLookups?: number;
  /** True once the review's deadline has passed. */
  expired?: () => boolean;
}

export function memoizeLookup(lookup: AppLookup, opts: ReviewLookupOptions = {}): AppLookup {
  const seen = new Map<string, Promise<unknown>>();
  const max = opts.maxLookups ?? Infinity;
  const once = <T>(key: string, load: () => Promise<T>): Promise<T> => {
    let p = seen.get(key) as Promise<T> | undefined;
    if (!p) {
      if (opts.expired?.()) return Promise.reject(new LookupBudgetError('deadline'));
      if (seen.size >= max) return Promise.reject(new LookupBudgetError('budget'));
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
