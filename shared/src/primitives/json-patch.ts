/**
 * RFC 6902 JSON Patch building. Every write the reconciler makes is one of these patches, opened with
 * `test` operations so the API server refuses it when the object moved on since it was read.
 */

export type PatchOp =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; path: string; from: string };

/** RFC 6901: "~" becomes "~0" and "/" becomes "~1" (annotation keys contain "/"). */
export function escapePointerSegment(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function pointer(...segments: (string | number)[]): string {
  return segments.map((s) => '/' + escapePointerSegment(String(s))).join('');
}

/** Preconditions that pin a patch to the exact object version that was read. */
export function testIdentity(meta: { uid?: string; resourceVersion?: string }): PatchOp[] {
  const ops: PatchOp[] = [];
  if (meta.uid) ops.push({ op: 'test', path: '/metadata/uid', value: meta.uid });
  if (meta.resourceVersion) ops.push({ op: 'test', path: '/metadata/resourceVersion', value: meta.resourceVersion });
  return ops;
}

/**
 * Sets annotations, guarded by a precondition on one annotation's current value (or on the object's
 * resourceVersion when that annotation is absent, since `test` cannot assert absence).
 */
export function setAnnotationsPatch(
  meta: { uid?: string; resourceVersion?: string; annotations?: Record<string, string> },
  values: Record<string, string>,
  guardKey: string,
): PatchOp[] {
  const current = meta.annotations;
  const ops: PatchOp[] = [];
  if (meta.uid) ops.push({ op: 'test', path: '/metadata/uid', value: meta.uid });
  if (current && guardKey in current) {
    ops.push({ op: 'test', path: pointer('metadata', 'annotations', guardKey), value: current[guardKey] });
  } else if (meta.resourceVersion) {
    ops.push({ op: 'test', path: '/metadata/resourceVersion', value: meta.resourceVersion });
  }
  if (!current) {
    ops.push({ op: 'add', path: '/metadata/annotations', value: { ...values } });
    return ops;
  }
  for (const [k, v] of Object.entries(values)) {
    if (current[k] !== v) ops.push({ op: 'add', path: pointer('metadata', 'annotations', k), value: v });
  }
  return ops;
}

/**
 * Moves a top-level section of an object (e.g. status) to `desired`, key by key, only touching what
 * differs; guarded by uid and resourceVersion. Returns [] when nothing differs; throws when `meta` has
 * neither (an unguarded patch would overwrite whatever the object holds now).
 */
export function sectionPatch(
  meta: { uid?: string; resourceVersion?: string },
  section: string,
  current: Record<string, unknown> | undefined,
  desired: Record<string, unknown>,
  equal: (a: unknown, b: unknown) => boolean,
): PatchOp[] {
  const changes: PatchOp[] = [];
  if (!current) {
    changes.push({ op: 'add', path: pointer(section), value: desired });
  } else {
    for (const [k, v] of Object.entries(desired)) {
      if (v === undefined) continue;
      if (!equal(current[k], v)) changes.push({ op: 'add', path: pointer(section, k), value: v });
    }
    for (const k of Object.keys(current)) {
      if (desired[k] === undefined && k in current) changes.push({ op: 'remove', path: pointer(section, k) });
    }
  }
  if (changes.length === 0) return [];
  const guard = testIdentity(meta);
  if (guard.length === 0)
    throw new Error(
      `refusing to patch /${section} without a precondition: the object read has no uid or resourceVersion`,
    );
  return [...guard, ...changes];
}
