/**
 * One informer per watched namespace (or one for all namespaces) behind a single get/list/index
 * surface, so a service needs read rights only in the namespaces it watches. Used by both services.
 */
import type { Handler, Informer, InformerEvent, KubeObject } from './informer.js';

export class NamespacedCache<T extends KubeObject> {
  private readonly informers = new Map<string, Informer<T>>();

  constructor(namespaces: string[] | undefined, make: (namespace: string | undefined) => Informer<T>) {
    if (!namespaces || namespaces.length === 0) this.informers.set('', make(undefined));
    else for (const ns of new Set(namespaces)) this.informers.set(ns, make(ns));
  }

  private informerFor(namespace: string): Informer<T> | undefined {
    return this.informers.get('') ?? this.informers.get(namespace);
  }

  on(event: InformerEvent, h: Handler<T>): this {
    for (const i of this.informers.values()) i.on(event, h);
    return this;
  }
  addIndex(name: string, fn: (o: T) => string[]): this {
    for (const i of this.informers.values()) i.addIndex(name, fn);
    return this;
  }
  get(namespace: string | undefined, name: string): T | undefined {
    return this.informerFor(namespace ?? '')?.get(namespace, name);
  }
  /** Whether `namespace` is watched at all (an unwatched object is unknown, not missing). */
  watches(namespace: string): boolean {
    return this.informerFor(namespace) !== undefined;
  }
  list(namespace?: string): T[] {
    if (namespace !== undefined) return this.informerFor(namespace)?.list(namespace) ?? [];
    return [...this.informers.values()].flatMap((i) => i.list());
  }
  byIndex(name: string, value: string): T[] {
    return [...this.informers.values()].flatMap((i) => i.byIndex(name, value));
  }
  get synced(): boolean {
    return [...this.informers.values()].every((i) => i.synced);
  }
  get size(): number {
    return [...this.informers.values()].reduce((n, i) => n + i.size, 0);
  }
  start(): void {
    for (const i of this.informers.values()) i.start();
  }
  async stop(): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }
  async waitForSync(timeoutMs: number): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.waitForSync(timeoutMs)));
  }
}
