/**
 * A tenant's flood against the RUNNING reconciler (reconciler/dist/main.js on the real control plane):
 * one namespace fills itself with large labelled ConfigMaps and Secrets that no kdcluster connects to —
 * ordinary rights in its own namespace are enough. The reconciler's memory must grow with what kdclusters
 * reference, not with what tenants create (DESIGN.md §10): its RSS after a full collection grows by less
 * than FLOOD_RSS_GROWTH_BOUND_MIB, and delivery goes on in the flooded namespace and in the other one (an
 * edit of a referenced ConfigMap reaches the member pod, in both, during and after the flood). A
 * connected object too big to be delivered is left out of configmeta and named in status and events,
 * while the rest of the cluster's connections are delivered.
 *
 * The figures (RSS and heap before/after, delivery latencies before and during the flood) are logged
 * as one `tenant flood:` line; docs/reliability.md quotes a run. Nothing here asserts a duration.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { useTestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { installCrds } from '../support/crds.js';
import { apply, configMap, getJson, kdApp, kdCluster, memberPod, secret } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { type ReconcilerProcess, serviceNodeOptions, startReconciler } from '../support/services.js';
import { heapAfterGc, inspectorNodeOptions, inspectorUrl } from '../support/inspector.js';
import { mib, procStatus } from './admission-support.js';

const env = useTestEnv();
const tenant = `${env.namespace}-tenant`.slice(0, 63);
/** What the issue measured: 300 labelled, unreferenced ConfigMaps of 900 KiB (97 → 356 MiB RSS). */
const FLOOD_CONFIGMAPS = 300;
/** Secrets are delivered from the same kind of cache: a smaller flood of them rides along. */
const FLOOD_SECRETS = 30;
const FLOOD_VALUE_BYTES = 900 * 1024;
const FLOOD_CONCURRENCY = 4;
const FLOOD_LABEL = 'kd-test-flood';
/**
 * The bound of the issue: 300 × 900 KiB held in full is ~260 MiB, so a cache that holds the data of
 * unreferenced objects cannot pass, while a metadata-only cache (a few hundred bytes each) leaves room for
 * V8's lazily returned pages on a loaded machine.
 */
const FLOOD_RSS_GROWTH_BOUND_MIB = 50;

let rec: ReconcilerProcess;
let inspector: string;
const core = () => env.kc.makeApiClient(CoreV1Api);

/** The configmeta value a member pod holds for ConfigMap `cm` (its `k` key), or undefined. */
async function delivered(ns: string, pod: string, cm: string): Promise<string | undefined> {
  const p = await core().readNamespacedPod({ namespace: ns, name: pod });
  const text = p.metadata?.annotations?.['kubedirector.hpe.com/configmeta'];
  if (!text) return undefined;
  const doc = JSON.parse(text) as {
    connections?: { configmaps?: Record<string, { metadata: { name: string }; data: Record<string, string> }[]> };
  };
  for (const list of Object.values(doc.connections?.configmaps ?? {}))
    for (const e of list) if (e.metadata.name === cm) return e.data?.k;
  return undefined;
}

/** Edits `cm`'s key `k` and waits until `pod` holds the new value; returns the milliseconds it took. */
async function editAndWait(ns: string, cm: string, pod: string, value: string): Promise<number> {
  const started = Date.now();
  await core().patchNamespacedConfigMap(
    { namespace: ns, name: cm, body: [{ op: 'replace', path: '/data/k', value }] },
    // client-node picks the patch type from this header.
    { headers: { 'Content-Type': 'application/json-patch+json' } } as never,
  );
  await eventually(
    `${ns}/${pod} holds ${cm}.k=${value}`,
    async () => (await delivered(ns, pod, cm)) === value,
    120_000,
    50,
  );
  return Date.now() - started;
}

async function memory(): Promise<{ rssMiB: number; heapMiB: number }> {
  const heap = await heapAfterGc(inspector);
  return { rssMiB: mib(procStatus(rec.pid).rssKiB), heapMiB: mib(heap.usedBytes / 1024) };
}

async function flood(): Promise<void> {
  const value = (i: number) => `${i}:`.padEnd(FLOOD_VALUE_BYTES, 'x');
  const jobs: (() => Promise<unknown>)[] = [];
  for (let i = 0; i < FLOOD_CONFIGMAPS; i++)
    jobs.push(() =>
      core().createNamespacedConfigMap({
        namespace: tenant,
        body: {
          metadata: { name: `flood-${i}`, labels: { 'kubedirector.hpe.com/cmType': 'flood', [FLOOD_LABEL]: 'true' } },
          data: { k: value(i) },
        },
      }),
    );
  for (let i = 0; i < FLOOD_SECRETS; i++)
    jobs.push(() =>
      core().createNamespacedSecret({
        namespace: tenant,
        body: {
          metadata: {
            name: `flood-${i}`,
            labels: { 'kubedirector.hpe.com/secretType': 'flood', [FLOOD_LABEL]: 'true' },
          },
          stringData: { k: value(i) },
        },
      }),
    );
  let next = 0;
  await Promise.all(
    Array.from({ length: FLOOD_CONCURRENCY }, async () => {
      while (next < jobs.length) await jobs[next++]!();
    }),
  );
}

beforeAll(async () => {
  await installCrds(env);
  await createNamespace(env.kc, tenant, {});
  for (const ns of [env.namespace, tenant]) {
    await apply(
      env,
      [
        kdApp('app', { category: 'app' }),
        configMap('ref', { k: 'v0' }),
        secret('creds', { token: 'initial' }),
        kdCluster('c', 'app', { configmaps: ['ref'], secrets: ['creds'] }),
        memberPod('c-0', 'c'),
      ],
      ns,
    );
  }
  rec = await startReconciler(env, {
    args: [`--watch-namespaces=${env.namespace},${tenant}`],
    env: { NODE_OPTIONS: inspectorNodeOptions(serviceNodeOptions('reconciler')) },
  });
  await rec.waitForLog((l) => l.msg === 'became leader');
  for (const ns of [env.namespace, tenant])
    await eventually(`${ns}/c-0 has configmeta`, async () => (await delivered(ns, 'c-0', 'ref')) === 'v0', 60_000);
  inspector = await inspectorUrl(rec);
}, 120_000);

afterAll(async () => {
  await rec?.stop();
  // The namespaces stay Terminating (no namespace controller): free the flood's bytes in the API server.
  for (const del of [
    () => core().deleteCollectionNamespacedConfigMap({ namespace: tenant, labelSelector: FLOOD_LABEL }),
    () => core().deleteCollectionNamespacedSecret({ namespace: tenant, labelSelector: FLOOD_LABEL }),
    () => core().deleteNamespace({ name: tenant }),
  ])
    await del().catch(() => undefined);
});

describe("a tenant's flood of large labelled objects that no kdcluster connects to", () => {
  it('grows the reconciler by less than the bound, and delivery goes on in both namespaces', async () => {
    const quiet: number[] = [];
    for (let i = 1; i <= 3; i++) quiet.push(await editAndWait(env.namespace, 'ref', 'c-0', `quiet-${i}`));
    const before = await memory();

    // Edits in the other namespace while the flood goes in, one after the other.
    let flooding = true;
    const during: number[] = [];
    const victim = (async () => {
      for (let i = 1; flooding; i++) during.push(await editAndWait(env.namespace, 'ref', 'c-0', `during-${i}`));
    })();
    const floodStarted = Date.now();
    try {
      await flood();
    } finally {
      flooding = false;
    }
    const floodMs = Date.now() - floodStarted;
    await victim;
    // The flooded namespace's own watch delivers its events in order: once this edit is delivered, the
    // reconciler has seen the whole flood.
    const tenantMs = await editAndWait(tenant, 'ref', 'c-0', 'after-flood');
    const victimMs = await editAndWait(env.namespace, 'ref', 'c-0', 'after-flood');
    const after = await memory();

    const fetches = {
      configmap: await rec.metric('kd_reconciler_content_fetches_total', { kind: 'configmap' }),
      secret: await rec.metric('kd_reconciler_content_fetches_total', { kind: 'secret' }),
    };
    const summary = {
      flood: {
        configmaps: FLOOD_CONFIGMAPS,
        secrets: FLOOD_SECRETS,
        kib: FLOOD_VALUE_BYTES / 1024,
        seconds: floodMs / 1000,
      },
      rssBeforeMiB: before.rssMiB,
      rssAfterMiB: after.rssMiB,
      rssPeakMiB: mib(procStatus(rec.pid).hwmKiB),
      heapAfterGcBeforeMiB: before.heapMiB,
      heapAfterGcAfterMiB: after.heapMiB,
      deliveryMs: { quiet, duringFlood: during, tenantAfterFlood: tenantMs, otherAfterFlood: victimMs },
      contentFetches: fetches,
    };
    console.log(`tenant flood: ${JSON.stringify(summary)}`);

    expect(during.length).toBeGreaterThan(0);
    expect(after.rssMiB - before.rssMiB).toBeLessThan(FLOOD_RSS_GROWTH_BOUND_MIB);
    // Only the referenced objects' content is kept: `ref` and `creds` in each namespace.
    for (const kind of ['configmap', 'secret'])
      expect({ kind, kept: await rec.metric('kd_reconciler_content_cache_objects', { kind }) }).toEqual({
        kind,
        kept: 2,
      });
    expect(rec.logs().filter((l) => l.level === 'error')).toEqual([]);
  }, 600_000);

  it('a connected object too big to deliver is left out and named in status and events; the rest is delivered', async () => {
    await apply(env, [
      configMap('big', { k: 'small-at-first' }),
      configMap('small', { k: 's1' }),
      kdCluster('d', 'app', { configmaps: ['small', 'big'] }),
      memberPod('d-0', 'd'),
    ]);
    await eventually(
      'd-0 holds big',
      async () => (await delivered(env.namespace, 'd-0', 'big')) === 'small-at-first',
      60_000,
    );
    // Past what a pod annotation can hold (kubectl apply would add a last-applied copy of it: too long).
    await core().patchNamespacedConfigMap(
      {
        namespace: env.namespace,
        name: 'big',
        body: [{ op: 'replace', path: '/data/k', value: 'big:'.padEnd(300 * 1024, 'y') }],
      },
      { headers: { 'Content-Type': 'application/json-patch+json' } } as never,
    );
    const status = await eventually(
      'd reports big',
      async () => {
        const s = (await getJson(env, ['kdcluster', 'd'])).status;
        const c = s?.connections?.find((x: { name: string }) => x.name === 'big') as
          { kind: string; name: string; state: string; message: string } | undefined;
        return c?.state === 'NotConnectable' ? c : undefined;
      },
      60_000,
    );
    expect(status.message).toMatch(/^configmap "big" is \d+ bytes in configmeta, more than can ever be delivered/);
    expect(status.message).toContain('262144');
    // Left out of configmeta; the rest is delivered.
    await eventually(
      'd-0 no longer holds big',
      async () => (await delivered(env.namespace, 'd-0', 'big')) === undefined,
      60_000,
    );
    expect(await delivered(env.namespace, 'd-0', 'small')).toBe('s1');
    const events = (await getJson(env, ['events.events.k8s.io'])).items.filter(
      (e: { regarding?: { name?: string }; reason?: string }) =>
        e.regarding?.name === 'd' && e.reason === 'ConnectionChanged',
    );
    expect(events.map((e: { note: string }) => e.note).join('\n')).toContain(
      'connected configmap big is now NotConnectable (configmap "big" is',
    );
    // Smaller again, it is delivered again.
    expect(await editAndWait(env.namespace, 'big', 'd-0', 'small-again')).toBeGreaterThan(0);
  }, 180_000);

  it('the content of a connected object is kept only while a kdcluster references it', async () => {
    const kept = () => rec.metric('kd_reconciler_content_cache_objects', { kind: 'configmap' });
    // ref in both namespaces, and d's small and big.
    await eventually('four ConfigMaps kept', async () => (await kept()) === 4);
    await apply(env, [kdCluster('d', 'app', { configmaps: ['small'] })]);
    await eventually('big let go', async () => (await kept()) === 3);
    await apply(env, [kdCluster('d', 'app')]);
    await eventually('small let go', async () => (await kept()) === 2);
  }, 60_000);
});
