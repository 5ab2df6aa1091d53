/**
 * The private document and the platform file, read the way configcli reads them as root: the public
 * document, then `.platform.json` and `.priv_configmeta.json` merged over it with Python's dict.update
 * (shallow: a top-level key replaces the public one whole), the merge skipped entirely when the platform
 * file is not a JSON object. Then every query an app makes still answers, and Secret values appear.
 */
import { describe, expect, it } from '@jest/globals';
import {
  ANNOTATION_PRIVATE_CONTENT_MAC,
  planPrivateSecret,
  privateContentMac,
  foreignPrivateSecretMessage,
  privateSecretOwner,
  trimPrivateSecret,
} from '../src/plan/plan-private-secret.js';
import { PLATFORM_DOCUMENT, renderPrivateSecretEntry } from '../src/configmeta/render-private-configmeta.js';
import { configcliGet, configcliRootView as rootView, type Json } from './configcli-reader.js';
import { LAST_APPLIED, render, scenario, SECRET_PLAIN } from './scenario.js';
import { secret, TEST_DIGEST_KEY } from './fixtures.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('the private document merged as configcli merges it (root)', () => {
  it('keeps every connected cluster and ConfigMap of the public document and adds the Secret values', async () => {
    const r = await render(scenario());
    const pub = r.docs.get('kdss-nb-0')!;
    const root = rootView(pub, r.private!.platform, r.private!.configmeta);
    const nonRoot = JSON.parse(pub) as Json;
    for (const key of [
      'connections.clusters',
      'connections.clusters.training.nodegroups.1.roles',
      'connections.clusters.training.nodegroups.1.roles.RESTServer.fqdns',
      'connections.clusters.training.services',
      'connections.configmaps',
      'connections.configmaps.model',
      'node.id',
      'nodegroups.1.roles',
      'cluster.name',
    ])
      expect([key, configcliGet(root, key)]).toEqual([key, configcliGet(nonRoot, key)]);
    expect(configcliGet(root, 'connections.secrets.source-control.data.token')).toBe(b64(SECRET_PLAIN.token));
    expect(configcliGet(root, 'connections.secrets.source-control.data.username')).toBe(b64(SECRET_PLAIN.username));
    expect(configcliGet(nonRoot, 'connections.secrets.source-control.data.token')).toBe('');
  });

  it('carries only whole top-level sections, each also in the public document, clusters and ConfigMaps equal', async () => {
    const r = await render(scenario());
    const pub = JSON.parse(r.docs.get('kdss-nb-0')!) as Record<string, Record<string, unknown>>;
    const priv = JSON.parse(r.private!.configmeta) as Record<string, Record<string, unknown>>;
    expect(Object.keys(priv)).toEqual(['connections']);
    expect(Object.keys(priv.connections!)).toEqual(Object.keys(pub.connections!));
    expect(priv.connections!.clusters).toEqual(pub.connections!.clusters);
    expect(priv.connections!.configmaps).toEqual(pub.connections!.configmaps);
  });

  it('the platform file is a JSON object that adds no key (without one configcli skips the private file)', async () => {
    const r = await render(scenario());
    expect(JSON.parse(r.private!.platform)).toEqual({});
    expect(r.private!.platform).toBe(PLATFORM_DOCUMENT);
    // The reason it must be there and valid: with a broken one root sees no value at all.
    const broken = rootView(r.docs.get('kdss-nb-0')!, '', r.private!.configmeta);
    expect(configcliGet(broken, 'connections.secrets.source-control.data.token')).toBe('');
  });

  it('nothing private without a connected Secret: no private file', async () => {
    const s = scenario();
    s.notebook.spec.connections = { clusters: ['training'], configmaps: ['model-prediction'] };
    expect((await render(s)).private).toBeUndefined();
  });

  it('role secret_keys (plain values) reach root only: the private file then carries the whole nodegroups', async () => {
    const s = scenario();
    s.notebook.spec.connections = { clusters: ['training'] };
    s.notebook.spec.roles![0]!.secretKeys = [
      { name: 'admin', value: 'adm1n' },
      { name: 'sealed', encryptedValue: 'q83vEjRWeJA=' },
    ];
    const r = await render(s);
    const pub = r.docs.get('kdss-nb-0')!;
    expect(pub).not.toContain('adm1n');
    const priv = JSON.parse(r.private!.configmeta) as Record<string, Json>;
    expect(Object.keys(priv)).toEqual(['nodegroups']);
    const root = rootView(pub, r.private!.platform, r.private!.configmeta);
    expect(configcliGet(root, 'nodegroups.1.roles.controller.secret_keys.admin')).toBe('adm1n');
    // An encrypted one needs KubeDirector's master key: left out, as KubeDirector leaves out what it cannot decrypt.
    expect(configcliGet(root, 'nodegroups.1.roles.controller.secret_keys')).toEqual(['admin']);
    expect(configcliGet(root, 'nodegroups.1.roles.controller.node_ids')).toEqual(
      configcliGet(JSON.parse(pub) as Json, 'nodegroups.1.roles.controller.node_ids'),
    );
  });

  it("a Secret entry as KubeDirector's: name, labels and annotations as Go []byte, data as stored, no last-applied copy", () => {
    const s = secret(
      'db',
      'postgres',
      { password: 'pw' },
      {
        withValues: true,
        labels: { team: 'ml' },
        annotations: { note: 'hi', [LAST_APPLIED]: '{"stringData":{"password":"pw"}}' },
      },
    );
    expect(renderPrivateSecretEntry(s)).toEqual({
      annotations: { note: b64('hi') },
      data: { password: b64('pw') },
      labels: { 'kubedirector.hpe.com/secretType': b64('postgres'), team: b64('ml') },
      metadata: { name: b64('db') },
    });
    expect(renderPrivateSecretEntry({ ...s, data: undefined }).data).toBeNull();
  });
});

describe('planning the private Secret', () => {
  const cluster = { metadata: { name: 'nb', namespace: 'ml', uid: 'uid-nb' }, spec: { app: 'x' } };
  const files = { configmeta: '{"connections":{}}', platform: '{}', sections: { connections: '{}' } };
  const mac = privateContentMac(TEST_DIGEST_KEY, 'uid-nb', files);
  const cached = (over: Record<string, unknown> = {}) => trimPrivateSecret(apiObject(over));
  const apiObject = (over: Record<string, unknown>): { metadata: Record<string, unknown> } =>
    ({
      metadata: {
        name: 'kd-configmeta-private-nb',
        namespace: 'ml',
        uid: 'uid-s',
        resourceVersion: '9',
        labels: { 'kd-connections.hpe.com/private-configmeta-of': 'nb' },
        annotations: { [ANNOTATION_PRIVATE_CONTENT_MAC]: mac, other: 'kept out' },
        ownerReferences: [{ uid: 'uid-nb', controller: true, kind: 'KubeDirectorCluster', name: 'nb' }],
        ...over,
      },
      data: { 'priv_configmeta.json': 'c2VjcmV0' },
    }) as { metadata: Record<string, unknown> };

  it('the cache keeps the MAC annotation and owners, never the data', () => {
    const c = cached();
    expect(JSON.stringify(c)).not.toContain('c2VjcmV0');
    expect(c.metadata.annotations).toEqual({ [ANNOTATION_PRIVATE_CONTENT_MAC]: mac });
  });

  it('the MAC depends on the key, the owning cluster and the content', () => {
    expect(privateContentMac(Buffer.alloc(32, 1), 'uid-nb', files)).not.toBe(mac);
    expect(privateContentMac(TEST_DIGEST_KEY, 'uid-other', files)).not.toBe(mac);
    expect(privateContentMac(TEST_DIGEST_KEY, 'uid-nb', { ...files, configmeta: '{}' })).not.toBe(mac);
    expect(() => privateContentMac(Buffer.alloc(8), 'uid-nb', files)).toThrow('at least 32 bytes');
  });

  it('same MAC: nothing; other content: one patch opened by tests on uid and resourceVersion', () => {
    expect(planPrivateSecret(cluster, files, cached(), TEST_DIGEST_KEY)).toBeUndefined();
    const w = planPrivateSecret(
      cluster,
      { ...files, configmeta: '{"connections":{"x":1}}' },
      cached(),
      TEST_DIGEST_KEY,
    );
    expect(w?.kind).toBe('patch');
    if (w?.kind !== 'patch') return;
    expect(w.ops.slice(0, 2)).toEqual([
      { op: 'test', path: '/metadata/uid', value: 'uid-s' },
      { op: 'test', path: '/metadata/resourceVersion', value: '9' },
    ]);
    expect(w.ops[3]).toEqual({
      op: 'add',
      path: '/metadata/annotations/kd-connections.hpe.com~1content-mac',
      value: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });

  it('a data write by another field manager after the reconciler last wrote it: written again, naming who', () => {
    const entry = (manager: string, time: string, data = true) => ({
      manager,
      operation: 'Update',
      time,
      fieldsV1: data ? { 'f:data': { 'f:priv_configmeta.json': {} } } : { 'f:metadata': { 'f:labels': {} } },
    });
    const ours = entry('kd-connections-reconciler', '2026-12-06T10:00:00Z');
    // Someone's later data write; a later label edit and an earlier data write are not edits of the content.
    const edited = cached({ managedFields: [ours, entry('kubectl-edit', '2026-12-06T10:05:00Z')] });
    expect(edited.metadata.dataEditedBy).toEqual(['kubectl-edit']);
    expect(JSON.stringify(edited)).not.toContain('f:priv_configmeta.json');
    for (const other of [
      entry('kubectl-label', '2026-12-06T10:05:00Z', false),
      entry('kubectl-edit', '2026-12-06T09:00:00Z'),
    ])
      expect(cached({ managedFields: [ours, other] }).metadata.dataEditedBy).toBeUndefined();
    // Put back in the same second as the edit: repaired (no second write).
    expect(
      cached({ managedFields: [entry('kubectl-edit', '2026-12-06T10:00:00Z'), ours] }).metadata.dataEditedBy,
    ).toBeUndefined();
    // Same MAC (the annotation was left alone), but edited: one patch of the whole data, naming the editor.
    const w = planPrivateSecret(cluster, files, edited, TEST_DIGEST_KEY);
    expect(w?.kind === 'patch' && { editedBy: w.editedBy, data: w.ops[2]?.path }).toEqual({
      editedBy: ['kubectl-edit'],
      data: '/data',
    });
    expect(planPrivateSecret(cluster, files, cached({ managedFields: [ours] }), TEST_DIGEST_KEY)).toBeUndefined();
  });

  it('missing: created with owner, labels and MAC; not needed: deleted on its uid; an earlier owner: deleted', () => {
    const created = planPrivateSecret(cluster, files, undefined, TEST_DIGEST_KEY);
    expect(created?.kind === 'create' && created.body.metadata).toMatchObject({
      name: 'kd-configmeta-private-nb',
      labels: {
        'kd-connections.hpe.com/private-configmeta-of': 'nb',
        'app.kubernetes.io/managed-by': 'kd-connections',
      },
      annotations: { [ANNOTATION_PRIVATE_CONTENT_MAC]: mac },
      ownerReferences: [{ uid: 'uid-nb', controller: true, blockOwnerDeletion: false, kind: 'KubeDirectorCluster' }],
    });
    expect(planPrivateSecret(cluster, undefined, cached(), TEST_DIGEST_KEY)).toMatchObject({
      kind: 'delete',
      uid: 'uid-s',
      resourceVersion: '9',
    });
    expect(planPrivateSecret(cluster, undefined, undefined, TEST_DIGEST_KEY)).toBeUndefined();
    const earlier = cached({ ownerReferences: [{ uid: 'uid-old', controller: true, kind: 'KubeDirectorCluster' }] });
    expect(privateSecretOwner(earlier, cluster)).toEqual({ owner: 'earlier-cluster' });
    expect(planPrivateSecret(cluster, files, earlier, TEST_DIGEST_KEY)).toMatchObject({
      kind: 'delete',
      why: 'it belongs to an earlier cluster of the same name',
    });
  });

  it("someone else's Secret of that name is never patched or deleted, and says why it is not ours", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ labels: undefined }, 'it has no label kd-connections.hpe.com/private-configmeta-of=nb'],
      [
        { labels: { 'kd-connections.hpe.com/private-configmeta-of': 'other' } },
        'its label kd-connections.hpe.com/private-configmeta-of is "other", not "nb"',
      ],
      [{ ownerReferences: [] }, 'it is not controlled by a KubeDirectorCluster (no controller owner reference)'],
      [
        { ownerReferences: [{ uid: 'uid-nb', controller: false, kind: 'KubeDirectorCluster' }] },
        'it is not controlled by a KubeDirectorCluster (no controller owner reference)',
      ],
      [
        { ownerReferences: [{ uid: 'uid-d', controller: true, kind: 'Deployment' }] },
        'it is not controlled by a KubeDirectorCluster (no controller owner reference)',
      ],
    ];
    for (const [over, why] of cases) {
      const s = cached(over);
      expect(privateSecretOwner(s, cluster)).toEqual({ owner: 'foreign', why });
      // Not ours: no write whether the cluster needs a private Secret (other content) or not.
      expect(planPrivateSecret(cluster, { ...files, configmeta: '{"x":1}' }, s, TEST_DIGEST_KEY)).toBeUndefined();
      expect(planPrivateSecret(cluster, undefined, s, TEST_DIGEST_KEY)).toBeUndefined();
    }
    expect(privateSecretOwner(cached(), cluster)).toEqual({ owner: 'ours' });
    expect(foreignPrivateSecretMessage(cluster, 'it has no label x')).toBe(
      "Secret ml/kd-configmeta-private-nb is not this kdcluster's private configmeta Secret (it has no label x); " +
        'kd-connections never uses or changes it, and the member pods get configmeta without Secret values ' +
        'until it is deleted or renamed (then the reconciler creates its own)',
    );
  });
});
