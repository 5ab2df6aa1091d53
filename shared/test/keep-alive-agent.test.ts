/**
 * The API client's keep-alive agent must not keep a request (and its response, and what the response's
 * listeners hold) alive through the socket that request opened: with Node 24's https.Agent, every idle
 * keep-alive socket held its first request — for an informer, its first LIST page.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import https from 'node:https';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createCA, createServingCert } from '@kd-connections/certs';
import { keepAliveAgent } from '../src/runtime/keep-alive-agent.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

let server: https.Server;
let url: string;
let ca: string;

beforeAll(async () => {
  const authority = createCA({ keyBits: 2048 });
  const serving = createServingCert({ ca: authority, ipAddresses: ['127.0.0.1'], keyBits: 2048 });
  ca = authority.certPem;
  server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) =>
    res.end('x'.repeat(256 * 1024)),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

/** One request through `agent`, its body read; returns a weak reference to the request. */
async function oneRequest(agent: http.Agent): Promise<WeakRef<http.ClientRequest>> {
  let ref: WeakRef<http.ClientRequest> | undefined;
  await new Promise<void>((ok, fail) => {
    const r = https.request(url, { agent, ca }, (res) => {
      res.resume();
      res.on('end', () => ok());
    });
    r.on('error', fail);
    ref = new WeakRef(r);
    r.end();
  });
  // The socket goes back to the pool on the next ticks.
  await new Promise((r) => setTimeout(r, 50));
  return ref!;
}

async function collected(ref: WeakRef<object>): Promise<boolean> {
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  return ref.deref() === undefined;
}

const idleSockets = (agent: http.Agent) => Object.values(agent.freeSockets).flat().length;

describe('keepAliveAgent', () => {
  it('keeps the socket for reuse but not the request that opened it', async () => {
    const agent = keepAliveAgent('https:', 4);
    const ref = await oneRequest(agent);
    expect(idleSockets(agent)).toBe(1);
    expect(await collected(ref)).toBe(true);
    // The socket still serves the next request.
    await oneRequest(agent);
    expect(idleSockets(agent)).toBe(1);
    agent.destroy();
  });

  it("is needed: Node's own https.Agent keeps the first request of an idle socket alive", async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 4 });
    const ref = await oneRequest(agent);
    expect(idleSockets(agent)).toBe(1);
    expect(await collected(ref)).toBe(false);
    agent.destroy();
  });
});
