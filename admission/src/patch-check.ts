/**
 * A last check before a patch leaves the service: it must apply to the object it was computed for
 * (fast-json-patch semantics, the same RFC 6902 rules the API server applies). A patch that would not
 * apply is a bug here, and failing loudly beats the API server's opaque "failed to apply patch".
 */
import jsonpatch, { type Operation } from 'fast-json-patch';
import type { PatchOp } from '@kd-connections/shared';

export function assertPatchApplies(patch: PatchOp[], document: unknown, what: string): void {
  if (patch.length === 0) return;
  const err = jsonpatch.validate(patch as Operation[], document);
  if (err) throw new Error(`${what}: computed patch does not apply (${err.name} at operation ${err.index ?? '?'})`);
}
