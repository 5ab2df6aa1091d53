/**
 * Write expectations (the ReplicaSet controller's pattern): after a write, the informer cache is stale
 * until the watch delivers the written resourceVersion. A reconcile that ran against that stale view
 * would redo the write and trip its own `test` precondition. So each write records the resourceVersion
 * it produced; the watch handler clears it when that version arrives; a reconcile waits while any of
 * its objects is still expected. Expectations expire after a while, so a lost watch event (a relist
 * that skipped past the version) delays work but never stalls it.
 */
export class Expectations {
  private readonly pending = new Map<string, { rv: string; until: number }>();

  constructor(
    private readonly ttlMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** A write to `objectKey` produced `resourceVersion`. */
  expect(objectKey: string, resourceVersion: string | undefined): void {
    if (resourceVersion) this.pending.set(objectKey, { rv: resourceVersion, until: this.now() + this.ttlMs });
  }

  /** The cache now holds `resourceVersion` of `objectKey` (or the object is gone: pass undefined). */
  observe(objectKey: string, resourceVersion: string | undefined): void {
    const p = this.pending.get(objectKey);
    if (p && (resourceVersion === undefined || p.rv === resourceVersion)) this.pending.delete(objectKey);
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
