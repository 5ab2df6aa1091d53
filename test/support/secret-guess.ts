/**
 * An offline guess of a low-entropy Secret value from what a user without access to the Secret can
 * read: every 4-digit value is tried against every digest-like string, with each way this project has
 * derived digests from Secret data (an unkeyed sha256 over the data salted with the public uid; the
 * per-connection digest over the configmeta entry, the uid and that hash; connectionsHash over a single
 * Secret connection) and with plain hashes of the value. With `key`, the keyed MAC is tried too: that is
 * what the reconciler could compute, and shows the guess would work if the key leaked.
 */
import { createHash, createHmac } from 'node:crypto';
import { canonicalJson } from '@kd-connections/shared/primitives';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const contentHash = (v: unknown) => sha256(canonicalJson(v));

export interface GuessTarget {
  /** Everything readable, as text: digest-like hex strings (16 characters or more) are taken from it. */
  readable: string;
  /** The Secret's name, its data key holding the value, and its uid (public: events name it). */
  name: string;
  dataKey: string;
  uid: string;
  /** The Secret's configmeta entry as pods show it (readable on the pod's annotation). */
  entry: unknown;
  key?: Uint8Array;
}

/** Every digest of a candidate value under every scheme tried. */
function digestsOf(value: string, t: GuessTarget): string[] {
  const b64 = Buffer.from(value).toString('base64');
  const data = { [t.dataKey]: b64 };
  const salted = canonicalJson({ uid: t.uid, data });
  const dataHashes = [sha256(salted)];
  if (t.key) dataHashes.push(createHmac('sha256', t.key).update(salted).digest('hex'));
  const out = [sha256(value), sha256(b64), contentHash(data), ...dataHashes];
  for (const dataHash of dataHashes) {
    for (const field of ['dataHash', 'dataMac']) {
      const digest = contentHash({ entry: t.entry, uid: t.uid, [field]: dataHash });
      out.push(digest, contentHash({ [`Secret/${t.name}`]: digest }));
    }
  }
  return out;
}

/** The 4-digit value some digest in `readable` was derived from, if any. */
export function guessFourDigits(t: GuessTarget): string | undefined {
  const found = new Set(t.readable.match(/[0-9a-f]{16,}/g) ?? []);
  const shown = (d: string) => found.has(d) || found.has(d.slice(0, 16)) || found.has(d.slice(0, 32));
  for (let i = 0; i < 10_000; i++) {
    const value = String(i).padStart(4, '0');
    if (digestsOf(value, t).some(shown)) return value;
  }
  return undefined;
}
