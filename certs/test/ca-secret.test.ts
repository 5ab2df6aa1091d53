/** The pure rules of dynamic serving's CA Secret and of the caBundle merge, on pinned clocks. */
import { describe, expect, it } from '@jest/globals';
import {
  caSecretData,
  createCA,
  inspectCertificate,
  mergeBundle,
  planCA,
  readCASecret,
  trackUnwanted,
  trustedCAs,
  type SecretObject,
} from '../src/index.js';

const T0 = new Date('2030-03-01T12:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);
const b64 = (v: string | Buffer) => Buffer.from(v).toString('base64');
const ca1 = createCA({ keyBits: 1024, lifetimeMs: 3_000_000, now: T0, commonName: 'one' });
const ca2 = createCA({ keyBits: 1024, lifetimeMs: 3_000_000, now: at(2000), commonName: 'two' });
const info = (pem: string) => inspectCertificate(pem);
const fp = (pem: string) => info(pem).fingerprint256;
const secret = (data: Record<string, string>, extra: Partial<SecretObject> = {}): SecretObject => ({
  metadata: { name: 'tls', namespace: 'kd', resourceVersion: '3' },
  type: 'kubernetes.io/tls',
  data,
  ...extra,
});
const healthy = secret({
  'ca.crt': b64(ca1.certPem),
  'ca.key': b64(ca1.keyPem),
  'tls.crt': b64(ca1.certPem),
  'tls.key': b64(ca1.keyPem),
  'webhook-path-key': b64(Buffer.alloc(32, 1)),
  'user-key': b64('kept'),
});

describe('readCASecret and planCA', () => {
  it('a healthy Secret: its CA, its path key, nothing to write; the CA is due at two thirds', () => {
    const s = readCASecret(healthy);
    expect(s.ca?.info.fingerprint256).toBe(fp(ca1.certPem));
    expect(s.pathKey).toEqual(Buffer.alloc(32, 1));
    expect(planCA(healthy, s, at(1000))).toEqual({ write: undefined, reasons: [], damaged: false });
    // notBefore is backdated 5 min: two thirds of 3,300 s from T0 - 300 s.
    expect(planCA(healthy, s, at(1900))).toMatchObject({ write: 'new-ca', damaged: false });
    expect(planCA(healthy, s, at(1899)).write).toBeUndefined();
    expect(planCA(healthy, s, at(3000))).toMatchObject({ write: 'new-ca', damaged: true });
  });

  it('absent, empty, damaged, or without a path key: what to write and why', () => {
    expect(planCA(undefined, readCASecret(undefined), T0)).toEqual({
      write: 'new-ca',
      reasons: ['the Secret does not exist'],
      damaged: false,
    });
    const empty = secret({});
    expect(planCA(empty, readCASecret(empty), T0)).toMatchObject({ write: 'new-ca', damaged: false });
    const garbage = secret({ ...healthy.data, 'ca.crt': b64('garbage') });
    expect(planCA(garbage, readCASecret(garbage), T0)).toMatchObject({ write: 'new-ca', damaged: true });
    const wrongKey = secret({ ...healthy.data, 'ca.key': b64(ca2.keyPem) });
    expect(planCA(wrongKey, readCASecret(wrongKey), T0)).toEqual({
      write: 'new-ca',
      reasons: ['ca.key is not the key of the CA'],
      damaged: true,
    });
    const noKey = secret({ ...healthy.data, 'webhook-path-key': b64('short') });
    expect(planCA(noKey, readCASecret(noKey), T0)).toMatchObject({ write: 'path-key', damaged: false });
  });
});

describe('caSecretData and trustedCAs', () => {
  it('a rotation keeps the old CA as previous, the path key, and every key not its own', () => {
    const before = secret({ ...healthy.data, 'tls-previous.crt': b64('x') });
    const data = caSecretData(before, readCASecret(before), { newCA: ca2, now: at(2000), servingLifetimeMs: 60_000 });
    expect(Object.keys(data).sort()).toEqual(
      [
        'ca-previous.crt',
        'ca.crt',
        'ca.key',
        'tls-previous.crt',
        'tls.crt',
        'tls.key',
        'user-key',
        'webhook-path-key',
        'webhook-path-key-created',
      ].sort(),
    );
    expect(data['tls.crt']).toBe(data['ca.crt']);
    const s = readCASecret(secret(data));
    expect(s.ca?.info.fingerprint256).toBe(fp(ca2.certPem));
    expect(s.previous.map((c) => c.fingerprint256)).toEqual([fp(ca1.certPem)]);
    expect(s.pathKey).toEqual(Buffer.alloc(32, 1));
    // Trusted until the new CA's notBefore (backdated 5 min) + 5 min + 30 s slack + one serving lifetime…
    expect(trustedCAs(s, at(2089), 60_000).map((c) => c.fingerprint256)).toEqual([fp(ca2.certPem), fp(ca1.certPem)]);
    expect(trustedCAs(s, at(2090), 60_000).map((c) => c.fingerprint256)).toEqual([fp(ca2.certPem)]);
    // …or until it expires, if sooner.
    expect(trustedCAs(s, at(2999), 3_600_000)).toHaveLength(2);
    expect(trustedCAs(s, at(3000), 3_600_000)).toHaveLength(1);
  });

  it("0.1.0's Secret (a shared leaf in tls.crt, a stored path token): same CA, a path key added, the token kept until 2 h old", () => {
    const token = 'A'.repeat(43);
    const long = createCA({ keyBits: 1024, lifetimeMs: 100 * 3_600_000, now: T0 });
    const old = secret({
      'ca.crt': b64(long.certPem),
      'ca.key': b64(long.keyPem),
      'tls.crt': b64('a 0.1.0 leaf'),
      'tls.key': b64('its key'),
      'webhook-path-token': b64(token),
      'webhook-path-token-previous': b64('not a token'),
      'webhook-path-token-issued': b64(T0.toISOString()),
    });
    const s = readCASecret(old);
    expect(s.ca?.info.fingerprint256).toBe(fp(long.certPem));
    expect(s.legacyTokens).toEqual([token]);
    expect(s.legacyIssuedAt).toEqual(T0);
    expect(planCA(old, s, at(10))).toMatchObject({ write: 'path-key' });
    const withKey = secret(caSecretData(old, s, { now: at(10), servingLifetimeMs: 60_000 }));
    const k = readCASecret(withKey);
    expect(k.legacyTokens).toEqual([token]);
    // The 0.1.0 pair stays where 0.1.0 replicas still serve it from.
    expect(withKey.data!['tls.crt']).toBe(old.data!['tls.crt']);
    // Two hours after the key was added (the upgrade began) and the token was issued.
    expect(planCA(withKey, k, at(7209)).write).toBeUndefined();
    expect(planCA(withKey, k, at(7210)).write).toBe('drop-legacy-token');
    const dropped = caSecretData(withKey, k, { now: at(7210), servingLifetimeMs: 60_000, dropLegacyToken: true });
    expect(dropped['tls.crt']).toBe(dropped['ca.crt']);
    expect(Object.keys(dropped).filter((x) => x.startsWith('webhook-path-token'))).toEqual([]);
    expect(readCASecret(secret(dropped)).pathKey).toEqual(k.pathKey);
  });

  it('a CA Secret without a usable CA: every CA certificate it names becomes a previous one', () => {
    const broken = secret({ 'ca.crt': b64(ca1.certPem), 'ca.key': b64('not a key'), 'tls.crt': b64(ca2.certPem) });
    const s = readCASecret(broken);
    expect(s.ca).toBeUndefined();
    expect(s.previous.map((c) => c.subjectCN)).toEqual(['one', 'two']);
    const ca3 = createCA({ keyBits: 1024, lifetimeMs: 3_000_000, now: at(10), commonName: 'three' });
    const data = caSecretData(broken, s, { newCA: ca3, now: at(10), servingLifetimeMs: 60_000 });
    expect(readCASecret(secret(data)).previous.map((c) => c.subjectCN)).toEqual(['one', 'two']);
    expect(Buffer.from(data['webhook-path-key']!, 'base64')).toHaveLength(32);
  });
});

describe('mergeBundle', () => {
  const one = info(ca1.certPem);
  const two = info(ca2.certPem);
  const o = (now: Date, unwantedSince = new Map<string, number>(), allowPrune = true) => ({
    now,
    unwantedSince,
    pruneAfterMs: 20_000,
    allowPrune,
  });

  it('adds trusted CAs at once, current first, and keeps published ones until unwanted for pruneAfterMs', () => {
    const m = mergeBundle([one], [two], o(at(2100)));
    expect(m.cas.map((c) => c.subjectCN)).toEqual(['two', 'one']);
    expect(m.added).toEqual([two.fingerprint256]);
    const since = trackUnwanted(new Map(), [two, one], [two], at(2100).getTime());
    expect([...since]).toEqual([[one.fingerprint256, at(2100).getTime()]]);
    expect(trackUnwanted(since, [two, one], [two], at(2110).getTime())).toEqual(since);
    expect(mergeBundle([two, one], [two], o(at(2119), since)).removed).toEqual([]);
    expect(mergeBundle([two, one], [two], o(at(2120), since)).removed).toEqual([one.fingerprint256]);
    // Not from a broken Secret, which says nothing reliable about what is unwanted.
    expect(mergeBundle([two, one], [two], o(at(2120), since, false)).removed).toEqual([]);
  });

  it('drops expired CAs and leaves whatever is published when nothing is trusted', () => {
    expect(mergeBundle([one, two], [], o(at(3000))).cas.map((c) => c.subjectCN)).toEqual(['two']);
    expect(mergeBundle([one], [], o(at(100))).cas).toEqual([one]);
  });
});
