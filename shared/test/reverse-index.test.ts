/** The reverse index: namespace-qualified, so a same-named object elsewhere wakes nobody. */
import { describe, expect, it } from '@jest/globals';
import { ReverseIndex } from '../src/plan/reverse-index.js';
import { objectKey, splitKey } from '../src/primitives/object-key.js';

describe('ReverseIndex', () => {
  it('maps each connected object to the clusters that list it', () => {
    const idx = new ReverseIndex();
    idx.set('ml/a', { clusters: ['b'], configmaps: ['cm1', 'cm2'], secrets: ['s1'] });
    idx.set('ml/c', { configmaps: ['cm1'] });
    expect(idx.dependentsOf('ConfigMap', 'ml/cm1')).toEqual(['ml/a', 'ml/c']);
    expect(idx.dependentsOf('ConfigMap', 'ml/cm2')).toEqual(['ml/a']);
    expect(idx.dependentsOf('Secret', 'ml/s1')).toEqual(['ml/a']);
    expect(idx.dependentsOf('Cluster', 'ml/b')).toEqual(['ml/a']);
    expect(idx.size).toBe(2);
  });

  it('is namespace-qualified: the same name in another namespace is not a dependent', () => {
    const idx = new ReverseIndex();
    idx.set('ml/a', { configmaps: ['cm1'], clusters: ['b'] });
    idx.set('other/x', { configmaps: ['cm1'] });
    expect(idx.dependentsOf('ConfigMap', 'other/cm1')).toEqual(['other/x']);
    expect(idx.dependentsOf('ConfigMap', 'ml/cm1')).toEqual(['ml/a']);
    expect(idx.dependentsOf('Cluster', 'other/b')).toEqual([]);
  });

  it('keeps kinds apart: a Secret and a ConfigMap of the same name are different objects', () => {
    const idx = new ReverseIndex();
    idx.set('ml/a', { configmaps: ['shared-name'] });
    idx.set('ml/b', { secrets: ['shared-name'] });
    expect(idx.dependentsOf('ConfigMap', 'ml/shared-name')).toEqual(['ml/a']);
    expect(idx.dependentsOf('Secret', 'ml/shared-name')).toEqual(['ml/b']);
    expect(idx.dependentsOf('Cluster', 'ml/shared-name')).toEqual([]);
  });

  it('set replaces what a cluster had; delete forgets it', () => {
    const idx = new ReverseIndex();
    idx.set('ml/a', { configmaps: ['cm1', 'cm2'] });
    idx.set('ml/a', { configmaps: ['cm2', 'cm3', 'cm3'] });
    expect(idx.dependentsOf('ConfigMap', 'ml/cm1')).toEqual([]);
    expect(idx.dependentsOf('ConfigMap', 'ml/cm2')).toEqual(['ml/a']);
    expect(idx.dependentsOf('ConfigMap', 'ml/cm3')).toEqual(['ml/a']);
    idx.delete('ml/a');
    expect(idx.dependentsOf('ConfigMap', 'ml/cm2')).toEqual([]);
    expect(idx.size).toBe(0);
    idx.delete('ml/never-seen');
    expect(idx.size).toBe(0);
  });

  it('set and delete return the objects no cluster connects to any more', () => {
    const idx = new ReverseIndex();
    expect(idx.set('ml/a', { configmaps: ['cm1', 'cm2'], secrets: ['s1'] })).toEqual([]);
    expect(idx.set('ml/b', { configmaps: ['cm1'] })).toEqual([]);
    expect(idx.set('ml/a', { configmaps: ['cm2'] })).toEqual([{ kind: 'Secret', key: 'ml/s1' }]);
    expect(idx.has('ConfigMap', 'ml/cm1')).toBe(true);
    expect(idx.has('Secret', 'ml/s1')).toBe(false);
    expect(idx.delete('ml/a')).toEqual([{ kind: 'ConfigMap', key: 'ml/cm2' }]);
    expect(idx.delete('ml/b')).toEqual([{ kind: 'ConfigMap', key: 'ml/cm1' }]);
    expect(idx.has('ConfigMap', 'ml/cm1')).toBe(false);
    expect(idx.delete('ml/b')).toEqual([]);
  });

  it('a cluster without connections takes no room', () => {
    const idx = new ReverseIndex();
    idx.set('ml/a', undefined);
    idx.set('ml/b', { clusters: [], configmaps: [] });
    expect(idx.size).toBe(0);
  });

  it('keys split back into namespace and name', () => {
    expect(objectKey('ml', 'a.b')).toBe('ml/a.b');
    expect(splitKey('ml/a.b')).toEqual({ namespace: 'ml', name: 'a.b' });
  });
});
