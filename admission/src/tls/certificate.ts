/**
 * Where the serving certificate comes from is kept behind two small interfaces: a source delivers
 * PEM pairs to a sink whenever it has a new one. The file loader is one source; a bootstrapper that
 * reads or creates a Secret is another, calling the same `setCertificate`.
 */
import tls from 'node:tls';
import { inspectCertificate, splitPemBlocks, type CertificateInfo } from '@kd-connections/certs';

export interface CertificateSink {
  /** Installs a certificate and key (PEM). Throws, keeping the current pair, when they are unusable. */
  setCertificate(certPem: string, keyPem: string): void;
}

export interface CertificateSource {
  /** Begins delivering certificates to `sink`; resolves after the first attempt (not necessarily a success). */
  start(sink: CertificateSink): Promise<void>;
  stop(): void;
  /** Why the certificate being served is not valid (e.g. expired and not renewable); empty when it is. */
  notReadyReasons?(): string[];
  /** Bootstrap with a webhook path token: the tokens a review may come with. */
  pathTokens?(): readonly string[];
}

/** TLS 1.2 or newer, AEAD suites only (GCM, ChaCha20-Poly1305), forward secrecy. */
export const MIN_TLS_VERSION = 'TLSv1.2';
export const AEAD_CIPHERS = [
  // TLS 1.3 (all of them are AEAD)
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  // TLS 1.2
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

export function tlsOptions(certPem: string, keyPem: string): tls.SecureContextOptions {
  return {
    cert: certPem,
    key: keyPem,
    minVersion: MIN_TLS_VERSION,
    ciphers: AEAD_CIPHERS,
    honorCipherOrder: true,
  };
}

/**
 * Checks that a pair is usable (the certificate parses and the key matches it) and describes the
 * certificate. Throws with a readable message otherwise.
 */
export function checkPair(certPem: string, keyPem: string): CertificateInfo {
  let leaf: CertificateInfo;
  try {
    // The first certificate is the leaf; what follows is its chain (or, in a combined file, the key).
    const first = splitPemBlocks(certPem).find((b) => b.type === 'CERTIFICATE');
    leaf = inspectCertificate(first?.pem ?? certPem);
  } catch (e) {
    throw new Error(`certificate does not parse: ${(e as Error).message}`);
  }
  try {
    tls.createSecureContext(tlsOptions(certPem, keyPem));
  } catch (e) {
    throw new Error(`certificate and key are not a usable pair: ${(e as Error).message}`);
  }
  return leaf;
}
