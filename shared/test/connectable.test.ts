/** connectable_to matching: any-of entries, all-of fields, exact versions and semver ranges. */
import { describe, expect, it } from '@jest/globals';
import {
  describeAllowed,
  describeApp,
  describeEntry,
  entryMatches,
  isConnectable,
  parseVersionSpec,
  versionMatches,
} from '../src/domain/connectable.js';
import type { ConnectableToEntry, KDAppSpec } from '../src/domain/types.js';
import { app } from './fixtures.js';

const spark = (version: string): KDAppSpec => ({ category: 'streaming', distroID: 'bluedata/spark', version });

describe('versionMatches', () => {
  const cases: [spec: string, version: string | undefined, expected: boolean][] = [
    // exact versions
    ['2.4.5', '2.4.5', true],
    ['2.4.5', '2.4.6', false],
    ['2.4', '2.4.0', true],
    ['2.4.0', '2.4', true],
    ['2.4', '2.4.1', false],
    ['1.0', '1', true],
    ['7', '7.2.0', false],
    ['v1.3', '1.3', true],
    ['1.3', 'v1.3.0', true],
    ['2.4.5-beta', '2.4.5-beta', true],
    ['2.4.5-beta', '2.4.5', false],
    ['2.4.5', '2.4.5-beta', false],
    // four-part versions (KubeDirector catalog entries use them) are exact too
    ['5.1.0.0', '5.1.0.0', true],
    ['5.1.0.0', '5.1.0', true],
    ['5.1.0.0', '5.1.0.1', false],
    ['5.1.0', '5.1.0.1', false],
    ['2.4.5', undefined, false],
    // ranges
    ['>=2.4 <3', '2.4.0', true],
    ['>=2.4 <3', '2.4.7', true],
    ['>=2.4 <3', '2.9', true],
    ['>=2.4 <3', '2.3.9', false],
    ['>=2.4 <3', '3.0.0', false],
    ['>=2.4 <3', '3', false],
    ['>=2.4 <3', '3.0.0-rc1', false],
    ['^7', '7.0.0', true],
    ['^7', '7.9.1', true],
    ['^7', '8.0.0', false],
    ['^7', '6.9', false],
    ['2.x', '2.0', true],
    ['2.x', '2.11.3', true],
    ['2.x', '3.0', false],
    ['~1.2', '1.2.9', true],
    ['~1.2', '1.3.0', false],
    ['1.2 - 1.4 || >=2', '1.3', true],
    ['1.2 - 1.4 || >=2', '1.5', false],
    ['1.2 - 1.4 || >=2', '2.1', true],
    ['>=2.4 <3', undefined, false],
    ['>=2.4 <3', 'not-a-version', false],
    // an invalid spec matches nothing
    ['>=banana', '1.0', false],
    ['', '1.0', false],
  ];
  it.each(cases)('%j matches %j: %s', (spec, version, expected) => {
    expect(versionMatches(spec, version)).toBe(expected);
  });

  it('parses exact versions and ranges apart', () => {
    expect(parseVersionSpec('2.4.5')).toEqual({ kind: 'exact', value: '2.4.5' });
    expect(parseVersionSpec(' 1.0 ')).toEqual({ kind: 'exact', value: '1.0' });
    expect(parseVersionSpec('>=2.4 <3')).toEqual({ kind: 'range', range: '>=2.4.0 <3.0.0-0' });
    expect(parseVersionSpec('^7')?.kind).toBe('range');
    expect(parseVersionSpec('2.x')?.kind).toBe('range');
    expect(parseVersionSpec('>=banana')).toBeUndefined();
    expect(parseVersionSpec('   ')).toBeUndefined();
  });
});

describe('entryMatches: all fields of an entry must match', () => {
  const target = spark('2.4.7');
  const cases: [ConnectableToEntry, boolean][] = [
    [{ category: 'streaming' }, true],
    [{ category: 'training' }, false],
    [{ distroID: 'bluedata/spark' }, true],
    [{ distroID: 'bluedata/spark2' }, false],
    [{ version: '2.4.7' }, true],
    [{ category: 'streaming', distroID: 'bluedata/spark' }, true],
    [{ category: 'streaming', distroID: 'hpecp/kafka' }, false],
    [{ category: 'streaming', version: '>=2.4 <3' }, true],
    [{ category: 'streaming', version: '>=3' }, false],
    [{ category: 'streaming', distroID: 'bluedata/spark', version: '2.x' }, true],
    [{ category: 'training', distroID: 'bluedata/spark', version: '2.x' }, false],
    // category comparison is exact (no case folding, no prefix)
    [{ category: 'Streaming' }, false],
    [{ category: 'stream' }, false],
    // an empty entry matches nothing
    [{}, false],
  ];
  it.each(cases)('%j → %s', (entry, expected) => {
    expect(entryMatches(entry, target)).toBe(expected);
  });

  it('a field the target app lacks does not match', () => {
    expect(entryMatches({ category: 'streaming' }, { distroID: 'x' })).toBe(false);
    expect(entryMatches({ version: '*' }, { category: 'x' })).toBe(false);
  });
});

describe('isConnectable: any entry may allow', () => {
  const from = (connectable_to: ConnectableToEntry[] | undefined): KDAppSpec =>
    connectable_to === undefined ? { category: 'notebook' } : { category: 'notebook', connectable_to };

  it('absent: unrestricted (KubeDirector compatibility)', () => {
    expect(isConnectable(from(undefined), spark('9.9'))).toEqual({ allowed: true });
    expect(isConnectable({ connectable_to: null } as unknown as KDAppSpec, spark('1'))).toEqual({ allowed: true });
  });

  it('empty: no cluster is connectable', () => {
    expect(isConnectable(from([]), spark('2.4.7'))).toEqual({ allowed: false, reason: 'empty' });
  });

  it('allowed when any entry matches, refused when none does', () => {
    const rules = [{ category: 'training' }, { category: 'streaming', version: '>=2.4 <3' }];
    expect(isConnectable(from(rules), spark('2.4.7'))).toEqual({ allowed: true });
    expect(isConnectable(from(rules), { category: 'training' })).toEqual({ allowed: true });
    expect(isConnectable(from(rules), spark('3.1.2'))).toEqual({ allowed: false, reason: 'no-match' });
    expect(isConnectable(from(rules), { category: 'database', version: '2.5' })).toEqual({
      allowed: false,
      reason: 'no-match',
    });
  });

  it('is directional: the connecting app decides', () => {
    const notebook: KDAppSpec = { category: 'notebook', connectable_to: [{ category: 'streaming' }] };
    const streaming: KDAppSpec = { ...spark('2.4.7'), connectable_to: [] };
    expect(isConnectable(notebook, streaming).allowed).toBe(true);
    expect(isConnectable(streaming, notebook).allowed).toBe(false);
  });
});

describe('descriptions used in messages', () => {
  it('describes entries, apps and allowed sets', () => {
    expect(describeEntry({ version: '>=2.4 <3', category: 'training' })).toBe(
      '{category: "training", version: ">=2.4 <3"}',
    );
    expect(describeApp(app('spark', spark('2.4.5')))).toBe(
      'app "spark" (category "streaming", distroID "bluedata/spark", version "2.4.5")',
    );
    expect(describeApp(app('bare', {}))).toBe('app "bare" (category none, distroID none, version none)');
    expect(describeAllowed({})).toBe('any cluster (connectable_to is not set)');
    expect(describeAllowed({ connectable_to: [] })).toBe('no cluster connections (connectable_to is empty)');
    expect(describeAllowed({ connectable_to: [{ category: 'a' }, { distroID: 'x/y', version: '1' }] })).toBe(
      '{category: "a"}, {distroID: "x/y", version: "1"}',
    );
  });
});
