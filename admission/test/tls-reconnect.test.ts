/** After a certificate swap, kept-alive connections set up with the old certificate are told to reconnect. */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { createCA, createServingCert, type CertPair } from '@kd-connections/certs';
import { silentLogger } from '@kd-connections/shared/runtime';
import { createApp } from '../src/app.js';
import { AdmissionMetrics } from '../src/metrics.js';
import { AdmissionServer } from '../src/server.js';
import { WEBHOOKS } from '../src/webhooks/index.js';
import { exampleWorld } from './support.js';

let ca: CertPair, first: CertPair, second: CertPair;
let server: AdmissionServer;
let port: number;
const metrics = new AdmissionMetrics();

beforeAll(async () => {
  // 2048 bits: Node 24's OpenSSL (security level 2) refuses smaller keys in TLS ("ee key too small").
  ca = createCA({ keyBits: 2048 });
  first = createServingCert({ ca, ipAddresses: ['127.0.0.1'], commonName: 'first', keyBits: 2048 });
  second = createServingCert({ ca, ipAddresses: ['127.0.0.1'], commonName: 'second', keyBits: 2048 });
  const app = createApp({
    webhooks: WEBHOOKS,
    deps: exampleWorld().deps(),
    metrics,
    log: silentLogger,
    readiness: () => ({ ready: true, reasons: [] }),
  });
  server = new AdmissionServer({ app, host: '127.0.0.1', port: 0, metrics });
  server.setCertificate(first.certPem, first.keyPem);
  port = await server.listen();
});

afterAll(() => server.shutdown(1000));

function get(agent: https.Agent): Promise<{ res: IncomingMessage; peer: string; socket: TLSSocket }> {
  return new Promise((ok, fail) => {
    https
      .get({ host: '127.0.0.1', port, path: '/healthz', ca: ca.certPem, agent }, (res) => {
        const socket = res.socket as TLSSocket;
        const peer = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
        res.resume();
        res.on('end', () => ok({ res, peer, socket }));
      })
      .on('error', fail);
  });
}

const fp = (pem: string) => new X509Certificate(pem).fingerprint256;
const recycled = async () =>
  Number(/^kd_admission_tls_connections_recycled_total (\d+)$/m.exec(await metrics.registry.metrics())?.[1]);

it('answers the next request on an old connection with Connection: close, then serves the new certificate', async () => {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const a = await get(agent);
    expect(a.peer).toBe(fp(first.certPem));
    expect(a.res.headers.connection).toBe('keep-alive');
    const b = await get(agent);
    expect(b.socket).toBe(a.socket); // kept alive
    expect(await recycled()).toBe(0);

    server.setCertificate(second.certPem, second.keyPem);
    const c = await get(agent);
    expect(c.socket).toBe(a.socket); // the old connection (first certificate) still answers...
    expect(c.res.headers.connection).toBe('close'); // ...and asks the client to reconnect
    expect(await recycled()).toBe(1);

    const d = await get(agent);
    expect(d.socket).not.toBe(a.socket);
    expect(d.peer).toBe(fp(second.certPem));
    expect(d.res.headers.connection).toBe('keep-alive');
    expect(await recycled()).toBe(1);
  } finally {
    agent.destroy();
  }
});
