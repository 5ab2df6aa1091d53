/** Reading PEM back: fields, key matching, bundles; and the tests' own reading of names and issuers. */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import forge from 'node-forge';
import { createCA, createServingCert, DAY_MS, type CertPair } from '../src/generate.js';
import {
  CertificateError,
  inspectCertificate,
  keyMatchesCertificate,
  parseCertificates,
  splitPemBlocks,
} from '../src/inspect.js';
import { canonicalIp, certificateFacts, isIssuedBy } from '../../test/support/certificate-facts.js';
import { brokenPem } from './broken-pem.js';

// Key size does not matter to these checks; 1024 bits keeps the suite quick.
const BITS = 1024;
const NOW = new Date('2031-06-15T08:00:00Z');

let ca: CertPair;
let impostor: CertPair; // another CA with the very same name
let leaf: CertPair;
let impostorLeaf: CertPair;

beforeAll(() => {
  ca = createCA({ keyBits: BITS, now: NOW, commonName: 'same-name-ca' });
  impostor = createCA({ keyBits: BITS, now: NOW, commonName: 'same-name-ca' });
  const opts = { service: { name: 'svc', namespace: 'ns' }, ipAddresses: ['10.0.0.1', '::1'], keyBits: BITS };
  leaf = createServingCert({ ...opts, ca, now: NOW, lifetimeMs: 3 * DAY_MS });
  impostorLeaf = createServingCert({ ...opts, ca: impostor, now: NOW });
});

describe('inspectCertificate', () => {
  it('reports names, validity, CA flag and usages', () => {
    const i = { ...inspectCertificate(leaf.certPem), ...certificateFacts(leaf.certPem) };
    expect(i.subjectCN).toBe('svc');
    expect(i.issuerCN).toBe('same-name-ca');
    expect(i.notBefore.toISOString()).toBe('2031-06-15T07:55:00.000Z');
    expect(i.notAfter.toISOString()).toBe('2031-06-18T08:00:00.000Z');
    expect(i.dnsNames).toEqual(['svc', 'svc.ns', 'svc.ns.svc', 'svc.ns.svc.cluster.local']);
    expect(i.ipAddresses).toEqual(['10.0.0.1', '::1']);
    expect(i.isCA).toBe(false);
    expect(i.extKeyUsages).toEqual(['serverAuth']);
    expect(i.fingerprint256).toMatch(/^[0-9a-f]{64}$/);
    expect(i.pem).toBe(leaf.certPem.replace(/\r\n/g, '\n'));
  });

  it('reports the serial as written by the generator', () => {
    const i = certificateFacts(ca.certPem);
    expect(i.serialNumber).toMatch(/^[0-9a-f]{32}$/);
    expect(certificateFacts(ca.certPem.replace(/\n/g, '\r\n')).serialNumber).toBe(i.serialNumber);
  });

  it('wants exactly one certificate', () => {
    expect(() => inspectCertificate(ca.certPem + leaf.certPem)).toThrow(/expected one certificate, found 2/);
    expect(() => inspectCertificate('')).toThrow(CertificateError);
    expect(() => inspectCertificate('not a pem at all')).toThrow(/no PEM certificate found/);
  });

  it('names the problem when the base64 body is damaged', () => {
    const lines = ca.certPem.split('\n');
    lines.splice(3, 2); // drop two lines of the body
    expect(() => inspectCertificate(lines.join('\n'))).toThrow(/cannot parse certificate/);
  });
});

describe("the tests' isIssuedBy", () => {
  it('accepts the signing CA', () => {
    expect(isIssuedBy(leaf.certPem, ca.certPem)).toBe(true);
  });

  it('rejects another CA with the same name', () => {
    expect(inspectCertificate(impostor.certPem).subject).toBe(inspectCertificate(ca.certPem).subject);
    expect(isIssuedBy(leaf.certPem, impostor.certPem)).toBe(false);
    expect(isIssuedBy(impostorLeaf.certPem, ca.certPem)).toBe(false);
    expect(isIssuedBy(impostorLeaf.certPem, impostor.certPem)).toBe(true);
  });

  it('rejects a leaf whose issuer name and key identifier match the CA but whose signature does not', () => {
    // What an attacker holding another key could mint: only the signature tells it apart.
    const caCert = forge.pki.certificateFromPem(ca.certPem);
    const keys = forge.pki.rsa.generateKeyPair({ bits: BITS });
    const forged = forge.pki.createCertificate();
    forged.publicKey = keys.publicKey;
    forged.serialNumber = '01';
    forged.validity.notBefore = NOW;
    forged.validity.notAfter = new Date(NOW.getTime() + DAY_MS);
    forged.setSubject([{ name: 'commonName', value: 'svc' }]);
    forged.setIssuer(caCert.subject.attributes);
    forged.setExtensions([
      { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
    ]);
    forged.sign(forge.pki.privateKeyFromPem(impostor.keyPem), forge.md.sha256.create());
    const forgedInfo = inspectCertificate(forge.pki.certificateToPem(forged));
    const caInfo = inspectCertificate(ca.certPem);
    expect(forgedInfo.x509.checkIssued(caInfo.x509)).toBe(true); // names and key identifiers agree
    expect(isIssuedBy(forgedInfo, caInfo)).toBe(false);
  });

  it('rejects a CA with a different name', () => {
    const other = createCA({ keyBits: BITS, commonName: 'other-ca' });
    expect(isIssuedBy(leaf.certPem, other.certPem)).toBe(false);
  });
});

describe('keyMatchesCertificate', () => {
  it('matches a certificate with its own key only', () => {
    expect(keyMatchesCertificate(leaf.keyPem, leaf.certPem)).toBe(true);
    expect(keyMatchesCertificate(ca.keyPem, ca.certPem)).toBe(true);
    expect(keyMatchesCertificate(ca.keyPem, leaf.certPem)).toBe(false);
    expect(keyMatchesCertificate(impostorLeaf.keyPem, leaf.certPem)).toBe(false);
  });

  it('accepts PKCS#8 as well as PKCS#1 and says no to a key of another type', () => {
    const pkcs8 = createPrivateKey(leaf.keyPem).export({ format: 'pem', type: 'pkcs8' }).toString();
    expect(pkcs8).toContain('BEGIN PRIVATE KEY');
    expect(keyMatchesCertificate(pkcs8, leaf.certPem)).toBe(true);
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    expect(keyMatchesCertificate(ec, leaf.certPem)).toBe(false);
  });

  it('throws a CertificateError for a key that does not parse', () => {
    expect(() => keyMatchesCertificate(brokenPem('RSA PRIVATE KEY'), leaf.certPem)).toThrow(CertificateError);
  });
});

describe('PEM bundles', () => {
  it('splits blocks, ignoring text around them and CRLF line ends', () => {
    // node-forge already writes CRLF; doubling the CRs and adding trailing blanks must not matter.
    const text = `# old CA\r\n${ca.certPem.replace(/\n/g, ' \r\n')}\nsome comment\n${impostor.certPem}${leaf.keyPem}`;
    const blocks = splitPemBlocks(text);
    expect(blocks.map((b) => b.type)).toEqual(['CERTIFICATE', 'CERTIFICATE', 'RSA PRIVATE KEY']);
    expect(blocks[0]!.pem).toBe(ca.certPem.replace(/\r\n/g, '\n'));
    expect(blocks[0]!.pem).not.toContain('\r');
  });

  it('parses an old + new CA bundle in order', () => {
    const certs = parseCertificates(ca.certPem + '\n' + impostor.certPem);
    expect(certs).toHaveLength(2);
    expect(certs[0]!.fingerprint256).toBe(inspectCertificate(ca.certPem).fingerprint256);
    expect(certs[1]!.fingerprint256).toBe(inspectCertificate(impostor.certPem).fingerprint256);
    expect(certs[0]!.fingerprint256).not.toBe(certs[1]!.fingerprint256);
  });

  it('refuses a bundle holding a private key, naming the block', () => {
    expect(() => parseCertificates(ca.certPem + leaf.keyPem, 'ca.crt')).toThrow(
      'ca.crt (block 2): expected only CERTIFICATE blocks, found a RSA PRIVATE KEY block',
    );
  });

  it('refuses an empty bundle', () => {
    expect(() => parseCertificates('\n\n', 'caBundle')).toThrow('caBundle: no PEM certificate found');
  });
});

describe("the tests' canonicalIp", () => {
  it('compresses IPv6 and keeps IPv4', () => {
    expect(canonicalIp('FD00:0:0:0:0:0:0:10')).toBe('fd00::10');
    expect(canonicalIp('192.168.0.1')).toBe('192.168.0.1');
  });
});
