/**
 * Issuing: a CA, and serving certificates signed by it (node-forge builds and signs; keys come from Node's
 * crypto). RSA-2048: node-forge cannot issue ECDSA certificates, and 2048 bits is the smallest size every
 * Kubernetes distribution and Node's default security level accept.
 */
import { generateKeyPair, generateKeyPairSync, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import forge from 'node-forge';

const { pki, md } = forge;

/** A PEM certificate and its PEM private key. */
export interface CertPair {
  certPem: string;
  keyPem: string;
}

interface Common {
  /** Lifetime in milliseconds (default: 10 years for a CA, 1 year for a serving certificate). */
  lifetimeMs?: number;
  keyBits?: number;
  /** A key made beforehand (generateKeyPem), instead of one generated here on the event loop. */
  keyPem?: string;
  commonName?: string;
  now?: Date;
}

export type CAOptions = Common;

export interface ServingOptions extends Common {
  ca: CertPair;
  /** The Service the certificate is for: adds svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local. */
  service?: { name: string; namespace: string };
  dnsNames?: string[];
  ipAddresses?: string[];
}

export const DAY_MS = 24 * 60 * 60 * 1000;
/** notBefore is backdated so a peer whose clock runs a little behind still accepts a fresh certificate. */
export const BACKDATE_MS = 5 * 60 * 1000;
export const DEFAULT_KEY_BITS = 2048;

/**
 * The backdating for a lifetime: BACKDATE_MS, but at most a tenth of the lifetime, so a certificate of a
 * few minutes (the bootstrap tests use 30-90 s) is not due for renewal (two thirds) the moment it is issued.
 */
export function backdateMs(lifetimeMs: number): number {
  return Math.max(0, Math.min(BACKDATE_MS, Math.floor(lifetimeMs / 10)));
}

const rsaPem = (bits: number) =>
  ({
    modulusLength: bits,
    publicKeyEncoding: { type: 'pkcs1', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  }) as const;

/** An RSA key (PKCS#1 PEM) generated on libuv's thread pool, so a replica answering reviews does not stall. */
export async function generateKeyPem(bits = DEFAULT_KEY_BITS): Promise<string> {
  return (await promisify(generateKeyPair)('rsa', rsaPem(bits))).privateKey;
}

/** The SAN list a serving certificate gets: the Service's in-cluster names, then the extra ones, each once. */
export function servingDnsNames(opts: Pick<ServingOptions, 'service' | 'dnsNames'>): string[] {
  const s = opts.service;
  const svc = s ? [s.name, `${s.name}.${s.namespace}`, `${s.name}.${s.namespace}.svc`] : [];
  return [...new Set([...svc, ...(s ? [`${svc[2]}.cluster.local`] : []), ...(opts.dnsNames ?? [])])];
}

/**
 * A certificate for `o`'s key (or a new one), signed by `issuer` (self-signed when absent), never valid past
 * its issuer. Exported for the test harness's client certificates; the product issues through createCA and
 * createServingCert.
 */
export function issueCertificate(
  o: Common & { subject: { name: string; value: string }[]; extensions: object[]; defaultLifetimeMs: number },
  issuer?: CertPair,
): CertPair {
  const keyPem = o.keyPem ?? generateKeyPairSync('rsa', rsaPem(o.keyBits ?? DEFAULT_KEY_BITS)).privateKey;
  const privateKey = pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  const issuerCert = issuer && pki.certificateFromPem(issuer.certPem);
  const now = (o.now ?? new Date()).getTime();
  const end = Math.min(
    now + (o.lifetimeMs ?? o.defaultLifetimeMs),
    issuerCert?.validity.notAfter.getTime() ?? Infinity,
  );
  const cert = pki.createCertificate();
  cert.publicKey = pki.setRsaPublicKey(privateKey.n, privateKey.e);
  const serial = randomBytes(16);
  serial[0] = serial[0]! & 0x7f || 0x01; // a positive DER INTEGER that keeps its 16 bytes
  cert.serialNumber = serial.toString('hex');
  cert.validity.notBefore = new Date(now - backdateMs(end - now));
  cert.validity.notAfter = new Date(end);
  cert.setSubject(o.subject);
  cert.setIssuer(issuerCert?.subject.attributes ?? o.subject);
  cert.setExtensions([
    ...o.extensions,
    { name: 'subjectKeyIdentifier' },
    ...(issuerCert
      ? [{ name: 'authorityKeyIdentifier', keyIdentifier: issuerCert.generateSubjectKeyIdentifier().getBytes() }]
      : []),
  ]);
  cert.sign(issuer ? pki.privateKeyFromPem(issuer.keyPem) : privateKey, md.sha256.create());
  // node-forge ends PEM lines with CRLF; files and caBundles get LF, as OpenSSL writes them.
  const lf = (pem: string) => pem.replace(/\r\n/g, '\n');
  return { certPem: lf(pki.certificateToPem(cert)), keyPem: lf(pki.privateKeyToPem(privateKey)) };
}

export function createCA(opts: CAOptions = {}): CertPair {
  return issueCertificate({
    ...opts,
    subject: [{ name: 'commonName', value: opts.commonName ?? 'kd-connections-ca' }],
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
    defaultLifetimeMs: 3650 * DAY_MS,
  });
}

export function createServingCert(opts: ServingOptions): CertPair {
  const dnsNames = servingDnsNames(opts);
  const ips = [...new Set(opts.ipAddresses ?? [])];
  if (dnsNames.length === 0 && ips.length === 0) {
    throw new Error(
      'a serving certificate needs at least one DNS name or IP address (service, dnsNames or ipAddresses)',
    );
  }
  const altNames = [...dnsNames.map((value) => ({ type: 2, value })), ...ips.map((ip) => ({ type: 7, ip }))];
  return issueCertificate(
    {
      ...opts,
      subject: [{ name: 'commonName', value: opts.commonName ?? dnsNames[0] ?? ips[0]! }],
      extensions: [
        { name: 'basicConstraints', cA: false, critical: true },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
        { name: 'extKeyUsage', serverAuth: true },
        { name: 'subjectAltName', altNames },
      ],
      defaultLifetimeMs: 365 * DAY_MS,
    },
    opts.ca,
  );
}
