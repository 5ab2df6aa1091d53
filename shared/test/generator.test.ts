/** The mutating webhook's generator decision and the connection-set diff it is based on. */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { connectionSets, diffConnections, hasConnections } from '../src/domain/connection-sets.js';
import { decideGenerator } from '../src/domain/generator.js';
import type { Connections } from '../src/domain/types.js';
import { cluster, seeded, shuffled } from './fixtures.js';

const c = (connections?: Connections, generator?: number, roles = [{ id: 'controller', members: 1 }]) =>
  cluster('nb', 'jupyter-notebook', { ...(connections ? { connections } : {}), generator, roles });

const add = (value: number) => [{ op: 'add', path: '/spec/configMetaGenerator', value }];

describe('decideGenerator: CREATE', () => {
  const cases: [string, Connections | undefined, number | undefined, number | undefined, unknown[]][] = [
    ['no connections, no generator: nothing', undefined, undefined, undefined, []],
    ['empty connection lists count as none', { clusters: [], configmaps: [], secrets: [] }, undefined, undefined, []],
    ['no connections, a generator given: kept as is', undefined, 3, 3, []],
    ['connections, no generator: 1', { configmaps: ['cm1'] }, undefined, 1, add(1)],
    ['connections and a generator: incoming + 1', { clusters: ['b'] }, 4, 5, add(5)],
    ['connections, generator 0: 1', { secrets: ['s'] }, 0, 1, add(1)],
  ];
  it.each(cases)('%s', (_name, connections, incoming, value, patch) => {
    const d = decideGenerator('CREATE', c(connections, incoming));
    expect(d.value).toBe(value);
    expect(d.patch).toEqual(patch);
  });
});

describe('decideGenerator: UPDATE (base = old value)', () => {
  const cm = { configmaps: ['cm1'] };
  const cases: [
    string,
    Connections | undefined,
    number | undefined,
    Connections | undefined,
    number | undefined,
    number | undefined,
    unknown[],
  ][] = [
    // [name, old connections, old generator, new connections, incoming generator, expected value, expected patch]
    ['re-apply of an unchanged manifest without the field keeps the stored value', cm, 4, cm, undefined, 4, add(4)],
    ['unchanged, the stored value sent back: no patch', cm, 4, cm, 4, 4, []],
    ['unchanged, never had a generator: nothing', undefined, undefined, undefined, undefined, undefined, []],
    ['unchanged, a raised value (forced refresh) is kept', cm, 4, cm, 7, 7, []],
    ['unchanged, a lowered value is left for validation to refuse', cm, 4, cm, 2, 2, []],
    [
      'reordered lists are the same sets',
      { configmaps: ['a', 'b'] },
      4,
      { configmaps: ['b', 'a'] },
      undefined,
      4,
      add(4),
    ],
    ['repeated entries are the same sets', { configmaps: ['a', 'b'] }, 4, { configmaps: ['a', 'b', 'a'] }, 4, 4, []],
    ['a cluster added, field absent: base + 1', cm, 4, { ...cm, clusters: ['b'] }, undefined, 5, add(5)],
    ['a cluster added, old value sent back: base + 1', cm, 4, { ...cm, clusters: ['b'] }, 4, 5, add(5)],
    ['a cluster added, a higher value sent: kept', cm, 4, { ...cm, clusters: ['b'] }, 9, 9, []],
    ['a cluster added, a lower value sent: base + 1', cm, 4, { ...cm, clusters: ['b'] }, 1, 5, add(5)],
    ['a ConfigMap removed: base + 1', { configmaps: ['cm1', 'cm2'] }, 4, cm, undefined, 5, add(5)],
    ['all connections removed: base + 1', cm, 4, undefined, undefined, 5, add(5)],
    ['a Secret swapped for another: base + 1', { secrets: ['s1'] }, 2, { secrets: ['s2'] }, undefined, 3, add(3)],
    ['first connection on a cluster that never had a generator: 1', undefined, undefined, cm, undefined, 1, add(1)],
    [
      'moved between lists (same name, other kind) is a change',
      { configmaps: ['x'] },
      1,
      { secrets: ['x'] },
      undefined,
      2,
      add(2),
    ],
  ];
  it.each(cases)('%s', (_name, oldConns, oldGen, newConns, incoming, value, patch) => {
    const d = decideGenerator('UPDATE', c(newConns, incoming), c(oldConns, oldGen));
    expect(d.value).toBe(value);
    expect(d.patch).toEqual(patch);
  });

  it('only a roles change: no patch', () => {
    const d = decideGenerator(
      'UPDATE',
      c({ clusters: ['b'] }, 3, [{ id: 'controller', members: 3 }]),
      c({ clusters: ['b'] }, 3, [{ id: 'controller', members: 1 }]),
    );
    expect(d).toMatchObject({ value: 3, patch: [] });
  });

  it('an UPDATE without an old object is decided like a CREATE', () => {
    expect(decideGenerator('UPDATE', c({ clusters: ['b'] }, 2)).value).toBe(3);
  });
});

describe('decideGenerator does not depend on list order or repeats', () => {
  const names = fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e.f', 'g-h'), { maxLength: 5 });
  const conns = fc.record({ clusters: names, configmaps: names, secrets: names });
  const gen = fc.option(fc.nat({ max: 1000 }), { nil: undefined });

  it('same value and patch for any permutation (with repeats) of the lists', () => {
    fc.assert(
      fc.property(conns, conns, gen, gen, fc.boolean(), fc.integer(), (oldC, newC, oldG, newG, isCreate, seed) => {
        const random = seeded(seed);
        const permute = (x: Connections): Connections => ({
          clusters: shuffled([...x.clusters!, ...x.clusters!.slice(0, 1)], random),
          configmaps: shuffled(x.configmaps!, random),
          secrets: shuffled([...x.secrets!, ...x.secrets!], random),
        });
        const op = isCreate ? 'CREATE' : 'UPDATE';
        const a = decideGenerator(op, c(newC, newG), isCreate ? undefined : c(oldC, oldG));
        const b = decideGenerator(op, c(permute(newC), newG), isCreate ? undefined : c(permute(oldC), oldG));
        expect(b.value).toBe(a.value);
        expect(b.patch).toEqual(a.patch);
      }),
    );
  });

  it('never lowers the stored value and bumps whenever the sets change', () => {
    fc.assert(
      fc.property(conns, conns, fc.nat({ max: 1000 }), gen, (oldC, newC, oldG, newG) => {
        const d = decideGenerator('UPDATE', c(newC, newG), c(oldC, oldG));
        const changed = diffConnections(oldC, newC).changed;
        if (changed) expect(d.value).toBeGreaterThan(oldG);
        else expect(d.value).toBe(newG ?? oldG);
        // No patch exactly when the request already carries the decided value.
        expect(d.patch.length === 0).toBe(d.value === newG);
      }),
    );
  });
});

describe('connection sets', () => {
  it('are sets: order and repeats carry no meaning, non-strings are ignored', () => {
    const s = connectionSets({ clusters: ['b', 'a', 'b'], configmaps: [3 as unknown as string, 'x'] });
    expect([...s.clusters]).toEqual(['b', 'a']);
    expect([...s.configmaps]).toEqual(['x']);
    expect([...s.secrets]).toEqual([]);
    expect(connectionSets(undefined).clusters.size).toBe(0);
  });

  it('malformed lists (not arrays) count as empty instead of throwing', () => {
    // A mutating webhook sees the object before the API server checks it against the schema.
    const malformed = { clusters: 'abc', configmaps: { a: 1 }, secrets: 5 } as unknown as Connections;
    expect(() => connectionSets(malformed)).not.toThrow();
    expect(hasConnections(malformed)).toBe(false);
    const d = decideGenerator('CREATE', c(malformed, 2));
    expect(d).toMatchObject({ value: 2, patch: [] });
    expect(decideGenerator('UPDATE', c(malformed, 2), c({ clusters: ['a'] }, 2)).value).toBe(3);
  });

  it('hasConnections is true only when some list is non-empty', () => {
    expect(hasConnections(undefined)).toBe(false);
    expect(hasConnections(null)).toBe(false);
    expect(hasConnections({ clusters: [], secrets: [] })).toBe(false);
    expect(hasConnections({ secrets: ['s'] })).toBe(true);
  });

  it('diff lists what was added and removed per list, sorted', () => {
    const d = diffConnections(
      { clusters: ['b', 'a'], configmaps: ['x'] },
      { clusters: ['c', 'a', 'd'], secrets: ['s'] },
    );
    expect(d).toEqual({
      added: { clusters: ['c', 'd'], configmaps: [], secrets: ['s'] },
      removed: { clusters: ['b'], configmaps: ['x'], secrets: [] },
      changed: true,
    });
    expect(diffConnections({ clusters: ['a', 'b'] }, { clusters: ['b', 'a', 'a'], configmaps: [] }).changed).toBe(
      false,
    );
  });
});

describe('decideGenerator refuses a value that is not a generator', () => {
  const withGenerator = (v: unknown) => {
    const x = c({ clusters: ['training'] });
    (x.spec as Record<string, unknown>).configMetaGenerator = v;
    return x;
  };

  it('the string "5" is refused with the field path, never replaced by a patch', () => {
    for (const op of ['CREATE', 'UPDATE'] as const) {
      const d = decideGenerator(op, withGenerator('5'), op === 'UPDATE' ? c({}, 4) : undefined);
      expect(d.patch).toEqual([]);
      expect(d.error).toEqual({
        field: 'spec.configMetaGenerator',
        message:
          'must be a whole number (0 or more), not the string "5"; leave it out of manifests and the webhook sets it',
      });
    }
  });

  it('so are negative and fractional numbers; whole numbers and absence are fine', () => {
    expect(decideGenerator('CREATE', withGenerator(-1)).error?.message).toContain('not -1');
    expect(decideGenerator('CREATE', withGenerator(1.5)).error?.message).toContain('not 1.5');
    expect(decideGenerator('CREATE', withGenerator(3)).error).toBeUndefined();
    expect(decideGenerator('CREATE', withGenerator(undefined)).error).toBeUndefined();
  });
});
