/**
 * Of a Secret, only its name, its type label and its keys reach configmeta (which the pod's annotation
 * shows to anyone who can read pods), and the caches keep nothing of it they do not need: allow-lists,
 * so an annotation or label that quotes a value never leaks.
 */
import { describe, expect, it } from '@jest/globals';
import { renderConnections, renderSecretEntry } from '../src/configmeta/render-configmeta.js';
import { LAST_APPLIED_ANNOTATION, metaOnly, trimSecret } from '../src/configmeta/trim-object.js';
import { LABEL_SECRET_TYPE } from '../src/domain/types.js';
import { TEST_DIGEST_KEY, secret } from './fixtures.js';

const VALUE = 'hunter2';
const B64 = Buffer.from(VALUE).toString('base64');
const annotations = {
  [LAST_APPLIED_ANNOTATION]: JSON.stringify({ kind: 'Secret', stringData: { password: VALUE } }),
  'backup.example.com/copy': `password=${VALUE}`,
};
const labels = { 'example.com/hint': VALUE, team: 'ml' };

/** A Secret as the API server sends it. */
const apiSecret = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: {
    name: 'db',
    namespace: 'ml',
    uid: 'u-db',
    resourceVersion: '7',
    labels: { ...labels, [LABEL_SECRET_TYPE]: 'postgres' },
    annotations,
    managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:data': { 'f:password': {} } } }],
    finalizers: ['example.com/keep'],
    ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: 'u-o' }],
  },
  type: 'Opaque',
  data: { password: B64, user: Buffer.from('robot').toString('base64') },
};

describe('configmeta shows a Secret as name, type label and keys', () => {
  const s = secret('db', 'postgres', { password: VALUE, user: 'robot' }, { labels, annotations });

  it('drops every annotation and every label but the type label', () => {
    // Name and label values are base64, as KubeDirector encodes them (Go []byte).
    expect(renderSecretEntry(s)).toEqual({
      metadata: { name: Buffer.from('db').toString('base64') },
      labels: { [LABEL_SECRET_TYPE]: Buffer.from('postgres').toString('base64') },
      annotations: {},
      data: { password: '', user: '' },
      redacted: true,
    });
  });

  it('nothing of the value appears anywhere in the rendered connections', () => {
    const text = JSON.stringify(renderConnections({ clusters: [], configmaps: [], secrets: [s] }));
    expect(text).not.toContain(VALUE);
    expect(text).not.toContain(B64);
  });
});

describe("the reconciler's Secret cache", () => {
  it('keeps what the private document renders and the MAC; no managedFields, last-applied copy, owners or finalizers', () => {
    const kept = trimSecret(apiSecret, { key: TEST_DIGEST_KEY });
    expect(kept.metadata).toEqual({
      name: 'db',
      namespace: 'ml',
      uid: 'u-db',
      resourceVersion: '7',
      labels: apiSecret.metadata.labels,
      annotations: { 'backup.example.com/copy': `password=${VALUE}` },
    });
    expect(Object.keys(kept).sort()).toEqual(['data', 'dataMac', 'keys', 'metadata']);
    expect(kept.keys).toEqual(['password', 'user']);
    expect(kept.data).toEqual(apiSecret.data);
    const text = JSON.stringify(kept);
    expect(text).not.toContain('stringData');
    expect(text).not.toContain('managedFields');
    expect(text).not.toContain('example.com/keep');
  });

  it('a Secret without data keeps none (rendered as null, as KubeDirector does)', () => {
    const { data: _data, ...empty } = apiSecret;
    const kept = trimSecret(empty, { key: TEST_DIGEST_KEY });
    expect(kept).not.toHaveProperty('data');
    expect(kept.keys).toEqual([]);
  });
});

describe("admission's Secret cache", () => {
  it('keeps identity and labels only', () => {
    expect(metaOnly(apiSecret)).toEqual({
      metadata: { name: 'db', namespace: 'ml', uid: 'u-db', resourceVersion: '7', labels: apiSecret.metadata.labels },
    });
  });
});
