/**
 * What tests check in a certificate beyond what the product reads (names, usages, serial, issuer): Node's
 * X509Certificate, read for assertions.
 */
import { isIP } from 'node:net';
import { inspectCertificate, type CertificateInfo } from '@kd-connections/certs';

const EKU_NAMES: Record<string, string> = { '1.3.6.1.5.5.7.3.1': 'serverAuth', '1.3.6.1.5.5.7.3.2': 'clientAuth' };

/** Canonical text form of an IP address, so "::1" and "0:0:0:0:0:0:0:1" compare equal. */
export function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]/`).hostname.slice(1, -1) : ip;
}

const info = (c: string | CertificateInfo) => (typeof c === 'string' ? inspectCertificate(c) : c);

export function certificateFacts(cert: string | CertificateInfo) {
  const x = info(cert).x509;
  // Node prints "DNS:a, IP Address:1.2.3.4"; the test certificates' names need no quoting.
  const sans = (x.subjectAltName ?? '').split(', ').filter(Boolean);
  const of = (type: string) => sans.filter((s) => s.startsWith(`${type}:`)).map((s) => s.slice(type.length + 1));
  return {
    dnsNames: of('DNS'),
    ipAddresses: of('IP Address').map(canonicalIp),
    extKeyUsages: (x.keyUsage ?? []).map((oid) => EKU_NAMES[oid] ?? oid),
    subject: x.subject,
    issuer: x.issuer,
    issuerCN: /^CN=(.*)$/m.exec(x.issuer)?.[1],
    serialNumber: x.serialNumber.toLowerCase().replace(/^(?:00)+(?=.)/, ''),
  };
}

/** Whether `ca` issued `cert`: the issuer name matches AND the signature verifies with the CA's key. */
export function isIssuedBy(cert: string | CertificateInfo, ca: string | CertificateInfo): boolean {
  const [leaf, issuer] = [info(cert).x509, info(ca).x509];
  return leaf.checkIssued(issuer) && leaf.verify(issuer.publicKey);
}
