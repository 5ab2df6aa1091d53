/**
 * The informer's reaction to a failing or flapping server, against a scripted loopback HTTP server
 * (this tests our retry policy, not Kubernetes behaviour; that is in test/integration/informer.test.ts).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { Informer } from '../src/runtime/informer.js';
import { KubeClient } from '../src/runtime/kube-client.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function server(handler: http.RequestListener): Promise<{ url: string; hits: string[] }> {
  const hits: string[] = [];
  const s = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    handler(req, res);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  closers.push(() => new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r()))));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, hits };
}

function client(url: string): KubeClient {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const c = new KubeClient(kc);
  closers.push(async () => c.close());
  return c;
}

function start(inf: Informer): void {
  inf.start();
  closers.push(() => inf.stop());
}

describe('Informer backoff', () => {
  it('computes capped exponential delays with ±20% jitter', () => {
    const b = { initialMs: 100, maxMs: 1000 };
    expect([1, 2, 3, 4, 5, 9].map((n) => Informer.backoffDelay(n, b, () => 0.5))).toEqual([
      100, 200, 400, 800, 1000, 1000,
    ]);
    expect(Informer.backoffDelay(1, b, () => 0)).toBe(80);
    expect(Informer.backoffDelay(1, b, () => 1)).toBe(120);
  });

  it('backs off while the server keeps failing, instead of hammering it', async () => {
    const srv = await server((_req, res) => res.writeHead(500).end('{"kind":"Status","message":"boom"}'));
    const restarts: string[] = [];
    const inf = new Informer({
      name: 't',
      client: client(srv.url),
      path: '/api/v1/configmaps',
      backoff: { initialMs: 100, maxMs: 2000 },
      onRestart: (r) => restarts.push(r),
      random: () => 0.5,
    });
    start(inf);
    await new Promise((r) => setTimeout(r, 1600));
    // 100 + 200 + 400 + 800 ms of waiting fit in 1.6 s: about 4-5 attempts, not hundreds.
    expect(srv.hits.length).toBeGreaterThanOrEqual(3);
    expect(srv.hits.length).toBeLessThanOrEqual(6);
    expect(inf.synced).toBe(false);
    expect(restarts.every((r) => r === 'error')).toBe(true);
  });

  it('treats watches that end at once as a reconnect storm and backs off', async () => {
    const srv = await server((req, res) => {
      if (req.url?.includes('watch=1')) return res.writeHead(200, { 'Content-Type': 'application/json' }).end();
      res
        .writeHead(200, { 'Content-Type': 'application/json' })
        .end(JSON.stringify({ metadata: { resourceVersion: '5' }, items: [] }));
    });
    const inf = new Informer({
      name: 't',
      client: client(srv.url),
      path: '/api/v1/configmaps',
      backoff: { initialMs: 100, maxMs: 2000 },
      random: () => 0.5,
    });
    start(inf);
    await new Promise((r) => setTimeout(r, 1600));
    const watches = srv.hits.filter((h) => h.includes('watch=1'));
    expect(inf.synced).toBe(true);
    expect(watches.length).toBeGreaterThanOrEqual(3);
    expect(watches.length).toBeLessThanOrEqual(6);
    // Every watch asks for bookmarks, a server-side timeout, and resumes from the list's version.
    expect(watches[0]).toMatch(/allowWatchBookmarks=true/);
    expect(watches[0]).toMatch(/timeoutSeconds=\d+/);
    expect(watches[0]).toMatch(/resourceVersion=5/);
  });

  it('follows bookmarks: the next watch resumes from the bookmarked version', async () => {
    let n = 0;
    const srv = await server((req, res) => {
      if (!req.url?.includes('watch=1')) {
        return res.writeHead(200).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
      }
      n++;
      res.writeHead(200);
      if (n === 1) {
        res.write(JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '42' } } }) + '\n');
        setTimeout(() => res.end(), 1100); // a normal end after the server-side timeout
      }
    });
    const inf = new Informer({
      name: 't',
      client: client(srv.url),
      path: '/api/v1/configmaps',
      watchTimeoutSeconds: 1,
      random: () => 0.5,
    });
    start(inf);
    for (let i = 0; i < 40 && srv.hits.filter((h) => h.includes('watch=1')).length < 2; i++)
      await new Promise((r) => setTimeout(r, 100));
    const watches = srv.hits.filter((h) => h.includes('watch=1'));
    expect(watches[1]).toMatch(/resourceVersion=42/);
  });
});
