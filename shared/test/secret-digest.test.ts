/**
 * Secret digests: the MAC over a Secret's data is keyed, status shows no per-Secret digest, and nothing
 * a user without the Secret can read lets them test guesses of a low-entropy value offline.
 */
import { describe, expect, it } from '@jest/globals';
import { guessFourDigits } from '../../test/support/secret-guess.js';
import { describeChanges } from '../src/plan/connection-changes.js';
import { DIGEST_KEY_BYTES, secretDataMac } from '../src/configmeta/secret-data-mac.js';
import { renderConnections } from '../src/configmeta/render-configmeta.js';
import { resolveConnections } from '../src/plan/resolve-connections.js';
import { MemoryWorld, NS, SYSTEM_NS, TEST_DIGEST_KEY, cluster, exampleApps, secret } from './fixtures.js';

const DATA = { pin: Buffer.from('4821').toString('base64') };

describe('secretDataMac', () => {
  it('is HMAC-SHA256: deterministic, and different under another key', () => {
    const mac = secretDataMac(TEST_DIGEST_KEY, 'uid-1', DATA);
    expect(mac).toMatch(/^[0-9a-f]{64}$/);
    expect(secretDataMac(Buffer.from(TEST_DIGEST_KEY), 'uid-1', { ...DATA })).toBe(mac);
    expect(secretDataMac(Buffer.alloc(DIGEST_KEY_BYTES, 8), 'uid-1', DATA)).not.toBe(mac);
  });

  it('is bound to the uid and to every value', () => {
    const mac = secretDataMac(TEST_DIGEST_KEY, 'uid-1', DATA);
    expect(secretDataMac(TEST_DIGEST_KEY, 'uid-2', DATA)).not.toBe(mac);
    expect(secretDataMac(TEST_DIGEST_KEY, 'uid-1', { pin: Buffer.from('4822').toString('base64') })).not.toBe(mac);
    expect(secretDataMac(TEST_DIGEST_KEY, 'uid-1', {})).not.toBe(mac);
  });

  it('refuses a key shorter than 32 bytes', () => {
    expect(() => secretDataMac(Buffer.alloc(16), 'uid-1', DATA)).toThrow('digest key must be at least 32 bytes');
  });
});

describe('status of a cluster connected to a Secret holding a 4-digit value', () => {
  const notebook = exampleApps().find((a) => a.metadata.name === 'jupyter-notebook')!;
  const nb = cluster('nb', 'jupyter-notebook', { connections: { secrets: ['pin'] } });
  const resolve = async (value: string) => {
    const s = secret('pin', 'db', { pin: value });
    const world = new MemoryWorld({ apps: exampleApps(), clusters: [nb], secrets: [s] });
    const r = await resolveConnections(nb, { app: notebook, namespace: NS }, world, { systemNamespace: SYSTEM_NS });
    const entry = renderConnections(r.connected).secrets.db![0]!;
    const status = { connectionsHash: r.hash, connections: r.statuses };
    return { s, r, entry, status };
  };

  it('has no digest of the Secret of its own', async () => {
    const { r } = await resolve('4821');
    expect(r.statuses).toEqual([{ kind: 'Secret', name: 'pin', state: 'Connected' }]);
  });

  it('does not give the value away to an offline guess; only the key would', async () => {
    const { s, entry, status } = await resolve('4821');
    const target = {
      readable: JSON.stringify({ status, entry }),
      name: 'pin',
      dataKey: 'pin',
      uid: s.metadata.uid!,
      entry,
    };
    expect(guessFourDigits(target)).toBeUndefined();
    // The same guess with the reconciler's key finds it: status does depend on the value, through the key.
    expect(guessFourDigits({ ...target, key: TEST_DIGEST_KEY })).toBe('4821');
  });

  it('still changes when the value changes', async () => {
    expect((await resolve('4821')).r.hash).not.toBe((await resolve('4822')).r.hash);
  });
});

describe('describeChanges for a Secret that stays connected', () => {
  it('names the connected Secrets, one of which changed, when nothing else explains the change', () => {
    const one = [{ kind: 'Secret' as const, name: 'pin', state: 'Connected' as const }];
    expect(describeChanges(one, one)).toEqual({ changed: one, text: 'connected secret pin changed' });
    const two = [...one, { kind: 'Secret' as const, name: 'token', state: 'Connected' as const }];
    expect(describeChanges(two, two)).toEqual({
      changed: [],
      text: 'one of the connected secrets pin, token changed',
    });
  });

  it('names the ConfigMap when one changed, and a Secret that became available', () => {
    const before = [{ kind: 'ConfigMap' as const, name: 'cm', state: 'Connected' as const, contentHash: 'a' }];
    const after = [
      { kind: 'ConfigMap' as const, name: 'cm', state: 'Connected' as const, contentHash: 'b' },
      { kind: 'Secret' as const, name: 'pin', state: 'Connected' as const },
    ];
    expect(describeChanges(before, after).text).toBe(
      'connected configmap cm changed, connected secret pin became available',
    );
  });

  it('says why a connected object is no longer connected', () => {
    const before = [{ kind: 'ConfigMap' as const, name: 'cm', state: 'Connected' as const, contentHash: 'a' }];
    const message = 'configmap "cm" is 300000 bytes in configmeta, more than can ever be delivered';
    const after = [{ kind: 'ConfigMap' as const, name: 'cm', state: 'NotConnectable' as const, message }];
    expect(describeChanges(before, after).text).toBe(`connected configmap cm is now NotConnectable (${message})`);
  });
});
