/** What createCA / createServingCert produce: names, usages, validity, serials, key size. */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createPrivateKey } from 'node:crypto';
import forge from 'node-forge';
import {
  BACKDATE_MS,
  backdateMs,
  createCA,
  createServingCert,
  DAY_MS,
  DEFAULT_KEY_BITS,
  generateKeyPem,
  servingDnsNames,
  type CertPair,
} from '../src/generate.js';
import { inspectCertificate, type CertificateInfo } from '../src/inspect.js';
import { certificateFacts, isIssuedBy } from '../../test/support/certificate-facts.js';
import { createClientCert } from '../../test/support/test-pki.js';

type Facts = CertificateInfo & ReturnType<typeof certificateFacts>;
const facts = (pem: string): Facts => ({ ...inspectCertificate(pem), ...certificateFacts(pem) });
import { renewAt } from '../src/ca-secret.js';

// Whole seconds: certificates store validity with second precision.
const NOW = new Date('2030-03-01T12:00:00Z');

let ca: CertPair;
let serving: CertPair;
let caInfo: Facts;
let info: Facts;

beforeAll(() => {
  ca = createCA({ now: NOW, lifetimeMs: 30 * DAY_MS });
  serving = createServingCert({
    ca,
    service: { name: 'kd-admission', namespace: 'kd-system' },
    dnsNames: ['webhook.example.com', 'kd-admission'], // the duplicate must appear once
    ipAddresses: ['127.0.0.1', '::1'],
    lifetimeMs: 10 * DAY_MS,
    now: NOW,
  });
  caInfo = facts(ca.certPem);
  info = facts(serving.certPem);
});

describe('serving certificate', () => {
  it('has SANs for every in-cluster name of the Service, then the extra names and IPs', () => {
    expect(info.dnsNames).toEqual([
      'kd-admission',
      'kd-admission.kd-system',
      'kd-admission.kd-system.svc',
      'kd-admission.kd-system.svc.cluster.local',
      'webhook.example.com',
    ]);
    expect(info.ipAddresses).toEqual(['127.0.0.1', '::1']);
    expect(info.subjectCN).toBe('kd-admission');
  });

  it('is for serverAuth only, not a CA, and signed by the CA', () => {
    expect(info.extKeyUsages).toEqual(['serverAuth']);
    expect(info.isCA).toBe(false);
    expect(info.issuerCN).toBe('kd-connections-ca');
    expect(isIssuedBy(info, caInfo)).toBe(true);
    const ku = forge.pki.certificateFromPem(serving.certPem).getExtension('keyUsage') as {
      digitalSignature?: boolean;
      keyCertSign?: boolean;
    };
    expect(ku.digitalSignature).toBe(true);
    expect(ku.keyCertSign).toBe(false);
  });

  it('is valid from 5 minutes before issuance for its lifetime', () => {
    expect(BACKDATE_MS).toBe(5 * 60 * 1000);
    expect(info.notBefore.toISOString()).toBe('2030-03-01T11:55:00.000Z');
    expect(info.notAfter.toISOString()).toBe('2030-03-11T12:00:00.000Z');
  });

  it('is backdated by at most a tenth of a short lifetime, so it is not due for renewal when issued', () => {
    expect(backdateMs(10 * DAY_MS)).toBe(BACKDATE_MS);
    expect(backdateMs(45_000)).toBe(4_500);
    const short = createServingCert({ ca, ipAddresses: ['127.0.0.1'], lifetimeMs: 45_000, now: NOW, keyBits: 1024 });
    const s = inspectCertificate(short.certPem);
    expect(s.notBefore.toISOString()).toBe('2030-03-01T11:59:55.000Z'); // 4.5 s, stored in whole seconds
    expect(s.notAfter.toISOString()).toBe('2030-03-01T12:00:45.000Z');
    // Two thirds of 50 s after notBefore: not yet due when issued.
    expect(renewAt(s).toISOString()).toBe('2030-03-01T12:00:28.333Z');
  });

  it('signs with a key generated beforehand off the event loop (generateKeyPem)', async () => {
    const keyPem = await generateKeyPem(1024);
    const leaf = createServingCert({ ca, dnsNames: ['x.example.com'], keyPem, now: NOW });
    expect(leaf.keyPem.replace(/\s/g, '')).toBe(keyPem.replace(/\s/g, ''));
    expect(inspectCertificate(leaf.certPem).x509.checkPrivateKey(createPrivateKey(keyPem))).toBe(true);
  });

  it('never outlives its CA', () => {
    const long = inspectCertificate(
      createServingCert({ ca, dnsNames: ['x.example.com'], lifetimeMs: 365 * DAY_MS, now: NOW }).certPem,
    );
    expect(long.notAfter.getTime()).toBe(caInfo.notAfter.getTime());
  });

  it('uses a 2048-bit RSA key by default', () => {
    expect(DEFAULT_KEY_BITS).toBe(2048);
    expect(info.x509.publicKey.asymmetricKeyType).toBe('rsa');
    expect(info.x509.publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
  });

  it('needs at least one name', () => {
    expect(() => createServingCert({ ca })).toThrow(/at least one DNS name or IP address/);
  });

  it('servingDnsNames lists the Service names first, without duplicates', () => {
    expect(servingDnsNames({ service: { name: 's', namespace: 'n' }, dnsNames: ['s.n', 'x'] })).toEqual([
      's',
      's.n',
      's.n.svc',
      's.n.svc.cluster.local',
      'x',
    ]);
  });
});

describe('CA', () => {
  it('is a self-signed CA with critical basicConstraints and keyCertSign', () => {
    expect(caInfo.isCA).toBe(true);
    expect(caInfo.subject).toBe(caInfo.issuer);
    expect(isIssuedBy(caInfo, caInfo)).toBe(true);
    const cert = forge.pki.certificateFromPem(ca.certPem);
    const bc = cert.getExtension('basicConstraints') as { cA?: boolean; critical?: boolean };
    expect(bc).toMatchObject({ cA: true, critical: true });
    const ku = cert.getExtension('keyUsage') as { keyCertSign?: boolean; cRLSign?: boolean };
    expect(ku).toMatchObject({ keyCertSign: true, cRLSign: true });
  });

  it('is valid from 5 minutes before creation for its lifetime', () => {
    expect(caInfo.notBefore.toISOString()).toBe('2030-03-01T11:55:00.000Z');
    expect(caInfo.notAfter.toISOString()).toBe('2030-03-31T12:00:00.000Z');
  });
});

describe('serial numbers', () => {
  it('are random, positive and 16 bytes long', () => {
    const other = facts(createServingCert({ ca, dnsNames: ['a.example.com'], keyBits: 1024 }).certPem);
    const client = facts(createClientCert({ ca, commonName: 'c', keyBits: 1024 }).certPem);
    const serials = [caInfo.serialNumber, info.serialNumber, other.serialNumber, client.serialNumber];
    expect(new Set(serials).size).toBe(4);
    for (const s of serials) {
      expect(s).toMatch(/^[0-7][0-9a-f]{31}$/);
      expect(s).not.toMatch(/^00/);
    }
  });
});

describe("the harness's client certificate (test-pki.ts)", () => {
  it('is for clientAuth with the organizations as O=', () => {
    const c = facts(
      createClientCert({ ca, commonName: 'admin', organizations: ['system:masters'], keyBits: 1024 }).certPem,
    );
    expect(c.extKeyUsages).toEqual(['clientAuth']);
    expect(c.subject).toContain('O=system:masters');
    expect(c.subjectCN).toBe('admin');
    expect(c.dnsNames).toEqual([]);
  });
});
