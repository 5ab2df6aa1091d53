/**
 * The content cache behind the reconciler's metadata-only watches: a connected object's content is read
 * once per version however many reconciles ask, kept only while referenced and within its byte budget,
 * dropped when the watch shows it changed or gone, and a failed or 404 read throws (the work queue
 * retries) rather than answering "missing".
 */
import { describe, expect, it } from '@jest/globals';
import { ContentCache } from '../src/runtime/content-cache.js';
import type { KubeObject } from '../src/runtime/informer.js';

interface Stored extends KubeObject {
  data: string;
}

function setup(opts: { maxBytes?: number; wanted?: (key: string) => boolean } = {}) {
  const objects = new Map<string, Stored>();
  const reads: string[] = [];
  const results: string[] = [];
  let failNext: Error | undefined;
  let release: (() => void) | undefined;
  let hold = false;
  const put = (name: string, rv: string, data: string) =>
    objects.set(`ns/${name}`, { metadata: { namespace: 'ns', name, resourceVersion: rv }, data });
  const cache = new ContentCache<{ data: string; rv?: string }>({
    kind: 'configmap',
    fetch: async (ns, name) => {
      reads.push(`${ns}/${name}`);
      if (hold) await new Promise<void>((r) => (release = r));
      if (failNext) {
        const e = failNext;
        failNext = undefined;
        throw e;
      }
      const o = objects.get(`${ns}/${name}`);
      return o && structuredClone(o);
    },
    keep: (o) => ({
      value: { data: (o as Stored).data, rv: o.metadata.resourceVersion },
      bytes: (o as Stored).data.length,
    }),
    wanted: opts.wanted ?? (() => true),
    maxBytes: opts.maxBytes ?? 1000,
    onFetch: (r) => results.push(r),
  });
  const meta = (name: string, rv: string) => ({ metadata: { namespace: 'ns', name, resourceVersion: rv } });
  return {
    cache,
    objects,
    reads,
    results,
    put,
    meta,
    fail: (e: Error) => (failNext = e),
    holdFetches: () => (hold = true),
    releaseFetch: () => {
      hold = false;
      release?.();
    },
  };
}

describe('ContentCache', () => {
  it('reads an object once per version, and again when the watch shows a newer one', async () => {
    const t = setup();
    t.put('a', '1', 'one');
    expect(await t.cache.get(t.meta('a', '1'))).toEqual({ data: 'one', rv: '1' });
    expect(await t.cache.get(t.meta('a', '1'))).toEqual({ data: 'one', rv: '1' });
    expect(t.reads).toEqual(['ns/a']);
    t.put('a', '2', 'two');
    expect(await t.cache.get(t.meta('a', '2'))).toEqual({ data: 'two', rv: '2' });
    expect(t.reads).toEqual(['ns/a', 'ns/a']);
    expect(t.cache.size).toBe(1);
    expect(t.cache.bytes).toBe(3);
  });

  it('many reconciles asking at once share one read', async () => {
    const t = setup();
    t.put('a', '1', 'one');
    t.holdFetches();
    const all = Promise.all(Array.from({ length: 20 }, () => t.cache.get(t.meta('a', '1'))));
    await new Promise((r) => setImmediate(r));
    t.releaseFetch();
    expect(new Set((await all).map((v) => v.data))).toEqual(new Set(['one']));
    expect(t.reads).toEqual(['ns/a']);
  });

  it('keeps nothing that no kdcluster references, but still answers', async () => {
    const referenced = new Set(['ns/a']);
    const t = setup({ wanted: (k) => referenced.has(k) });
    t.put('a', '1', 'aaa');
    t.put('b', '1', 'bbb');
    expect((await t.cache.get(t.meta('b', '1'))).data).toBe('bbb');
    expect((await t.cache.get(t.meta('a', '1'))).data).toBe('aaa');
    expect(t.cache.size).toBe(1);
    await t.cache.get(t.meta('b', '1'));
    expect(t.reads).toEqual(['ns/b', 'ns/a', 'ns/b']);
  });

  it('forget drops a copy unless it is of the version the watch now shows', async () => {
    const t = setup();
    t.put('a', '5', 'five');
    await t.cache.get(t.meta('a', '4')); // the fetch got ahead of the watch
    t.cache.forget('ns/a', '5'); // the watch catches up: the kept copy is current
    expect(t.cache.size).toBe(1);
    await t.cache.get(t.meta('a', '5'));
    expect(t.reads).toEqual(['ns/a']); // the watch now shows the kept version: no second read
    t.cache.forget('ns/a', '6');
    expect(t.cache.size).toBe(0);
    expect(t.cache.bytes).toBe(0);
    t.cache.forget('ns/never');
  });

  it('stays within its byte budget, letting the least recently used go', async () => {
    const t = setup({ maxBytes: 10 });
    for (const n of ['a', 'b', 'c']) t.put(n, '1', 'xxxx');
    await t.cache.get(t.meta('a', '1'));
    await t.cache.get(t.meta('b', '1'));
    await t.cache.get(t.meta('a', '1')); // a is now the most recently used
    await t.cache.get(t.meta('c', '1'));
    expect(t.cache.bytes).toBeLessThanOrEqual(10);
    expect(t.cache.size).toBe(2);
    t.reads.length = 0;
    await t.cache.get(t.meta('a', '1'));
    await t.cache.get(t.meta('b', '1'));
    expect(t.reads).toEqual(['ns/b']);
    // One object bigger than the whole budget is answered, never kept.
    t.put('huge', '1', 'y'.repeat(11));
    expect((await t.cache.get(t.meta('huge', '1'))).data).toHaveLength(11);
    expect(t.cache.bytes).toBeLessThanOrEqual(10);
  });

  it('a failed read throws and keeps nothing; an object gone (404) throws so the key is retried', async () => {
    const t = setup();
    t.put('a', '1', 'one');
    t.fail(new Error('GET: 500 Internal Server Error'));
    await expect(t.cache.get(t.meta('a', '1'))).rejects.toThrow('500');
    expect(t.cache.size).toBe(0);
    expect((await t.cache.get(t.meta('a', '1'))).data).toBe('one');
    t.objects.delete('ns/a');
    await expect(t.cache.get(t.meta('a', '2'))).rejects.toThrow(
      'configmap ns/a was deleted since it was seen; retrying once the watch shows it',
    );
    expect(t.cache.size).toBe(0);
    expect(t.results).toEqual(['error', 'ok', 'not_found']);
  });
});
