/**
 * The one cache-or-live reader, in the reconciler's mode: apps and clusters from the cache only, and a
 * ConfigMap/Secret the label-selected cache lacks read live as metadata — unlabeled is an answer,
 * labelled means the watch is behind and the caller must retry. (The admission mode is tested with the
 * admission service.)
 */
import { describe, expect, it } from '@jest/globals';
import { CachedLookup, type LiveGet, type ObjectStore } from '../src/caches/cached-lookup.js';
import { objectKey } from '../src/primitives/object-key.js';
import { LABEL_CM_TYPE, type KDApp, type KDCluster, type MetaObject } from '../src/domain/types.js';

class Store<T extends MetaObject> implements ObjectStore<T> {
  constructor(
    private readonly items: T[] = [],
    private readonly watched?: string[],
  ) {}
  get(namespace: string | undefined, name: string): T | undefined {
    return this.items.find((o) => objectKey(o.metadata.namespace, o.metadata.name) === objectKey(namespace, name));
  }
  list(): T[] {
    return this.items;
  }
  watches(namespace: string): boolean {
    return !this.watched || this.watched.includes(namespace);
  }
}

function reader(server: Record<string, unknown>, watched?: string[]) {
  const calls: string[] = [];
  const live: LiveGet = async <T>(path: string) => {
    calls.push(path);
    return server[path] as T | undefined;
  };
  const stores = {
    apps: new Store<KDApp>(),
    clusters: new Store<KDCluster>(),
    configmaps: new Store<MetaObject>([], watched),
  };
  const lookup = new CachedLookup(stores, live, undefined, { cacheOnly: true, retryLabelledMiss: true });
  return { lookup, calls };
}

describe('CachedLookup in the reconciler mode', () => {
  it('never reads apps or clusters live', async () => {
    const { lookup, calls } = reader({});
    expect(await lookup.getApp('ml', 'a')).toBeUndefined();
    expect(await lookup.getCluster('ml', 'c')).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('an unlabeled ConfigMap is read live and kept as identity and labels only', async () => {
    const { lookup } = reader({
      '/api/v1/namespaces/ml/configmaps/plain': {
        metadata: { name: 'plain', namespace: 'ml', labels: { team: 'a' }, managedFields: [{}] },
        data: { k: 'v' },
      },
    });
    expect(await lookup.getConfigMap('ml', 'plain')).toEqual({
      metadata: { name: 'plain', namespace: 'ml', labels: { team: 'a' } },
    });
  });

  it('a labelled ConfigMap the cache does not hold yet: an error to retry on, never "missing"', async () => {
    const { lookup } = reader({
      '/api/v1/namespaces/ml/configmaps/new': {
        metadata: { name: 'new', namespace: 'ml', labels: { [LABEL_CM_TYPE]: 'x' } },
      },
    });
    await expect(lookup.getConfigMap('ml', 'new')).rejects.toThrow(
      'configmap ml/new is labelled but not in the cache yet; retrying',
    );
  });

  it('a namespace that is not watched is unknown: nothing is read', async () => {
    const { lookup, calls } = reader({}, ['ml']);
    expect(await lookup.getConfigMap('other', 'x')).toBeUndefined();
    expect(calls).toEqual([]);
  });
});

describe('CachedLookup: names no object can have', () => {
  it.each([
    ['a namespace of a megabyte', 'é'.repeat(1 << 20), 'cm'],
    ['an upper-case namespace', 'ML', 'cm'],
    ['a namespace longer than a label', 'n'.repeat(64), 'cm'],
    ['a name of "."', 'ml', '.'],
    ['a name with "%"', 'ml', 'a%2Fb'],
    ['a name with a lone surrogate', 'ml', 'a\uD800'],
    ['a name longer than a subdomain', 'ml', 'n'.repeat(254)],
  ])('%s: missing, and nothing is read', async (_what, namespace, name) => {
    const { lookup, calls } = reader({});
    expect(await lookup.getConfigMap(namespace, name)).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('the longest valid namespace and name are read', async () => {
    const { lookup, calls } = reader({});
    const ns = 'n'.repeat(63);
    const name = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    expect(await lookup.getConfigMap(ns, name)).toBeUndefined();
    expect(calls).toEqual([`/api/v1/namespaces/${ns}/configmaps/${name}`]);
  });
});
