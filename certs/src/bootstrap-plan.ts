/**
 * The pure decisions of certificate bootstrap mode: what the TLS Secret holds, what to do about it,
 * what the Secret holds after a renewal, and which CAs the webhooks' caBundle must carry. No I/O; the
 * time is an argument, so every rule here is unit-tested with pinned clocks.
 *
 * The Secret (type kubernetes.io/tls):
 *   tls.crt, tls.key     the serving pair every replica serves
 *   ca.crt, ca.key       the CA that signs it; the key is here so that any replica can renew
 *   ca-previous.crt      CAs replaced by a rotation whose leaves may still be served
 *   tls-previous.crt     those leaves (certificates only, no keys): they decide how long a previous CA stays
 *
 * CA-rotation rule: a previous CA stays in ca-previous.crt, and so in every caBundle, for as long as a
 * leaf it signed and that was in use at the rotation (tls-previous.crt) has not expired. After that
 * no replica can present such a leaf to a verifying client, so the CA is no longer needed; it leaves
 * the caBundle `pruneAfterMs` after this replica first noticed it is no longer wanted.
 */
import type { CertPair } from './generate.js';
import { isIssuedBy, parseCertificates, splitPemBlocks, type CertificateInfo } from './inspect.js';
import {
  buildCABundle,
  renewalDecision,
  type CABundle,
  type RenewalDecision,
  type RenewalOptions,
  type RenewalReason,
  type StoredCerts,
  type WantedServing,
} from './renewal.js';

export const TLS_SECRET_TYPE = 'kubernetes.io/tls';

export const SECRET_KEYS = {
  cert: 'tls.crt',
  key: 'tls.key',
  caCert: 'ca.crt',
  caKey: 'ca.key',
  previousCAs: 'ca-previous.crt',
  previousLeaves: 'tls-previous.crt',
} as const;

/** The parts of a Secret bootstrap mode reads (data is base64, as the API returns it). */
export interface SecretObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; namespace?: string; resourceVersion?: string; uid?: string; [k: string]: unknown };
  type?: string;
  immutable?: boolean;
  data?: Record<string, string>;
}

export interface SecretContents extends StoredCerts {
  previousCAsPem?: string;
  previousLeavesPem?: string;
}

export function decodeSecret(secret: SecretObject | undefined): SecretContents {
  const data = secret?.data ?? {};
  const get = (k: string) => {
    const v = data[k];
    return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
  };
  return {
    certPem: get(SECRET_KEYS.cert),
    keyPem: get(SECRET_KEYS.key),
    caCertPem: get(SECRET_KEYS.caCert),
    caKeyPem: get(SECRET_KEYS.caKey),
    previousCAsPem: get(SECRET_KEYS.previousCAs),
    previousLeavesPem: get(SECRET_KEYS.previousLeaves),
  };
}

/** Every certificate in the texts that parses; the rest is skipped (callers judge what is missing). */
export function certificatesIn(...texts: (string | undefined)[]): CertificateInfo[] {
  const out: CertificateInfo[] = [];
  for (const text of texts) {
    for (const block of splitPemBlocks(text ?? '')) {
      try {
        const c = parseCertificates(block.pem)[0]!;
        if (!out.some((o) => o.fingerprint256 === c.fingerprint256)) out.push(c);
      } catch {
        /* skipped, see above */
      }
    }
  }
  return out;
}

/** Expected lifecycle, logged at info; anything else found in the Secret is damage, reported as a Warning. */
const ROUTINE = new Set<RenewalReason['code']>(['serving-expiring', 'ca-expiring', 'san-mismatch']);
const NOT_SERVABLE = new Set<RenewalReason['code']>([
  'serving-missing',
  'serving-unparsable',
  'serving-key-mismatch',
  'serving-expired',
  'serving-not-yet-valid',
  'serving-not-server-auth',
]);

export type PlanAction = 'create' | 'keep' | 'renew-serving' | 'renew-ca';

export interface Plan {
  /** create: no Secret. keep: serve it. renew-serving: new leaf from the stored CA. renew-ca: new CA and leaf. */
  action: PlanAction;
  decision?: RenewalDecision;
  /** Reasons that mean the Secret was damaged (not due for routine renewal); empty when healthy. */
  damage: RenewalReason[];
  /** Set when a renewal is needed but the Secret cannot be written; the text says what to do. */
  blocked?: string;
  /** The stored pair, when it can be served meanwhile: valid now, key matches, signed by a CA of the Secret. */
  servable?: CertPair & { info: CertificateInfo; issuer: CertificateInfo };
  /** Oddities that do not stop anything (e.g. a Secret of another type). */
  notes: string[];
}

export function planFor(
  secret: SecretObject | undefined,
  wanted: WantedServing,
  now: Date,
  options?: RenewalOptions,
): Plan {
  if (!secret) return { action: 'create', damage: [], notes: [] };
  const contents = decodeSecret(secret);
  const decision = renewalDecision(contents, wanted, now, options);
  const notes: string[] = [];
  if (secret.type !== undefined && secret.type !== TLS_SECRET_TYPE) {
    notes.push(`Secret has type ${secret.type}, not ${TLS_SECRET_TYPE}; using it anyway`);
  }
  const empty = [contents.certPem, contents.keyPem, contents.caCertPem, contents.caKeyPem].every((v) => !v?.trim());
  // An empty Secret (pre-created, e.g. by a chart) is initialized, not repaired.
  const damage = empty ? [] : decision.reasons.filter((r) => !ROUTINE.has(r.code));
  const plan: Plan = { action: decision.action, decision, damage, notes };
  if (decision.serving && !decision.reasons.some((r) => NOT_SERVABLE.has(r.code))) {
    const issuer = certificatesIn(contents.caCertPem, contents.previousCAsPem).find(
      (ca) => ca.isCA && isIssuedBy(decision.serving!, ca),
    );
    if (issuer)
      plan.servable = { certPem: contents.certPem!, keyPem: contents.keyPem!, info: decision.serving, issuer };
  }
  if (decision.action !== 'keep' && secret.immutable === true) {
    plan.blocked =
      `Secret ${secret.metadata.namespace}/${secret.metadata.name} is immutable and needs ` +
      `${decision.action === 'renew-ca' ? 'a new CA' : 'a new serving certificate'} ` +
      `(${decision.reasons.map((r) => r.message).join('; ')}); delete it and it is created again`;
  }
  return plan;
}

/**
 * The CAs the caBundle must carry for what the Secret holds: its CA first, then each previous CA
 * while a leaf it signed (tls.crt or tls-previous.crt) is still valid. Empty when ca.crt is unusable.
 */
export function desiredCAs(contents: SecretContents, now: Date): CertificateInfo[] {
  const current = certificatesIn(contents.caCertPem)[0];
  if (!current?.isCA) return [];
  return buildCABundle(
    current.pem,
    contents.previousCAsPem ?? '',
    [contents.certPem ?? '', ...certificatesIn(contents.previousLeavesPem).map((c) => c.pem)],
    now,
  ).cas;
}

export interface NewSecretInput {
  ca: CertPair;
  serving: CertPair;
  /** CAs that may still be trusted for a leaf in use: the old ca.crt, ca-previous.crt, the published caBundle. */
  previousCAs: (string | undefined)[];
  /** Leaves that may still be served: the old tls.crt, tls-previous.crt, the leaf this replica serves. */
  leavesInUse: (string | undefined)[];
  now: Date;
  /** The Secret's current data: keys bootstrap mode does not own are carried over. */
  existing?: Record<string, string>;
}

export interface NewSecret {
  /** base64 values, ready for the Secret's data. */
  data: Record<string, string>;
  /** The caBundle for this Secret: the new CA first, then the previous CAs kept. */
  bundle: CABundle;
  previousLeaves: CertificateInfo[];
}

/** The Secret data after a renewal, with the previous CAs (and their leaves) that must stay trusted. */
export function newSecretData(input: NewSecretInput): NewSecret {
  const leaves = certificatesIn(...input.leavesInUse).filter((l) => !l.isCA);
  const bundle = buildCABundle(
    input.ca.certPem,
    certificatesIn(...input.previousCAs).map((c) => c.pem),
    leaves.map((l) => l.pem),
    input.now,
  );
  const previous = bundle.cas.slice(1);
  const previousLeaves = leaves.filter(
    (l) => l.notAfter.getTime() > input.now.getTime() && previous.some((ca) => isIssuedBy(l, ca)),
  );
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  const data: Record<string, string> = { ...input.existing };
  for (const k of Object.values(SECRET_KEYS)) delete data[k];
  data[SECRET_KEYS.cert] = b64(input.serving.certPem);
  data[SECRET_KEYS.key] = b64(input.serving.keyPem);
  data[SECRET_KEYS.caCert] = b64(input.ca.certPem);
  data[SECRET_KEYS.caKey] = b64(input.ca.keyPem);
  if (previous.length > 0) data[SECRET_KEYS.previousCAs] = b64(previous.map((c) => c.pem).join(''));
  if (previousLeaves.length > 0) data[SECRET_KEYS.previousLeaves] = b64(previousLeaves.map((c) => c.pem).join(''));
  return { data, bundle, previousLeaves };
}

/** The CAs a set of caBundle field values (base64 PEM) carry, in order, each once; junk is skipped. */
export function publishedCAs(caBundles: (string | undefined)[]): CertificateInfo[] {
  return certificatesIn(...caBundles.map((b) => (b ? Buffer.from(b, 'base64').toString('utf8') : undefined)));
}

/**
 * When each published CA that is not wanted was first seen unwanted. Called once per configuration,
 * so CAs that are not in `published` keep their entry; wanted ones lose it. `forgetUnpublished` drops
 * the entries of CAs no configuration carries any more.
 */
export function trackUnwanted(
  previous: ReadonlyMap<string, number>,
  published: readonly CertificateInfo[],
  desired: readonly CertificateInfo[],
  nowMs: number,
): Map<string, number> {
  const next = new Map(previous);
  for (const c of desired) next.delete(c.fingerprint256);
  for (const c of published)
    if (!next.has(c.fingerprint256) && !desired.some((d) => d.fingerprint256 === c.fingerprint256))
      next.set(c.fingerprint256, nowMs);
  return next;
}

export function forgetUnpublished(
  since: ReadonlyMap<string, number>,
  published: readonly CertificateInfo[],
): Map<string, number> {
  const keep = new Set(published.map((c) => c.fingerprint256));
  return new Map([...since].filter(([fp]) => keep.has(fp)));
}

export interface MergeOptions {
  now: Date;
  unwantedSince: ReadonlyMap<string, number>;
  pruneAfterMs: number;
  /** Only from a healthy Secret: a broken one says nothing reliable about which CAs are unwanted. */
  allowPrune: boolean;
  /** CAs to take out at once (one this replica generated for a write it then lost). */
  withdraw?: ReadonlySet<string>;
}

export interface BundleMerge {
  cas: CertificateInfo[];
  pem: string;
  added: string[];
  removed: string[];
}

/**
 * The caBundle to publish: every desired CA (current first), then each CA already published unless
 * it expired, is withdrawn, or has been unwanted for `pruneAfterMs`. CAs are added at once and
 * removed only late, so a replica that has not yet seen the newest Secret, or a writer between
 * publishing a new CA and writing the Secret, can never take away a CA someone is about to serve.
 */
export function mergeBundle(
  published: readonly CertificateInfo[],
  desired: readonly CertificateInfo[],
  o: MergeOptions,
): BundleMerge {
  const now = o.now.getTime();
  const cas: CertificateInfo[] = [];
  const has = (fp: string) => cas.some((c) => c.fingerprint256 === fp);
  for (const c of desired) if (!has(c.fingerprint256)) cas.push(c);
  const removed: string[] = [];
  for (const c of published) {
    if (has(c.fingerprint256)) continue;
    const since = o.unwantedSince.get(c.fingerprint256);
    const drop =
      !c.isCA ||
      c.notAfter.getTime() <= now ||
      o.withdraw?.has(c.fingerprint256) === true ||
      (o.allowPrune && since !== undefined && now - since >= o.pruneAfterMs);
    if (drop) removed.push(c.fingerprint256);
    else cas.push(c);
  }
  const before = new Set(published.map((c) => c.fingerprint256));
  return {
    cas,
    pem: cas.map((c) => c.pem).join(''),
    added: cas.filter((c) => !before.has(c.fingerprint256)).map((c) => c.fingerprint256),
    removed,
  };
}

/**
 * The next moment something changes without any event: renewal due, a previous leaf expiring (its CA
 * becomes unwanted), an unwanted CA reaching `pruneAfterMs`.
 */
export function nextWakeAt(
  contents: SecretContents,
  plan: Plan,
  unwantedSince: ReadonlyMap<string, number>,
  pruneAfterMs: number,
  now: Date,
): Date | undefined {
  const t = now.getTime();
  const times: number[] = [];
  if (plan.decision?.renewAt) times.push(plan.decision.renewAt.getTime());
  for (const c of certificatesIn(contents.previousLeavesPem, contents.previousCAsPem)) times.push(c.notAfter.getTime());
  for (const since of unwantedSince.values()) times.push(since + pruneAfterMs);
  const future = times.filter((x) => x > t);
  return future.length > 0 ? new Date(Math.min(...future)) : undefined;
}
