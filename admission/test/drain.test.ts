/**
 * The drain on shutdown closes every connection that is not carrying a request, without waiting for
 * the drain timeout: kept-alive connections between requests, connections that never sent a byte, and
 * connections past the TLS handshake that never sent a request (the spare an HTTP client such as the
 * API server's Go transport leaves in its pool when it dialed for a request another connection took).
 */
import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { createCA, createServingCert, type CertPair } from '@kd-connections/certs';
import { createLogger } from '@kd-connections/shared/runtime';
import { AdmissionServer, SILENT_CONNECTION_MS } from '../src/server.js';

let ca: CertPair, serving: CertPair;
const warnings: string[] = [];
const cleanup: (() => void)[] = [];

beforeAll(() => {
  ca = createCA({ commonName: 'drain-test-ca' });
  serving = createServingCert({ ca, ipAddresses: ['127.0.0.1'], commonName: 'drain-test' });
});

afterEach(() => {
  for (const c of cleanup.splice(0)) c();
  warnings.length = 0;
});

async function startServer(): Promise<{ server: AdmissionServer; port: number }> {
  const server = new AdmissionServer({
    app: (req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    },
    host: '127.0.0.1',
    port: 0,
    log: createLogger({ component: 'test', level: 'warn', write: (l) => warnings.push(l) }),
  });
  server.setCertificate(serving.certPem, serving.keyPem);
  return { server, port: await server.listen() };
}

/** A TLS connection that completes the handshake and then sends nothing; `closed` settles when the server closes it. */
async function spare(port: number): Promise<{ closed: Promise<void>; isClosed: () => boolean }> {
  const s = tls.connect({ host: '127.0.0.1', port, ca: ca.certPem });
  let closedFlag = false;
  const closed = new Promise<void>((r) => s.once('close', () => ((closedFlag = true), r())));
  s.on('error', () => {});
  cleanup.push(() => s.destroy());
  await new Promise<void>((ok, fail) => {
    s.once('secureConnect', () => ok());
    s.once('error', fail);
  });
  return { closed, isClosed: () => closedFlag };
}

const DRAIN_TIMEOUT_MS = 20_000;

describe('drain', () => {
  it('closes a connection past the TLS handshake that never sent a request, long before the drain timeout', async () => {
    const { server, port } = await startServer();
    const idle = await spare(port);
    // A plain TCP connection that never sent a ClientHello, and a kept-alive connection between requests.
    const tcp = net.connect(port, '127.0.0.1');
    tcp.on('error', () => {});
    cleanup.push(() => tcp.destroy());
    const tcpClosed = new Promise<void>((r) => tcp.once('close', () => r()));
    const agent = new https.Agent({ keepAlive: true });
    cleanup.push(() => agent.destroy());
    await new Promise<void>((ok, fail) =>
      https
        .get({ host: '127.0.0.1', port, path: '/', ca: ca.certPem, agent }, (res) => (res.resume(), res.on('end', ok)))
        .on('error', fail),
    );
    const kept = Object.values(agent.freeSockets)[0]![0]!;
    const keptClosed = new Promise<void>((r) => kept.once('close', () => r()));

    const started = Date.now();
    const result = await server.shutdown(DRAIN_TIMEOUT_MS);
    expect(result).toEqual({ forced: false });
    await Promise.all([idle.closed, tcpClosed, keptClosed]);
    // Nothing waited for the drain timeout (its warning names the connections it had to cut).
    expect(Date.now() - started).toBeLessThan(DRAIN_TIMEOUT_MS / 2);
    expect(warnings).toEqual([]);
  }, 30_000);

  it('gives a connection that just finished its handshake time to send its request, and answers it', async () => {
    const { server, port } = await startServer();
    const s = tls.connect({ host: '127.0.0.1', port, ca: ca.certPem });
    s.on('error', () => {});
    cleanup.push(() => s.destroy());
    await new Promise<void>((ok) => s.once('secureConnect', () => ok()));
    const answer = new Promise<string>((ok) => {
      let text = '';
      s.on('data', (c: Buffer) => (text += c.toString()));
      s.on('end', () => ok(text));
      s.on('close', () => ok(text));
    });
    const done = server.shutdown(DRAIN_TIMEOUT_MS);
    // The request comes a moment after the drain began, well within SILENT_CONNECTION_MS.
    await new Promise((r) => setTimeout(r, SILENT_CONNECTION_MS / 5));
    s.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    expect(await answer).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/);
    expect(await done).toEqual({ forced: false });
    expect(warnings).toEqual([]);
  }, 30_000);
});
