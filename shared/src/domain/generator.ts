/**
 * The rules for spec.configMetaGenerator. The mutating webhook's (decideGenerator) is deterministic and
 * based on the old object, so re-applying an unchanged manifest (client-side, server-side, GitOps) never
 * drifts:
 * - CREATE: incoming value (or 0) + 1 when any connection is listed; otherwise unchanged.
 * - UPDATE: base = old value; an absent incoming value means "keep base"; when the connection sets
 *   changed, max(incoming, base + 1); otherwise the incoming value, or base when absent.
 * No patch when the result equals what the request carries. The reconciler's (decideBump) is below.
 */
import { diffConnections, hasConnections } from './connection-sets.js';
import type { FieldError } from './field-errors.js';
import type { PatchOp } from '../primitives/json-patch.js';
import type { KDCluster } from './types.js';

export interface GeneratorDecision {
  /** The value the object should carry, or undefined to leave the field absent. */
  value: number | undefined;
  patch: PatchOp[];
  /** Why, for logs: "connections changed", "kept stored value", ... */
  reason: string;
  /** Set when the request carries a value that is not a generator: it is refused, never replaced. */
  error?: FieldError;
}

/** What is wrong with a requested configMetaGenerator, or undefined when it is absent or a whole number ≥ 0. */
export function generatorValueError(v: unknown): FieldError | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return undefined;
  return {
    field: 'spec.configMetaGenerator',
    message: `must be a whole number (0 or more), not ${typeof v === 'string' ? 'the string ' : ''}${JSON.stringify(v)}; leave it out of manifests and the webhook sets it`,
  };
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function decideGenerator(
  operation: 'CREATE' | 'UPDATE',
  object: KDCluster,
  oldObject?: KDCluster,
): GeneratorDecision {
  const error = generatorValueError(object.spec?.configMetaGenerator);
  if (error) return { value: undefined, patch: [], reason: 'invalid configMetaGenerator', error };
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

export interface GeneratorBump {
  from: number;
  to: number;
  /** JSON Patch on the kdcluster: the generator is tested (or the resourceVersion, when absent) and raised. */
  ops: PatchOp[];
}

/**
 * The reconciler's rule: request a regeneration (generator + 1) when what the pods would see (`hash`)
 * differs from status.connectionsHash and none is pending. A cluster seen for the first time (no
 * connectionsHash yet) gets its status initialized without a bump; a pending regeneration (generator
 * above status.lastConfigMetaGenerator) is delivered, not bumped again.
 */
export function decideBump(cluster: KDCluster, hash: string): GeneratorBump | undefined {
  const status = cluster.status ?? {};
  const from = cluster.spec?.configMetaGenerator ?? 0;
  const firstSeen = status.connectionsHash === undefined;
  const pending = from > (status.lastConfigMetaGenerator ?? -1);
  if (firstSeen || pending || hash === status.connectionsHash) return undefined;
  const to = from + 1;
  // The uid too: a cluster deleted and re-created under the same name is another object.
  const uid: PatchOp[] = cluster.metadata.uid
    ? [{ op: 'test', path: '/metadata/uid', value: cluster.metadata.uid }]
    : [];
  const ops: PatchOp[] =
    typeof cluster.spec?.configMetaGenerator === 'number'
      ? [
          ...uid,
          { op: 'test', path: '/spec/configMetaGenerator', value: from },
          { op: 'replace', path: '/spec/configMetaGenerator', value: to },
        ]
      : [
          ...uid,
          { op: 'test', path: '/metadata/resourceVersion', value: cluster.metadata.resourceVersion },
          { op: 'add', path: '/spec/configMetaGenerator', value: to },
        ];
  return { from, to, ops };
}
