/** JSON Patch builders: the exact requests the reconciler sends, with `test` preconditions and `~1` escaping. */
import { describe, expect, it } from '@jest/globals';
import { isDeepStrictEqual } from 'node:util';
import { pointer, sectionPatch, setAnnotationsPatch, testIdentity } from '../src/primitives/json-patch.js';
import {
  ANNOTATION_CONFIGMETA,
  ANNOTATION_CONFIGMETA_GENERATOR,
  ANNOTATION_CONFIGMETA_HASH,
} from '../src/domain/types.js';

describe('setAnnotationsPatch', () => {
  const values = {
    [ANNOTATION_CONFIGMETA]: '{"version":"8"}',
    [ANNOTATION_CONFIGMETA_GENERATOR]: '4',
    [ANNOTATION_CONFIGMETA_HASH]: 'abc',
  };

  it('a pod that already has configmeta: guarded by the generator annotation, keys escaped with ~1', () => {
    const patch = setAnnotationsPatch(
      {
        uid: 'u1',
        resourceVersion: '10',
        annotations: {
          [ANNOTATION_CONFIGMETA]: '{}',
          [ANNOTATION_CONFIGMETA_GENERATOR]: '3',
          [ANNOTATION_CONFIGMETA_HASH]: 'abc',
        },
      },
      values,
      ANNOTATION_CONFIGMETA_GENERATOR,
    );
    expect(patch).toEqual([
      { op: 'test', path: '/metadata/uid', value: 'u1' },
      { op: 'test', path: '/metadata/annotations/kubedirector.hpe.com~1configmeta-generator', value: '3' },
      { op: 'add', path: '/metadata/annotations/kubedirector.hpe.com~1configmeta', value: '{"version":"8"}' },
      { op: 'add', path: '/metadata/annotations/kubedirector.hpe.com~1configmeta-generator', value: '4' },
    ]);
  });

  it('a pod with other annotations only: guarded by resourceVersion', () => {
    const patch = setAnnotationsPatch(
      { uid: 'u1', resourceVersion: '10', annotations: { a: 'b' } },
      { [ANNOTATION_CONFIGMETA_GENERATOR]: '1' },
      ANNOTATION_CONFIGMETA_GENERATOR,
    );
    expect(patch).toEqual([
      { op: 'test', path: '/metadata/uid', value: 'u1' },
      { op: 'test', path: '/metadata/resourceVersion', value: '10' },
      { op: 'add', path: '/metadata/annotations/kubedirector.hpe.com~1configmeta-generator', value: '1' },
    ]);
  });

  it('a pod without annotations: the whole map is added', () => {
    expect(setAnnotationsPatch({ resourceVersion: '10' }, { 'a/b~c': 'x' }, 'a/b~c')).toEqual([
      { op: 'test', path: '/metadata/resourceVersion', value: '10' },
      { op: 'add', path: '/metadata/annotations', value: { 'a/b~c': 'x' } },
    ]);
    expect(pointer('metadata', 'annotations', 'a/b~c')).toBe('/metadata/annotations/a~1b~0c');
  });
});

describe('sectionPatch and testIdentity', () => {
  it('no difference: no patch at all (no write)', () => {
    const status = { lastConfigMetaGenerator: 3, conditions: [{ type: 'A' }] };
    expect(
      sectionPatch(
        { uid: 'u', resourceVersion: '1' },
        'status',
        status,
        JSON.parse(JSON.stringify(status)),
        isDeepStrictEqual,
      ),
    ).toEqual([]);
  });

  it('no section yet: added whole, guarded', () => {
    expect(sectionPatch({ uid: 'u', resourceVersion: '1' }, 'status', undefined, { a: 1 }, isDeepStrictEqual)).toEqual([
      { op: 'test', path: '/metadata/uid', value: 'u' },
      { op: 'test', path: '/metadata/resourceVersion', value: '1' },
      { op: 'add', path: '/status', value: { a: 1 } },
    ]);
  });

  it('refuses to build a patch without a precondition (no uid, no resourceVersion)', () => {
    expect(() => sectionPatch({}, 'status', { a: 1 }, { a: 2 }, isDeepStrictEqual)).toThrow(
      'refusing to patch /status without a precondition: the object read has no uid or resourceVersion',
    );
    // Nothing to write needs no precondition.
    expect(sectionPatch({}, 'status', { a: 1 }, { a: 1 }, isDeepStrictEqual)).toEqual([]);
  });

  it('testIdentity pins what is known', () => {
    expect(testIdentity({})).toEqual([]);
    expect(testIdentity({ resourceVersion: '7' })).toEqual([
      { op: 'test', path: '/metadata/resourceVersion', value: '7' },
    ]);
  });
});
