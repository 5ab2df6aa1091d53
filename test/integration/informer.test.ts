/** The shared informer against the real API server: events, metadata-only, quiet relists, 410 Gone. */
import { afterEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Informer, KubeClient, type KubeObject } from '@kd-connections/shared/runtime';
import { useTestEnv } from '../support/cluster.js';
import { eventually } from '../support/processes.js';
import { compactEtcd } from '../support/etcd.js';
import { startControlPlane } from '../controlplane/controlplane.js';

const env = useTestEnv();
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const s of stops.splice(0)) await s();
});

function informer(extra: Partial<ConstructorParameters<typeof Informer>[0]> & { kc?: KubeConfig } = {}) {
  const { kc, ...rest } = extra;
  const client = new KubeClient(kc ?? env.kc, 'kd-connections-test');
  const events: string[] = [];
  const restarts: string[] = [];
  const inf = new Informer<KubeObject & { data?: Record<string, string> }>({
    name: 'test',
    client,
    path: `/api/v1/namespaces/${env.namespace}/configmaps`,
    labelSelector: 'informer-test',
    onRestart: (r) => restarts.push(r),
    ...rest,
  });
  for (const ev of ['add', 'update', 'delete'] as const) inf.on(ev, (o) => events.push(`${ev} ${o.metadata.name}`));
  inf.start();
  stops.push(async () => {
    await inf.stop();
    client.close();
  });
  return { inf, events, restarts };
}

const core = () => env.kc.makeApiClient(CoreV1Api);
const cm = (name: string, data: Record<string, string>) => ({
  metadata: { name, labels: { 'informer-test': 'yes' } },
  data,
});

describe('Informer', () => {
  it('lists, then delivers add, update and delete in order, and filters by label', async () => {
    await core().createNamespacedConfigMap({ namespace: env.namespace, body: cm('before', { v: '1' }) });
    const { inf, events } = informer();
    await inf.waitForSync(10_000);
    expect(events).toEqual(['add before']);
    await core().createNamespacedConfigMap({ namespace: env.namespace, body: cm('later', { v: '1' }) });
    await core().createNamespacedConfigMap({
      namespace: env.namespace,
      body: { metadata: { name: 'unlabelled' }, data: {} },
    });
    await core().patchNamespacedConfigMap({
      namespace: env.namespace,
      name: 'later',
      body: [{ op: 'replace', path: '/data/v', value: '2' }],
    });
    await core().deleteNamespacedConfigMap({ namespace: env.namespace, name: 'before' });
    await eventually('events seen', () => events.length >= 4);
    expect(events).toEqual(['add before', 'add later', 'update later', 'delete before']);
    expect(inf.get(env.namespace, 'later')?.data).toEqual({ v: '2' });
    expect(inf.get(env.namespace, 'unlabelled')).toBeUndefined();
  });

  it('in metadata-only mode holds no data', async () => {
    await core().createNamespacedConfigMap({ namespace: env.namespace, body: cm('meta-only', { secretish: 'value' }) });
    const { inf } = informer({ metadataOnly: true });
    await inf.waitForSync(10_000);
    const o = inf.get(env.namespace, 'meta-only')!;
    expect(o.kind).toBe('PartialObjectMetadata');
    expect(o.metadata.labels).toEqual({ 'informer-test': 'yes' });
    expect(JSON.stringify(o)).not.toContain('value');
  });

  it('a periodic relist of an unchanged world emits nothing', async () => {
    await core().createNamespacedConfigMap({ namespace: env.namespace, body: cm('stable', { v: '1' }) });
    const { inf, events } = informer({ relistPeriodMs: 300 });
    await inf.waitForSync(10_000);
    const afterSync = events.length;
    await new Promise((r) => setTimeout(r, 1500)); // several relists
    expect(events.length).toBe(afterSync);
    // ...and still notices a change made between relists.
    await core().patchNamespacedConfigMap({
      namespace: env.namespace,
      name: 'stable',
      body: [{ op: 'replace', path: '/data/v', value: '2' }],
    });
    await eventually('update seen', () => events.includes('update stable'));
  });

  it('on 410 Gone relists and re-watches without replaying what it already has', async () => {
    // A control plane of its own with the watch cache off, so watches are served by etcd and an
    // etcd compaction makes an old resourceVersion answer 410 Gone, as it does in production.
    const cp = await startControlPlane({ apiserverFlags: ['--watch-cache=false'], audit: false });
    stops.push(() => cp.stop());
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const c = kc.makeApiClient(CoreV1Api);
    await c.createNamespacedConfigMap({ namespace: 'default', body: cm('first', { v: '1' }) });
    const { inf, events, restarts } = informer({ kc, path: '/api/v1/namespaces/default/configmaps' });
    await inf.waitForSync(10_000);
    expect(events).toEqual(['add first']);
    // Stop watching, let the world move on and compact history, then resume from the old version.
    const internals = inf as unknown as { abort: AbortController; resourceVersion: string };
    const resumeFrom = internals.resourceVersion;
    await c.createNamespacedConfigMap({ namespace: 'default', body: cm('while-away', { v: '1' }) });
    // One more write, so the compaction revision lies beyond the first revision the watch would need.
    await c.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'filler' } } });
    await compactEtcd(cp.etcdUrl);
    internals.resourceVersion = resumeFrom;
    const current = internals.abort;
    internals.abort = new AbortController();
    current.abort();
    await eventually('410 handled by a relist', () => restarts.includes('gone'), 15_000);
    // The relist brought the object created meanwhile exactly once, and nothing it already had.
    await eventually('caught up', () => events.includes('add while-away'));
    expect(events).toEqual(['add first', 'add while-away']);
    await c.createNamespacedConfigMap({ namespace: 'default', body: cm('after-gone', { v: '1' }) });
    await eventually('watch works again', () => events.includes('add after-gone'));
  }, 120_000);
});
