/**
 * Reading certificates back: what a stored PEM says (names, validity, usages), whether a CA really
 * signed it, whether a key belongs to it, and PEM bundles with several certificates (a caBundle with
 * an old and a new CA). Parsing uses Node's X509Certificate rather than node-forge, so certificates
 * this package did not create (cert-manager or a user Secret, possibly ECDSA) can be inspected too.
 */
import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';

/** A PEM certificate, key or bundle that cannot be used; the message says which and why. */
export class CertificateError extends Error {
  override name = 'CertificateError';
}

export interface CertificateInfo {
  /** The certificate as one normalized PEM block. */
  readonly pem: string;
  readonly x509: X509Certificate;
  /** Distinguished names one attribute per line, as Node prints them (e.g. "CN=kd-connections-ca"). */
  readonly subject: string;
  readonly issuer: string;
  readonly subjectCN: string | undefined;
  readonly issuerCN: string | undefined;
  /** Lower-case hex, without leading zero octets. */
  readonly serialNumber: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly dnsNames: string[];
  /** Canonical text form (IPv6 compressed, lower case), comparable with canonicalIp(). */
  readonly ipAddresses: string[];
  /** basicConstraints cA. */
  readonly isCA: boolean;
  /** Extended key usages by name ("serverAuth", "clientAuth", ...); unknown ones as dotted OIDs. */
  readonly extKeyUsages: string[];
  /** SHA-256 of the DER, lower-case hex: identifies a certificate across re-encodings of its PEM. */
  readonly fingerprint256: string;
}

export type CertificateInput = string | CertificateInfo;

export interface PemBlock {
  /** The label after BEGIN, e.g. "CERTIFICATE" or "RSA PRIVATE KEY". */
  type: string;
  /** The block alone, with "\n" line ends and a trailing newline. */
  pem: string;
}

const EKU_NAMES: Record<string, string> = {
  '1.3.6.1.5.5.7.3.1': 'serverAuth',
  '1.3.6.1.5.5.7.3.2': 'clientAuth',
  '1.3.6.1.5.5.7.3.3': 'codeSigning',
  '1.3.6.1.5.5.7.3.4': 'emailProtection',
  '1.3.6.1.5.5.7.3.8': 'timeStamping',
  '1.3.6.1.5.5.7.3.9': 'OCSPSigning',
  '2.5.29.37.0': 'anyExtendedKeyUsage',
};

// Lenient about line ends and trailing blanks (node-forge writes CRLF, editors add spaces).
const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[ \t\r]*\n([\s\S]*?)-----END \1-----/g;

/** Every PEM block in a text, in order; text between blocks is ignored (as OpenSSL and Go do). */
export function splitPemBlocks(text: string): PemBlock[] {
  const blocks: PemBlock[] = [];
  for (const m of text.matchAll(PEM_BLOCK)) {
    const type = m[1]!;
    const body = m[2]!.replace(/[ \t\r]+$/gm, '').replace(/\n*$/, '\n');
    blocks.push({ type, pem: `-----BEGIN ${type}-----\n${body}-----END ${type}-----\n` });
  }
  return blocks;
}

/** Canonical text form of an IP address (so "::1" and "0:0:0:0:0:0:0:1" compare equal); throws if not an IP. */
export function canonicalIp(ip: string): string {
  const kind = isIP(ip);
  if (kind === 4) return ip;
  // The WHATWG URL parser prints IPv6 hosts in RFC 5952 form.
  if (kind === 6) return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  throw new CertificateError(`not an IP address: ${JSON.stringify(ip)}`);
}

/** Node prints a DN one "KEY=value" per line with RFC 2253 backslash escapes. */
function commonName(dn: string): string | undefined {
  for (const line of dn.split('\n')) {
    if (line.startsWith('CN=')) return line.slice(3).replace(/\\(.)/g, '$1');
  }
  return undefined;
}

/**
 * Node prints subjectAltName as "DNS:a, IP Address:1.2.3.4"; values with special characters are
 * JSON-quoted so the list stays unambiguous.
 */
function parseSubjectAltName(text: string | undefined): { dnsNames: string[]; ipAddresses: string[] } {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  let rest = text ?? '';
  while (rest.length > 0) {
    const colon = rest.indexOf(':');
    if (colon < 0) break;
    const type = rest.slice(0, colon);
    rest = rest.slice(colon + 1);
    let value: string;
    if (rest.startsWith('"')) {
      const end = /^"(?:[^"\\]|\\.)*"/.exec(rest);
      if (!end) break;
      value = JSON.parse(end[0]) as string;
      rest = rest.slice(end[0].length);
    } else {
      const comma = rest.indexOf(', ');
      value = comma < 0 ? rest : rest.slice(0, comma);
      rest = comma < 0 ? '' : rest.slice(comma);
    }
    rest = rest.replace(/^, /, '');
    if (type === 'DNS') dnsNames.push(value);
    else if (type === 'IP Address' && isIP(value)) ipAddresses.push(canonicalIp(value));
  }
  return { dnsNames, ipAddresses };
}

function toInfo(x509: X509Certificate, pem: string): CertificateInfo {
  const sans = parseSubjectAltName(x509.subjectAltName);
  return {
    pem,
    x509,
    subject: x509.subject,
    issuer: x509.issuer,
    subjectCN: commonName(x509.subject),
    issuerCN: commonName(x509.issuer),
    serialNumber: x509.serialNumber.toLowerCase().replace(/^(?:00)+(?=.)/, ''),
    // Node 20 has no validFromDate; the "Mon DD HH:MM:SS YYYY GMT" form parses as UTC.
    notBefore: new Date(x509.validFrom),
    notAfter: new Date(x509.validTo),
    dnsNames: sans.dnsNames,
    ipAddresses: sans.ipAddresses,
    isCA: x509.ca,
    extKeyUsages: (x509.keyUsage ?? []).map((oid) => EKU_NAMES[oid] ?? oid),
    fingerprint256: createHash('sha256').update(x509.raw).digest('hex'),
  };
}

function parseBlock(block: PemBlock, what: string): CertificateInfo {
  if (block.type !== 'CERTIFICATE') {
    throw new CertificateError(`${what}: expected only CERTIFICATE blocks, found a ${block.type} block`);
  }
  try {
    return toInfo(new X509Certificate(block.pem), block.pem);
  } catch (e) {
    throw new CertificateError(`${what}: cannot parse certificate: ${(e as Error).message}`);
  }
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

function info(cert: CertificateInput): CertificateInfo {
  return typeof cert === 'string' ? inspectCertificate(cert) : cert;
}

/** A PEM private key (PKCS#1, PKCS#8 or SEC1); throws a CertificateError when it does not parse. */
export function parsePrivateKey(pem: string, what = 'private key'): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch (e) {
    throw new CertificateError(`${what}: cannot parse: ${(e as Error).message}`);
  }
}

/**
 * Whether `ca` issued `cert`: the issuer name matches the CA's subject (and key identifiers, when
 * present) AND the signature verifies with the CA's public key, so a different CA that merely has the
 * same name is rejected. Validity dates are not considered here.
 */
export function isIssuedBy(cert: CertificateInput, ca: CertificateInput): boolean {
  const leaf = info(cert).x509;
  const issuer = info(ca).x509;
  return leaf.checkIssued(issuer) && leaf.verify(issuer.publicKey);
}

/** Whether the private key belongs to the certificate's public key. Throws if the key does not parse. */
export function keyMatchesCertificate(keyPem: string | KeyObject, cert: CertificateInput): boolean {
  const key = typeof keyPem === 'string' ? parsePrivateKey(keyPem) : keyPem;
  try {
    return info(cert).x509.checkPrivateKey(key);
  } catch {
    // Node throws instead of returning false when the key type differs (e.g. EC key, RSA certificate).
    return false;
  }
}
