/**
 * Certificates only the harness needs: client certificates for the API server's users and kubelets, and the
 * service-account signing key. The product issues CAs and serving certificates only (@kd-connections/certs).
 */
import { generateKeyPairSync } from 'node:crypto';
import { issueCertificate, type CertPair } from '@kd-connections/certs';

export interface ClientOptions {
  ca: CertPair;
  commonName: string;
  /** Subject O= entries; Kubernetes reads them as groups (e.g. system:masters). */
  organizations?: string[];
  lifetimeMs?: number;
  keyBits?: number;
}

export function createClientCert(o: ClientOptions): CertPair {
  return issueCertificate(
    {
      ...o,
      subject: [
        ...(o.organizations ?? []).map((value) => ({ name: 'organizationName', value })),
        { name: 'commonName', value: o.commonName },
      ],
      extensions: [
        { name: 'basicConstraints', cA: false, critical: true },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
        { name: 'extKeyUsage', clientAuth: true },
      ],
      defaultLifetimeMs: 365 * 24 * 3_600_000,
    },
    o.ca,
  );
}

/** An RSA key pair for signing service-account tokens (kube-apiserver --service-account-*-file). */
export function createSigningKey(bits = 2048): { publicKeyPem: string; privateKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
  return { publicKeyPem: publicKey, privateKeyPem: privateKey };
}
