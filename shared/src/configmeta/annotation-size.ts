/** Kubernetes' limit on the size of an object's annotations, and the check every configmeta write goes through. */

/** Kubernetes' limit on the total size of an object's annotations (keys + values), in bytes. */
export const ANNOTATIONS_SIZE_LIMIT = 256 * 1024;

export function annotationsSize(annotations: Record<string, string> | undefined): number {
  let n = 0;
  for (const [k, v] of Object.entries(annotations ?? {})) n += Buffer.byteLength(k) + Buffer.byteLength(v);
  return n;
}

/** Whether `ours` fits beside `otherBytes` of annotations that are not ours. */
export function fitsInAnnotations(otherBytes: number, ours: Record<string, string>): boolean {
  return otherBytes + annotationsSize(ours) <= ANNOTATIONS_SIZE_LIMIT;
}

/** The one sentence status and events use when configmeta does not fit. */
export function tooLargeMessage(bytes: number): string {
  return `configmeta is ${bytes} bytes and does not fit in a pod annotation (annotations are limited to ${ANNOTATIONS_SIZE_LIMIT} bytes in total); nothing was written`;
}
