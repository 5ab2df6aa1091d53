import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, RequestListener } from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { createCA, createServingCert, type CertPair } from '@kd-connections/certs';
import { createLogger } from '@kd-connections/shared/runtime';
import { createApp } from '../src/app.js';
import { AdmissionMetrics } from '../src/metrics.js';
import { AdmissionServer, KEEP_ALIVE_TIMEOUT_MS } from '../src/server.js';
import { checkPair } from '../src/tls/certificate.js';
import { FileCertificateSource } from '../src/tls/file-certificate-source.js';
import { WEBHOOKS } from '../src/webhooks/index.js';
import { exampleWorld, fixture } from './support.js';

// Two CAs, each with a serving pair for 127.0.0.1: a rotation to a new CA is visible to clients.
let ca1: CertPair, ca2: CertPair, serving1: CertPair, serving2: CertPair;
let dir: string;

beforeAll(() => {
  ca1 = createCA({ commonName: 'test-ca-1' });
  ca2 = createCA({ commonName: 'test-ca-2' });
  serving1 = createServingCert({ ca: ca1, ipAddresses: ['127.0.0.1'], commonName: 'serving-1' });
  serving2 = createServingCert({ ca: ca2, ipAddresses: ['127.0.0.1'], commonName: 'serving-2' });
  dir = mkdtempSync(join(tmpdir(), 'kd-admission-tls-'));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;

function newServer(app?: RequestListener, metrics = new AdmissionMetrics()): AdmissionServer {
  const handler =
    app ??
    createApp({
      webhooks: WEBHOOKS,
      deps: exampleWorld().deps(),
      metrics,
      log: createLogger({ component: 'test', level: 'error', write: () => {} }),
      readiness: () => ({ ready: true, reasons: [] }),
      draining: () => server.draining,
    });
  const server: AdmissionServer = new AdmissionServer({ app: handler, host: '127.0.0.1', port: 0, metrics });
  return server;
}

/** One TLS handshake; resolves with what was negotiated or rejects with the handshake error. */
function handshake(
  port: number,
  ca: string,
  opts: tls.ConnectionOptions = {},
): Promise<{ protocol: string | null; cipher: string; peer: string }> {
  return new Promise((ok, fail) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca, ...opts }, () => {
      const peer = s.getPeerX509Certificate()?.fingerprint256 ?? '';
      ok({ protocol: s.getProtocol(), cipher: s.getCipher().name, peer });
      s.end();
    });
    s.on('error', fail);
  });
}

function get(port: number, ca: string, path: string, agent?: https.Agent): Promise<IncomingMessage & { body: string }> {
  return new Promise((ok, fail) => {
    https
      .get({ host: '127.0.0.1', port, path, ca, agent: agent ?? false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => ok(Object.assign(res, { body })));
      })
      .on('error', fail);
  });
}

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('AdmissionServer TLS', () => {
  let server: AdmissionServer;
  let port: number;
  const metrics = new AdmissionMetrics();

  beforeAll(async () => {
    server = newServer(undefined, metrics);
    let listening = false;
    const listen = server.listen().then((p) => ((listening = true), p));
    await new Promise((r) => setImmediate(r));
    // No certificate yet: the server must not listen (a handshake would have nothing to present).
    expect(listening).toBe(false);
    expect(server.tlsLoaded).toBe(false);
    server.setCertificate(serving1.certPem, serving1.keyPem);
    port = await listen;
    expect(server.tlsLoaded).toBe(true);
  });

  afterAll(() => server.shutdown(1000));

  it('negotiates TLS 1.3 by default and only AEAD suites on TLS 1.2', async () => {
    expect((await handshake(port, ca1.certPem)).protocol).toBe('TLSv1.3');
    const v12 = await handshake(port, ca1.certPem, { maxVersion: 'TLSv1.2' });
    expect(v12.protocol).toBe('TLSv1.2');
    expect(v12.cipher).toMatch(/GCM|CHACHA20/);
  });

  it('refuses TLS 1.2 without an AEAD suite', async () => {
    await expect(
      handshake(port, ca1.certPem, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES128-SHA256:ECDHE-RSA-AES128-SHA' }),
    ).rejects.toThrow(/(sslv3|ssl\/tls) alert handshake failure/);
  });

  it('refuses TLS 1.1 (the server answers with a protocol_version alert)', async () => {
    await expect(
      handshake(port, ca1.certPem, { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }),
    ).rejects.toThrow(/tlsv1 alert protocol version/);
  });

  it('advertises a keep-alive timeout of at least 90 s', async () => {
    expect(KEEP_ALIVE_TIMEOUT_MS).toBeGreaterThanOrEqual(90_000);
    expect(server.server.headersTimeout).toBeGreaterThan(server.server.keepAliveTimeout);
    expect(server.server.requestTimeout).toBeGreaterThanOrEqual(server.server.headersTimeout);
    const agent = new https.Agent({ keepAlive: true });
    try {
      const res = await get(port, ca1.certPem, '/healthz', agent);
      expect(res.headers['keep-alive']).toBe(`timeout=${KEEP_ALIVE_TIMEOUT_MS / 1000}`);
    } finally {
      agent.destroy();
    }
  });

  it('swaps the certificate without a restart; a mismatched pair is refused and the old one stays', async () => {
    expect((await handshake(port, ca1.certPem)).peer).toBe(fingerprint(serving1.certPem));
    expect(() => server.setCertificate(serving2.certPem, serving1.keyPem)).toThrow(
      /certificate and key are not a usable pair/,
    );
    expect((await handshake(port, ca1.certPem)).peer).toBe(fingerprint(serving1.certPem));
    server.setCertificate(serving2.certPem, serving2.keyPem);
    expect((await handshake(port, ca2.certPem)).peer).toBe(fingerprint(serving2.certPem));
    await expect(handshake(port, ca1.certPem)).rejects.toThrow(/self[- ]signed|unable to verify|unable to get/i);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^kd_admission_tls_reloads_total\{result="loaded"\} 2$/m);
    expect(text).toMatch(/^kd_admission_tls_reloads_total\{result="rejected"\} 1$/m);
    server.setCertificate(serving1.certPem, serving1.keyPem);
  });

  it('checkPair describes a certificate and rejects garbage', () => {
    expect(checkPair(serving1.certPem, serving1.keyPem)).toMatchObject({ subject: 'CN=serving-1' });
    expect(() => checkPair('not a certificate', serving1.keyPem)).toThrow(/certificate does not parse/);
  });
});

describe('graceful shutdown', () => {
  it('stops accepting, closes idle connections, finishes the in-flight review with Connection: close', async () => {
    let arrived!: () => void;
    const requestArrived = new Promise<void>((r) => (arrived = r));
    const app = createApp({
      webhooks: WEBHOOKS,
      deps: exampleWorld().deps(),
      metrics: new AdmissionMetrics(),
      log: createLogger({ component: 'test', level: 'error', write: () => {} }),
      readiness: () => ({ ready: !server.draining, reasons: server.draining ? ['shutting down'] : [] }),
      draining: () => server.draining,
    });
    const server: AdmissionServer = newServer((req, res) => {
      if (req.url === '/mutate-pod') arrived();
      app(req, res);
    });
    server.setCertificate(serving1.certPem, serving1.keyPem);
    const port = await server.listen();

    // An idle kept-alive connection (it served one request and waits for the next).
    const idleAgent = new https.Agent({ keepAlive: true });
    await get(port, ca1.certPem, '/healthz', idleAgent);
    const idleSocket = Object.values(idleAgent.freeSockets)[0]![0]!;
    const idleClosed = new Promise<void>((r) => idleSocket.once('close', () => r()));

    // An in-flight review: headers and half the body sent.
    const body = Buffer.from(JSON.stringify(fixture('mutate-pod-member')));
    const req = https.request({
      host: '127.0.0.1',
      port,
      path: '/mutate-pod',
      method: 'POST',
      ca: ca1.certPem,
      agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': body.length, Connection: 'keep-alive' },
    });
    const answer = new Promise<IncomingMessage & { body: string }>((ok, fail) => {
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => ok(Object.assign(res, { body: text })));
      });
      req.on('error', fail);
    });
    req.write(body.subarray(0, 100));
    await requestArrived;

    const done = server.shutdown(10_000);
    await idleClosed;
    // The listener is closed: a new connection is refused.
    await expect(handshake(port, ca1.certPem)).rejects.toThrow(/ECONNREFUSED/);
    req.end(body.subarray(100));
    expect(await done).toEqual({ forced: false });
    const res = await answer;
    expect(res.statusCode).toBe(200);
    expect(res.headers.connection).toBe('close');
    expect(JSON.parse(res.body).response.patchType).toBe('JSONPatch');
    idleAgent.destroy();
  });
});

describe('FileCertificateSource', () => {
  /** A Secret volume: files are symlinks into ..data, which is swapped atomically on update. */
  function secretVolume(
    name: string,
    pair: CertPair,
  ): { certFile: string; keyFile: string; update(p: CertPair): void } {
    const vol = join(dir, name);
    mkdirSync(vol);
    let n = 0;
    const writeData = (p: CertPair) => {
      const ts = join(vol, `..${++n}`);
      mkdirSync(ts);
      writeFileSync(join(ts, 'tls.crt'), p.certPem);
      writeFileSync(join(ts, 'tls.key'), p.keyPem);
      symlinkSync(`..${n}`, join(vol, '..data_tmp'));
      renameSync(join(vol, '..data_tmp'), join(vol, '..data'));
    };
    writeData(pair);
    symlinkSync('..data/tls.crt', join(vol, 'tls.crt'));
    symlinkSync('..data/tls.key', join(vol, 'tls.key'));
    return { certFile: join(vol, 'tls.crt'), keyFile: join(vol, 'tls.key'), update: writeData };
  }

  it.each([
    ['watching the directory', true],
    ['polling alone', false],
  ])('reloads a Secret volume update by %s, skipping a mismatched pair', async (name, watch) => {
    const vol = secretVolume(`vol-${watch}`, serving1);
    const server = newServer();
    const source = new FileCertificateSource({ ...vol, watch, pollIntervalMs: watch ? 60_000 : 200 });
    try {
      await source.start(server);
      expect(server.tlsLoaded).toBe(true);
      const port = await server.listen();
      expect((await handshake(port, ca1.certPem)).peer).toBe(fingerprint(serving1.certPem));

      // Half a rotation (new certificate, old key): not loaded, the old pair keeps serving.
      vol.update({ certPem: serving2.certPem, keyPem: serving1.keyPem });
      await source.check();
      expect((await handshake(port, ca1.certPem)).peer).toBe(fingerprint(serving1.certPem));

      vol.update(serving2);
      await waitFor('the new certificate', async () => {
        const h = await handshake(port, ca2.certPem).catch(() => undefined);
        return h?.peer === fingerprint(serving2.certPem);
      });
    } finally {
      source.stop();
      await server.shutdown(1000);
    }
  });

  it('waits for files that do not exist yet', async () => {
    const certFile = join(dir, 'later', 'tls.crt');
    const keyFile = join(dir, 'later', 'tls.key');
    mkdirSync(join(dir, 'later'));
    const server = newServer();
    const source = new FileCertificateSource({ certFile, keyFile, pollIntervalMs: 200 });
    try {
      await source.start(server);
      expect(server.tlsLoaded).toBe(false);
      writeFileSync(keyFile, serving1.keyPem);
      writeFileSync(certFile, serving1.certPem);
      await waitFor('the certificate', () => server.tlsLoaded);
    } finally {
      source.stop();
    }
  });
});
