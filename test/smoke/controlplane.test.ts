import { afterAll, describe, expect, it } from '@jest/globals';
import https from 'node:https';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { useTestEnv } from '../support/cluster.js';
import {
  markerWebhook,
  startTestWebhookServer,
  waitForMarkerDenied,
  type TestWebhookServer,
} from '../support/webhooks.js';

const env = useTestEnv();

describe('the test control plane is a real kube-apiserver', () => {
  it('stores what client-node writes and kubectl reads it back', async () => {
    const core = env.kc.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({
      namespace: env.namespace,
      body: { metadata: { name: 'hello' }, data: { greeting: 'from client-node' } },
    });
    const got = await env.kubectl(['get', 'configmap', 'hello', '-o', 'json']);
    expect(got.stderr).toBe('');
    expect(got.code).toBe(0);
    const cm = JSON.parse(got.stdout);
    expect(cm.data).toEqual({ greeting: 'from client-node' });
    expect(cm.metadata.namespace).toBe(env.namespace);
    expect(cm.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);

    const ns = await env.kubectl(['get', 'namespace', env.namespace, '-o', 'jsonpath={.status.phase}'], {
      namespace: false,
    });
    expect(ns.stdout).toBe('Active');
  });

  it('reports its version as v1.36 and kubectl is within one minor of it', async () => {
    const v = await env.kubectl(['version', '-o', 'json'], { namespace: false });
    expect(v.code).toBe(0);
    const parsed = JSON.parse(v.stdout);
    expect(parsed.serverVersion.gitVersion).toMatch(/^v1\.36\./);
    expect(Math.abs(Number(parsed.clientVersion.minor) - Number(parsed.serverVersion.minor))).toBeLessThanOrEqual(1);
  });

  it('authorizes with RBAC: a request without a client certificate is anonymous and forbidden', async () => {
    const { status, body } = await new Promise<{ status: number; body: string }>((ok, fail) => {
      https
        .get(`${env.info.server}/api/v1/namespaces`, { ca: env.info.caPem }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
        })
        .on('error', fail);
    });
    expect(status).toBe(403);
    expect(body).toContain('system:anonymous');
  });
});

describe('a ValidatingWebhookConfiguration in url mode', () => {
  let server: TestWebhookServer;
  const configName = `smoke-${Math.random().toString(36).slice(2, 8)}`;

  afterAll(async () => {
    await env.kc
      .makeApiClient(AdmissionregistrationV1Api)
      .deleteValidatingWebhookConfiguration({ name: configName })
      .catch(() => undefined);
    await server?.close();
  });

  it('is called by the API server and can deny a request', async () => {
    server = await startTestWebhookServer(env.info.webhookServing, ({ path, review }) => {
      if (path === '/marker') return { allowed: false, message: 'marker: configuration is live' };
      const obj = review.request?.object as { data?: Record<string, string> } | undefined;
      return obj?.data?.forbidden
        ? { allowed: false, message: 'smoke webhook: data.forbidden is not allowed' }
        : { allowed: true };
    });
    const caBundle = Buffer.from(env.info.webhookCaPem).toString('base64');
    await env.kc.makeApiClient(AdmissionregistrationV1Api).createValidatingWebhookConfiguration({
      body: {
        metadata: { name: configName },
        webhooks: [
          markerWebhook({
            name: 'marker.smoke.kd.test',
            url: server.url('/marker'),
            caBundle,
            namespace: env.namespace,
            marker: configName,
          }),
          {
            name: 'deny.smoke.kd.test',
            clientConfig: { url: server.url('/validate'), caBundle },
            rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
            objectSelector: { matchExpressions: [{ key: 'kd-test-webhook-marker', operator: 'DoesNotExist' }] },
            failurePolicy: 'Fail',
            sideEffects: 'None',
            admissionReviewVersions: ['v1'],
            timeoutSeconds: 5,
          },
        ],
      },
    });
    await waitForMarkerDenied(env.kc, env.namespace, configName);

    const core = env.kc.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({
      namespace: env.namespace,
      body: { metadata: { name: 'fine' }, data: { a: '1' } },
    });
    const denied = await env.kubectl(['create', 'configmap', 'bad', '--from-literal=forbidden=yes']);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(
      'admission webhook "deny.smoke.kd.test" denied the request: smoke webhook: data.forbidden is not allowed',
    );

    const seen = server.calls
      .filter((c) => c.path === '/validate')
      .map((c) => (c.review.request?.name as string) ?? '');
    expect(seen).toEqual(expect.arrayContaining(['fine', 'bad']));
    const review = server.calls.find((c) => c.path === '/validate')!.review;
    expect(review.apiVersion).toBe('admission.k8s.io/v1');
    expect(review.request?.uid).toMatch(/^[0-9a-f-]{36}$/);
    const stored = await env.kubectl(['get', 'configmap', 'bad', '--ignore-not-found', '-o', 'name']);
    expect(stored.stdout).toBe('');
  });
});
