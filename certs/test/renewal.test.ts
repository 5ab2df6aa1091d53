/** Every branch of the renewal decision, the renewal clock, and the caBundle during a CA rotation, at fixed times. */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createCA, createClientCert, createServingCert, DAY_MS, type CertPair } from '../src/generate.js';
import { inspectCertificate, parseCertificates } from '../src/inspect.js';
import {
  buildCABundle,
  MAX_TIMER_DELAY_MS,
  renewalDecision,
  renewalTime,
  timerDelayMs,
  type RenewalDecision,
  type StoredCerts,
  type WantedServing,
} from '../src/renewal.js';
import { brokenPem } from './broken-pem.js';

// Key size does not matter to these checks; 1024 bits keeps the suite quick.
const BITS = 1024;
const T0 = new Date('2030-01-01T00:00:00Z');
const at = (days: number, extraMs = 0) => new Date(T0.getTime() + days * DAY_MS + extraMs);

const wanted: WantedServing = { service: { name: 'kd-admission', namespace: 'kd-system' }, ipAddresses: ['127.0.0.1'] };

let ca: CertPair; // T0, 30 days: renewal due around day 20
let otherCa: CertPair; // same name, different key
let serving: CertPair; // T0, 9 days: renewal due around day 6
let servingLater: CertPair; // issued on day 1
let servingDay19: CertPair; // issued on day 19, still fresh when the CA is due (day 20)
let servingOtherCa: CertPair;
let servingFewNames: CertPair;
let clientCert: CertPair;

function serve(from: CertPair, now: Date, extra: Partial<WantedServing> = {}): CertPair {
  return createServingCert({ ca: from, ...wanted, ...extra, now, lifetimeMs: 9 * DAY_MS, keyBits: BITS });
}

beforeAll(() => {
  ca = createCA({ now: T0, lifetimeMs: 30 * DAY_MS, keyBits: BITS });
  otherCa = createCA({ now: T0, lifetimeMs: 30 * DAY_MS, keyBits: BITS });
  serving = serve(ca, T0);
  servingLater = serve(ca, at(1));
  servingDay19 = serve(ca, at(19));
  servingOtherCa = serve(otherCa, T0);
  servingFewNames = serve(ca, T0, { ipAddresses: [] });
  clientCert = createClientCert({ ca, commonName: 'kd-admission', now: T0, lifetimeMs: 9 * DAY_MS, keyBits: BITS });
});

function stored(leaf: CertPair = serving, authority: CertPair = ca): StoredCerts {
  return { caCertPem: authority.certPem, caKeyPem: authority.keyPem, certPem: leaf.certPem, keyPem: leaf.keyPem };
}

const codes = (d: RenewalDecision) => d.reasons.map((r) => r.code);

describe('renewalDecision', () => {
  it('keeps a fresh, matching pair and says when renewal becomes due', () => {
    const d = renewalDecision(stored(), wanted, at(1));
    expect(d.action).toBe('keep');
    expect(d.reasons).toEqual([]);
    // Two thirds of the serving lifetime (9 days + the 5 minute backdating) after its notBefore.
    expect(d.renewAt?.toISOString()).toBe(
      new Date(T0.getTime() - 5 * 60_000 + (2 / 3) * (9 * DAY_MS + 5 * 60_000)).toISOString(),
    );
    expect(d.serving?.subjectCN).toBe('kd-admission');
    expect(d.ca?.isCA).toBe(true);
  });

  describe('missing pieces', () => {
    it('nothing stored: new CA and serving pair', () => {
      const d = renewalDecision({}, wanted, at(1));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-missing', 'serving-missing']);
      expect(d.reasons[0]!.message).toBe('missing: CA certificate, CA key');
      expect(d.reasons[1]!.message).toBe('missing: serving certificate, serving key');
      expect(d.renewAt).toBeUndefined();
    });

    it('CA key missing: a new CA (nothing could sign the next serving certificate)', () => {
      const d = renewalDecision({ ...stored(), caKeyPem: undefined }, wanted, at(1));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-missing']);
      expect(d.reasons[0]!.message).toBe('missing: CA key');
    });

    it('serving key missing (or blank): a new serving pair from the stored CA', () => {
      const d = renewalDecision({ ...stored(), keyPem: '  \n' }, wanted, at(1));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-missing']);
      expect(d.reasons[0]!.message).toBe('missing: serving key');
    });
  });

  describe('unparsable PEM', () => {
    it('serving certificate', () => {
      const d = renewalDecision({ ...stored(), certPem: 'garbage' }, wanted, at(1));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-unparsable']);
      expect(d.reasons[0]!.message).toMatch(/serving certificate: no PEM certificate found/);
    });

    it('serving key', () => {
      const d = renewalDecision({ ...stored(), keyPem: brokenPem('RSA PRIVATE KEY') }, wanted, at(1));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-unparsable']);
    });

    it('CA certificate with a damaged body', () => {
      const broken = ca.certPem.replace(/\n[A-Za-z0-9+/]{20}/, '\n');
      const d = renewalDecision({ ...stored(), caCertPem: broken }, wanted, at(1));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-unparsable']);
      expect(d.ca).toBeUndefined();
    });

    it('CA key', () => {
      const d = renewalDecision({ ...stored(), caKeyPem: 'not a key' }, wanted, at(1));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-unparsable']);
    });
  });

  describe('validity of the serving certificate', () => {
    it('renews once two thirds of the lifetime have passed, not a second earlier', () => {
      const due = renewalTime(inspectCertificate(serving.certPem));
      expect(renewalDecision(stored(), wanted, new Date(due.getTime() - 1000)).action).toBe('keep');
      const d = renewalDecision(stored(), wanted, due);
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-expiring']);
      expect(d.reasons[0]!.message).toContain('2030-01-10T00:00:00.000Z');
    });

    it('expired', () => {
      const d = renewalDecision(stored(), wanted, at(9));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-expired']);
    });

    it('not yet valid', () => {
      const d = renewalDecision(stored(servingLater), wanted, at(1, -10 * 60_000));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-not-yet-valid']);
      expect(d.reasons[0]!.message).toContain('clock skew');
    });

    it('honours another renewal fraction', () => {
      expect(renewalDecision(stored(), wanted, at(5)).action).toBe('keep');
      expect(codes(renewalDecision(stored(), wanted, at(5), { renewAtFraction: 0.5 }))).toEqual(['serving-expiring']);
      expect(() => renewalDecision(stored(), wanted, at(5), { renewAtFraction: 1.5 })).toThrow(RangeError);
    });
  });

  describe('names and usages', () => {
    it('SAN mismatch: a wanted IP is not covered', () => {
      const d = renewalDecision(stored(servingFewNames), wanted, at(1));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['san-mismatch']);
      expect(d.reasons[0]).toMatchObject({ missingDnsNames: [], missingIpAddresses: ['127.0.0.1'] });
    });

    it('SAN mismatch: a wanted DNS name is not covered, e.g. after the Service moved namespace', () => {
      const d = renewalDecision(
        stored(),
        { ...wanted, service: { name: 'kd-admission', namespace: 'elsewhere' } },
        at(1),
      );
      expect(codes(d)).toEqual(['san-mismatch']);
      expect(d.reasons[0]!.missingDnsNames).toEqual([
        'kd-admission.elsewhere',
        'kd-admission.elsewhere.svc',
        'kd-admission.elsewhere.svc.cluster.local',
      ]);
      expect(d.reasons[0]!.message).toContain('kd-admission.elsewhere.svc');
    });

    it('extra SANs in the certificate are fine', () => {
      expect(renewalDecision(stored(), { dnsNames: ['kd-admission.kd-system.svc'] }, at(1)).action).toBe('keep');
    });

    it('a certificate without serverAuth is replaced', () => {
      const d = renewalDecision(stored(clientCert), { dnsNames: [] }, at(1));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-not-server-auth']);
    });
  });

  describe('keys and issuer', () => {
    it('serving key mismatch', () => {
      const d = renewalDecision({ ...stored(), keyPem: servingLater.keyPem }, wanted, at(1));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['serving-key-mismatch']);
    });

    it('CA mismatch: signed by another CA with the same name', () => {
      const d = renewalDecision(stored(servingOtherCa), wanted, at(1));
      expect(d.action).toBe('renew-serving');
      expect(codes(d)).toEqual(['ca-mismatch']);
      expect(d.reasons[0]!.message).toContain('not signed by the stored CA');
    });

    it('CA key mismatch: a new CA', () => {
      const d = renewalDecision({ ...stored(), caKeyPem: otherCa.keyPem }, wanted, at(1));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-key-mismatch']);
    });

    it('a stored "CA" that is not a CA', () => {
      const d = renewalDecision(stored(serving, servingLater), wanted, at(2));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-not-a-ca', 'ca-mismatch']);
    });
  });

  describe('validity of the CA', () => {
    it('CA expiring: a new CA even though the serving certificate is fresh', () => {
      const d = renewalDecision(stored(servingDay19), wanted, at(21));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-expiring']);
    });

    it('CA expired', () => {
      const d = renewalDecision(stored(servingDay19), wanted, at(31));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-expired', 'serving-expired']);
    });

    it('CA not yet valid', () => {
      const d = renewalDecision(stored(), wanted, at(0, -60 * 60_000));
      expect(d.action).toBe('renew-ca');
      expect(codes(d)).toEqual(['ca-not-yet-valid', 'serving-not-yet-valid']);
    });
  });

  it('the renewal time is the earlier of CA and serving certificate', () => {
    const d = renewalDecision(stored(servingDay19), wanted, at(19, DAY_MS / 2));
    expect(d.action).toBe('keep');
    expect(d.renewAt?.getTime()).toBe(renewalTime(inspectCertificate(ca.certPem)).getTime());
    expect(d.renewAt?.getTime()).toBeLessThan(renewalTime(inspectCertificate(servingDay19.certPem)).getTime());
  });
});

describe('timerDelayMs', () => {
  it('keeps timer delays within what setTimeout accepts, and above a floor when asked', () => {
    expect(timerDelayMs(at(1), at(0))).toBe(DAY_MS);
    expect(timerDelayMs(at(0), at(1))).toBe(0);
    expect(timerDelayMs(at(0), at(1), 1000)).toBe(1000);
    expect(timerDelayMs(at(1), at(0), 1000)).toBe(DAY_MS);
    expect(timerDelayMs(at(200), at(0))).toBe(MAX_TIMER_DELAY_MS);
    expect(MAX_TIMER_DELAY_MS).toBe(2147483647);
  });
});

describe('buildCABundle', () => {
  const fp = (pem: string) => inspectCertificate(pem).fingerprint256;

  it('publishes old and new CA while the old leaf is still in use, new first', () => {
    const b = buildCABundle(otherCa.certPem, ca.certPem, [serving.certPem], at(1));
    expect(b.cas.map((c) => c.fingerprint256)).toEqual([fp(otherCa.certPem), fp(ca.certPem)]);
    expect(parseCertificates(b.pem).map((c) => c.fingerprint256)).toEqual([fp(otherCa.certPem), fp(ca.certPem)]);
    expect(b.dropped).toEqual([]);
  });

  it('drops the old CA once only leaves of the new CA are in use', () => {
    const b = buildCABundle(otherCa.certPem, ca.certPem, [servingOtherCa.certPem], at(1));
    expect(b.cas.map((c) => c.fingerprint256)).toEqual([fp(otherCa.certPem)]);
    expect(b.dropped).toEqual([{ subjectCN: 'kd-connections-ca', fingerprint256: fp(ca.certPem), reason: 'unused' }]);
    expect(parseCertificates(b.pem)).toHaveLength(1);
  });

  it('drops the old CA when its leaf has expired', () => {
    const b = buildCABundle(otherCa.certPem, [ca.certPem], [serving.certPem], at(10));
    expect(b.cas).toHaveLength(1);
    expect(b.dropped.map((d) => d.reason)).toEqual(['unused']);
  });

  it('takes the published bundle as it is: the current CA once, duplicates once, junk dropped', () => {
    const published = otherCa.certPem + ca.certPem + ca.certPem;
    const b = buildCABundle(
      otherCa.certPem,
      [published, serving.certPem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'],
      [serving.certPem, 'junk'],
      at(1),
    );
    expect(b.cas.map((c) => c.fingerprint256)).toEqual([fp(otherCa.certPem), fp(ca.certPem)]);
    expect(b.dropped.map((d) => d.reason)).toEqual(['same-as-current', 'duplicate', 'not-a-ca', 'unparsable']);
  });

  it('drops an expired previous CA even if a leaf of it is listed', () => {
    const b = buildCABundle(otherCa.certPem, ca.certPem, [servingDay19.certPem], at(31));
    expect(b.cas).toHaveLength(1);
    expect(b.dropped.map((d) => d.reason)).toEqual(['expired']);
  });

  it('with no previous CA it is just the current one', () => {
    const b = buildCABundle(ca.certPem, '', [], at(1));
    expect(b.pem).toBe(ca.certPem.replace(/\r\n/g, '\n'));
  });

  it('refuses a current "CA" that is not one', () => {
    expect(() => buildCABundle(serving.certPem, '', [], at(1))).toThrow(
      /current CA: certificate lacks basicConstraints/,
    );
    expect(() => buildCABundle(ca.certPem + otherCa.certPem, '', [], at(1))).toThrow(/expected one certificate/);
  });
});
