import { describe, expect, it } from '@jest/globals';
import {
  acceptedPathTokens,
  pathToken,
  pathTokenChangeAt,
  pathTokenClock,
  pathTokenPeriod,
  publishedPathTokenPeriod,
  routeBehindToken,
  tokenPath,
  webhookPathPatch,
} from '../src/path-token/path-token-rules.js';
import type { WebhookConfigurationView } from '@kd-connections/certs';

const KEY = Buffer.alloc(32, 7);
const A = pathToken(KEY, 1);
const B = pathToken(KEY, 2);
const routes = (name: string) =>
  ({ 'validate-kdcluster.x': '/validate-kdcluster', 'mutate-pod.x': '/mutate-pod' })[name];

const view = (clientConfigs: WebhookConfigurationView['webhooks']): WebhookConfigurationView => ({
  metadata: { name: 'c', resourceVersion: '7' },
  webhooks: clientConfigs,
});

describe('the webhook path token', () => {
  it('is an HMAC of the key and the period: 43 URL-safe characters, the same for every replica, new each period', () => {
    const many = new Set(Array.from({ length: 200 }, (_, p) => pathToken(KEY, p)));
    expect(many.size).toBe(200);
    for (const t of many) expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(pathToken(Buffer.alloc(32, 7), 1)).toBe(A);
    expect(pathToken(Buffer.alloc(32, 8), 1)).not.toBe(A);
  });

  it('admits a request path only behind one of the current tokens', () => {
    expect(routeBehindToken(tokenPath(A, '/validate-kdcluster'), [A])).toBe('/validate-kdcluster');
    expect(routeBehindToken(tokenPath(A, '/mutate-pod'), [B, A])).toBe('/mutate-pod');
    expect(routeBehindToken(tokenPath(B, '/validate-kdcluster'), [A])).toBeUndefined();
    expect(routeBehindToken('/validate-kdcluster', [A])).toBeUndefined();
    expect(routeBehindToken(`/t/${A}`, [A])).toBeUndefined();
    expect(routeBehindToken(`/t/${A.slice(0, 20)}/validate-kdcluster`, [A])).toBeUndefined();
    expect(routeBehindToken(`/t/${A}x/validate-kdcluster`, [A])).toBeUndefined();
    expect(routeBehindToken(`/t//validate-kdcluster`, [A])).toBeUndefined();
    expect(routeBehindToken(tokenPath(A, '/validate-kdcluster'), [])).toBeUndefined();
  });
});

describe('webhookPathPatch', () => {
  it('sets service.path of each known webhook, with a test of its name at its index', () => {
    const p = webhookPathPatch(
      view([
        { name: 'validate-kdcluster.x', clientConfig: { service: { name: 's', namespace: 'n' } } },
        { name: 'mutate-pod.x', clientConfig: { service: { name: 's', namespace: 'n', path: '/mutate-pod' } } },
      ]),
      A,
      routes,
    );
    expect(p.changed).toEqual(['validate-kdcluster.x', 'mutate-pod.x']);
    expect(p.unknown).toEqual([]);
    expect(p.ops).toEqual([
      { op: 'test', path: '/webhooks/0/name', value: 'validate-kdcluster.x' },
      { op: 'add', path: '/webhooks/0/clientConfig/service/path', value: `/t/${A}/validate-kdcluster` },
      { op: 'test', path: '/webhooks/1/name', value: 'mutate-pod.x' },
      { op: 'add', path: '/webhooks/1/clientConfig/service/path', value: `/t/${A}/mutate-pod` },
    ]);
  });

  it('rewrites only the path of a url, and nothing when every path is right', () => {
    const p = webhookPathPatch(
      view([{ name: 'mutate-pod.x', clientConfig: { url: 'https://127.0.0.1:9443/mutate-pod' } }]),
      A,
      routes,
    );
    expect(p.ops[1]).toEqual({
      op: 'add',
      path: '/webhooks/0/clientConfig/url',
      value: `https://127.0.0.1:9443/t/${A}/mutate-pod`,
    });
    const done = webhookPathPatch(
      view([
        { name: 'mutate-pod.x', clientConfig: { url: `https://127.0.0.1:9443/t/${A}/mutate-pod` } },
        { name: 'validate-kdcluster.x', clientConfig: { service: { path: `/t/${A}/validate-kdcluster` } } },
      ]),
      A,
      routes,
    );
    expect(done).toEqual({ ops: [], changed: [], unknown: [] });
    // A new token replaces the old one.
    expect(
      webhookPathPatch(
        view([{ name: 'mutate-pod.x', clientConfig: { service: { path: `/t/${A}/mutate-pod` } } }]),
        B,
        routes,
      ).ops[1],
    ).toEqual({ op: 'add', path: '/webhooks/0/clientConfig/service/path', value: `/t/${B}/mutate-pod` });
  });

  it('without a token: the bare route, taking back a token path; a prefix in front of the route is kept', () => {
    const p = webhookPathPatch(
      view([
        { name: 'mutate-pod.x', clientConfig: { url: `https://proxy.example.com/kd/t/${A}/mutate-pod` } },
        { name: 'validate-kdcluster.x', clientConfig: { service: { path: `/t/${A}/validate-kdcluster` } } },
      ]),
      undefined,
      routes,
    );
    expect(p.ops.filter((o) => o.op === 'add').map((o) => o.value)).toEqual([
      'https://proxy.example.com/kd/mutate-pod',
      '/validate-kdcluster',
    ]);
    expect(
      webhookPathPatch(
        view([{ name: 'mutate-pod.x', clientConfig: { url: 'https://proxy.example.com/kd/mutate-pod' } }]),
        A,
        routes,
      ).ops[1]!.value,
    ).toBe(`https://proxy.example.com/kd/t/${A}/mutate-pod`);
  });

  it('leaves a path that is not one of ours, or a url that does not parse, alone and says which', () => {
    const p = webhookPathPatch(
      view([
        { name: 'mutate-pod.x', clientConfig: { service: { path: '/hooks/custom' } } },
        { name: 'validate-kdcluster.x', clientConfig: { url: 'not a url' } },
      ]),
      A,
      routes,
    );
    expect(p).toEqual({ ops: [], changed: [], unknown: ['mutate-pod.x', 'validate-kdcluster.x'] });
  });

  it('leaves webhooks it has no route for alone, and says which', () => {
    const p = webhookPathPatch(
      view([{ name: 'someone-else.example.com', clientConfig: { service: { path: '/theirs' } } }]),
      A,
      routes,
    );
    expect(p).toEqual({ ops: [], changed: [], unknown: ['someone-else.example.com'] });
  });
});

describe('rotation', () => {
  const H = 3_600_000;
  const hourly = pathTokenClock(H);
  const t = (p: number) => pathToken(KEY, p);

  it('timing: previous accepted min(5 min, half), next min(30 s, a quarter) early; 0 never rotates', () => {
    expect(hourly).toEqual({ rotationMs: H, graceMs: 300_000, skewMs: 30_000 });
    expect(pathTokenClock(40_000)).toEqual({ rotationMs: 40_000, graceMs: 20_000, skewMs: 10_000 });
    expect(pathTokenPeriod(5 * H + 1, hourly)).toBe(5);
    expect(pathTokenPeriod(5 * H + 1, pathTokenClock(0))).toBe(0);
    expect(acceptedPathTokens(KEY, 5 * H, pathTokenClock(0), false)).toEqual([t(0)]);
    expect(pathTokenChangeAt(5 * H, pathTokenClock(0))).toBeUndefined();
  });

  it('accepts the previous token through the grace (longer until published here) and the next within the skew', () => {
    expect(acceptedPathTokens(KEY, 5 * H, hourly, true)).toEqual([t(5), t(4)]);
    expect(acceptedPathTokens(KEY, 5 * H + 299_999, hourly, true)).toEqual([t(5), t(4)]);
    expect(acceptedPathTokens(KEY, 5 * H + 300_000, hourly, true)).toEqual([t(5)]);
    expect(acceptedPathTokens(KEY, 5 * H + 300_000, hourly, false)).toEqual([t(5), t(4)]);
    expect(acceptedPathTokens(KEY, 6 * H - 30_001, hourly, true)).toEqual([t(5)]);
    expect(acceptedPathTokens(KEY, 6 * H - 30_000, hourly, true)).toEqual([t(5), t(6)]);
  });

  it("publishes a period's token only from 30 s into it, so clocks up to a minute apart agree", () => {
    expect(publishedPathTokenPeriod(5 * H + 29_999, hourly)).toBe(4);
    expect(publishedPathTokenPeriod(5 * H + 30_000, hourly)).toBe(5);
    // A replica 59 s behind, at the moment one ahead publishes period 5, accepts it as the next.
    expect(acceptedPathTokens(KEY, 5 * H + 30_000 - 59_000, hourly, true)).toContain(t(5));
    expect(publishedPathTokenPeriod(5 * H, pathTokenClock(0))).toBe(0);
  });

  it('wakes when the accepted tokens change: end of grace, start of skew, next period', () => {
    expect(pathTokenChangeAt(5 * H + 1, hourly)).toEqual(new Date(5 * H + 30_000));
    expect(pathTokenChangeAt(5 * H + 30_000, hourly)).toEqual(new Date(5 * H + 300_000));
    expect(pathTokenChangeAt(5 * H + 300_000, hourly)).toEqual(new Date(6 * H - 30_000));
    expect(pathTokenChangeAt(6 * H - 30_000, hourly)).toEqual(new Date(6 * H));
  });

  it('the patch leaves a path behind a token still good as it is, never taking a newer one back', () => {
    const v = view([{ name: 'mutate-pod.x', clientConfig: { service: { path: `/t/${B}/mutate-pod` } } }]);
    expect(webhookPathPatch(v, A, routes, [B, A]).ops).toEqual([]);
    expect(webhookPathPatch(v, A, routes, [A]).ops[1]!.value).toBe(`/t/${A}/mutate-pod`);
    const bare = view([{ name: 'mutate-pod.x', clientConfig: { service: { path: '/mutate-pod' } } }]);
    expect(webhookPathPatch(bare, A, routes, [B, A]).ops[1]!.value).toBe(`/t/${A}/mutate-pod`);
  });
});
