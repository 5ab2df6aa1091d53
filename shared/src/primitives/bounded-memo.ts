/**
 * A memo bounded in bytes as well as entries: the version memos are keyed by text from reviews, and a
 * cap on entries alone let a thousand megabyte keys stay (issue 27). Keys longer than `maxKeyLength`
 * are computed and not kept; past `maxBytes` (keys at two bytes a character plus `entryBytes` each)
 * the memo starts over, which costs recomputation, never memory.
 */
export class BoundedMemo<V> {
  private readonly map = new Map<string, V>();
  private bytes = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
    private readonly maxKeyLength: number,
    private readonly entryBytes = 64,
  ) {}

  get(key: string, compute: (key: string) => V): V {
    if (this.map.has(key)) return this.map.get(key) as V;
    const v = compute(key);
    if (key.length > this.maxKeyLength) return v;
    const cost = key.length * 2 + this.entryBytes;
    if (this.map.size >= this.maxEntries || this.bytes + cost > this.maxBytes) this.clear();
    this.map.set(key, v);
    this.bytes += cost;
    return v;
  }

  clear(): void {
    this.map.clear();
    this.bytes = 0;
  }

  get size(): number {
    return this.map.size;
  }

  /** The bytes counted for what is kept. */
  get keptBytes(): number {
    return this.bytes;
  }
}
