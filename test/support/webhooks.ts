/**
 * Helpers for webhooks registered by URL on 127.0.0.1, including the "marker" technique of the
 * Kubernetes e2e suite: a configuration only counts as live once the API server actually calls it,
 * which is proven by a request that only that webhook would deny.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, type KubeConfig, type V1ValidatingWebhook } from '@kubernetes/client-node';

export interface ReviewCall {
  path: string;
  review: { apiVersion?: string; kind?: string; request?: Record<string, unknown> & { uid?: string } };
}

export interface TestWebhookServer {
  url(path: string): string;
  port: number;
  calls: ReviewCall[];
  close(): Promise<void>;
}

type Decide = (call: ReviewCall) => { allowed: boolean; message?: string; warnings?: string[] };

/** A tiny AdmissionReview server for tests; `decide` answers each request. */
export async function startTestWebhookServer(
  tls: { certPem: string; keyPem: string },
  decide: Decide,
): Promise<TestWebhookServer> {
  const calls: ReviewCall[] = [];
  const server = https.createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // The API server appends ?timeout=Ns; callers match on the path alone.
      const path = new URL(req.url ?? '/', 'https://127.0.0.1').pathname;
      const call: ReviewCall = { path, review: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
      calls.push(call);
      const d = decide(call);
      res.setHeader('Content-Type', 'application/json');
      res.end(
        JSON.stringify({
          apiVersion: call.review.apiVersion ?? 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: {
            uid: call.review.request?.uid,
            allowed: d.allowed,
            ...(d.message ? { status: { code: d.allowed ? 200 : 403, message: d.message } } : {}),
            ...(d.warnings ? { warnings: d.warnings } : {}),
          },
        }),
      );
    });
  });
  server.keepAliveTimeout = 90_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    calls,
    url: (path) => `https://127.0.0.1:${port}${path}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export const MARKER_LABEL = 'kd-test-webhook-marker';

/**
 * A validating webhook that denies ConfigMaps labelled with the marker label in one namespace.
 * Add it to a configuration next to the webhooks under test; `waitForMarkerDenied` then tells when
 * the API server uses the configuration. failurePolicy Ignore: a dead marker server blocks nothing.
 */
export function markerWebhook(opts: {
  name: string;
  url: string;
  caBundle: string;
  namespace: string;
  marker: string;
}): V1ValidatingWebhook {
  return {
    name: opts.name,
    clientConfig: { url: opts.url, caBundle: opts.caBundle },
    rules: [
      { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'], scope: 'Namespaced' },
    ],
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': opts.namespace } },
    objectSelector: { matchLabels: { [MARKER_LABEL]: opts.marker } },
    failurePolicy: 'Ignore',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 5,
  };
}

/** Creates marker ConfigMaps every 100 ms until one is denied, i.e. until the configuration is live. */
export async function waitForMarkerDenied(
  kc: KubeConfig,
  namespace: string,
  marker: string,
  timeoutMs = 30_000,
): Promise<number> {
  const core = kc.makeApiClient(CoreV1Api);
  const end = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    const name = `marker-${marker}-${attempt}`.slice(0, 63);
    try {
      await core.createNamespacedConfigMap({
        namespace,
        body: { metadata: { name, labels: { [MARKER_LABEL]: marker } } },
      });
      await core.deleteNamespacedConfigMap({ namespace, name });
    } catch (e) {
      const code = (e as { code?: number }).code;
      if (code === 400 || code === 403) return attempt; // denied by the marker webhook
      throw e;
    }
    if (Date.now() > end) throw new Error(`webhook configuration with marker ${marker} not live after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
