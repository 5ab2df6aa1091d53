/**
 * The HTTP edge behind a webhook path token: reviews are answered only at /t/<token>/<webhook>; anything
 * else — the bare paths, a wrong or old token — gets the same 404 before the body is read, so a caller
 * without the token learns nothing about any object.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { pathToken, tokenPath } from '../src/path-token/path-token-rules.js';

const newPathToken = () => pathToken(randomBytes(32), 1);
import { createLogger } from '@kd-connections/shared/runtime';
import { createApp } from '../src/app.js';
import { AdmissionMetrics } from '../src/metrics.js';
import { WEBHOOKS } from '../src/webhooks/index.js';
import { exampleWorld, fixture, serveOnLoopback } from './support.js';

let served: Awaited<ReturnType<typeof serveOnLoopback>>;
let port: number;
const metrics = new AdmissionMetrics();
const world = exampleWorld();
const lookups = world.lookups;
let tokens: string[] = [newPathToken()];

beforeAll(async () => {
  const app = createApp({
    webhooks: WEBHOOKS,
    deps: world.deps(),
    metrics,
    log: createLogger({ component: 'test', level: 'error', write: () => undefined }),
    readiness: () => ({ ready: true, reasons: [] }),
    pathTokens: () => tokens,
  });
  served = await serveOnLoopback(app);
  port = served.port;
});

afterAll(() => served.close());

function post(path: string, body: string | Buffer): Promise<{ status: number; body: string; connection?: string }> {
  return new Promise((ok, fail) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent: false,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }));
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

const refused = async () =>
  (await metrics.registry.getSingleMetricAsString('kd_admission_reviews_refused_path_total')).match(/ (\d+)$/m)?.[1];

describe('reviews behind a webhook path token', () => {
  const review = JSON.stringify(fixture('validate-kdcluster-create-denied'));

  it('are decided at /t/<token>/<webhook>, with a ?timeout= as the API server sends it', async () => {
    for (const path of [
      tokenPath(tokens[0]!, '/validate-kdcluster'),
      `${tokenPath(tokens[0]!, '/validate-kdcluster')}?timeout=10s`,
    ]) {
      const r = await post(path, review);
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body).response.uid).toBe(JSON.parse(review).request.uid);
    }
  });

  it('elsewhere get one fixed 404 without a decision or a lookup: bare path, wrong token, no route', async () => {
    const before = Number(await refused());
    lookups.length = 0;
    const other = newPathToken();
    const paths = [
      '/validate-kdcluster',
      '/mutate-pod',
      tokenPath(other, '/validate-kdcluster'),
      `/t/${tokens[0]!.slice(0, 42)}/validate-kdcluster`,
      tokenPath(tokens[0]!, '/no-such-webhook'),
      `/t/${tokens[0]}`,
    ];
    const answers = new Set<string>();
    for (const path of paths) {
      const r = await post(path, review);
      expect({ path, status: r.status }).toEqual({ path, status: 404 });
      answers.add(r.body);
    }
    expect([...answers]).toEqual(['no webhook at this path\n']);
    expect(lookups).toEqual([]);
    expect(Number(await refused())).toBe(before + paths.length);
  });

  it('a large body sent to a wrong path is answered, not read into memory, and the connection closed', async () => {
    const r = await post('/validate-kdcluster', Buffer.alloc(3 * 1024 * 1024, 'x'));
    expect(r.status).toBe(404);
    expect(r.connection).toBe('close');
  });

  it('follow the current tokens: a new one works at once, a dropped one no longer does', async () => {
    const old = tokens[0]!;
    const next = newPathToken();
    tokens = [next, old];
    expect((await post(tokenPath(next, '/validate-kdcluster'), review)).status).toBe(200);
    expect((await post(tokenPath(old, '/validate-kdcluster'), review)).status).toBe(200);
    tokens = [next];
    expect((await post(tokenPath(old, '/validate-kdcluster'), review)).status).toBe(404);
  });

  it('health, readiness and metrics stay where the probes look for them', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const r = await new Promise<number>((ok, fail) =>
        http
          .get({ host: '127.0.0.1', port, path, agent: false }, (res) => (res.resume(), ok(res.statusCode ?? 0)))
          .on('error', fail),
      );
      expect({ path, status: r }).toEqual({ path, status: 200 });
    }
  });
});
