/**
 * When a stored CA + serving pair must be replaced, and why. Everything here is a pure function of
 * its arguments (time included), so the admission service's bootstrap can call it on every Secret
 * event and on a timer, and tests can pin `now`.
 */
import { servingDnsNames } from './generate.js';
import {
  CertificateError,
  isIssuedBy,
  keyMatchesCertificate,
  missingSubjectAltNames,
  parseCertificates,
  splitPemBlocks,
  type CertificateInfo,
} from './inspect.js';

/** What was found in storage (e.g. a TLS Secret's ca.crt, ca.key, tls.crt, tls.key); absent pieces undefined. */
export interface StoredCerts {
  caCertPem?: string;
  caKeyPem?: string;
  certPem?: string;
  keyPem?: string;
}

/** The names the serving certificate must cover: the same shape createServingCert takes. */
export interface WantedServing {
  service?: { name: string; namespace: string };
  dnsNames?: string[];
  ipAddresses?: string[];
}

export interface RenewalOptions {
  /** Renew once this fraction of a certificate's lifetime has passed (default 2/3). */
  renewAtFraction?: number;
}

export const DEFAULT_RENEW_AT_FRACTION = 2 / 3;

export type RenewalReasonCode =
  | 'ca-missing'
  | 'ca-unparsable'
  | 'ca-not-a-ca'
  | 'ca-key-mismatch'
  | 'ca-expired'
  | 'ca-not-yet-valid'
  | 'ca-expiring'
  | 'serving-missing'
  | 'serving-unparsable'
  | 'serving-key-mismatch'
  | 'serving-expired'
  | 'serving-not-yet-valid'
  | 'serving-expiring'
  | 'serving-not-server-auth'
  | 'san-mismatch'
  | 'ca-mismatch';

export interface RenewalReason {
  code: RenewalReasonCode;
  /** One sentence for logs and events. */
  message: string;
  /** For san-mismatch: the wanted names the stored certificate does not cover. */
  missingDnsNames?: string[];
  missingIpAddresses?: string[];
}

export interface RenewalDecision {
  /**
   * keep: the stored pair is fine. renew-serving: issue a new serving pair from the stored CA.
   * renew-ca: the CA itself is unusable or expiring; create a new CA and a serving pair signed by it
   * (publish old + new CA in the caBundle while the old leaf is still served: see buildCABundle).
   */
  action: 'keep' | 'renew-serving' | 'renew-ca';
  /** Every problem found (empty for keep); the CA's come first. */
  reasons: RenewalReason[];
  /** For keep: when renewal becomes due if nothing else changes (earliest of CA and serving). */
  renewAt?: Date;
  /** The parsed certificates, when they parsed (for logs). */
  ca?: CertificateInfo;
  serving?: CertificateInfo;
}

/** The moment `fraction` of the certificate's lifetime (notBefore..notAfter) has passed. */
export function renewalTime(cert: CertificateInfo, fraction = DEFAULT_RENEW_AT_FRACTION): Date {
  const start = cert.notBefore.getTime();
  return new Date(start + (cert.notAfter.getTime() - start) * fraction);
}

type Parsed = { cert?: CertificateInfo; problem?: RenewalReason };

function parseOne(pem: string, what: string, code: RenewalReasonCode): Parsed {
  try {
    // A tls.crt may carry the chain after the leaf; the first certificate is the one that matters.
    return { cert: parseCertificates(pem, what)[0]! };
  } catch (e) {
    return { problem: { code, message: (e as Error).message } };
  }
}

function keyProblem(keyPem: string, cert: CertificateInfo, what: string, code: RenewalReasonCode) {
  try {
    if (keyMatchesCertificate(keyPem, cert)) return undefined;
    return { code, message: `${what} key does not belong to the ${what} certificate` };
  } catch (e) {
    const unparsable: RenewalReasonCode = code === 'ca-key-mismatch' ? 'ca-unparsable' : 'serving-unparsable';
    return { code: unparsable, message: (e as Error).message };
  }
}

function timeProblem(
  cert: CertificateInfo,
  now: Date,
  fraction: number,
  what: string,
  codes: { expired: RenewalReasonCode; notYet: RenewalReasonCode; expiring: RenewalReasonCode },
): RenewalReason | undefined {
  const t = now.getTime();
  if (t >= cert.notAfter.getTime()) {
    return { code: codes.expired, message: `${what} certificate expired at ${cert.notAfter.toISOString()}` };
  }
  if (t < cert.notBefore.getTime()) {
    return {
      code: codes.notYet,
      message: `${what} certificate is not valid before ${cert.notBefore.toISOString()} (clock skew?)`,
    };
  }
  const due = renewalTime(cert, fraction);
  if (t >= due.getTime()) {
    return {
      code: codes.expiring,
      message: `${what} certificate expires at ${cert.notAfter.toISOString()}; renewal was due at ${due.toISOString()}`,
    };
  }
  return undefined;
}

const CA_CODES = new Set<RenewalReasonCode>([
  'ca-missing',
  'ca-unparsable',
  'ca-not-a-ca',
  'ca-key-mismatch',
  'ca-expired',
  'ca-not-yet-valid',
  'ca-expiring',
]);

/**
 * Whether the stored CA + serving pair must be renewed at `now`, and why. Every check runs so the
 * reasons list is complete; the action is the strongest one any reason calls for. Bad stored data is
 * a reason, never an exception; it throws only for bad arguments (a wanted IP that is not an IP, a
 * fraction outside (0, 1]).
 */
export function renewalDecision(
  stored: StoredCerts,
  wanted: WantedServing,
  now: Date,
  options: RenewalOptions = {},
): RenewalDecision {
  const fraction = options.renewAtFraction ?? DEFAULT_RENEW_AT_FRACTION;
  if (!(fraction > 0 && fraction <= 1)) throw new RangeError(`renewAtFraction must be in (0, 1], got ${fraction}`);
  const reasons: RenewalReason[] = [];
  const missing = (pieces: [string, string | undefined][]) =>
    pieces.filter(([, v]) => v === undefined || v.trim() === '').map(([n]) => n);

  // The CA.
  let ca: CertificateInfo | undefined;
  const caMissing = missing([
    ['CA certificate', stored.caCertPem],
    ['CA key', stored.caKeyPem],
  ]);
  if (caMissing.length > 0) {
    reasons.push({ code: 'ca-missing', message: `missing: ${caMissing.join(', ')}` });
  }
  if (stored.caCertPem?.trim()) {
    const p = parseOne(stored.caCertPem, 'CA certificate', 'ca-unparsable');
    if (p.problem) reasons.push(p.problem);
    ca = p.cert;
  }
  if (ca) {
    if (!ca.isCA) reasons.push({ code: 'ca-not-a-ca', message: 'CA certificate lacks basicConstraints cA=true' });
    if (stored.caKeyPem?.trim()) {
      const k = keyProblem(stored.caKeyPem, ca, 'CA', 'ca-key-mismatch');
      if (k) reasons.push(k);
    }
    const t = timeProblem(ca, now, fraction, 'CA', {
      expired: 'ca-expired',
      notYet: 'ca-not-yet-valid',
      expiring: 'ca-expiring',
    });
    if (t) reasons.push(t);
  }

  // The serving pair.
  let serving: CertificateInfo | undefined;
  const servingMissing = missing([
    ['serving certificate', stored.certPem],
    ['serving key', stored.keyPem],
  ]);
  if (servingMissing.length > 0) {
    reasons.push({ code: 'serving-missing', message: `missing: ${servingMissing.join(', ')}` });
  }
  if (stored.certPem?.trim()) {
    const p = parseOne(stored.certPem, 'serving certificate', 'serving-unparsable');
    if (p.problem) reasons.push(p.problem);
    serving = p.cert;
  }
  if (serving) {
    if (stored.keyPem?.trim()) {
      const k = keyProblem(stored.keyPem, serving, 'serving', 'serving-key-mismatch');
      if (k) reasons.push(k);
    }
    const t = timeProblem(serving, now, fraction, 'serving', {
      expired: 'serving-expired',
      notYet: 'serving-not-yet-valid',
      expiring: 'serving-expiring',
    });
    if (t) reasons.push(t);
    if (!serving.extKeyUsages.includes('serverAuth')) {
      reasons.push({
        code: 'serving-not-server-auth',
        message: 'serving certificate lacks the serverAuth extended key usage',
      });
    }
    const gap = missingSubjectAltNames(serving, { dnsNames: servingDnsNames(wanted), ipAddresses: wanted.ipAddresses });
    if (gap.dnsNames.length + gap.ipAddresses.length > 0) {
      reasons.push({
        code: 'san-mismatch',
        message: `serving certificate does not cover ${[...gap.dnsNames, ...gap.ipAddresses].join(', ')}`,
        missingDnsNames: gap.dnsNames,
        missingIpAddresses: gap.ipAddresses,
      });
    }
    if (ca && !isIssuedBy(serving, ca)) {
      reasons.push({
        code: 'ca-mismatch',
        message: `serving certificate was not signed by the stored CA (issuer ${JSON.stringify(serving.issuerCN ?? serving.issuer)})`,
      });
    }
  }

  const action = reasons.some((r) => CA_CODES.has(r.code)) ? 'renew-ca' : reasons.length > 0 ? 'renew-serving' : 'keep';
  const decision: RenewalDecision = { action, reasons };
  if (ca) decision.ca = ca;
  if (serving) decision.serving = serving;
  if (action === 'keep' && ca && serving) {
    const due = Math.min(renewalTime(ca, fraction).getTime(), renewalTime(serving, fraction).getTime());
    decision.renewAt = new Date(due);
  }
  return decision;
}

/** setTimeout fires at once (with a warning) for delays above 2^31-1 ms, about 24.8 days. */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * The one clamp for renewal timers: a setTimeout delay towards `due`, never below `minMs` (so a wake
 * that is due already does not spin) and never above MAX_TIMER_DELAY_MS (so a renewal months away
 * wakes early and re-evaluates instead of firing immediately).
 */
export function timerDelayMs(due: Date, now: Date, minMs = 0): number {
  return Math.min(MAX_TIMER_DELAY_MS, Math.max(minMs, due.getTime() - now.getTime()));
}

export type DroppedCAReason = 'same-as-current' | 'duplicate' | 'unparsable' | 'not-a-ca' | 'expired' | 'unused';

export interface CABundle {
  /** The caBundle to publish: the current CA first, then every previous CA still needed. */
  pem: string;
  cas: CertificateInfo[];
  /** Previous CAs left out, and why (for logs). */
  dropped: { subjectCN?: string; fingerprint256?: string; reason: DroppedCAReason; message?: string }[];
}

/**
 * The caBundle to publish during (or after) a CA rotation: the current CA, plus each previous CA that
 * still signs a leaf in use (not expired at `now`), so clients keep trusting a replica that still serves
 * the old leaf. Once no such leaf remains, the previous CA is dropped.
 *
 * @param currentCaPem the CA that signs new serving certificates (exactly one certificate)
 * @param previous CAs published before: a PEM bundle (e.g. the caBundle now published) or a list of PEMs
 * @param leavesInUse serving certificates that may still be presented to clients
 */
export function buildCABundle(
  currentCaPem: string,
  previous: string | readonly string[],
  leavesInUse: readonly string[],
  now: Date,
): CABundle {
  const current = parseCertificates(currentCaPem, 'current CA');
  if (current.length !== 1) throw new CertificateError(`current CA: expected one certificate, found ${current.length}`);
  const ca = current[0]!;
  if (!ca.isCA) throw new CertificateError('current CA: certificate lacks basicConstraints cA=true');

  const leaves: CertificateInfo[] = [];
  for (const pem of leavesInUse) {
    // A leaf that does not parse cannot be tied to a CA, and no client accepts it anyway.
    for (const b of splitPemBlocks(pem).slice(0, 1)) {
      try {
        leaves.push(parseCertificates(b.pem)[0]!);
      } catch {
        /* ignored, see above */
      }
    }
  }
  const liveLeaves = leaves.filter((l) => l.notAfter.getTime() > now.getTime());

  const blocks = typeof previous === 'string' ? splitPemBlocks(previous) : previous.flatMap((p) => splitPemBlocks(p));
  const kept: CertificateInfo[] = [ca];
  const dropped: CABundle['dropped'] = [];
  for (const block of blocks) {
    let prev: CertificateInfo;
    try {
      prev = parseCertificates(block.pem, 'previous CA')[0]!;
    } catch (e) {
      dropped.push({ reason: 'unparsable', message: (e as Error).message });
      continue;
    }
    const id = { subjectCN: prev.subjectCN, fingerprint256: prev.fingerprint256 };
    if (prev.fingerprint256 === ca.fingerprint256) dropped.push({ ...id, reason: 'same-as-current' });
    else if (kept.some((k) => k.fingerprint256 === prev.fingerprint256)) dropped.push({ ...id, reason: 'duplicate' });
    else if (!prev.isCA) dropped.push({ ...id, reason: 'not-a-ca' });
    else if (prev.notAfter.getTime() <= now.getTime()) dropped.push({ ...id, reason: 'expired' });
    else if (!liveLeaves.some((l) => isIssuedBy(l, prev))) dropped.push({ ...id, reason: 'unused' });
    else kept.push(prev);
  }
  return { pem: kept.map((c) => c.pem).join(''), cas: kept, dropped };
}
