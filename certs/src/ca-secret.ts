/**
 * The CA Secret of dynamic serving (cert-manager's webhook model): one kubernetes.io/tls Secret holds the
 * CA from which every admission replica signs its own serving certificate, in memory. Pure: what the Secret
 * holds, whether it needs a write, the data after one, and which CAs the webhooks must trust. Time is an
 * argument, so every rule is unit-tested with pinned clocks.
 *
 *   ca.crt, ca.key     the CA
 *   tls.crt, tls.key   a copy of the CA (the Secret type requires these keys). Version 0.1.0's replicas kept
 *                      one shared serving pair here, signed by the same ca.crt/ca.key: during an upgrade they
 *                      still do, and both versions serve leaves of the one CA
 *   ca-previous.crt    CAs a rotation replaced: trusted while a leaf they signed may still be served
 *   webhook-path-key   the secret webhook path tokens are derived from (admission/src/path-token)
 *   webhook-path-token, -previous, -issued   0.1.0's stored path token: accepted and kept published while
 *                      a 0.1.0 replica may be running (LEGACY_TOKEN_MAX_AGE_MS), then removed
 *
 * A leaf is signed by whichever CA its replica read last, and lives at most `servingLifetimeMs`; a replica
 * reading the Secret just before a rotation may sign one more leaf from the old CA. So a previous CA stays
 * trusted until the rotation (the new CA's notBefore, which is backdated by at most BACKDATE_MS) plus
 * BACKDATE_MS plus one serving lifetime — or until it expires, if sooner.
 */
import { randomBytes } from 'node:crypto';
import { BACKDATE_MS, type CertPair } from './generate.js';
import { keyMatchesCertificate, parseCertificates, splitPemBlocks, type CertificateInfo } from './inspect.js';

export const TLS_SECRET_TYPE = 'kubernetes.io/tls';

export const CA_SECRET_KEYS = {
  caCert: 'ca.crt',
  caKey: 'ca.key',
  cert: 'tls.crt',
  key: 'tls.key',
  previous: 'ca-previous.crt',
  pathKey: 'webhook-path-key',
  /** When the path key was written (RFC 3339): the start of an upgrade from 0.1.0. */
  pathKeyCreated: 'webhook-path-key-created',
} as const;

const LEGACY_TOKEN = {
  current: 'webhook-path-token',
  previous: 'webhook-path-token-previous',
  issued: 'webhook-path-token-issued',
};

/**
 * How long 0.1.0's stored token stays after both the path key was added (the first new replica's write,
 * the start of the upgrade) and the token was last issued: a rollout does not take two hours, so no 0.1.0
 * replica is left to accept it by then. (0.1.0 issues a new one each rotation period, or never.)
 */
export const LEGACY_TOKEN_MAX_AGE_MS = 2 * 3_600_000;

/**
 * Slack on top of a previous CA's trust window: a replica that read the Secret just before a rotation may
 * sign one more leaf from the old CA a moment after it.
 */
export const PREVIOUS_CA_SLACK_MS = 30_000;

/** The parts of a Secret dynamic serving reads (data is base64, as the API returns it). */
export interface SecretObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; namespace?: string; resourceVersion?: string; uid?: string; [k: string]: unknown };
  type?: string;
  immutable?: boolean;
  data?: Record<string, string>;
}

export interface CASecret {
  /** The CA, when tls.crt is a CA certificate and tls.key its key. */
  ca?: CertPair & { info: CertificateInfo };
  /** What is wrong with the CA (empty when `ca` is set). */
  problems: string[];
  /** Every other CA certificate the Secret names (ca-previous.crt, an older ca.crt), each once. */
  previous: CertificateInfo[];
  pathKey?: Buffer;
  /** When the path key was written. */
  pathKeyCreatedAt?: Date;
  /** 0.1.0's stored path tokens (current first), and when the current one was issued. */
  legacyTokens: string[];
  legacyIssuedAt?: Date;
}

const text = (data: Record<string, string> | undefined, key: string) =>
  data?.[key] === undefined ? undefined : Buffer.from(data[key], 'base64').toString('utf8');

/** Every certificate in the texts that parses, each once; the rest is skipped (callers judge what is missing). */
export function certificatesIn(...texts: (string | undefined)[]): CertificateInfo[] {
  const out: CertificateInfo[] = [];
  for (const block of texts.flatMap((t) => splitPemBlocks(t ?? ''))) {
    try {
      const c = parseCertificates(block.pem)[0]!;
      if (!out.some((o) => o.fingerprint256 === c.fingerprint256)) out.push(c);
    } catch {
      /* skipped, see above */
    }
  }
  return out;
}

export function readCASecret(secret: SecretObject | undefined): CASecret {
  const data = secret?.data;
  const certPem = text(data, CA_SECRET_KEYS.caCert);
  const keyPem = text(data, CA_SECRET_KEYS.caKey);
  const problems: string[] = [];
  let info: CertificateInfo | undefined;
  if (!certPem?.trim() || !keyPem?.trim())
    problems.push(`${CA_SECRET_KEYS.caCert} or ${CA_SECRET_KEYS.caKey} is empty`);
  else {
    try {
      info = parseCertificates(certPem, CA_SECRET_KEYS.caCert)[0]!;
      if (!info.isCA)
        problems.push(`${CA_SECRET_KEYS.caCert} is not a CA certificate (basicConstraints cA is not set)`);
      else if (!keyMatchesCertificate(keyPem, info)) problems.push(`${CA_SECRET_KEYS.caKey} is not the key of the CA`);
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  const ca = info && problems.length === 0 ? { certPem: info.pem, keyPem: keyPem!, info } : undefined;
  const previous = certificatesIn(text(data, CA_SECRET_KEYS.previous), certPem, text(data, CA_SECRET_KEYS.cert)).filter(
    (c) => c.isCA && c.fingerprint256 !== ca?.info.fingerprint256,
  );
  const rawKey = data?.[CA_SECRET_KEYS.pathKey];
  const pathKey = rawKey === undefined ? undefined : Buffer.from(rawKey, 'base64');
  const legacyTokens = [LEGACY_TOKEN.current, LEGACY_TOKEN.previous]
    .map((k) => text(data, k))
    .filter((t): t is string => t !== undefined && /^[A-Za-z0-9_-]{43}$/.test(t));
  const issued = Date.parse(text(data, LEGACY_TOKEN.issued) ?? '');
  const keyCreated = Date.parse(text(data, CA_SECRET_KEYS.pathKeyCreated) ?? '');
  return {
    ...(ca ? { ca } : {}),
    problems,
    previous,
    ...(pathKey && pathKey.length >= 32 ? { pathKey } : {}),
    ...(Number.isNaN(keyCreated) ? {} : { pathKeyCreatedAt: new Date(keyCreated) }),
    legacyTokens,
    ...(legacyTokens.length > 0 && !Number.isNaN(issued) ? { legacyIssuedAt: new Date(issued) } : {}),
  };
}

/** When a certificate is due for renewal: two thirds of the way from notBefore to notAfter. */
export function renewAt(c: Pick<CertificateInfo, 'notBefore' | 'notAfter'>): Date {
  const from = c.notBefore.getTime();
  return new Date(from + ((c.notAfter.getTime() - from) * 2) / 3);
}

export interface CAPlan {
  /**
   * Write a new CA (the Secret is absent, its CA unusable, expired or due), or only a path key, or only
   * remove 0.1.0's path token, or nothing.
   */
  write: 'new-ca' | 'path-key' | 'drop-legacy-token' | undefined;
  /** Why, one sentence each, for logs and events. */
  reasons: string[];
  /** The reasons mean damage (reported as a Warning), not routine renewal. */
  damaged: boolean;
}

export function planCA(secret: SecretObject | undefined, s: CASecret, now: Date): CAPlan {
  if (!secret) return { write: 'new-ca', reasons: ['the Secret does not exist'], damaged: false };
  const empty = Object.values(CA_SECRET_KEYS).every((k) => !secret.data?.[k]);
  if (!s.ca) return { write: 'new-ca', reasons: s.problems, damaged: !empty };
  const t = now.getTime();
  const info = s.ca.info;
  if (t >= info.notAfter.getTime())
    return { write: 'new-ca', reasons: [`the CA expired at ${info.notAfter.toISOString()}`], damaged: true };
  if (t < info.notBefore.getTime())
    return { write: 'new-ca', reasons: [`the CA is not valid before ${info.notBefore.toISOString()}`], damaged: true };
  if (t >= renewAt(info).getTime())
    return { write: 'new-ca', reasons: [`the CA expires at ${info.notAfter.toISOString()}`], damaged: false };
  if (!s.pathKey) return { write: 'path-key', reasons: [`${CA_SECRET_KEYS.pathKey} is missing`], damaged: false };
  if (s.legacyTokens.length > 0 && !s.pathKeyCreatedAt) {
    const reasons = [`${CA_SECRET_KEYS.pathKeyCreated} is missing`];
    return { write: 'path-key', reasons, damaged: false };
  }
  const legacySince = Math.max(s.legacyIssuedAt?.getTime() ?? 0, s.pathKeyCreatedAt?.getTime() ?? t);
  if (s.legacyTokens.length > 0 && legacySince + LEGACY_TOKEN_MAX_AGE_MS <= t) {
    const reasons = ["0.1.0's webhook path token is no longer rotated by any replica"];
    return { write: 'drop-legacy-token', reasons, damaged: false };
  }
  return { write: undefined, reasons: [], damaged: false };
}

/** Until when a previous CA must stay trusted (see the file comment). */
export function previousTrustedUntil(prev: CertificateInfo, current: CertificateInfo, servingLifetimeMs: number): Date {
  const rotated = current.notBefore.getTime() + BACKDATE_MS + PREVIOUS_CA_SLACK_MS;
  return new Date(Math.min(prev.notAfter.getTime(), rotated + servingLifetimeMs));
}

/** The CAs the webhooks must trust for this Secret now: its CA first, then previous CAs still needed. */
export function trustedCAs(s: CASecret, now: Date, servingLifetimeMs: number): CertificateInfo[] {
  if (!s.ca) return [];
  const current = s.ca.info;
  return [current, ...s.previous.filter((p) => previousTrustedUntil(p, current, servingLifetimeMs) > now)];
}

export interface CASecretWrite {
  now: Date;
  servingLifetimeMs: number;
  /** The new CA; absent: the Secret's own. */
  newCA?: CertPair;
  /**
   * CAs that may sign a leaf served now although the Secret no longer names them (the caBundles' CAs, the
   * issuer of this replica's leaf): a new CA keeps them as previous ones (a deleted or broken Secret).
   */
  inUse?: readonly CertificateInfo[];
  /** Remove 0.1.0's path token. */
  dropLegacyToken?: boolean;
}

/**
 * The Secret's data after a write: the new CA (or the CA it holds) and its path key (or a new one), the CAs
 * still needed as previous ones, and every key dynamic serving does not own carried over — 0.1.0's path
 * token too, unless `dropLegacyToken`. tls.crt/tls.key become a copy of the CA when the CA changes or the
 * 0.1.0 token goes (until then a running 0.1.0 replica keeps its serving pair there).
 */
export function caSecretData(secret: SecretObject | undefined, s: CASecret, o: CASecretWrite): Record<string, string> {
  const b64 = (v: string | Buffer) => Buffer.from(v).toString('base64');
  const ca = o.newCA ?? s.ca!;
  const current = parseCertificates(ca.certPem, 'new CA')[0]!;
  const candidates = o.newCA ? [...(s.ca ? [s.ca.info] : []), ...s.previous, ...(o.inUse ?? [])] : s.previous;
  const previous = candidates.filter(
    (p, i) =>
      p.isCA &&
      p.fingerprint256 !== current.fingerprint256 &&
      candidates.findIndex((c) => c.fingerprint256 === p.fingerprint256) === i &&
      previousTrustedUntil(p, current, o.servingLifetimeMs) > o.now,
  );
  const data: Record<string, string> = { ...secret?.data };
  const copyToTls = !secret || o.newCA !== undefined || o.dropLegacyToken === true;
  const ours = Object.values(CA_SECRET_KEYS).filter(
    (k) => copyToTls || (k !== CA_SECRET_KEYS.cert && k !== CA_SECRET_KEYS.key),
  );
  for (const k of [...ours, ...(o.dropLegacyToken ? Object.values(LEGACY_TOKEN) : [])]) delete data[k];
  const [certB64, keyB64] = [b64(ca.certPem), b64(ca.keyPem)];
  data[CA_SECRET_KEYS.caCert] = certB64;
  data[CA_SECRET_KEYS.caKey] = keyB64;
  if (copyToTls) [data[CA_SECRET_KEYS.cert], data[CA_SECRET_KEYS.key]] = [certB64, keyB64];
  if (previous.length > 0) data[CA_SECRET_KEYS.previous] = b64(previous.map((c) => c.pem).join(''));
  data[CA_SECRET_KEYS.pathKey] = b64(s.pathKey ?? randomBytes(32));
  data[CA_SECRET_KEYS.pathKeyCreated] = b64(
    s.pathKey ? (s.pathKeyCreatedAt ?? o.now).toISOString() : o.now.toISOString(),
  );
  return data;
}
