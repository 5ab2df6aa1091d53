/** The pure decisions of bootstrap mode: Secret state → action, new Secret data, caBundle contents. */
import { beforeAll, describe, expect, it } from '@jest/globals';
import {
  certificatesIn,
  decodeSecret,
  desiredCAs,
  forgetUnpublished,
  mergeBundle,
  newSecretData,
  nextWakeAt,
  planFor,
  publishedCAs,
  SECRET_KEYS,
  trackUnwanted,
  type SecretObject,
} from '../src/bootstrap-plan.js';
import { createCA, createServingCert, type CertPair } from '../src/generate.js';
import { inspectCertificate, type CertificateInfo } from '../src/inspect.js';

const T0 = new Date('2030-05-01T12:00:00Z');
const MIN = 60_000;
const at = (ms: number) => new Date(T0.getTime() + ms);
const BITS = 1024; // speed; the size is not under test here
const wanted = { service: { name: 'kd-admission', namespace: 'kd' }, ipAddresses: ['127.0.0.1'] };

let caOld: CertPair, caNew: CertPair, caOther: CertPair;
let leafOld: CertPair, leafNew: CertPair, leafOther: CertPair;
let info: (pem: string) => CertificateInfo;

beforeAll(() => {
  caOld = createCA({ now: T0, lifetimeMs: 600 * MIN, keyBits: BITS, commonName: 'old' });
  caNew = createCA({ now: T0, lifetimeMs: 600 * MIN, keyBits: BITS, commonName: 'new' });
  caOther = createCA({ now: T0, lifetimeMs: 600 * MIN, keyBits: BITS, commonName: 'other' });
  // 60-minute leaves: renewal due 40 minutes (and a bit, for the backdating) after issuance.
  leafOld = createServingCert({ ca: caOld, ...wanted, now: T0, lifetimeMs: 60 * MIN, keyBits: BITS });
  leafNew = createServingCert({ ca: caNew, ...wanted, now: at(30 * MIN), lifetimeMs: 60 * MIN, keyBits: BITS });
  leafOther = createServingCert({ ca: caOther, ...wanted, now: T0, lifetimeMs: 60 * MIN, keyBits: BITS });
  info = (pem) => inspectCertificate(pem);
});

const b64 = (s: string) => Buffer.from(s).toString('base64');

function secret(data: Record<string, string | undefined>, extra: Partial<SecretObject> = {}): SecretObject {
  const encoded: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) if (v !== undefined) encoded[k] = b64(v);
  return {
    metadata: { name: 'tls', namespace: 'kd', resourceVersion: '7' },
    type: 'kubernetes.io/tls',
    data: encoded,
    ...extra,
  };
}

const healthy = () =>
  secret({ 'tls.crt': leafOld.certPem, 'tls.key': leafOld.keyPem, 'ca.crt': caOld.certPem, 'ca.key': caOld.keyPem });

const fps = (cas: CertificateInfo[]) => cas.map((c) => c.subjectCN);

describe('planFor: what to do with the Secret', () => {
  it('creates a missing Secret', () => {
    expect(planFor(undefined, wanted, at(MIN))).toMatchObject({ action: 'create', damage: [] });
  });

  it('keeps a healthy Secret, serves its pair, and knows when renewal is due', () => {
    const p = planFor(healthy(), wanted, at(MIN));
    expect(p.action).toBe('keep');
    expect(p.damage).toEqual([]);
    expect(p.servable?.certPem).toBe(leafOld.certPem);
    expect(p.servable?.issuer.subjectCN).toBe('old');
    // Two thirds of 65 minutes (60 + 5 backdated) after notBefore.
    expect(p.decision?.renewAt?.toISOString()).toBe(at(-5 * MIN + (2 / 3) * 65 * MIN).toISOString());
  });

  it('renews the serving pair at two thirds of its lifetime as routine (no damage), serving the old one meanwhile', () => {
    const p = planFor(healthy(), wanted, at(41 * MIN));
    expect(p.action).toBe('renew-serving');
    expect(p.damage).toEqual([]);
    expect(p.servable).toBeDefined();
  });

  it('treats garbage in tls.crt as damage: a new serving certificate from the same CA, nothing to serve', () => {
    const s = secret({
      'tls.crt': 'garbage',
      'tls.key': leafOld.keyPem,
      'ca.crt': caOld.certPem,
      'ca.key': caOld.keyPem,
    });
    const p = planFor(s, wanted, at(MIN));
    expect(p.action).toBe('renew-serving');
    expect(p.damage.map((r) => r.code)).toEqual(['serving-unparsable']);
    expect(p.damage[0]!.message).toBe('serving certificate: no PEM certificate found');
    expect(p.servable).toBeUndefined();
    const pemGarbage = '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n';
    const p2 = planFor({ ...s, data: { ...s.data, 'tls.crt': b64(pemGarbage) } }, wanted, at(MIN));
    expect(p2.damage.map((r) => r.code)).toEqual(['serving-unparsable']);
    expect(p2.damage[0]!.message).toMatch(/^serving certificate: cannot parse certificate/);
  });

  it('needs a new CA when the CA key is gone, while the old pair can still be served', () => {
    const s = secret({ 'tls.crt': leafOld.certPem, 'tls.key': leafOld.keyPem, 'ca.crt': caOld.certPem });
    const p = planFor(s, wanted, at(MIN));
    expect(p.action).toBe('renew-ca');
    expect(p.damage.map((r) => r.code)).toEqual(['ca-missing']);
    expect(p.servable?.certPem).toBe(leafOld.certPem);
  });

  it('does not serve a pair whose key belongs to another certificate, or that the Secret CAs did not sign', () => {
    const mixed = secret({
      'tls.crt': leafOld.certPem,
      'tls.key': leafNew.keyPem,
      'ca.crt': caOld.certPem,
      'ca.key': caOld.keyPem,
    });
    const m = planFor(mixed, wanted, at(MIN));
    expect(m.action).toBe('renew-serving');
    expect(m.damage.map((r) => r.code)).toEqual(['serving-key-mismatch']);
    expect(m.servable).toBeUndefined();
    const foreign = secret({
      'tls.crt': leafOther.certPem,
      'tls.key': leafOther.keyPem,
      'ca.crt': caOld.certPem,
      'ca.key': caOld.keyPem,
    });
    const p = planFor(foreign, wanted, at(MIN));
    expect(p.damage.map((r) => r.code)).toEqual(['ca-mismatch']);
    expect(p.servable).toBeUndefined();
  });

  it('serves a leaf of a previous CA listed in ca-previous.crt', () => {
    const s = secret({
      'tls.crt': leafOld.certPem,
      'tls.key': leafOld.keyPem,
      'ca.crt': caNew.certPem,
      'ca.key': caNew.keyPem,
      'ca-previous.crt': caOld.certPem,
    });
    const p = planFor(s, wanted, at(MIN));
    expect(p.action).toBe('renew-serving'); // not signed by the current CA
    expect(p.servable?.issuer.subjectCN).toBe('old');
  });

  it('initializes an empty Secret without calling it damage', () => {
    expect(planFor(secret({}), wanted, at(MIN))).toMatchObject({ action: 'renew-ca', damage: [] });
  });

  it('is blocked, saying what to do, when an immutable Secret needs a write; not when it is healthy', () => {
    const broken = secret(
      { 'tls.crt': 'x', 'tls.key': leafOld.keyPem, 'ca.crt': caOld.certPem, 'ca.key': caOld.keyPem },
      { immutable: true },
    );
    expect(planFor(broken, wanted, at(MIN)).blocked).toMatch(
      /kd\/tls is immutable .* delete it and it is created again$/,
    );
    expect(planFor({ ...healthy(), immutable: true }, wanted, at(MIN)).blocked).toBeUndefined();
  });

  it('notes a Secret of another type but uses it', () => {
    const p = planFor({ ...healthy(), type: 'Opaque' }, wanted, at(MIN));
    expect(p.action).toBe('keep');
    expect(p.notes).toEqual(['Secret has type Opaque, not kubernetes.io/tls; using it anyway']);
  });

  it('decodes every key it owns', () => {
    const c = decodeSecret(secret({ 'ca-previous.crt': 'p', 'tls-previous.crt': 'l', 'tls.crt': 'c' }));
    expect(c).toMatchObject({ previousCAsPem: 'p', previousLeavesPem: 'l', certPem: 'c', caKeyPem: undefined });
  });
});

describe('newSecretData: a renewal', () => {
  it('on a CA rotation keeps the old CA and records the old leaf while that leaf is in use', () => {
    const n = newSecretData({
      ca: caNew,
      serving: leafNew,
      previousCAs: [caOld.certPem, undefined, caOther.certPem],
      leavesInUse: [leafOld.certPem, undefined],
      now: at(30 * MIN),
      existing: { 'other-key': b64('kept'), [SECRET_KEYS.previousCAs]: b64('stale') },
    });
    expect(fps(n.bundle.cas)).toEqual(['new', 'old']);
    // caOther signed no leaf in use (a racer's CA, say): not kept.
    expect(n.bundle.dropped).toEqual([expect.objectContaining({ subjectCN: 'other', reason: 'unused' })]);
    const c = decodeSecret({ metadata: {}, data: n.data });
    expect(c.caCertPem).toBe(caNew.certPem);
    expect(c.caKeyPem).toBe(caNew.keyPem);
    expect(c.certPem).toBe(leafNew.certPem);
    expect(c.keyPem).toBe(leafNew.keyPem);
    expect(fps(certificatesIn(c.previousCAsPem))).toEqual(['old']);
    expect(certificatesIn(c.previousLeavesPem).map((l) => l.fingerprint256)).toEqual([
      info(leafOld.certPem).fingerprint256,
    ]);
    expect(Buffer.from(n.data['other-key']!, 'base64').toString()).toBe('kept');
    // Nothing but certificates goes into ca-previous.crt and tls-previous.crt.
    expect(c.previousCAsPem).not.toContain('PRIVATE KEY');
    expect(c.previousLeavesPem).not.toContain('PRIVATE KEY');
  });

  it('drops the previous CA once its leaf has expired', () => {
    const n = newSecretData({
      ca: caNew,
      serving: leafNew,
      previousCAs: [caOld.certPem],
      leavesInUse: [leafOld.certPem],
      now: at(61 * MIN),
    });
    expect(fps(n.bundle.cas)).toEqual(['new']);
    expect(n.data[SECRET_KEYS.previousCAs]).toBeUndefined();
    expect(n.data[SECRET_KEYS.previousLeaves]).toBeUndefined();
  });
});

describe('desiredCAs: the caBundle a Secret calls for', () => {
  const rotated = () =>
    secret({
      'tls.crt': leafNew.certPem,
      'tls.key': leafNew.keyPem,
      'ca.crt': caNew.certPem,
      'ca.key': caNew.keyPem,
      'ca-previous.crt': caOld.certPem,
      'tls-previous.crt': leafOld.certPem,
    });

  it('is the current CA, then the previous one while its leaf is valid', () => {
    const c = decodeSecret(rotated());
    expect(fps(desiredCAs(c, at(31 * MIN)))).toEqual(['new', 'old']);
    expect(fps(desiredCAs(c, at(60 * MIN + 1000)))).toEqual(['new']);
  });

  it('is empty when ca.crt is unusable (nothing reliable to publish)', () => {
    expect(desiredCAs(decodeSecret(secret({ 'ca.crt': 'junk' })), at(MIN))).toEqual([]);
    expect(desiredCAs(decodeSecret(secret({ 'ca.crt': leafOld.certPem })), at(MIN))).toEqual([]);
  });

  it('wakes for renewal, for the previous leaf expiring, and for pruning', () => {
    const s = rotated();
    const plan = planFor(s, wanted, at(31 * MIN));
    const wake = nextWakeAt(decodeSecret(s), plan, new Map([['x', at(50 * MIN).getTime()]]), 20 * MIN, at(31 * MIN));
    // The old leaf expires at T0 + 60 min, before the new leaf's renewal (T0 + 68 min) and the prune (T0 + 70 min).
    expect(wake?.toISOString()).toBe(at(60 * MIN).toISOString());
  });
});

describe('mergeBundle: what is published', () => {
  let old: CertificateInfo, cur: CertificateInfo, other: CertificateInfo;
  beforeAll(() => {
    [old, cur, other] = [caOld, caNew, caOther].map((c) => info(c.certPem)) as [
      CertificateInfo,
      CertificateInfo,
      CertificateInfo,
    ];
  });
  const opts = (o: Partial<Parameters<typeof mergeBundle>[2]> = {}) => ({
    now: at(MIN),
    unwantedSince: new Map<string, number>(),
    pruneAfterMs: 20_000,
    allowPrune: true,
    ...o,
  });

  it('adds what is wanted at once, current CA first, and keeps what is already there', () => {
    const m = mergeBundle([other, old], [cur, old], opts());
    expect(fps(m.cas)).toEqual(['new', 'old', 'other']);
    expect(m.added).toEqual([cur.fingerprint256]);
    expect(m.removed).toEqual([]);
    expect(m.pem).toBe(cur.pem + old.pem + other.pem);
  });

  it('removes an unwanted CA only after it has been unwanted for pruneAfterMs, and only from a healthy Secret', () => {
    const since = new Map([[other.fingerprint256, at(MIN).getTime() - 19_000]]);
    expect(fps(mergeBundle([cur, other], [cur], opts({ unwantedSince: since })).cas)).toEqual(['new', 'other']);
    const later = opts({ unwantedSince: since, now: at(MIN + 1000) });
    expect(mergeBundle([cur, other], [cur], later).removed).toEqual([other.fingerprint256]);
    expect(fps(mergeBundle([cur, other], [cur], { ...later, allowPrune: false }).cas)).toEqual(['new', 'other']);
    // Never seen unwanted before: not removed (a writer may be about to use it).
    expect(fps(mergeBundle([cur, other], [cur], opts()).cas)).toEqual(['new', 'other']);
  });

  it('removes expired CAs, leaves, and a withdrawn CA at once', () => {
    const expired = info(createCA({ now: T0, lifetimeMs: MIN, keyBits: BITS, commonName: 'expired' }).certPem);
    const m = mergeBundle(
      [expired, info(leafOld.certPem), other, cur],
      [],
      opts({ now: at(2 * MIN), allowPrune: false, withdraw: new Set([other.fingerprint256]) }),
    );
    expect(fps(m.cas)).toEqual(['new']);
    expect(m.removed).toHaveLength(3);
  });

  it('tracks since when each published CA is unwanted, across configurations', () => {
    let since = trackUnwanted(new Map(), [cur, other], [cur], 1000);
    since = trackUnwanted(since, [cur, old], [cur], 2000); // a second configuration
    expect([...since]).toEqual([
      [other.fingerprint256, 1000],
      [old.fingerprint256, 2000],
    ]);
    since = trackUnwanted(since, [cur, other], [cur, other], 3000); // wanted again
    expect([...since]).toEqual([[old.fingerprint256, 2000]]);
    expect([...forgetUnpublished(since, [cur])]).toEqual([]);
  });

  it('reads the published CAs from caBundle fields, skipping junk and duplicates', () => {
    const both = b64(cur.pem + old.pem);
    expect(fps(publishedCAs([both, b64(cur.pem), undefined, b64('junk')]))).toEqual(['new', 'old']);
  });
});
