import { generateKeyPair, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import forge from 'node-forge';

const { pki, md } = forge;

/** A PEM certificate and its PEM private key. */
export interface CertPair {
  certPem: string;
  keyPem: string;
}

export interface CAOptions {
  commonName?: string;
  /** Lifetime in milliseconds (default 10 years: the CA outlives many serving certificates). */
  lifetimeMs?: number;
  keyBits?: number;
  /** A key made beforehand (generateKeyPem), instead of one generated here. */
  keyPem?: string;
  now?: Date;
}

export interface ServingOptions {
  ca: CertPair;
  /** The Service the certificate is for: adds svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local. */
  service?: { name: string; namespace: string };
  dnsNames?: string[];
  ipAddresses?: string[];
  /** Lifetime in milliseconds (default 1 year). */
  lifetimeMs?: number;
  keyBits?: number;
  /** A key made beforehand (generateKeyPem), instead of one generated here. */
  keyPem?: string;
  commonName?: string;
  now?: Date;
}

export interface ClientOptions {
  ca: CertPair;
  commonName: string;
  /** Subject O= entries; Kubernetes reads them as groups (e.g. system:masters). */
  organizations?: string[];
  lifetimeMs?: number;
  keyBits?: number;
  now?: Date;
}

export const DAY_MS = 24 * 60 * 60 * 1000;
/** notBefore is backdated so a peer whose clock runs a little behind still accepts a fresh certificate. */
export const BACKDATE_MS = 5 * 60 * 1000;

/**
 * The backdating for a lifetime: BACKDATE_MS, but at most a tenth of the lifetime. Renewal is due at
 * two thirds of notBefore..notAfter, so a fixed 5 minutes would make any certificate shorter than
 * 150 s (the bootstrap tests use 30-90 s) due for renewal the moment it is issued.
 */
export function backdateMs(lifetimeMs: number): number {
  return Math.max(0, Math.min(BACKDATE_MS, Math.floor(lifetimeMs / 10)));
}

/**
 * RSA-2048: node-forge cannot issue ECDSA certificates, and 2048 bits is the smallest size every
 * Kubernetes distribution and Node's default security level accept. Generation uses Node's native
 * crypto (through forge, or generateKeyPem off the event loop).
 */
export const DEFAULT_KEY_BITS = 2048;

/** DNS names a Service is reachable under from inside the cluster. */
export function serviceDnsNames(name: string, namespace: string): string[] {
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`];
}

function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f; // positive INTEGER in DER
  if (bytes[0] === 0) bytes[0] = 0x01; // no leading zero octet, so the serial keeps 16 bytes
  return bytes.toString('hex');
}

function newKeys(bits: number, keyPem?: string): forge.pki.rsa.KeyPair {
  if (keyPem === undefined) return pki.rsa.generateKeyPair({ bits, e: 0x10001 });
  const privateKey = pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  return { privateKey, publicKey: pki.setRsaPublicKey(privateKey.n, privateKey.e) };
}

/**
 * An RSA key (PKCS#1 PEM) generated on libuv's thread pool: the admission service signs its serving
 * certificates while it answers reviews, and a generation on the event loop would stall them.
 */
export async function generateKeyPem(bits = DEFAULT_KEY_BITS): Promise<string> {
  const { privateKey } = await promisify(generateKeyPair)('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'pkcs1', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
  return privateKey;
}

function validity(cert: forge.pki.Certificate, now: Date, lifetimeMs: number): void {
  cert.validity.notBefore = new Date(now.getTime() - backdateMs(lifetimeMs));
  cert.validity.notAfter = new Date(now.getTime() + lifetimeMs);
}

export function createCA(opts: CAOptions = {}): CertPair {
  const keys = newKeys(opts.keyBits ?? DEFAULT_KEY_BITS, opts.keyPem);
  const cert = pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = randomSerial();
  validity(cert, opts.now ?? new Date(), opts.lifetimeMs ?? 3650 * DAY_MS);
  const subject = [{ name: 'commonName', value: opts.commonName ?? 'kd-connections-ca' }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(keys.privateKey, md.sha256.create());
  return { certPem: pki.certificateToPem(cert), keyPem: pki.privateKeyToPem(keys.privateKey) };
}

function issue(
  ca: CertPair,
  keys: forge.pki.rsa.KeyPair,
  commonName: string,
  organizations: string[],
  extensions: object[],
  now: Date,
  lifetimeMs: number,
): CertPair {
  const caCert = pki.certificateFromPem(ca.certPem);
  const caKey = pki.privateKeyFromPem(ca.keyPem);
  const cert = pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = randomSerial();
  // Never outlive the issuer: a leaf valid past its CA fails verification at the end anyway.
  const end = Math.min(now.getTime() + lifetimeMs, caCert.validity.notAfter.getTime());
  validity(cert, now, end - now.getTime());
  cert.setSubject([
    ...organizations.map((o) => ({ name: 'organizationName', value: o })),
    { name: 'commonName', value: commonName },
  ]);
  cert.setIssuer(caCert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    ...extensions,
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(caKey, md.sha256.create());
  return { certPem: pki.certificateToPem(cert), keyPem: pki.privateKeyToPem(keys.privateKey) };
}

/** The SAN list a serving certificate gets for the given options, in a stable order. */
export function servingDnsNames(opts: Pick<ServingOptions, 'service' | 'dnsNames'>): string[] {
  const names = [
    ...(opts.service ? serviceDnsNames(opts.service.name, opts.service.namespace) : []),
    ...(opts.dnsNames ?? []),
  ];
  return [...new Set(names)];
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
  return issue(
    opts.ca,
    newKeys(opts.keyBits ?? DEFAULT_KEY_BITS, opts.keyPem),
    opts.commonName ?? dnsNames[0] ?? ips[0]!,
    [],
    [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
    opts.now ?? new Date(),
    opts.lifetimeMs ?? 365 * DAY_MS,
  );
}

export function createClientCert(opts: ClientOptions): CertPair {
  return issue(
    opts.ca,
    newKeys(opts.keyBits ?? DEFAULT_KEY_BITS),
    opts.commonName,
    opts.organizations ?? [],
    [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
    ],
    opts.now ?? new Date(),
    opts.lifetimeMs ?? 365 * DAY_MS,
  );
}

/** An RSA key pair for signing service-account tokens (kube-apiserver --service-account-*-file). */
export function createSigningKey(bits = DEFAULT_KEY_BITS): { publicKeyPem: string; privateKeyPem: string } {
  const keys = newKeys(bits);
  return { publicKeyPem: pki.publicKeyToPem(keys.publicKey), privateKeyPem: pki.privateKeyToPem(keys.privateKey) };
}
