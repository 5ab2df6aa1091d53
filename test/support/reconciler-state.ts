/**
 * What fault tests of the reconciler look at from outside: every kdcluster of a namespace with its
 * generator, status and member pods' configmeta annotations in one read (two list calls, no kubectl),
 * "converged" (status synced and every pod at the cluster's generator), the reconciler's own writes in
 * the audit log, and "quiet" (nothing queued, no write or reconcile for a while) from its metrics.
 */
import { KubeClient } from '@kd-connections/shared/runtime';
import type { TestEnv } from './cluster.js';
import { writes, type AuditEvent } from './audit.js';
import { eventually } from './processes.js';
import { type ReconcilerProcess, startReconciler } from './services.js';

export interface PodState {
  name: string;
  labels: Record<string, string>;
  generator?: string;
  hash?: string;
  /** The configmeta document, parsed. */
  doc?: any;
}

export interface ClusterState {
  name: string;
  /** spec.configMetaGenerator (0 when absent). */
  generator: number;
  connections: any;
  status: any;
  pods: PodState[];
}

export function testClient(env: TestEnv): KubeClient {
  return new KubeClient(env.kc, 'kd-connections-test');
}

export async function clusterStates(env: TestEnv, client: KubeClient): Promise<Map<string, ClusterState>> {
  const ns = env.namespace;
  const [clusters, pods] = await Promise.all([
    client.get<{ items: any[] }>(`/apis/kubedirector.hpe.com/v1beta1/namespaces/${ns}/kubedirectorclusters`),
    client.get<{ items: any[] }>(`/api/v1/namespaces/${ns}/pods`, {
      query: { labelSelector: 'kubedirector.hpe.com/kdcluster' },
    }),
  ]);
  const out = new Map<string, ClusterState>();
  for (const c of clusters.items)
    out.set(c.metadata.name, {
      name: c.metadata.name,
      generator: c.spec?.configMetaGenerator ?? 0,
      connections: c.spec?.connections ?? {},
      status: c.status ?? {},
      pods: [],
    });
  for (const p of pods.items) {
    const a = (p.metadata.annotations ?? {}) as Record<string, string>;
    const text = a['kubedirector.hpe.com/configmeta'];
    out.get(p.metadata.labels['kubedirector.hpe.com/kdcluster'])?.pods.push({
      name: p.metadata.name,
      labels: p.metadata.labels ?? {},
      generator: a['kubedirector.hpe.com/configmeta-generator'],
      hash: a['kubedirector.hpe.com/configmeta-hash'],
      doc: text ? JSON.parse(text) : undefined,
    });
  }
  for (const c of out.values()) c.pods.sort((a, b) => a.name.localeCompare(b.name));
  return out;
}

export function condition(c: ClusterState, type = 'ConfigMetaSynced'): any {
  return (c.status.conditions ?? []).find((x: { type: string }) => x.type === type);
}

/** Status says the current generator is delivered, and every member pod holds it. */
export function converged(c: ClusterState): boolean {
  return (
    condition(c)?.status === 'True' &&
    c.status.lastConfigMetaGenerator === c.generator &&
    c.status.members?.synced === c.pods.length &&
    c.pods.every((p) => p.generator === String(c.generator) && p.doc !== undefined)
  );
}

/** Writes made by any reconciler process in the namespace since `since`, without its leader Lease. */
export function reconcilerWrites(env: TestEnv, since: Date, opts: { events?: boolean } = {}): AuditEvent[] {
  return writes(env.info.auditLogPath, {
    namespace: env.namespace,
    since,
    userAgent: 'kd-connections-reconciler',
  }).filter((e) => e.objectRef?.resource !== 'leases' && (opts.events !== false || e.objectRef?.resource !== 'events'));
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Waits until the reconcilers are quiet: queue empty and no reconcile or API write counted for
 * `quietMs`. Returns how long it took.
 */
export async function waitQuiet(recs: ReconcilerProcess[], quietMs = 2000, timeoutMs = 60_000): Promise<number> {
  const started = Date.now();
  let last = '';
  let since = Date.now();
  for (;;) {
    const sample = await Promise.all(
      recs.map(async (r) =>
        [
          await r.metric('kd_reconciler_api_writes_total'),
          await r.metric('kd_reconciler_reconciles_total'),
          await r.metric('kd_reconciler_queue_depth'),
        ].join('/'),
      ),
    );
    const key = sample.join(' ');
    const idle = sample.every((s) => s.endsWith('/0'));
    if (key !== last || !idle) {
      last = key;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`reconcilers not quiet after ${timeoutMs} ms (${key})`);
    await sleep(250);
  }
}

/** Starts a reconciler, waits until it leads, every kdcluster of the namespace is delivered, and it is quiet. */
export async function startSettledReconciler(env: TestEnv, client: KubeClient): Promise<ReconcilerProcess> {
  const rec = await startReconciler(env);
  await rec.waitForLog((l) => l.msg === 'became leader', 60_000);
  await eventually(
    'every cluster delivered',
    async () => [...(await clusterStates(env, client)).values()].every(converged),
    60_000,
  );
  await waitQuiet([rec]);
  return rec;
}
