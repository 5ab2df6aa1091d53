/**
 * A last check before a patch leaves the service: it must apply to the object it was computed for
 * (fast-json-patch semantics, the same RFC 6902 rules the API server applies). A patch that would not
 * apply is a bug here, and failing loudly beats the API server's opaque "failed to apply patch".
 *
 * The patch is applied to a copy that shares everything with the object except the containers on the
 * paths it touches (copied just before each operation), not to a deep clone: fast-json-patch's
 * validate() clones the whole object and the patch on every review, which cost more than deciding it.
 */
import jsonpatch, { type Operation } from 'fast-json-patch';
import type { PatchOp } from '@kd-connections/shared/primitives';

export function assertPatchApplies(patch: PatchOp[], document: unknown, what: string): void {
  if (patch.length === 0) return;
  try {
    const copied = new WeakSet<object>();
    const own = <T>(v: T): T => {
      if (v === null || typeof v !== 'object' || copied.has(v)) return v;
      const c = (Array.isArray(v) ? v.slice() : { ...v }) as T & object;
      copied.add(c);
      return c;
    };
    let doc: unknown = own(document);
    // The operations are cloned as validate() clones them (a JSON round trip): small, and what they add
    // to the copy must not be the caller's objects.
    const ops = JSON.parse(JSON.stringify(patch)) as Operation[];
    for (const [i, op] of ops.entries()) {
      // Only the containers an operation changes are copied: the parents along its path (and along
      // `from` for move).
      for (const pointer of [op.path, (op as { from?: unknown }).from]) {
        if (typeof pointer === 'string') doc = ownPath(doc, pointer, own);
      }
      doc = jsonpatch.applyOperation(doc, op, true, true, true, i).newDocument;
    }
  } catch (e) {
    if (e instanceof jsonpatch.JsonPatchError) {
      throw new Error(`${what}: computed patch does not apply (${e.name} at operation ${e.index ?? '?'})`);
    }
    throw e;
  }
}

/** Replaces every container on the way to the parent of `pointer` by a private copy; returns the root. */
function ownPath(root: unknown, pointer: string, own: <T>(v: T) => T): unknown {
  if (pointer === '') return root;
  const keys = pointer.split('/').slice(1);
  let node = own(root);
  const top = node;
  for (let k = 0; k < keys.length - 1; k++) {
    if (node === null || typeof node !== 'object') break;
    const key = keys[k]!.replace(/~1/g, '/').replace(/~0/g, '~');
    const parent = node as Record<string, unknown>;
    if (!Object.prototype.hasOwnProperty.call(parent, key)) break;
    const child = own(parent[key]);
    parent[key] = child;
    node = child;
  }
  return top;
}
