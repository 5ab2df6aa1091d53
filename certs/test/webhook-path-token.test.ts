import { describe, expect, it } from '@jest/globals';
import {
  isPathToken,
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

  it('leaves webhooks it has no route for alone, and says which', () => {
    const p = webhookPathPatch(
      view([{ name: 'someone-else.example.com', clientConfig: { service: { path: '/theirs' } } }]),
      A,
      routes,
    );
    expect(p).toEqual({ ops: [], changed: [], unknown: ['someone-else.example.com'] });
  });
});
