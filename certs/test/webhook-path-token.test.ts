import { describe, expect, it } from '@jest/globals';
import {
  acceptedPathTokens,
  isPathToken,
  nextPathTokenData,
  PATH_TOKEN_ISSUED_KEY,
  PATH_TOKEN_PREVIOUS_KEY,
  pathTokenDue,
  pathTokenPublishAt,
  pathTokenState,
  pathTokenTiming,
  pathTokenWakeAt,
  newPathToken,
  PATH_TOKEN_KEY,
  pathTokenIn,
  routeBehindToken,
  tokenPath,
  webhookPathPatch,
  type WebhookConfigurationView,
} from '../src/index.js';

const A = newPathToken();
const B = newPathToken();
const routes = (name: string) =>
  ({ 'validate-kdcluster.x': '/validate-kdcluster', 'mutate-pod.x': '/mutate-pod' })[name];
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

describe('the webhook path token', () => {
  it('is 32 random bytes as 43 URL-safe characters, new each time', () => {
    const many = new Set(Array.from({ length: 200 }, newPathToken));
    expect(many.size).toBe(200);
    for (const t of many) expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(isPathToken(A)).toBe(true);
  });

  it('is read from a Secret only when well-formed', () => {
    expect(pathTokenIn({ [PATH_TOKEN_KEY]: b64(A) })).toBe(A);
    expect(pathTokenIn(undefined)).toBeUndefined();
    expect(pathTokenIn({})).toBeUndefined();
    expect(pathTokenIn({ [PATH_TOKEN_KEY]: b64('short') })).toBeUndefined();
    expect(pathTokenIn({ [PATH_TOKEN_KEY]: b64(`${A.slice(0, 42)}/`) })).toBeUndefined();
    expect(pathTokenIn({ [PATH_TOKEN_KEY]: b64(`${A}\n`) })).toBeUndefined();
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
  const view = (clientConfigs: WebhookConfigurationView['webhooks']): WebhookConfigurationView => ({
    metadata: { name: 'c', resourceVersion: '7' },
    webhooks: clientConfigs,
  });

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
  const t0 = new Date('2026-12-06T12:00:00Z');
  const at = (s: number) => new Date(t0.getTime() + s * 1000);
  const hourly = pathTokenTiming(3_600_000);

  it('timing: publish after min(10 s, a quarter), previous accepted min(5 min, half); 0 never rotates', () => {
    expect(hourly).toEqual({ rotationMs: 3_600_000, publishAfterMs: 10_000, graceMs: 300_000 });
    expect(pathTokenTiming(40_000)).toEqual({ rotationMs: 40_000, publishAfterMs: 10_000, graceMs: 20_000 });
    expect(pathTokenTiming(8_000)).toEqual({ rotationMs: 8_000, publishAfterMs: 2_000, graceMs: 4_000 });
    expect(pathTokenTiming(0).rotationMs).toBe(0);
  });

  it('a first token, then the next one every period; the state reads back what was written', () => {
    const empty = pathTokenState({});
    expect(empty).toEqual({ current: undefined, previous: undefined, issuedAt: undefined });
    expect(pathTokenDue(empty, t0, hourly)).toBe('add');
    const first = pathTokenState(nextPathTokenData(empty, t0, A));
    expect(first).toEqual({ current: A, previous: undefined, issuedAt: t0 });
    expect(pathTokenDue(first, at(3599), hourly)).toBeUndefined();
    expect(pathTokenDue(first, at(3600), hourly)).toBe('rotate');
    expect(pathTokenDue(first, at(99_999), pathTokenTiming(0))).toBeUndefined();
    const second = pathTokenState(nextPathTokenData(first, at(3600), B));
    expect(second).toEqual({ current: B, previous: A, issuedAt: at(3600) });
    // A token without a recorded issue time (or an unreadable one) is due at once.
    expect(pathTokenDue(pathTokenState({ [PATH_TOKEN_KEY]: b64(A) }), t0, hourly)).toBe('rotate');
    expect(
      pathTokenDue(pathTokenState({ [PATH_TOKEN_KEY]: b64(A), [PATH_TOKEN_ISSUED_KEY]: b64('yesterday') }), t0, hourly),
    ).toBe('rotate');
    expect(
      pathTokenState({ [PATH_TOKEN_KEY]: b64(A), [PATH_TOKEN_PREVIOUS_KEY]: b64('junk') }).previous,
    ).toBeUndefined();
  });

  it('accepts the previous through its grace, publishes the new one after publishAfter, wakes at each change', () => {
    const s = { current: B, previous: A, issuedAt: t0 };
    expect(acceptedPathTokens(s, at(299), hourly)).toEqual([B, A]);
    expect(acceptedPathTokens(s, at(300), hourly)).toEqual([B]);
    expect(acceptedPathTokens({ current: undefined, previous: A, issuedAt: t0 }, t0, hourly)).toEqual([]);
    expect(pathTokenPublishAt(s, at(5), hourly)).toEqual(at(10));
    expect(pathTokenPublishAt(s, at(10), hourly)).toBeUndefined();
    // A first token (nothing to replace) is published at once.
    expect(pathTokenPublishAt({ current: A, previous: undefined, issuedAt: t0 }, t0, hourly)).toBeUndefined();
    expect(pathTokenWakeAt(s, t0, hourly)).toEqual(at(10));
    expect(pathTokenWakeAt(s, at(10), hourly)).toEqual(at(300));
    expect(pathTokenWakeAt(s, at(300), hourly)).toEqual(at(3600));
    expect(pathTokenWakeAt(s, at(300), pathTokenTiming(0))).toBeUndefined();
  });
});
