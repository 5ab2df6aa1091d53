/**
 * The content of the objects some kdcluster connects to, fetched when a reconcile asks for it and kept
 * while it is referenced. The watches that wake clusters hold metadata only (identity and the type
 * label), so what a tenant creates costs a few hundred bytes per object however big it is; the data
 * that configmeta renders is read — one GET — only for connected objects, and read again when the
 * watched resourceVersion moves past the kept one. So memory grows with what kdclusters reference.
 *
 * - `get(meta)` answers from the cache when the kept copy has the resourceVersion the watch shows,
 *   otherwise fetches (one request per object and version however many reconciles ask at once);
 * - a fetched object no kdcluster references any more (`wanted`) is returned but not kept;
 * - `forget` drops a copy when its object changes or is deleted, or its last reference goes;
 * - the kept copies are bounded in bytes (`maxBytes`): past it the least recently used go, to be
 *   fetched again when next needed — more reads, never more memory.
 * A failed fetch throws, so the reconcile is retried by the work queue; an object gone (404) while the
 * watch still shows it throws too: its delete event wakes the clusters again.
 */
import { objectKey } from '../primitives/object-key.js';
import type { KubeObject } from './informer.js';

export interface ContentCacheOptions<T> {
  /** For messages: "configmap", "secret". */
  kind: string;
  /** Reads the whole object; undefined when it does not exist. */
  fetch: (namespace: string, name: string) => Promise<KubeObject | undefined>;
  /** What is kept of a fetched object, and its size against `maxBytes`. */
  keep: (obj: KubeObject) => { value: T; bytes: number };
  /** Whether some kdcluster references `namespace/name`; only then is a fetched copy kept. */
  wanted: (key: string) => boolean;
  maxBytes: number;
  onFetch?: (result: 'ok' | 'not_found' | 'error') => void;
}

interface Entry<T> {
  resourceVersion: string | undefined;
  value: T;
  bytes: number;
}

export class ContentCache<T> {
  /** In least-recently-used order (a hit moves the entry to the end). */
  private readonly entries = new Map<string, Entry<T>>();
  private readonly inflight = new Map<string, Promise<Entry<T>>>();
  private total = 0;

  constructor(private readonly o: ContentCacheOptions<T>) {}

  /** The content of the object `meta` names, at least as new as `meta.resourceVersion`. */
  async get(meta: { metadata: { namespace?: string; name?: string; resourceVersion?: string } }): Promise<T> {
    const { namespace = '', name = '', resourceVersion } = meta.metadata;
    const key = objectKey(namespace, name);
    const kept = this.entries.get(key);
    if (kept && kept.resourceVersion === resourceVersion) {
      this.entries.delete(key);
      this.entries.set(key, kept);
      return kept.value;
    }
    const flight = `${key}@${resourceVersion ?? ''}`;
    let p = this.inflight.get(flight);
    if (!p) {
      p = this.fetch(namespace, name, key).finally(() => this.inflight.delete(flight));
      this.inflight.set(flight, p);
    }
    return (await p).value;
  }

  private async fetch(namespace: string, name: string, key: string): Promise<Entry<T>> {
    let obj: KubeObject | undefined;
    try {
      obj = await this.o.fetch(namespace, name);
    } catch (e) {
      this.o.onFetch?.('error');
      throw e;
    }
    if (!obj) {
      this.o.onFetch?.('not_found');
      this.forget(key);
      throw new Error(`${this.o.kind} ${key} was deleted since it was seen; retrying once the watch shows it`);
    }
    this.o.onFetch?.('ok');
    const { value, bytes } = this.o.keep(obj);
    const entry = { resourceVersion: obj.metadata.resourceVersion, value, bytes };
    this.forget(key);
    if (this.o.wanted(key) && bytes <= this.o.maxBytes) {
      this.entries.set(key, entry);
      this.total += bytes;
      for (const [k, e] of this.entries) {
        if (this.total <= this.o.maxBytes) break;
        this.entries.delete(k);
        this.total -= e.bytes;
      }
    }
    return entry;
  }

  /**
   * Drops the kept copy of `namespace/name` (changed, deleted, or no longer referenced) — unless it is
   * of `current`, the version the watch now shows (a fetch can get there before the watch does).
   */
  forget(key: string, current?: string): void {
    const e = this.entries.get(key);
    if (!e || (current !== undefined && e.resourceVersion === current)) return;
    this.entries.delete(key);
    this.total -= e.bytes;
  }

  get size(): number {
    return this.entries.size;
  }
  get bytes(): number {
    return this.total;
  }
}
