/**
 * Which CAs a webhook configuration's caBundle carries, from what it carries now and what the CA Secret
 * wants trusted. Every replica writes it, each from its own live read of the Secret, so a CA is added at
 * once and taken out only late: a replica that has not yet read the newest Secret must never take away a
 * CA another replica is about to sign with. A CA the Secret no longer wants leaves once this replica has
 * seen it unwanted for `pruneAfterMs` (its next read, after a watch event, says otherwise long before).
 */
import type { CertificateInfo } from './inspect.js';

export interface BundleMerge {
  cas: CertificateInfo[];
  pem: string;
  added: string[];
  removed: string[];
}

/**
 * When each published CA that is not trusted was first seen so; trusted ones and ones no longer
 * published lose their entry.
 */
export function trackUnwanted(
  previous: ReadonlyMap<string, number>,
  published: readonly CertificateInfo[],
  trusted: readonly CertificateInfo[],
  nowMs: number,
): Map<string, number> {
  const want = new Set(trusted.map((c) => c.fingerprint256));
  const next = new Map<string, number>();
  for (const c of published)
    if (!want.has(c.fingerprint256)) next.set(c.fingerprint256, previous.get(c.fingerprint256) ?? nowMs);
  return next;
}

/**
 * The caBundle to publish: every trusted CA (current first), then each CA already published unless it is
 * not a CA, expired, or (only when `allowPrune`: the Secret is healthy) unwanted for `pruneAfterMs`.
 */
export function mergeBundle(
  published: readonly CertificateInfo[],
  trusted: readonly CertificateInfo[],
  o: { now: Date; unwantedSince: ReadonlyMap<string, number>; pruneAfterMs: number; allowPrune: boolean },
): BundleMerge {
  const now = o.now.getTime();
  const cas: CertificateInfo[] = [];
  const has = (fp: string) => cas.some((c) => c.fingerprint256 === fp);
  for (const c of trusted) if (!has(c.fingerprint256)) cas.push(c);
  const removed: string[] = [];
  for (const c of published) {
    if (has(c.fingerprint256)) continue;
    const since = o.unwantedSince.get(c.fingerprint256);
    const prune = o.allowPrune && since !== undefined && now - since >= o.pruneAfterMs;
    if (!c.isCA || c.notAfter.getTime() <= now || prune) removed.push(c.fingerprint256);
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
