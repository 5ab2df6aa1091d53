/**
 * isConflict and isUnappliedPatch on answers kube-apiserver gave (captured by
 * test/integration/write-conflicts.test.ts into fixtures/apiserver-write-errors.json). The server
 * answers a failed `test` exactly as it answers a `replace` of a missing path, so the body alone marks a
 * patch as not applied; which of the two it was comes from jsonPatch's dry-run of the tests alone.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { isConflict, isUnappliedPatch, KubeApiError } from '../src/runtime/kube-client.js';

const CAPTURED = JSON.parse(
  readFileSync(new URL('./fixtures/apiserver-write-errors.json', import.meta.url), 'utf8'),
) as Record<string, { status: number; body: string }>;

const error = (name: string, patchFailure?: 'test-failed' | 'not-applicable') => {
  const c = CAPTURED[name]!;
  const s = JSON.parse(c.body) as { reason: string; message: string; details?: unknown };
  return new KubeApiError(c.status, s.reason, s.message, s.details, c.body, patchFailure);
};

describe('the bodies kube-apiserver sends', () => {
  it('a failed test and a patch that does not fit are the same unapplied-patch answer', () => {
    for (const name of [
      'testValueDiffers',
      'testPathMissing',
      'testResourceVersionDiffers',
      'replaceMissingPath',
      'removeMissingPath',
    ])
      expect([name, isUnappliedPatch(CAPTURED[name]!.status, CAPTURED[name]!.body)]).toEqual([name, true]);
    expect(CAPTURED.testValueDiffers!.body).toBe(CAPTURED.replaceMissingPath!.body);
  });

  it('a schema or validation rejection, and a 409, are not an unapplied patch', () => {
    for (const name of ['schemaRejection', 'invalidObject', 'alreadyExists', 'deletePreconditionUid'])
      expect([name, isUnappliedPatch(CAPTURED[name]!.status, CAPTURED[name]!.body)]).toEqual([name, false]);
  });
});

describe('isConflict', () => {
  it('is true for a 409: a create that found the object, a delete whose uid precondition failed', () => {
    expect(isConflict(error('alreadyExists'))).toBe(true);
    expect(isConflict(error('deletePreconditionUid'))).toBe(true);
    // client-node's ApiException carries the status as `code`.
    expect(isConflict({ code: 409, body: CAPTURED.alreadyExists!.body })).toBe(true);
  });

  it('is true for an unapplied patch whose test operations were found failing', () => {
    expect(isConflict(error('testValueDiffers', 'test-failed'))).toBe(true);
  });

  it('is false for every other 422: a patch that does not fit, a schema rejection, an invalid object', () => {
    expect(isConflict(error('replaceMissingPath', 'not-applicable'))).toBe(false);
    expect(isConflict(error('schemaRejection'))).toBe(false);
    expect(isConflict(error('invalidObject'))).toBe(false);
    // Not told which operation failed: not a conflict (the earlier rule took any such 422 for one).
    expect(isConflict(error('testValueDiffers'))).toBe(false);
    expect(isConflict({ code: 422, body: CAPTURED.testValueDiffers!.body })).toBe(false);
  });

  it('is false for errors without a status', () => {
    expect(isConflict(new Error('socket hang up'))).toBe(false);
    expect(isConflict(undefined)).toBe(false);
  });
});
