/**
 * Reading certificates back: what a PEM holds (validity, CA flag, fingerprint), PEM bundles with several
 * certificates (a caBundle with an old and a new CA), and whether a key belongs to a certificate. Node's
 * X509Certificate parses, so certificates this package did not create (cert-manager's, possibly ECDSA) work.
 */
import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';

/** A PEM certificate, key or bundle that cannot be used; the message says which and why. */
export class CertificateError extends Error {
  override name = 'CertificateError';
}

export interface CertificateInfo {
  /** The certificate as one normalized PEM block. */
  readonly pem: string;
  readonly x509: X509Certificate;
  /** Distinguished name one attribute per line, as Node prints it (e.g. "CN=kd-connections-ca"). */
  readonly subject: string;
  readonly subjectCN: string | undefined;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** basicConstraints cA. */
  readonly isCA: boolean;
  /** SHA-256 of the DER, lower-case hex: identifies a certificate across re-encodings of its PEM. */
  readonly fingerprint256: string;
}

export interface PemBlock {
  /** The label after BEGIN, e.g. "CERTIFICATE" or "RSA PRIVATE KEY". */
  type: string;
  /** The block alone, with "\n" line ends and a trailing newline. */
  pem: string;
}

// Lenient about line ends and trailing blanks (node-forge writes CRLF, editors add spaces).
const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[ \t\r]*\n([\s\S]*?)-----END \1-----/g;

/** Every PEM block in a text, in order; text between blocks is ignored (as OpenSSL and Go do). */
export function splitPemBlocks(text: string): PemBlock[] {
  return [...text.matchAll(PEM_BLOCK)].map(([, type, body]) => ({
    type: type!,
    pem: `-----BEGIN ${type}-----\n${body!.replace(/[ \t\r]+$/gm, '').replace(/\n*$/, '\n')}-----END ${type}-----\n`,
  }));
}

function parseBlock(block: PemBlock, what: string): CertificateInfo {
  if (block.type !== 'CERTIFICATE') {
    throw new CertificateError(`${what}: expected only CERTIFICATE blocks, found a ${block.type} block`);
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(block.pem);
  } catch (e) {
    throw new CertificateError(`${what}: cannot parse certificate: ${(e as Error).message}`);
  }
  const cn = /^CN=(.*)$/m.exec(x509.subject)?.[1]?.replace(/\\(.)/g, '$1');
  return {
    pem: block.pem,
    x509,
    subject: x509.subject,
    subjectCN: cn,
    // The "Mon DD HH:MM:SS YYYY GMT" form parses as UTC.
    notBefore: new Date(x509.validFrom),
    notAfter: new Date(x509.validTo),
    isCA: x509.ca,
    fingerprint256: createHash('sha256').update(x509.raw).digest('hex'),
  };
}

/**
 * Every certificate of a PEM bundle (a caBundle, or a leaf followed by its chain), in order. Throws
 * when there is none, when a block is not a certificate (a private key must never end up in a
 * caBundle), or when one does not parse.
 */
export function parseCertificates(pem: string, what = 'certificate bundle'): CertificateInfo[] {
  const blocks = splitPemBlocks(pem);
  if (blocks.length === 0) throw new CertificateError(`${what}: no PEM certificate found`);
  return blocks.map((b, i) => parseBlock(b, blocks.length > 1 ? `${what} (block ${i + 1})` : what));
}

/** Exactly one PEM certificate; throws a CertificateError otherwise. */
export function inspectCertificate(pem: string, what = 'certificate'): CertificateInfo {
  const certs = parseCertificates(pem, what);
  if (certs.length !== 1) throw new CertificateError(`${what}: expected one certificate, found ${certs.length}`);
  return certs[0]!;
}

/** Whether the private key belongs to the certificate's public key. Throws a CertificateError if it does not parse. */
export function keyMatchesCertificate(keyPem: string | KeyObject, cert: string | CertificateInfo): boolean {
  let key: KeyObject;
  try {
    key = typeof keyPem === 'string' ? createPrivateKey(keyPem) : keyPem;
  } catch (e) {
    throw new CertificateError(`private key: cannot parse: ${(e as Error).message}`);
  }
  const x509 = (typeof cert === 'string' ? inspectCertificate(cert) : cert).x509;
  try {
    return x509.checkPrivateKey(key);
  } catch {
    // Node throws instead of returning false when the key type differs (e.g. EC key, RSA certificate).
    return false;
  }
}
