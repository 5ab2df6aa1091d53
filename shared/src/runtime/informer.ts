/**
 * A list+watch cache ("informer") instead of client-node's makeInformer (1.4's stopped for good on an
 * error, reconnected in a tight loop and leaked an agent per reconnect; 2.x fixed those but still takes
 * the whole list from one call and cannot ask for metadata only). This one:
 * - lists in pages, then watches from the list's resourceVersion with bookmarks and a server-side
 *   timeoutSeconds (jittered), re-watching from the last seen resourceVersion when a watch ends;
 * - relists on 410 Gone and periodically, emitting events only for objects whose resourceVersion
 *   changed, so a relist of an unchanged world triggers nothing;
 * - backs off exponentially (with jitter) on errors and on watches that end immediately, and resets
 *   after a healthy stretch;
 * - can store a transformed, smaller object (e.g. a Secret's keys only) and can ask for metadata only;
 * - keeps secondary indexes (e.g. pods by their cluster label).
 * Handlers are called synchronously and are meant to only enqueue keys.
 */
import { errorMessage, type Logger, silentLogger } from './logger.js';
import { objectKey } from '../primitives/object-key.js';
import { ACCEPT_JSON, ACCEPT_META, ACCEPT_META_LIST, errorStatus, type KubeClient } from './kube-client.js';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; namespace?: string; resourceVersion?: string; uid?: string; [k: string]: unknown };
}

export type InformerEvent = 'add' | 'update' | 'delete';
export type Handler<T> = (obj: T, old?: T) => void;

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
}

export interface InformerOptions<T> {
  name: string;
  client: KubeClient;
  /** Collection path, e.g. /api/v1/namespaces/ml/pods or /apis/kubedirector.hpe.com/v1beta1/kubedirectorclusters */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Ask for PartialObjectMetadata only (no data, no spec). */
  metadataOnly?: boolean;
  /** Store a reduced object; must keep metadata.name/namespace/resourceVersion. */
  transform?: (obj: KubeObject) => T;
  pageSize?: number;
  /** Server-side watch timeout; each watch picks a value in [0.8, 1.2] × this. Default 300 s. */
  watchTimeoutSeconds?: number;
  /** Full relist period (0 = never). Default 10 minutes. */
  relistPeriodMs?: number;
  backoff?: BackoffOptions;
  log?: Logger;
  /** Called whenever a watch restarts for a reason other than its normal timeout (for metrics). */
  onRestart?: (reason: string) => void;
  /** Deterministic randomness for tests. */
  random?: () => number;
}

interface ListResponse {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: KubeObject[];
}

export class Informer<T extends KubeObject = KubeObject> {
  private readonly store = new Map<string, T>();
  private readonly handlers: Record<InformerEvent, Handler<T>[]> = { add: [], update: [], delete: [] };
  private readonly indexers = new Map<string, (obj: T) => string[]>();
  private readonly indexes = new Map<string, Map<string, Set<string>>>();
  private readonly syncWaiters: (() => void)[] = [];
  private resourceVersion = '';
  private hasSynced = false;
  private running = false;
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  private failures = 0;
  private relistDue = false;
  private relistTimer: NodeJS.Timeout | undefined;
  private readonly log: Logger;
  private readonly random: () => number;

  constructor(private readonly opts: InformerOptions<T>) {
    this.log = (opts.log ?? silentLogger).child({ informer: opts.name });
    this.random = opts.random ?? Math.random;
  }

  on(event: InformerEvent, handler: Handler<T>): this {
    this.handlers[event].push(handler);
    return this;
  }

  /** Adds an index; `fn` returns the index values of an object (e.g. ["ml/spark"]). */
  addIndex(name: string, fn: (obj: T) => string[]): this {
    this.indexers.set(name, fn);
    const idx = new Map<string, Set<string>>();
    this.indexes.set(name, idx);
    for (const [key, obj] of this.store) for (const v of fn(obj)) addTo(idx, v, key);
    return this;
  }

  get synced(): boolean {
    return this.hasSynced;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.store.get(objectKey(namespace, name));
  }

  list(namespace?: string): T[] {
    const all = [...this.store.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  byIndex(name: string, value: string): T[] {
    const keys = this.indexes.get(name)?.get(value);
    return keys ? [...keys].map((k) => this.store.get(k)!).filter(Boolean) : [];
  }

  get size(): number {
    return this.store.size;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.abort = new AbortController();
    this.loop = this.run();
    const period = this.opts.relistPeriodMs ?? 10 * 60_000;
    if (period > 0) {
      this.relistTimer = setInterval(() => {
        this.relistDue = true;
        this.abort.abort(); // ends the current watch; the loop relists
        this.abort = new AbortController();
      }, period);
      this.relistTimer.unref();
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.relistTimer) clearInterval(this.relistTimer);
    this.abort.abort();
    await this.loop?.catch(() => undefined);
  }

  waitForSync(timeoutMs = 60_000): Promise<void> {
    if (this.hasSynced) return Promise.resolve();
    return new Promise((ok, fail) => {
      const t = setTimeout(
        () => fail(new Error(`informer ${this.opts.name} not synced after ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.syncWaiters.push(() => {
        clearTimeout(t);
        ok();
      });
    });
  }

  /** Backoff delay for the n-th consecutive failure: exponential, capped, with ±20% jitter. */
  static backoffDelay(failures: number, b: BackoffOptions, random: () => number = Math.random): number {
    const base = Math.min(b.maxMs, b.initialMs * 2 ** Math.max(0, failures - 1));
    return Math.round(base * (0.8 + 0.4 * random()));
  }

  private async sleep(ms: number): Promise<void> {
    const signal = this.abort.signal;
    await new Promise<void>((r) => {
      const t = setTimeout(r, ms);
      signal.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
    });
  }

  private async run(): Promise<void> {
    const backoff = this.opts.backoff ?? { initialMs: 500, maxMs: 30_000 };
    let needList = true;
    while (this.running) {
      try {
        if (needList || this.relistDue) {
          this.relistDue = false;
          await this.relist();
          needList = false;
        }
        const started = Date.now();
        const events = await this.watchOnce();
        if (!this.running) break;
        if (this.relistDue) continue;
        // A watch that ends at once without events is a reconnect storm in the making: back off.
        if (events === 0 && Date.now() - started < 1000) throw new Error('watch ended immediately');
        this.failures = 0;
      } catch (e) {
        if (!this.running) break;
        if (this.relistDue) continue;
        const gone = errorStatus(e) === 410 || (e as { gone?: boolean } | null)?.gone === true;
        if (gone) {
          this.log.info('watch expired (410 Gone); relisting');
          this.opts.onRestart?.('gone');
          needList = true;
          continue; // relisting right away is the documented answer to 410
        }
        this.failures++;
        const delay = Informer.backoffDelay(this.failures, backoff, this.random);
        this.opts.onRestart?.('error');
        this.log.warn('list/watch failed; retrying', {
          error: errorMessage(e),
          failures: this.failures,
          retryInMs: delay,
        });
        await this.sleep(delay);
        if (!this.hasSynced) needList = true;
      }
    }
  }

  private query(): Record<string, string | undefined> {
    return { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector };
  }

  private async relist(): Promise<void> {
    const seen = new Map<string, T>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = await this.opts.client.get<ListResponse>(this.opts.path, {
        query: { ...this.query(), limit: this.opts.pageSize ?? 500, continue: cont },
        accept: this.opts.metadataOnly ? ACCEPT_META_LIST : ACCEPT_JSON,
        signal: this.abort.signal,
      });
      for (const item of page.items ?? []) {
        const obj = this.transform(item);
        seen.set(objectKey(obj.metadata.namespace, obj.metadata.name), obj);
      }
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont);
    // Replace the store, emitting events only for what changed since the last view.
    for (const [key, obj] of seen) {
      const old = this.store.get(key);
      if (!old) this.put(key, obj, 'add');
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.put(key, obj, 'update', old);
    }
    for (const [key, old] of [...this.store]) if (!seen.has(key)) this.remove(key, old);
    this.resourceVersion = rv;
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.log.info('synced', { objects: this.store.size });
      for (const w of this.syncWaiters.splice(0)) w();
    }
  }

  private transform(item: KubeObject): T {
    return this.opts.transform ? this.opts.transform(item) : (item as T);
  }

  /** One watch; returns the number of events seen when the server ends it normally. */
  private async watchOnce(): Promise<number> {
    const base = this.opts.watchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.max(1, Math.round(base * (0.8 + 0.4 * this.random())));
    let events = 0;
    this.log.debug('watch', { resourceVersion: this.resourceVersion, timeoutSeconds });
    await this.opts.client.watch(
      this.opts.path,
      {
        query: { ...this.query(), resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds },
        accept: this.opts.metadataOnly ? ACCEPT_META : ACCEPT_JSON,
        signal: this.abort.signal,
        idleMs: (timeoutSeconds + 30) * 1000,
      },
      (ev) => {
        events++;
        this.handle(ev);
      },
    );
    return events;
  }

  private handle(ev: { type: string; object: Record<string, unknown> }): void {
    if (ev.type === 'ERROR') {
      const status = ev.object as { code?: number; message?: string };
      const err = new Error(`watch error ${status.code ?? ''}: ${status.message ?? ''}`) as Error & { gone?: boolean };
      if (status.code === 410) err.gone = true;
      throw err;
    }
    const raw = ev.object as unknown as KubeObject;
    const rv = raw.metadata?.resourceVersion;
    if (ev.type === 'BOOKMARK') {
      if (rv) this.resourceVersion = rv;
      return;
    }
    const obj = this.transform(raw);
    const key = objectKey(obj.metadata.namespace, obj.metadata.name);
    const old = this.store.get(key);
    if (ev.type === 'DELETED') {
      if (old) this.remove(key, old);
    } else if (ev.type === 'ADDED' || ev.type === 'MODIFIED') {
      if (!old) this.put(key, obj, 'add');
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.put(key, obj, 'update', old);
    }
    if (rv) this.resourceVersion = rv;
  }

  private put(key: string, obj: T, event: 'add' | 'update', old?: T): void {
    if (old) this.unindex(key, old);
    this.store.set(key, obj);
    for (const [name, fn] of this.indexers) for (const v of fn(obj)) addTo(this.indexes.get(name)!, v, key);
    this.emit(event, obj, old);
  }

  private remove(key: string, old: T): void {
    this.unindex(key, old);
    this.store.delete(key);
    this.emit('delete', old);
  }

  private unindex(key: string, obj: T): void {
    for (const [name, fn] of this.indexers) {
      const idx = this.indexes.get(name)!;
      for (const v of fn(obj)) {
        const s = idx.get(v);
        s?.delete(key);
        if (s && s.size === 0) idx.delete(v);
      }
    }
  }

  private emit(event: InformerEvent, obj: T, old?: T): void {
    for (const h of this.handlers[event]) {
      try {
        h(obj, old);
      } catch (e) {
        this.log.error('informer handler threw', { event, error: errorMessage(e) });
      }
    }
  }
}

function addTo(idx: Map<string, Set<string>>, value: string, key: string): void {
  let s = idx.get(value);
  if (!s) idx.set(value, (s = new Set()));
  s.add(key);
}
