/**
 * The namespaces the webhook configurations send reviews for (the chart renders both from the same
 * values: `--watch-namespaces` is the selector's `In` list, `--excluded-namespaces` its `NotIn` list). The API
 * server never sends a review for a namespace outside them, so one that arrives was crafted by someone
 * else. It is refused before anything is looked up: otherwise the answer would tell whether an app,
 * Secret or ConfigMap of a given name exists in a namespace the sender may not read. Pure.
 */
import type { AdmissionRequest, Decision } from './admission-review.js';

export interface NamespaceScope {
  /** Only these namespaces; empty: every namespace not excluded. */
  only: readonly string[];
  /** Never these namespaces. */
  excluded: readonly string[];
  /**
   * Served for kdapp reviews even when excluded or not listed: the system catalog, whose namespace is by
   * default the release namespace that the other webhooks' selectors leave out (validate-kdapp selects it).
   */
  apps?: readonly string[];
}

/** Every namespace; for tests and tools that judge reviews without a webhook configuration. */
export const ALL_NAMESPACES: NamespaceScope = { only: [], excluded: [] };

export function inScope(namespace: string, scope: NamespaceScope): boolean {
  if (scope.excluded.includes(namespace)) return false;
  return scope.only.length === 0 || scope.only.includes(namespace);
}

function metadataNamespace(o: unknown): unknown {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return undefined;
  const m = (o as { metadata?: unknown }).metadata;
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return undefined;
  return (m as { namespace?: unknown }).namespace;
}

/**
 * A denial when the review is not for a served namespace, else undefined. The rules read the object's
 * own metadata.namespace before the request's, so every namespace the review names must be served; a
 * review naming none is refused too (all these webhooks judge namespaced objects). A name that is not
 * a string is left to the shape check, which refuses it as well, also before any lookup. The message
 * depends on the namespace name alone: it is the same whatever exists there.
 */
export function outOfScope(request: AdmissionRequest, scope: NamespaceScope, forApps = false): Decision | undefined {
  if (scope.only.length === 0 && scope.excluded.length === 0) return undefined;
  if (request.namespace === undefined || request.namespace === null || request.namespace === '') {
    return refusal('request.namespace is missing: these webhooks judge namespaced objects only');
  }
  for (const ns of [request.namespace, metadataNamespace(request.object), metadataNamespace(request.oldObject)]) {
    if (typeof ns !== 'string' || ns === '' || inScope(ns, scope)) continue;
    if (forApps && scope.apps?.includes(ns)) continue;
    const shown = JSON.stringify(ns.length > 63 ? ns.slice(0, 63) + '…' : ns);
    return refusal(`namespace ${shown} is not served by this admission service`);
  }
  return undefined;
}

function refusal(why: string): Decision {
  const message = `${why}; review refused without looking anything up`;
  return { allowed: false, code: 403, message, note: 'namespace not served' };
}
