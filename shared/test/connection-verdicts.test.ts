/**
 * The webhook and the reconciler judge a connection the same way: for every connection state, both paths
 * run on the same facts — validateCluster (the validating webhook's rules) and resolveConnections (the
 * reconciler's step 1) — and must agree: Connected ↔ allowed, anything else ↔ refused when added (and
 * only warned about when kept), with the very message the reconciler writes to status.
 */
import { describe, expect, it } from '@jest/globals';
import { formatFieldError } from '../src/domain/field-errors.js';
import { resolveApp, type RuleOptions } from '../src/domain/lookup.js';
import { resolveConnections } from '../src/plan/resolve-connections.js';
import type { ConnectionList, ConnectionState, KDCluster } from '../src/domain/types.js';
import { validateCluster } from '../src/domain/validate-kdcluster.js';
import { MemoryWorld, NS, SYSTEM_NS, app, cluster, configMap, secret } from './fixtures.js';

function world(): MemoryWorld {
  return new MemoryWorld({
    apps: [
      app('notebook', { category: 'notebook', connectable_to: [{ category: 'training' }] }),
      app('closed', { category: 'notebook', connectable_to: [] }),
      app('open', { category: 'notebook' }),
      app('trainer', { category: 'training', version: '1.0' }),
      app('database', { category: 'database', version: '12' }),
    ],
    clusters: [
      cluster('train', 'trainer', { ready: 1 }),
      cluster('cold', 'trainer'),
      cluster('db', 'database', { ready: 1 }),
      cluster('orphan', 'deleted-app', { ready: 1 }),
    ],
    configMaps: [configMap('cm', 'model', { k: 'v' }), configMap('plain-cm', undefined, { k: 'v' })],
    secrets: [secret('s', 'creds', { k: 'v' }), secret('plain-s', undefined, { k: 'v' })],
  });
}

interface Case {
  what: string;
  /** The app of the connecting cluster "nb". */
  app: string;
  list: ConnectionList;
  name: string;
  state: ConnectionState;
  opts?: Partial<RuleOptions>;
}

const CASES: Case[] = [
  { what: 'cluster allowed by connectable_to', app: 'notebook', list: 'clusters', name: 'train', state: 'Connected' },
  { what: 'cluster with no ready members yet', app: 'notebook', list: 'clusters', name: 'cold', state: 'Connected' },
  { what: 'cluster, connectable_to absent', app: 'open', list: 'clusters', name: 'db', state: 'Connected' },
  { what: 'cluster not found', app: 'notebook', list: 'clusters', name: 'ghost', state: 'Missing' },
  { what: 'cluster connectable_to forbids', app: 'notebook', list: 'clusters', name: 'db', state: 'NotConnectable' },
  { what: 'cluster, connectable_to empty', app: 'closed', list: 'clusters', name: 'train', state: 'NotConnectable' },
  { what: 'cluster whose app is missing', app: 'notebook', list: 'clusters', name: 'orphan', state: 'NotConnectable' },
  {
    what: 'cluster whose app is missing, connectable_to absent',
    app: 'open',
    list: 'clusters',
    name: 'orphan',
    state: 'NotConnectable',
  },
  {
    what: "cluster, the connecting cluster's own app missing",
    app: 'gone',
    list: 'clusters',
    name: 'train',
    state: 'NotConnectable',
  },
  { what: 'a cluster connecting to itself', app: 'notebook', list: 'clusters', name: 'nb', state: 'NotConnectable' },
  { what: 'labelled ConfigMap', app: 'notebook', list: 'configmaps', name: 'cm', state: 'Connected' },
  { what: 'ConfigMap not found', app: 'notebook', list: 'configmaps', name: 'ghost', state: 'Missing' },
  { what: 'ConfigMap without its label', app: 'notebook', list: 'configmaps', name: 'plain-cm', state: 'Unlabeled' },
  { what: 'labelled Secret', app: 'notebook', list: 'secrets', name: 's', state: 'Connected' },
  { what: 'Secret not found', app: 'notebook', list: 'secrets', name: 'ghost', state: 'Missing' },
  { what: 'Secret without its label', app: 'notebook', list: 'secrets', name: 'plain-s', state: 'Unlabeled' },
  {
    what: 'Secret while secret connections are disabled',
    app: 'notebook',
    list: 'secrets',
    name: 's',
    state: 'NotConnectable',
    opts: { secretConnections: false },
  },
];

const nb = (c: Case, generator?: number, extra: string[] = []): KDCluster =>
  cluster('nb', c.app, { connections: { [c.list]: [c.name, ...extra] }, ...(generator ? { generator } : {}) });

async function reconcilerVerdict(c: Case, opts: RuleOptions) {
  const w = world();
  const subject = nb(c);
  const own = await resolveApp(w, NS, subject.spec, opts.systemNamespace);
  const { statuses } = await resolveConnections(subject, own, w, opts);
  expect(statuses).toHaveLength(1);
  return statuses[0]!;
}

describe('the webhook and the reconciler give the same verdict for the same connection', () => {
  it.each(CASES.map((c) => [c.what, c] as const))('%s', async (_what, c) => {
    const opts: RuleOptions = { systemNamespace: SYSTEM_NS, ...c.opts };
    const field = `spec.connections.${c.list}[0]`;
    const status = await reconcilerVerdict(c, opts);
    expect(status.state).toBe(c.state);

    // Added (CREATE): refused with the status message exactly when the reconciler would not connect it.
    const created = await validateCluster({ operation: 'CREATE', object: nb(c) }, world(), opts);
    const atField = created.errors.filter((e) => e.field === field).map(formatFieldError);
    if (c.state === 'Connected') {
      expect(atField).toEqual([]);
      expect(status.message).toBeUndefined();
    } else {
      expect(atField).toEqual([`${field}: ${status.message}`]);
    }

    // Kept (an UPDATE that only adds another connection): never refused for it, only warned about.
    if (c.name === 'nb') return; // a self-connection is a CEL rule too: refused even when kept
    const kept = await validateCluster(
      { operation: 'UPDATE', oldObject: nb(c, 1), object: nb(c, 2, ['ghost-2']) },
      world(),
      opts,
    );
    expect(kept.errors.filter((e) => e.field === field)).toEqual([]);
    const warned = kept.warnings.filter((x) => x.startsWith(`${field}:`));
    expect(warned).toEqual(
      c.state === 'Connected' ? [] : [`${field}: ${status.message}; kept because it was connected before this change`],
    );
  });
});
