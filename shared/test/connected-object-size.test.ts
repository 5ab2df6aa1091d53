/**
 * What of a labelled ConfigMap or Secret the reconciler keeps: the metadata-only watch keeps identity and
 * the type label (nothing a tenant can inflate), a connected object what its entry renders, and an object
 * too big to ever be delivered only a stub that says how big it is.
 */
import { describe, expect, it } from '@jest/globals';
import {
  CONNECTED_OBJECT_LIMITS,
  configMapEntryBytes,
  keepConfigMap,
  keepSecret,
  tooLargeToDeliver,
} from '../src/configmeta/connected-object-size.js';
import { renderConfigMapEntry } from '../src/configmeta/render-configmeta.js';
import { LAST_APPLIED_ANNOTATION, typeLabelMeta } from '../src/configmeta/trim-object.js';
import { LABEL_CM_TYPE, LABEL_SECRET_TYPE } from '../src/domain/types.js';

const KEY = new Uint8Array(32).fill(7);
const meta = (labels: Record<string, string>, annotations: Record<string, string> = {}) => ({
  name: 'x',
  namespace: 'ns',
  uid: 'u1',
  resourceVersion: '9',
  labels,
  annotations,
  managedFields: [{ manager: 'kubectl' }],
});

describe('typeLabelMeta (the metadata-only watch)', () => {
  it('keeps identity and the type label only', () => {
    const big = 'z'.repeat(200_000);
    const o = {
      metadata: { ...meta({ [LABEL_CM_TYPE]: 'model', other: 'x' }, { note: big }), deletionTimestamp: 't' },
    };
    expect(typeLabelMeta(o, LABEL_CM_TYPE)).toEqual({
      metadata: {
        name: 'x',
        namespace: 'ns',
        uid: 'u1',
        resourceVersion: '9',
        labels: { [LABEL_CM_TYPE]: 'model' },
        deletionTimestamp: 't',
      },
    });
    expect(typeLabelMeta({ metadata: meta({ other: 'x' }) }, LABEL_CM_TYPE).metadata.labels).toBeUndefined();
  });
});

describe('keepConfigMap / keepSecret (a connected object)', () => {
  it('keeps what the entry renders (no binaryData, no last-applied copy) and counts its bytes', () => {
    const o = {
      metadata: meta({ [LABEL_CM_TYPE]: 'model', team: 'a' }, { note: 'n', [LAST_APPLIED_ANNOTATION]: '{}' }),
      data: { k: 'v' },
      binaryData: { b: 'AAAA' },
    };
    const kept = keepConfigMap(o);
    expect(kept.value).toEqual({
      metadata: {
        name: 'x',
        namespace: 'ns',
        uid: 'u1',
        resourceVersion: '9',
        labels: { [LABEL_CM_TYPE]: 'model', team: 'a' },
        annotations: { note: 'n' },
      },
      data: { k: 'v' },
    });
    expect(kept.bytes).toBe(Buffer.byteLength(JSON.stringify(renderConfigMapEntry(kept.value))));
    expect(kept.bytes).toBe(configMapEntryBytes(kept.value));
  });

  it('a ConfigMap whose entry cannot fit in a pod annotation becomes a stub that says how big it is', () => {
    const limit = CONNECTED_OBJECT_LIMITS.ConfigMap;
    const data = (n: number) => ({ metadata: meta({ [LABEL_CM_TYPE]: 'model' }), data: { k: 'v'.repeat(n) } });
    const fits = keepConfigMap(data(limit - 200));
    expect(fits.value.tooLargeBytes).toBeUndefined();
    expect(fits.bytes).toBeLessThanOrEqual(limit);
    const over = keepConfigMap(data(limit));
    expect(over.value).toEqual({
      metadata: { name: 'x', namespace: 'ns', uid: 'u1', resourceVersion: '9', labels: { [LABEL_CM_TYPE]: 'model' } },
      tooLargeBytes: expect.any(Number),
    });
    expect(over.value.tooLargeBytes).toBeGreaterThan(limit);
    expect(over.bytes).toBeLessThan(1024);
  });

  it('a Secret keeps its values and their MAC; one too big for the private Secret keeps neither', () => {
    const b64 = (n: number) => Buffer.alloc(n, 1).toString('base64');
    const secret = (data: Record<string, string>) => ({ metadata: meta({ [LABEL_SECRET_TYPE]: 'db' }), data });
    const small = keepSecret(secret({ p: b64(10) }), { key: KEY });
    expect(small.value).toMatchObject({
      keys: ['p'],
      data: { p: b64(10) },
      dataMac: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const big = keepSecret(secret({ p: b64(900 * 1024) }), { key: KEY });
    expect(big.value).toEqual({
      metadata: { name: 'x', namespace: 'ns', uid: 'u1', resourceVersion: '9', labels: { [LABEL_SECRET_TYPE]: 'db' } },
      keys: [],
      tooLargeBytes: expect.any(Number),
    });
    expect(big.value.tooLargeBytes).toBeGreaterThan(CONNECTED_OBJECT_LIMITS.Secret);
  });

  it('says what is too big, how big, and what limits it', () => {
    expect(tooLargeToDeliver('ConfigMap', 'cfg', 300_000)).toBe(
      'configmap "cfg" is 300000 bytes in configmeta, more than can ever be delivered (configmeta is a pod annotation, and annotations are limited to 262144 bytes); it is left out until it is smaller',
    );
    expect(tooLargeToDeliver('Secret', 's', 2_000_000)).toContain(
      'the private document is a Secret, and Secrets are limited to 1048576 bytes',
    );
  });
});
