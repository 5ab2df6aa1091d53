/**
 * A generated serving certificate works with real TLS: Node's https client, trusting only the
 * generated CA, accepts it for 127.0.0.1 and for the Service DNS name, and rejects it with another
 * CA or for a name it does not carry.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createCA, createServingCert, type CertPair } from '../src/generate.js';

let ca: CertPair;
let otherCa: CertPair;
let server: https.Server;
let port: number;

beforeAll(async () => {
  ca = createCA();
  otherCa = createCA();
  const serving = createServingCert({
    ca,
    service: { name: 'kd-admission', namespace: 'kd-system' },
    ipAddresses: ['127.0.0.1'],
  });
  server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) => res.end('ok'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

/** The response body, or the TLS error code. */
function get(trust: string, servername?: string): Promise<string> {
  return new Promise((resolve) => {
    const req = https.request(
      // `ca` replaces Node's built-in roots: the given CA is the only trust anchor. No agent: no reuse.
      { host: '127.0.0.1', port, path: '/', ca: trust, agent: false, ...(servername ? { servername } : {}) },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    req.end();
  });
}

describe('serving certificate over real TLS', () => {
  it('is accepted for 127.0.0.1 with its CA as the only root', async () => {
    expect(await get(ca.certPem)).toBe('ok');
  });

  it.each(['kd-admission.kd-system.svc', 'kd-admission.kd-system.svc.cluster.local', 'kd-admission'])(
    'is accepted for the Service name %s',
    async (name) => {
      expect(await get(ca.certPem, name)).toBe('ok');
    },
  );

  it('is rejected when the client trusts another CA', async () => {
    expect(await get(otherCa.certPem)).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    expect(await get(otherCa.certPem, 'kd-admission.kd-system.svc')).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  });

  it('is rejected for a name it does not carry', async () => {
    expect(await get(ca.certPem, 'kd-admission.other-namespace.svc')).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
  });
});
