import { describe, expect, it } from '@jest/globals';
import { isDeepStrictEqual } from 'node:util';
import { jsonEqual } from '../src/primitives/json-equal.js';

describe('jsonEqual', () => {
  // Pairs of JSON values; for every one jsonEqual must agree with util.isDeepStrictEqual, which it replaces.
  const values: unknown[] = [
    null,
    0,
    1,
    -0.5,
    '',
    '1',
    true,
    false,
    [],
    {},
    [1, 2],
    [2, 1],
    [1, [2, 3]],
    [1, [2, 4]],
    { a: 1 },
    { a: '1' },
    { a: 1, b: 2 },
    { b: 2, a: 1 },
    { a: 1, b: undefined },
    { a: 1, c: undefined },
    { a: { b: [1, { c: null }] } },
    { a: { b: [1, { c: false }] } },
    { 0: 'x' },
    ['x'],
    { app: 'nb', connections: { clusters: ['a', 'b'], configmaps: ['m'] }, configMetaGenerator: 3 },
    { connections: { configmaps: ['m'], clusters: ['a', 'b'] }, configMetaGenerator: 3, app: 'nb' },
    { app: 'nb', connections: { clusters: ['b', 'a'], configmaps: ['m'] }, configMetaGenerator: 3 },
    { app: 'nb', connections: { clusters: ['a', 'b'], configmaps: ['m'] }, configMetaGenerator: 4 },
  ];

  it('agrees with util.isDeepStrictEqual on every pair of JSON values', () => {
    let equalPairs = 0;
    for (const a of values)
      for (const b of values) {
        const want = isDeepStrictEqual(a, b);
        if (want) equalPairs++;
        expect([a, b, jsonEqual(a, b)]).toEqual([a, b, want]);
        // Parsed copies (fresh objects) compare the same way.
        expect(jsonEqual(JSON.parse(JSON.stringify(a ?? null)), JSON.parse(JSON.stringify(b ?? null)))).toBe(
          isDeepStrictEqual(JSON.parse(JSON.stringify(a ?? null)), JSON.parse(JSON.stringify(b ?? null))),
        );
      }
    // Not only the diagonal: key order does not matter.
    expect(equalPairs).toBeGreaterThan(values.length);
  });
});
