/**
 * Steps 1 and 2 of a reconcile: every connection gets a state, forbidden and unlabeled objects
 * are left out (fail closed), and the hash covers what pods see — and nothing else.
 */
import { describe, expect, it } from '@jest/globals';
import { contentHash } from '../src/primitives/hash.js';
import { tooLargeToDeliver } from '../src/configmeta/connected-object-size.js';
import { resolveConnections, type ResolveOptions } from '../src/plan/resolve-connections.js';
import type { Connections, KDCluster } from '../src/domain/types.js';
import { MemoryWorld, NS, SYSTEM_NS, app, cluster, configMap, exampleApps, pod, secret } from './fixtures.js';

const OPTS: ResolveOptions = { systemNamespace: SYSTEM_NS };
const notebookApp = exampleApps().find((a) => a.metadata.name === 'jupyter-notebook')!;
const OWN = { app: notebookApp, namespace: NS };

function world(): MemoryWorld {
  return new MemoryWorld({
    apps: [...exampleApps(), app('spark-streaming', { category: 'streaming', version: '2.4.7' }, SYSTEM_NS)],
    clusters: [
      cluster('training', 'training-engine', {
        roles: [{ id: 'RESTServer', members: 2 }],
        connections: { configmaps: ['cm'] },
      }),
      cluster('spark-sys', 'spark-streaming', { appCatalog: 'system' }),
      cluster('pg-main', 'postgres'),
      cluster('orphan', 'no-such-app'),
    ],
    configMaps: [configMap('cm', 'model', { k: 'v' }), configMap('plain', undefined, { k: 'v' })],
    secrets: [secret('s', 'db', { password: 'hunter2' }), secret('plain-s', undefined, { k: 'v' })],
    pods: [pod('training-0', 'training', 'RESTServer')],
  });
}

const nb = (connections: Connections): KDCluster => cluster('nb', 'jupyter-notebook', { connections });

describe('resolveConnections: statuses', () => {
  it('gives every connection a state and a message, sorted by kind then name', async () => {
    const r = await resolveConnections(
      nb({
        clusters: ['training', 'pg-main', 'ghost', 'orphan', 'nb', 'spark-sys'],
        configmaps: ['plain', 'cm', 'gone'],
        secrets: ['s', 'plain-s', 'nope'],
      }),
      OWN,
      world(),
      OPTS,
    );
    const hash16 = expect.stringMatching(/^[0-9a-f]{16}$/);
    expect(r.statuses).toEqual([
      { kind: 'Cluster', name: 'ghost', state: 'Missing', message: 'cluster "ghost" not found in namespace "ml"' },
      { kind: 'Cluster', name: 'nb', state: 'NotConnectable', message: 'a cluster cannot connect to itself ("nb")' },
      {
        kind: 'Cluster',
        name: 'orphan',
        state: 'NotConnectable',
        message:
          'cluster "orphan" uses app "no-such-app", which was not found in namespace "ml" or in the system catalog (namespace "kd-system"); it cannot be checked against connectable_to of app "jupyter-notebook"',
      },
      {
        kind: 'Cluster',
        name: 'pg-main',
        state: 'NotConnectable',
        message:
          'cluster "pg-main" uses app "postgres" (category "database", distroID "bitnami/postgresql", version "12.4.0"): connectable_to of app "jupyter-notebook" does not allow it; allowed: {category: "training"}, {category: "streaming", version: ">=2.4 <3"}',
      },
      // A system-catalog app (KubeDirector silently skipped these).
      { kind: 'Cluster', name: 'spark-sys', state: 'Connected', contentHash: hash16 },
      { kind: 'Cluster', name: 'training', state: 'Connected', contentHash: hash16 },
      { kind: 'ConfigMap', name: 'cm', state: 'Connected', contentHash: hash16 },
      { kind: 'ConfigMap', name: 'gone', state: 'Missing', message: 'configmap "gone" not found in namespace "ml"' },
      {
        kind: 'ConfigMap',
        name: 'plain',
        state: 'Unlabeled',
        message:
          'configmap "plain" lacks label kubedirector.hpe.com/cmType; add it (its value groups the ConfigMap in configmeta) to make it connectable',
      },
      { kind: 'Secret', name: 'nope', state: 'Missing', message: 'secret "nope" not found in namespace "ml"' },
      {
        kind: 'Secret',
        name: 'plain-s',
        state: 'Unlabeled',
        message:
          'secret "plain-s" lacks label kubedirector.hpe.com/secretType; add it (its value groups the Secret in configmeta) to make it connectable',
      },
      // No per-Secret digest in status: anyone who can view the cluster could test guesses against it.
      { kind: 'Secret', name: 's', state: 'Connected' },
    ]);
    // Only Connected objects make it into configmeta.
    expect(r.connected.clusters.map((c) => c.name)).toEqual(['spark-sys', 'training']);
    expect(r.connected.configmaps.map((c) => c.metadata.name)).toEqual(['cm']);
    expect(r.connected.secrets.map((s) => s.metadata.name)).toEqual(['s']);
    expect(r.connected.clusters[1]!.members.map((m) => m.pod)).toEqual(['training-0']);
  });

  it("without the cluster's own app no cluster is connectable; ConfigMaps still are", async () => {
    const r = await resolveConnections(nb({ clusters: ['training'], configmaps: ['cm'] }), undefined, world(), OPTS);
    expect(r.statuses.map((s) => [s.name, s.state, s.message])).toEqual([
      [
        'training',
        'NotConnectable',
        'this cluster\'s app "jupyter-notebook" was not found in namespace "ml" or in the system catalog (namespace "kd-system"), so connectable_to cannot be checked',
      ],
      ['cm', 'Connected', undefined],
    ]);
  });

  it('secret connections disabled: NotConnectable, and the Secret is never read', async () => {
    const w = world();
    const r = await resolveConnections(nb({ secrets: ['s'] }), OWN, w, { ...OPTS, secretConnections: false });
    expect(r.statuses).toEqual([
      {
        kind: 'Secret',
        name: 's',
        state: 'NotConnectable',
        message: 'secret connections are disabled in this installation (chart value secretConnections.enabled)',
      },
    ]);
    expect(w.reads.filter((x) => x.startsWith('Secret'))).toEqual([]);
  });
});

describe('resolveConnections: objects too big to deliver', () => {
  it('are NotConnectable with the reason, left out of what pods see, and the rest is kept', async () => {
    const w = world();
    w.configMaps.set(`${NS}/huge`, { ...configMap('huge', 'model', undefined), tooLargeBytes: 300_000 });
    w.secrets.set(`${NS}/huge-s`, { ...secret('huge-s', 'db', {}), keys: [], tooLargeBytes: 2_000_000 });
    const r = await resolveConnections(nb({ configmaps: ['cm', 'huge'], secrets: ['huge-s'] }), OWN, w, OPTS);
    expect(r.statuses.filter((s) => s.state !== 'Connected')).toEqual([
      {
        kind: 'ConfigMap',
        name: 'huge',
        state: 'NotConnectable',
        message: tooLargeToDeliver('ConfigMap', 'huge', 300_000),
      },
      {
        kind: 'Secret',
        name: 'huge-s',
        state: 'NotConnectable',
        message: tooLargeToDeliver('Secret', 'huge-s', 2_000_000),
      },
    ]);
    expect(r.connected.configmaps.map((c) => c.metadata.name)).toEqual(['cm']);
    expect(r.connected.secrets).toEqual([]);
    const without = await resolveConnections(nb({ configmaps: ['cm'] }), OWN, w, OPTS);
    expect(r.hash).toBe(without.hash);
  });
});

describe('resolveConnections: the hash covers what pods see', () => {
  const all: Connections = { clusters: ['training'], configmaps: ['cm', 'plain'], secrets: ['s'] };
  const hashIn = async (w: MemoryWorld, c: Connections = all) => (await resolveConnections(nb(c), OWN, w, OPTS)).hash;

  it('no connections: the hash of nothing', async () => {
    expect(await hashIn(world(), {})).toBe(contentHash({}));
  });

  it('changes when ConfigMap data changes, or a connected cluster gains a member', async () => {
    const w = world();
    const h0 = await hashIn(w);
    w.addConfigMap(configMap('cm', 'model', { k: 'v2' }));
    const h1 = await hashIn(w);
    expect(h1).not.toBe(h0);
    w.addPod(pod('training-1', 'training', 'RESTServer'));
    const h2 = await hashIn(w);
    expect(h2).not.toBe(h1);
  });

  it("changes when a connected object disappears or a Secret's values change", async () => {
    const w = world();
    const h0 = await hashIn(w);
    w.configMaps.delete(`${NS}/cm`);
    expect(await hashIn(w)).not.toBe(h0);
    const w2 = world();
    w2.addSecret(secret('s', 'db', { password: 'other' }));
    expect(await hashIn(w2)).not.toBe(h0);
  });

  it('does not change for what pods do not see', async () => {
    const w = world();
    const h0 = await hashIn(w);
    // An unlabeled ConfigMap's content (fail closed: it is not in configmeta).
    w.addConfigMap(configMap('plain', undefined, { k: 'changed' }));
    // The connected cluster's own connections (content is one hop deep) and its status.
    const training = w.clusters.get(`${NS}/training`)!;
    w.addCluster({
      ...training,
      spec: { ...training.spec, connections: { configmaps: ['other'] } },
      status: { membersSummary: '9/9' },
    });
    // A member pod turning unready, and an unrelated pod.
    w.addPod(pod('training-0', 'training', 'RESTServer', { ready: false }));
    w.addPod(pod('x-0', 'x', 'RESTServer'));
    // The same object in another namespace.
    w.addConfigMap(configMap('cm', 'model', { k: 'other-ns' }, { namespace: 'team-b' }));
    expect(await hashIn(w)).toBe(h0);
  });

  it('sees Secret values only through the keyed MAC, never as values, and ignores metadata-only writes', async () => {
    const base = world().addSecret(secret('s', 'db', { password: 'hunter2' }, { withValues: true }));
    const h = await hashIn(base);
    // A metadata-only write (new resourceVersion, same data and labels): no regeneration.
    expect(
      await hashIn(world().addSecret(secret('s', 'db', { password: 'hunter2' }, { resourceVersion: '999' }))),
    ).toBe(h);
    // Whether the cache holds the values or not does not change what is hashed.
    expect(await hashIn(world().addSecret(secret('s', 'db', { password: 'hunter2' })))).toBe(h);
    // Another value: another hash.
    expect(await hashIn(world().addSecret(secret('s', 'db', { password: 'swordfish' })))).not.toBe(h);
    const r = await resolveConnections(nb(all), OWN, base, OPTS);
    const shown = JSON.stringify(r.statuses);
    expect(shown).not.toContain('hunter2');
    expect(shown).not.toContain(Buffer.from('hunter2').toString('base64'));
  });
});
