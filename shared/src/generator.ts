/**
 * The mutating webhook's rule for spec.configMetaGenerator (DESIGN §4). Deterministic and based on the
 * old object, so re-applying an unchanged manifest (client-side, server-side, GitOps) never drifts:
 * - CREATE: incoming value (or 0) + 1 when any connection is listed; otherwise unchanged.
 * - UPDATE: base = old value; an absent incoming value means "keep base"; when the connection sets
 *   changed, max(incoming, base + 1); otherwise the incoming value, or base when absent.
 * No patch when the result equals what the request carries.
 */
import { diffConnections, hasConnections } from './connection-sets.js';
import type { PatchOp } from './json-patch.js';
import type { KDCluster } from './types.js';

export interface GeneratorDecision {
  /** The value the object should carry, or undefined to leave the field absent. */
  value: number | undefined;
  patch: PatchOp[];
  /** Why, for logs: "connections changed", "kept stored value", ... */
  reason: string;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function decideGenerator(
  operation: 'CREATE' | 'UPDATE',
  object: KDCluster,
  oldObject?: KDCluster,
): GeneratorDecision {
  const incoming = num(object.spec?.configMetaGenerator);
  let value: number | undefined;
  let reason: string;
  if (operation === 'CREATE' || !oldObject) {
    if (hasConnections(object.spec?.connections)) {
      value = (incoming ?? 0) + 1;
      reason = 'created with connections';
    } else {
      value = incoming;
      reason = 'created without connections';
    }
  } else {
    const base = num(oldObject.spec?.configMetaGenerator);
    const changed = diffConnections(oldObject.spec?.connections, object.spec?.connections).changed;
    if (changed) {
      value = Math.max(incoming ?? base ?? 0, (base ?? 0) + 1);
      reason = 'connections changed';
    } else if (incoming === undefined) {
      value = base;
      reason = base === undefined ? 'no generator yet' : 'kept stored value (absent from request)';
    } else {
      value = incoming;
      reason = 'connections unchanged';
    }
  }
  const patch: PatchOp[] =
    value !== undefined && value !== incoming ? [{ op: 'add', path: '/spec/configMetaGenerator', value }] : [];
  return { value, patch, reason };
}
