/**
 * Fault: the API server refuses the configmeta patch of some member pods: partial progress must be
 * recorded and the rest retried. The refusal is real: a
 * validating webhook (clientConfig.url on 127.0.0.1, scoped to this file's namespace, failurePolicy
 * Fail) denies every UPDATE of pods labelled fail-patch=yes. After a ConfigMap edit, the status must
 * record the partial progress (members.synced < total; ConfigMetaSynced False, reason PodPatchFailed,
 * naming exactly the refused pods), a Warning event must name them, the other pods must hold the new
 * configmeta, and the key must be retried with backoff (not in a hot loop). Once the webhook is removed,
 * a retry delivers to the rest and the condition turns True, without another generator bump.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeClient } from '@kd-connections/shared/runtime';
import { useTestEnv } from '../support/cluster.js';
import { writes } from '../support/audit.js';
import { apply, configMap, kdApp, kdCluster, memberPod } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import {
  clusterStates,
  condition,
  converged,
  sleep,
  testClient,
  waitQuiet,
  type ClusterState,
} from '../support/reconciler-state.js';
import {
  markerWebhook,
  startTestWebhookServer,
  waitForMarkerDenied,
  type TestWebhookServer,
} from '../support/webhooks.js';
import { installCrds } from '../support/crds.js';
import { type ReconcilerProcess, startReconciler } from '../support/services.js';

const env = useTestEnv();
let client: KubeClient;
let rec: ReconcilerProcess;
let server: TestWebhookServer;

const PODS = ['w-0', 'w-1', 'w-2', 'w-3', 'w-4'];
const REFUSED = ['w-3', 'w-4'];
const DENIAL = 'kd-test: updates of this pod are refused';
const configName = () => `${env.namespace}-deny-pod-patch`;

const cluster = async (): Promise<ClusterState> => (await clusterStates(env, client)).get('w')!;
const failedPodsIn = (message: string) => PODS.filter((p) => message.includes(`${p} (`));

beforeAll(async () => {
  client = testClient(env);
  await installCrds(env);
  await apply(env, [
    kdApp('trainer', { category: 'training' }),
    configMap('conf', { v: '1' }, 'settings'),
    kdCluster('w', 'trainer', { configmaps: ['conf'] }, ['controller'], PODS.length),
    ...PODS.map((p) => {
      const pod = memberPod(p, 'w') as { metadata: { labels: Record<string, string> } };
      if (REFUSED.includes(p)) pod.metadata.labels['fail-patch'] = 'yes';
      return pod;
    }),
  ]);
  rec = await startReconciler(env);
  await rec.waitForLog((l) => l.msg === 'became leader', 60_000);
  await eventually('first delivery', async () => converged(await cluster()), 60_000);
  await waitQuiet([rec]);

  server = await startTestWebhookServer(env.info.webhookServing, (call) => {
    if (call.path === '/marker') return { allowed: false, message: 'marker' };
    return call.review.request?.operation === 'UPDATE' ? { allowed: false, message: DENIAL } : { allowed: true };
  });
  const caBundle = Buffer.from(env.info.webhookCaPem).toString('base64');
  const config = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: configName(), labels: { 'kd-test': 'true' } },
    webhooks: [
      {
        name: 'deny-pod-update.kd-test.hpe.com',
        clientConfig: { url: server.url('/deny-pod-update'), caBundle },
        rules: [
          { apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods'], scope: 'Namespaced' },
        ],
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
        objectSelector: { matchLabels: { 'fail-patch': 'yes' } },
        failurePolicy: 'Fail',
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
        timeoutSeconds: 5,
      },
      markerWebhook({
        name: 'marker.kd-test.hpe.com',
        url: server.url('/marker'),
        caBundle,
        namespace: env.namespace,
        marker: 'pod-patch',
      }),
    ],
  };
  const r = await env.kubectl(['create', '-f', '-'], { input: JSON.stringify(config), namespace: false });
  if (r.code !== 0) throw new Error(`creating the webhook configuration failed: ${r.stderr}`);
  await waitForMarkerDenied(env.kc, env.namespace, 'pod-patch');
}, 180_000);

afterAll(async () => {
  await env.kubectl(['delete', 'validatingwebhookconfiguration', configName(), '--ignore-not-found'], {
    namespace: false,
  });
  await rec?.stop();
  await server?.close();
  client?.close();
});

describe('pod patches refused for a subset of pods', () => {
  it('records partial progress, names the refused pods, retries with backoff, and completes once allowed', async () => {
    const since = new Date();
    await client.jsonPatch(`/api/v1/namespaces/${env.namespace}/configmaps/conf`, [
      { op: 'replace', path: '/data/v', value: '2' },
    ]);
    const partial = await eventually(
      'partial delivery recorded',
      async () => {
        const c = await cluster();
        return c.generator === 1 && condition(c)?.reason === 'PodPatchFailed' ? c : undefined;
      },
      30_000,
    );
    const partialAt = Date.now();

    // Status: progress so far, the regeneration still pending, exactly the refused pods named.
    expect(partial.status.members).toMatchObject({ total: 5, synced: 3 });
    expect(partial.status.lastConfigMetaGenerator).toBe(0);
    const cond = condition(partial);
    expect(cond.status).toBe('False');
    expect(cond.message).toContain('configmeta generator 1 written to 3/5 member pods; failed: ');
    expect(cond.message).toContain(DENIAL);
    expect(failedPodsIn(cond.message)).toEqual(REFUSED);
    // The other pods hold the new configmeta; the refused ones still hold the old one, untouched.
    for (const p of partial.pods) {
      const refused = REFUSED.includes(p.name);
      expect([p.name, p.generator, p.doc.connections.configmaps.settings[0].data.v]).toEqual(
        refused ? [p.name, '0', '1'] : [p.name, '1', '2'],
      );
    }
    // A Warning event on the cluster names them too.
    const warning = await eventually('warning event', async () => {
      const list = await client.get<{ items: any[] }>(`/apis/events.k8s.io/v1/namespaces/${env.namespace}/events`);
      return list.items.find(
        (e) => e.type === 'Warning' && e.reason === 'ConfigMetaDeliveryFailed' && e.regarding?.name === 'w',
      );
    });
    expect(warning.note).toContain('configmeta generator 1 written to 3/5 member pods; failed: ');
    expect(failedPodsIn(warning.note)).toEqual(REFUSED);

    // Keep refusing for a while: the key is retried with growing delays, not in a hot loop.
    await sleep(Math.max(0, 8000 - (Date.now() - partialAt)));
    const attempts = writes(env.info.auditLogPath, {
      namespace: env.namespace,
      since,
      userAgent: 'kd-connections-reconciler',
    }).filter((e) => e.objectRef?.resource === 'pods' && e.objectRef.name === 'w-3');
    expect(attempts.every((e) => (e.responseStatus?.code ?? 0) >= 400)).toBe(true);
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    // Without backoff it would be well over a hundred attempts in these 8 s.
    expect(attempts.length).toBeLessThanOrEqual(30);
    const times = attempts.map((e) => Date.parse(e.requestReceivedTimestamp));
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(gaps[gaps.length - 1]!).toBeGreaterThan(gaps[0]!);
    expect(server.calls.filter((c) => c.path === '/deny-pod-update').length).toBeGreaterThanOrEqual(
      attempts.length * 2,
    );
    // Still partial, and no extra bump while retrying.
    const during = await cluster();
    expect(during.generator).toBe(1);
    expect(condition(during).reason).toBe('PodPatchFailed');

    // Allow the patches again: the next retry from the queue's backoff delivers to the rest.
    const allowedAt = Date.now();
    await env.kubectl(['delete', 'validatingwebhookconfiguration', configName()], { namespace: false });
    const done = await eventually(
      'delivered to the refused pods once allowed',
      async () => {
        const c = await cluster();
        return converged(c) ? c : undefined;
      },
      90_000,
    );
    const completedAt = Date.now();
    expect(done.generator).toBe(1);
    expect(done.status.lastConfigMetaGenerator).toBe(1);
    expect(done.status.members).toMatchObject({ total: 5, synced: 5 });
    expect(condition(done)).toMatchObject({ status: 'True', reason: 'Synced' });
    for (const p of done.pods) expect([p.name, p.doc.connections.configmaps.settings[0].data.v]).toEqual([p.name, '2']);
    await eventually('delivered event', async () => {
      const list = await client.get<{ items: any[] }>(`/apis/events.k8s.io/v1/namespaces/${env.namespace}/events`);
      return list.items.some(
        (e) => e.reason === 'ConfigMetaDelivered' && e.note === 'configmeta generator 1 written to 5/5 member pods',
      );
    });
    await waitQuiet([rec]);
    const podWrites = writes(env.info.auditLogPath, {
      namespace: env.namespace,
      since,
      userAgent: 'kd-connections-reconciler',
    }).filter((e) => e.objectRef?.resource === 'pods');
    const succeeded = podWrites.filter((e) => (e.responseStatus?.code ?? 0) < 300).map((e) => e.objectRef!.name);
    // Each pod got exactly one successful patch for this generator.
    expect(succeeded.sort()).toEqual(PODS);

    console.log(
      JSON.stringify({
        refusedAttemptsPerPodIn8s: attempts.length,
        retryGapsMs: gaps,
        deliveredAfterAllowedMs: completedAt - allowedAt,
        refusedPatchesTotal: podWrites.length - succeeded.length,
        reconcileErrors: await rec.metric('kd_reconciler_reconciles_total', { result: 'error' }),
      }),
    );
  }, 150_000);
});
