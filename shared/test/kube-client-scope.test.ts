/**
 * A scoped client (the reconciler's term of leadership) sends a request only if its scope still holds when
 * the connection is ready: a term that ends while a new connection is made sends nothing (a leader paused
 * past its lease once flushed a queued pod patch on resuming). Against a loopback HTTP server.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { isAbortError, KubeClient } from '../src/runtime/kube-client.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function setup(): Promise<{ hits: string[]; client: KubeClient }> {
  const hits: string[] = [];
  const s = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    res.setHeader('Content-Type', 'application/json');
    res.end('{}');
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const client = new KubeClient(kc);
  closers.push(async () => {
    client.close();
    await new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r())));
  });
  return { hits, client };
}

describe('a scoped client', () => {
  it('sends nothing when its scope ends while the connection is being made', async () => {
    const { hits, client } = await setup();
    const term = new AbortController();
    let checks = 0;
    // Holds when the request is made, ends by the time the new connection is ready.
    const scoped = client.scoped({ signal: term.signal, guard: () => void (++checks === 2 && term.abort()) });
    const err = await scoped.get('/api/v1/namespaces/ns/pods/p').catch((e: unknown) => e);
    expect(isAbortError(err)).toBe(true);
    expect(checks).toBe(2);
    await new Promise((r) => setTimeout(r, 100));
    expect(hits).toEqual([]);
  });

  it('checks again when the connection is ready and sends while the scope holds, on new and kept-alive connections', async () => {
    const { hits, client } = await setup();
    let checks = 0;
    const scoped = client.scoped({ signal: new AbortController().signal, guard: () => void checks++ });
    await scoped.get('/first');
    expect(checks).toBe(2); // before the request, and when its new connection was ready
    await scoped.get('/second');
    expect(checks).toBe(4);
    expect(hits).toEqual(['/first', '/second']);
  });
});
