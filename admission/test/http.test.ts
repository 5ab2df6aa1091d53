import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger, type Readiness } from '@kd-connections/shared/runtime';
import { createApp } from '../src/app.js';
import { AdmissionMetrics } from '../src/metrics.js';
import { MAX_BODY_BYTES } from '../src/request-body.js';
import { WEBHOOKS } from '../src/webhooks/index.js';
import { exampleWorld, fixture } from './support.js';

interface Answer {
  status: number;
  reusedSocket?: boolean;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let server: http.Server;
let port: number;
const logs: string[] = [];
const metrics = new AdmissionMetrics();
let readiness: Readiness = { ready: true, reasons: [] };
let draining = false;
const world = exampleWorld();
const deps = world.deps();

beforeAll(async () => {
  const app = createApp({
    webhooks: WEBHOOKS,
    deps,
    metrics,
    log: createLogger({ component: 'test', level: 'debug', write: (l) => logs.push(l) }),
    readiness: () => readiness,
    draining: () => draining,
  });
  server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function request(
  path: string,
  opts: { method?: string; body?: string | Buffer; headers?: http.OutgoingHttpHeaders; agent?: http.Agent } = {},
): Promise<Answer> {
  return new Promise((ok, fail) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: opts.method ?? 'POST',
        headers: opts.headers,
        agent: opts.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          ok({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            reusedSocket: req.reusedSocket,
          }),
        );
      },
    );
    req.on('error', fail);
    req.end(opts.body);
  });
}

const json = { 'Content-Type': 'application/json' };
const post = (path: string, body: string | Buffer, headers: http.OutgoingHttpHeaders = json) =>
  request(path, { body, headers: { ...headers, 'Content-Length': Buffer.byteLength(body) } });

describe('AdmissionReview over HTTP', () => {
  it('answers every webhook path with the uid and apiVersion echoed', async () => {
    const cases: [string, string][] = [
      ['/validate-kdcluster', 'validate-kdcluster-create-denied'],
      ['/mutate-kdcluster', 'mutate-kdcluster-create-with-connections'],
      ['/validate-kdapp', 'validate-kdapp-create-invalid'],
      ['/mutate-pod', 'mutate-pod-member'],
      ['/validate-kdcluster', 'review-v1beta1'],
    ];
    for (const [path, name] of cases) {
      const review = fixture(name);
      const res = await post(path, JSON.stringify(review));
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      const out = JSON.parse(res.body);
      expect(out.apiVersion).toBe(review.apiVersion);
      expect(out.kind).toBe('AdmissionReview');
      expect(out.response.uid).toBe(review.request.uid);
    }
  });

  it('accepts a charset parameter on the content type', async () => {
    const res = await post('/mutate-pod', JSON.stringify(fixture('mutate-pod-member')), {
      'Content-Type': 'application/json; charset=utf-8',
    });
    expect(res.status).toBe(200);
  });

  it('keeps the connection alive between reviews', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const reused: (boolean | undefined)[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const body = JSON.stringify(fixture('mutate-pod-member'));
        const res = await request('/mutate-pod', {
          body,
          headers: { ...json, 'Content-Length': Buffer.byteLength(body) },
          agent,
        });
        expect(res.headers.connection).toBe('keep-alive');
        reused.push(res.reusedSocket);
      }
      expect(reused).toEqual([false, true]);
    } finally {
      agent.destroy();
    }
  });
});

describe('bad input gets an exact status and a clear message', () => {
  const review = JSON.stringify(fixture('validate-kdcluster-create-denied'));
  const cases: [string, () => Promise<Answer>, number, string][] = [
    [
      'no content type',
      () => post('/validate-kdcluster', review, {}),
      415,
      'Content-Type must be application/json, got none',
    ],
    [
      'a wrong content type',
      () => post('/validate-kdcluster', review, { 'Content-Type': 'text/plain' }),
      415,
      'Content-Type must be application/json, got "text/plain"',
    ],
    [
      'a compressed body',
      () => post('/validate-kdcluster', review, { ...json, 'Content-Encoding': 'gzip' }),
      415,
      'Content-Encoding "gzip" is not supported; send the AdmissionReview uncompressed',
    ],
    ['an empty body', () => post('/validate-kdcluster', ''), 400, 'request body is empty; expected an AdmissionReview'],
    [
      'bad JSON',
      () => post('/validate-kdcluster', '{"kind": "AdmissionReview",'),
      400,
      `request body is not valid JSON: ${jsonError('{"kind": "AdmissionReview",')}`,
    ],
    ['a JSON array', () => post('/validate-kdcluster', '[]'), 400, 'expected an AdmissionReview object, got an array'],
    [
      'a wrong kind',
      () => post('/validate-kdcluster', JSON.stringify({ ...JSON.parse(review), kind: 'Pod' })),
      400,
      'kind must be "AdmissionReview", got "Pod"',
    ],
    [
      'a missing kind',
      () => post('/validate-kdcluster', JSON.stringify({ ...JSON.parse(review), kind: undefined })),
      400,
      'kind must be "AdmissionReview", got nothing',
    ],
    [
      'a wrong apiVersion',
      () => post('/validate-kdcluster', JSON.stringify({ ...JSON.parse(review), apiVersion: 'admission.k8s.io/v2' })),
      400,
      'apiVersion must be "admission.k8s.io/v1" (or v1beta1), got "admission.k8s.io/v2"',
    ],
    [
      'a missing request',
      () => post('/validate-kdcluster', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' })),
      400,
      'request is missing: an AdmissionReview sent to a webhook carries a request',
    ],
    [
      'a request that is not an object',
      () =>
        post(
          '/validate-kdcluster',
          JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: 'x' }),
        ),
      400,
      'request must be an object, got "x"',
    ],
    [
      'a missing request.uid',
      () => {
        const r = JSON.parse(review);
        delete r.request.uid;
        return post('/mutate-kdcluster', JSON.stringify(r));
      },
      400,
      'request.uid is missing or empty (got nothing): the API server matches the response to the request by it',
    ],
    [
      'an empty request.uid',
      () => {
        const r = JSON.parse(review);
        r.request.uid = '';
        return post('/mutate-pod', JSON.stringify(r));
      },
      400,
      'request.uid is missing or empty (got ""): the API server matches the response to the request by it',
    ],
    [
      'a declared Content-Length over 7 MiB (refused before reading)',
      () =>
        request('/validate-kdcluster', {
          headers: { ...json, 'Content-Length': MAX_BODY_BYTES + 1 },
          // No body is sent at all: the answer must not wait for it.
          body: undefined,
        }),
      413,
      `request body of ${MAX_BODY_BYTES + 1} bytes exceeds the limit of ${MAX_BODY_BYTES} bytes (7 MiB)`,
    ],
    [
      'GET on a webhook path',
      () => request('/validate-kdcluster', { method: 'GET' }),
      405,
      'method GET not allowed; POST an AdmissionReview',
    ],
    ['an unknown path', () => post('/validate-pods', review), 404, 'no webhook at /validate-pods'],
  ];
  it.each(cases)('%s', async (_name, send, status, message) => {
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.body).toBe(message + '\n');
  });

  it('answers 413 to a chunked body as soon as it passes 7 MiB, without waiting for the rest', async () => {
    const res = await new Promise<Answer>((ok, fail) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          path: '/validate-kdcluster',
          method: 'POST',
          headers: { ...json, 'Transfer-Encoding': 'chunked' },
          agent: false,
        },
        (r) => {
          let body = '';
          r.on('data', (c: Buffer) => (body += c.toString()));
          r.on('end', () => ok({ status: r.statusCode ?? 0, headers: r.headers, body }));
        },
      );
      req.on('error', (e) => (answered ? undefined : fail(e)));
      let answered = false;
      req.on('response', () => (answered = true));
      // 7 MiB + 1 byte in 64 KiB chunks, and the request is never ended: only a limit enforced while
      // streaming can answer this.
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const pump = () => {
        while (!answered && sent <= MAX_BODY_BYTES) {
          const n = Math.min(chunk.length, MAX_BODY_BYTES + 1 - sent);
          sent += n;
          if (!req.write(chunk.subarray(0, n))) return void req.once('drain', pump);
        }
      };
      pump();
    });
    expect(res.status).toBe(413);
    expect(res.body).toBe(`request body exceeds the limit of ${MAX_BODY_BYTES} bytes (7 MiB)\n`);
    expect(res.headers.connection).toBe('close');
  });

  it('lets a client that sends all of an oversized body read the 413 (the rest is dropped, not reset)', async () => {
    // Declared length and chunked, several times: closing with the body unread would reset the
    // connection under the client's writes, and it would see EPIPE/ECONNRESET instead of the answer.
    const big = Buffer.alloc(MAX_BODY_BYTES + 1, 0x20);
    for (let i = 0; i < 3; i++) {
      for (const headers of [json, { ...json, 'Transfer-Encoding': 'chunked' }]) {
        const res = await request('/validate-kdcluster', { body: big, headers });
        expect({ status: res.status, connection: res.headers.connection }).toEqual({
          status: 413,
          connection: 'close',
        });
      }
    }
  });

  it('accepts a review of exactly 7 MiB', async () => {
    const base = JSON.stringify(fixture('mutate-pod-member'));
    const padded = base + ' '.repeat(MAX_BODY_BYTES - Buffer.byteLength(base));
    expect(Buffer.byteLength(padded)).toBe(MAX_BODY_BYTES);
    const res = await post('/mutate-pod', padded);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).response.patchType).toBe('JSONPatch');
  });

  it('answers 500 when a lookup fails, and keeps serving', async () => {
    const original = deps.lookup.getCluster;
    deps.lookup.getCluster = async () => {
      throw new Error('API server unreachable');
    };
    try {
      const res = await post('/validate-kdcluster', JSON.stringify(fixture('validate-kdcluster-create-denied')));
      expect(res.status).toBe(500);
      expect(res.body).toBe('internal error: API server unreachable\n');
    } finally {
      deps.lookup.getCluster = original;
    }
    const again = await post('/validate-kdcluster', JSON.stringify(fixture('validate-kdcluster-create-denied')));
    expect(again.status).toBe(200);
  });
});

describe('health, readiness, metrics, logs', () => {
  it('/healthz is 200; /readyz follows readiness and says what is missing', async () => {
    expect(await request('/healthz', { method: 'GET' })).toMatchObject({ status: 200, body: 'ok\n' });
    expect(await request('/readyz', { method: 'GET' })).toMatchObject({ status: 200, body: 'ok\n' });
    readiness = { ready: false, reasons: ['no serving certificate loaded', 'kdapps cache not synced'] };
    try {
      expect(await request('/readyz', { method: 'GET' })).toMatchObject({
        status: 503,
        body: 'not ready: no serving certificate loaded; kdapps cache not synced\n',
      });
    } finally {
      readiness = { ready: true, reasons: [] };
    }
  });

  it('/metrics counts requests by webhook, operation and result and has a latency histogram', async () => {
    await post('/mutate-kdcluster', JSON.stringify(fixture('mutate-kdcluster-create-with-connections')));
    await post('/mutate-kdcluster', JSON.stringify(fixture('mutate-kdcluster-update-reordered')));
    await post('/validate-kdapp', JSON.stringify(fixture('validate-kdapp-create-invalid')));
    await post('/validate-kdapp', 'nope');
    const res = await request('/metrics', { method: 'GET' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const count = (labels: string) =>
      Number(new RegExp(`^kd_admission_requests_total\\{${labels}\\} (\\d+)$`, 'm').exec(res.body)?.[1] ?? 0);
    expect(count('webhook="mutate-kdcluster",operation="CREATE",result="patched"')).toBeGreaterThanOrEqual(1);
    expect(count('webhook="mutate-kdcluster",operation="UPDATE",result="allowed"')).toBeGreaterThanOrEqual(1);
    expect(count('webhook="validate-kdapp",operation="CREATE",result="denied"')).toBeGreaterThanOrEqual(1);
    expect(count('webhook="validate-kdapp",operation="unknown",result="rejected"')).toBeGreaterThanOrEqual(1);
    expect(res.body).toMatch(
      /^kd_admission_request_duration_seconds_bucket\{le="0.005",webhook="validate-kdapp"\} \d+$/m,
    );
  });

  it("/metrics has controller-runtime's webhook series: by path and HTTP code, latency by path, in flight by path", async () => {
    const before = await request('/metrics', { method: 'GET' });
    const value = (body: string, series: string) =>
      Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\d+)$`, 'm').exec(body)?.[1] ?? 0);
    const ok = 'controller_runtime_webhook_requests_total{webhook="/validate-kdapp",code="200"}';
    const bad = 'controller_runtime_webhook_requests_total{webhook="/validate-kdapp",code="400"}';
    const latency = 'controller_runtime_webhook_latency_seconds_count{webhook="/validate-kdapp"}';
    await post('/validate-kdapp', JSON.stringify(fixture('validate-kdapp-create-invalid')));
    await post('/validate-kdapp', 'nope');
    const after = (await request('/metrics', { method: 'GET' })).body;
    expect(value(after, ok) - value(before.body, ok)).toBe(1);
    expect(value(after, bad) - value(before.body, bad)).toBe(1);
    expect(value(after, latency) - value(before.body, latency)).toBe(2);
    // controller-runtime's (Go's default) buckets, so Go webhooks' dashboards read these unchanged.
    expect(after).toMatch(
      /^controller_runtime_webhook_latency_seconds_bucket\{le="0.005",webhook="\/validate-kdapp"\} \d+$/m,
    );
    expect(after).toMatch(
      /^controller_runtime_webhook_latency_seconds_bucket\{le="10",webhook="\/validate-kdapp"\} \d+$/m,
    );
    // Every review answered: none left in flight.
    expect(after).toMatch(/^controller_runtime_webhook_requests_in_flight\{webhook="\/validate-kdapp"\} 0$/m);
  });

  it('logs an allowed review at debug and a denied one at info', async () => {
    logs.length = 0;
    await post('/validate-kdapp', JSON.stringify(fixture('validate-kdapp-create-invalid')));
    await post('/mutate-kdcluster', JSON.stringify(fixture('mutate-kdcluster-update-reordered')));
    const lines = logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'review');
    expect(lines.map((l) => [l.webhook, l.decision, l.level])).toEqual([
      ['validate-kdapp', 'denied', 'info'],
      ['mutate-kdcluster', 'allowed', 'debug'],
    ]);
  });

  it('logs one structured line per review with identifiers, never the object', async () => {
    const review = fixture('validate-kdcluster-create-denied');
    (review.request.object as { metadata: Record<string, unknown> }).metadata.annotations = {
      note: 'BODY-MARKER-7f3a',
    };
    review.request.dryRun = true;
    logs.length = 0;
    await post('/validate-kdcluster', JSON.stringify(review));
    await post('/validate-kdcluster', '{"secret": "BODY-MARKER-7f3a"');
    expect(logs.join('\n')).not.toContain('BODY-MARKER-7f3a');
    const line = logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'review');
    expect(line).toMatchObject({
      level: 'info',
      webhook: 'validate-kdcluster',
      uid: review.request.uid,
      kind: 'KubeDirectorCluster',
      namespace: 'ml',
      name: 'notebook-sql',
      operation: 'CREATE',
      dryRun: true,
      decision: 'denied',
      code: 403,
      fields: ['spec.connections.clusters[0]'],
    });
    expect(typeof line.latencyMs).toBe('number');
    expect(logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'review refused')).toMatchObject({
      status: 400,
      reason: 'invalid-json',
    });
  });

  it('keeps metric labels and log fields bounded whatever the client sends', async () => {
    const review = fixture('mutate-pod-member');
    review.request.operation = 'EXPLODE-' + 'x'.repeat(50);
    review.request.uid = 'u'.repeat(10_000);
    logs.length = 0;
    const res = await post('/mutate-pod', JSON.stringify(review));
    expect(JSON.parse(res.body).response).toEqual({ uid: review.request.uid, allowed: true });
    const metricsText = (await request('/metrics', { method: 'GET' })).body;
    expect(metricsText).not.toContain('EXPLODE');
    expect(metricsText).toMatch(
      /^kd_admission_requests_total\{webhook="mutate-pod",operation="other",result="allowed"\} 1$/m,
    );
    const line = JSON.parse(logs.find((l) => l.includes('"msg":"review"'))!);
    expect(line.uid).toHaveLength(257);
    expect(line.operation).toBe('other');
  });

  it('sends Connection: close on every answer once draining', async () => {
    draining = true;
    try {
      const res = await post('/mutate-pod', JSON.stringify(fixture('mutate-pod-member')));
      expect(res.status).toBe(200);
      expect(res.headers.connection).toBe('close');
      expect((await request('/healthz', { method: 'GET' })).headers.connection).toBe('close');
    } finally {
      draining = false;
    }
  });
});

function jsonError(text: string): string {
  try {
    JSON.parse(text);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('valid JSON');
}
