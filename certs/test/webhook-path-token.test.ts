import { describe, expect, it } from '@jest/globals';
import {
  acceptedPathTokens,
  isPathToken,
  nextPathTokenData,
  PATH_TOKEN_ISSUED_KEY,
  PATH_TOKEN_PREVIOUS_KEY,
  learnPathToken,
  pathTokenDue,
  pathTokenState,
  publishCurrentNow,
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

const view = (clientConfigs: WebhookConfigurationView['webhooks']): WebhookConfigurationView => ({
  metadata: { name: 'c', resourceVersion: '7' },
  webhooks: clientConfigs,
});

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
    expect(pathTokenTiming(0)).toEqual({ rotationMs: 0, publishAfterMs: 10_000, graceMs: 300_000 });
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

  it('a replica times the overlap on its own clock: publish after publishAfter, previous accepted through the grace', () => {
    const ms = (x: number) => t0.getTime() + x * 1000;
    // A first token: nothing to replace, published at once.
    const first = learnPathToken(undefined, { current: A, previous: undefined, issuedAt: t0 }, ms(0))!;
    expect(first).toEqual({ current: A, seenAtMs: ms(0), published: false, fresh: true });
    expect(publishCurrentNow(first, ms(0), hourly)).toBe(true);
    expect(acceptedPathTokens(first, ms(0), hourly)).toEqual([A]);
    // The same token read again changes nothing.
    expect(learnPathToken(first, { current: A, previous: undefined, issuedAt: t0 }, ms(50))).toBe(first);
    // Rotated by another replica whose clock is an hour ahead: the times are this replica's.
    const skewed = { current: B, previous: A, issuedAt: at(7200) };
    const next = { ...learnPathToken({ ...first, published: true }, skewed, ms(100))!, published: false };
    expect(next).toEqual({ current: B, previous: A, seenAtMs: ms(100), published: false, fresh: false });
    expect(publishCurrentNow(next, ms(109), hourly)).toBe(false);
    expect(publishCurrentNow(next, ms(110), hourly)).toBe(true);
    expect(acceptedPathTokens(next, ms(100), hourly)).toEqual([B, A]);
    // Past the grace, the previous stays accepted until this replica's publication of B succeeded.
    expect(acceptedPathTokens(next, ms(500), hourly)).toEqual([B, A]);
    expect(acceptedPathTokens({ ...next, published: true }, ms(399), hourly)).toEqual([B, A]);
    expect(acceptedPathTokens({ ...next, published: true }, ms(400), hourly)).toEqual([B]);
    expect(acceptedPathTokens(undefined, ms(0), hourly)).toEqual([]);
    // A Secret replaced wholesale (no previous in it): the token this replica had stands in for it.
    expect(learnPathToken(next, { current: A, previous: undefined, issuedAt: t0 }, ms(600))).toEqual({
      current: A,
      previous: B,
      seenAtMs: ms(600),
      published: false,
      fresh: false,
    });
    // Wakes: publication, end of grace (this replica's clock), the rotation due (the writer's issue time).
    expect(pathTokenWakeAt(next, skewed, ms(100), hourly)).toEqual(new Date(ms(110)));
    expect(pathTokenWakeAt(next, skewed, ms(110), hourly)).toEqual(new Date(ms(400)));
    expect(pathTokenWakeAt(next, skewed, ms(400), hourly)).toEqual(at(10800));
    expect(
      pathTokenWakeAt(first, { current: A, previous: undefined, issuedAt: t0 }, ms(0), pathTokenTiming(0)),
    ).toBeUndefined();
  });

  it('the patch leaves a path behind a token still good as it is, never taking a newer one back', () => {
    const v = view([{ name: 'mutate-pod.x', clientConfig: { service: { path: `/t/${B}/mutate-pod` } } }]);
    expect(webhookPathPatch(v, A, routes, [B, A]).ops).toEqual([]);
    expect(webhookPathPatch(v, A, routes, [A]).ops[1]!.value).toBe(`/t/${A}/mutate-pod`);
    const bare = view([{ name: 'mutate-pod.x', clientConfig: { service: { path: '/mutate-pod' } } }]);
    expect(webhookPathPatch(bare, A, routes, [B, A]).ops[1]!.value).toBe(`/t/${A}/mutate-pod`);
  });
});
