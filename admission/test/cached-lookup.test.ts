import { describe, expect, it } from '@jest/globals';
import { CachedLookup, type LiveGet } from '@kd-connections/shared/caches';
import { metaOnly as reduceMeta, slimObject } from '@kd-connections/shared/configmeta';
import { memoizeLookup } from '../src/memoize-lookup.js';
import { exampleWorld, MapStore, NS } from './support.js';

describe('CachedLookup', () => {
  it('answers from the cache without a live read', async () => {
    const world = exampleWorld();
    const lookup = world.deps().lookup;
    expect((await lookup.getApp(NS, 'kafka'))?.spec.category).toBe('messaging');
    expect((await lookup.getCluster(NS, 'pg-main'))?.spec.app).toBe('postgres');
    expect((await lookup.getConfigMap(NS, 'spark-defaults'))?.metadata.labels).toEqual({
      'kubedirector.hpe.com/cmType': 'spark-config',
    });
    expect(world.liveCalls).toEqual([]);
  });

  it('reads a Secret missing from the cache live, metadata only, and keeps only identity and labels', async () => {
    const world = exampleWorld();
    const got = await world.deps().lookup.getSecret(NS, 'plain-secret');
    expect(got).toEqual({ metadata: { name: 'plain-secret', namespace: NS } });
    expect(JSON.stringify(got)).not.toContain('c2VjcmV0');
    expect(world.liveCalls).toEqual([
      {
        path: `/api/v1/namespaces/${NS}/secrets/plain-secret`,
        accept: expect.stringContaining('PartialObjectMetadata'),
      },
    ]);
    expect(world.lookups).toEqual(['secret:live']);
  });

  it('says undefined for an object the API server does not have (404), and passes other failures on', async () => {
    const world = exampleWorld();
    expect(await world.deps().lookup.getCluster(NS, 'ghost')).toBeUndefined();
    expect(world.lookups).toEqual(['cluster:live_not_found']);
    const failing: LiveGet = async () => {
      throw new Error('connection refused');
    };
    const lookup = new CachedLookup(
      { apps: new MapStore(), clusters: new MapStore(), configmaps: new MapStore() },
      failing,
    );
    await expect(lookup.getApp(NS, 'x')).rejects.toThrow('connection refused');
  });

  it('says undefined, without asking, for names no URL path can hold', async () => {
    const world = exampleWorld();
    const lookup = world.deps().lookup;
    for (const name of ['', '.', '..', 'a/b', '100%', '\ud800', 'x\udc00y']) {
      expect(await lookup.getConfigMap(NS, name)).toBeUndefined();
      expect(await lookup.getCluster(name, 'pg-main')).toBeUndefined();
    }
    expect(world.liveCalls).toEqual([]);
  });

  it('never reads Secrets when Secret connections are disabled (no secrets cache)', async () => {
    const calls: string[] = [];
    const live: LiveGet = async (path) => {
      calls.push(path);
      return undefined;
    };
    const lookup = new CachedLookup(
      { apps: new MapStore(), clusters: new MapStore(), configmaps: new MapStore() },
      live,
    );
    expect(await lookup.getSecret(NS, 'scm-creds')).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('lists clusters from the cache, per namespace or all', async () => {
    const world = exampleWorld();
    const lookup = world.deps().lookup;
    expect((await lookup.listClusters(NS)).map((c) => c.metadata.name).sort()).toEqual([
      'kafka-events',
      'notebook',
      'pg-main',
      'spark-logs-nightly',
      'training-cluster',
    ]);
    expect(await lookup.listClusters('elsewhere')).toEqual([]);
  });

  it('memoizes per review: the same object is asked for once', async () => {
    const world = exampleWorld();
    const lookup = memoizeLookup(world.deps().lookup);
    await Promise.all([lookup.getCluster(NS, 'ghost'), lookup.getCluster(NS, 'ghost'), lookup.getCluster(NS, 'ghost')]);
    expect(world.liveCalls).toHaveLength(1);
  });
});

describe('object reduction', () => {
  it('reduceMeta keeps name, namespace, uid, resourceVersion and labels only', () => {
    expect(
      reduceMeta({
        kind: 'Secret',
        metadata: {
          name: 's',
          namespace: NS,
          uid: 'u',
          resourceVersion: '7',
          labels: { a: 'b' },
          annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"data":{"k":"dg=="}}' },
          managedFields: [{ manager: 'kubectl' }],
        },
        data: { k: 'dg==' },
      } as never),
    ).toEqual({ metadata: { name: 's', namespace: NS, uid: 'u', resourceVersion: '7', labels: { a: 'b' } } });
  });

  it('slimObject drops managedFields and the last-applied annotation, keeps the rest', () => {
    const slim = slimObject({
      metadata: {
        name: 'c',
        managedFields: [{}],
        annotations: { keep: 'me', 'kubectl.kubernetes.io/last-applied-configuration': '{}' },
      },
      spec: { app: 'x' },
    });
    expect(slim).toEqual({ metadata: { name: 'c', annotations: { keep: 'me' } }, spec: { app: 'x' } });
  });
});
