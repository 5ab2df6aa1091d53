/**
 * Write expectations (the ReplicaSet controller's pattern): after a write, the informer cache is stale
 * until the watch delivers the written resourceVersion. A reconcile that ran against that stale view
 * would redo the write and trip its own `test` precondition. So each write records the resourceVersion
 * it produced; the watch handler clears it when that version arrives; a reconcile waits while any of
 * its objects is still expected. Expectations expire after a while, so a lost watch event (a relist
 * that skipped past the version) delays work but never stalls it.
 */
/**
 * Whether resourceVersion `a` is at least `b`. Kubernetes 1.35+ makes resourceVersions comparable as
 * decimal integers (KEP-5504); anything else is only compared for equality.
 */
export function rvAtLeast(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return false;
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) >= BigInt(b);
  return a === b;
}

export class Expectations {
  private readonly pending = new Map<string, { rv: string; until: number }>();

  constructor(
    private readonly ttlMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * A write to `objectKey` produced `resourceVersion`. Two passes may write one object (delivery and the
   * reconnect record): an answer arriving after a later write's never lowers what is expected.
   */
  expect(objectKey: string, resourceVersion: string | undefined): void {
    if (!resourceVersion) return;
    const p = this.pending.get(objectKey);
    const rv = p && rvAtLeast(p.rv, resourceVersion) ? p.rv : resourceVersion;
    this.pending.set(objectKey, { rv, until: this.now() + this.ttlMs });
  }

  /** The cache now holds `resourceVersion` of `objectKey` (or the object is gone: pass undefined). */
  observe(objectKey: string, resourceVersion: string | undefined): void {
    const p = this.pending.get(objectKey);
    if (p && (resourceVersion === undefined || rvAtLeast(resourceVersion, p.rv))) this.pending.delete(objectKey);
  }

  /** Milliseconds until the last of these objects stops being expected (0: none pending). */
  waitFor(objectKeys: string[]): number {
    const t = this.now();
    let wait = 0;
    for (const k of objectKeys) {
      const p = this.pending.get(k);
      if (!p) continue;
      if (p.until <= t) this.pending.delete(k);
      else wait = Math.max(wait, p.until - t);
    }
    return wait;
  }

  get size(): number {
    return this.pending.size;
  }
}
