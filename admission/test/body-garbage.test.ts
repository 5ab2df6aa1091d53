/**
 * The garbage of large bodies: BodyGarbage's rule, and where the HTTP edge tells it (a large review read
 * and answered; bytes of a body read or drained), against a real HTTP server and the example world.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { createLogger } from '@kd-connections/shared/runtime';
import { createApp, LARGE_BODY_BYTES } from '../src/app.js';
import { BodyGarbage, BODY_BYTES_PER_MINOR } from '../src/body-garbage.js';
import { AdmissionMetrics } from '../src/metrics.js';
import { ReviewLimiter } from '../src/review-limiter.js';
import { WEBHOOKS } from '../src/webhooks/index.js';
import { exampleWorld, fixture, serveOnLoopback } from './support.js';

describe('BodyGarbage', () => {
  it('a full collection after each large review; a minor one per MiB of body chunks consumed', () => {
    const calls: string[] = [];
    const g = new BodyGarbage({ full: () => calls.push('full'), minor: () => calls.push('minor') });
    g.afterLargeReview();
    for (let i = 0; i < 3 * 64; i++) g.consumed(BODY_BYTES_PER_MINOR / 64 + 1);
    expect(calls).toEqual(['full', 'minor', 'minor', 'minor']);
  });
});

describe('the HTTP edge tells it', () => {
  let served: Awaited<ReturnType<typeof serveOnLoopback>>;
  let port: number;
  const told = { large: 0, consumed: 0 };
  // One turn, held by the test when it wants the next review told "busy".
  const limiter = new ReviewLimiter({ maxInFlight: 1, maxBytes: 64 * 2 ** 20, maxQueued: 0 });

  beforeAll(async () => {
    const app = createApp({
      webhooks: WEBHOOKS,
      deps: exampleWorld().deps(),
      metrics: new AdmissionMetrics(),
      log: createLogger({ component: 'test', level: 'error', write: () => undefined }),
      readiness: () => ({ ready: true, reasons: [] }),
      limiter,
      garbage: { afterLargeReview: () => void told.large++, consumed: (n) => void (told.consumed += n) },
    });
    served = await serveOnLoopback(app);
    port = served.port;
  });
  afterAll(() => served.close());

  const post = (body: Buffer): Promise<number> =>
    new Promise((ok, fail) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          path: '/validate-kdcluster',
          method: 'POST',
          agent: false,
          headers: { 'Content-Type': 'application/json', 'Content-Length': body.length },
        },
        (res) => (res.resume(), res.on('end', () => ok(res.statusCode ?? 0))),
      );
      req.on('error', fail);
      req.end(body);
    });
  /** The denied fixture, padded with spaces (valid JSON) to `bytes`. */
  const review = (bytes: number) => {
    const text = JSON.stringify(fixture('validate-kdcluster-create-denied'));
    return Buffer.from(text + ' '.repeat(Math.max(0, bytes - text.length)));
  };

  it('once after a large review was read and answered, never after a small one; of every byte it read', async () => {
    const small = review(1000);
    const large = review(LARGE_BODY_BYTES + 10);
    expect(await post(small)).toBe(200);
    expect(told.large).toBe(0);
    expect(told.consumed).toBe(small.length);
    expect(await post(large)).toBe(200);
    expect(told.large).toBe(1);
    expect(told.consumed).toBe(small.length + large.length);
  });

  it('of the bytes of a body drained after "busy", not of it as a large review', async () => {
    const turn = limiter.acquire(1, 1000);
    const held = turn instanceof Promise ? await turn : turn;
    try {
      const size = 2 * LARGE_BODY_BYTES;
      const before = told.consumed;
      expect(await post(review(size))).toBe(429);
      expect(told.large).toBe(1);
      expect(told.consumed - before).toBeGreaterThan(0);
      expect(told.consumed - before).toBeLessThanOrEqual(size);
    } finally {
      if (held && held.ok) held.release();
    }
  });
});
