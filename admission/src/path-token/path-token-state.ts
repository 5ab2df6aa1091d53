/**
 * One replica's webhook path tokens in dynamic-serving mode: which it accepts and which it publishes, from
 * the CA Secret's key and its own clock (path-token-rules.ts has the pure rules). Kept here beside
 * them: tokens no longer current — a replaced key's, 0.1.0's stored ones once removed — which stay accepted
 * until this replica's publication of the new paths succeeded, plus KEY_CHANGE_GRACE_MS; and 0.1.0's tokens
 * still in the Secret, accepted and kept published as they are.
 */
import type { CASecret } from '@kd-connections/certs';
import {
  acceptedPathTokens,
  pathToken,
  pathTokenChangeAt,
  pathTokenPeriod,
  publishedPathTokenPeriod,
  type PathTokenClock,
} from './path-token-rules.js';

/** How long the tokens of a replaced key stay accepted after the new paths were published. */
const KEY_CHANGE_GRACE_MS = 60_000;
/** How long after a key change the replaced key's token stays the one published (the others read the new key). */
const KEY_PUBLISH_DELAY_MS = 10_000;

export interface PathsToPublish {
  token: string;
  /** Paths behind these are left as they are (never taken back from a newer token, or from 0.1.0's). */
  keep: string[];
  /** `token` is this period's with the newest key: publishing it counts as this period published. */
  current: boolean;
}

export class PathTokens {
  private key: Buffer | undefined;
  private legacy: string[] = [];
  private retired: { tokens: (nowMs: number) => string[]; until: number }[] = [];
  private keyChange: { oldKey: Buffer; at: number } | undefined;
  /** The period whose token this replica has seen published. */
  private publishedPeriod: number | undefined;

  constructor(
    private readonly clock: PathTokenClock,
    private readonly now: () => Date,
  ) {}

  get hasKey(): boolean {
    return this.key !== undefined;
  }

  /** Takes in the Secret's key and 0.1.0's tokens, retiring what they replace. */
  learn(s: CASecret): void {
    const t = this.now().getTime();
    this.retired = this.retired.filter((r) => t < r.until);
    const oldKey = this.key;
    if (s.pathKey && oldKey && !s.pathKey.equals(oldKey)) {
      this.retired.push({ tokens: (now) => acceptedPathTokens(oldKey, now, this.clock, false), until: Infinity });
      this.keyChange = { oldKey, at: t };
    }
    if (s.pathKey) this.key = s.pathKey;
    const gone = this.legacy.filter((x) => !s.legacyTokens.includes(x));
    if (gone.length > 0) this.retired.push({ tokens: () => gone, until: Infinity });
    this.legacy = s.legacyTokens;
  }

  /** The tokens a review may come with now (empty: no key known yet). */
  accepted(): string[] {
    if (!this.key) return [];
    const t = this.now().getTime();
    const published = this.publishedPeriod === pathTokenPeriod(t, this.clock);
    const out = [...acceptedPathTokens(this.key, t, this.clock, published), ...this.legacy];
    for (const r of this.retired) if (t < r.until) out.push(...r.tokens(t));
    return out;
  }

  /**
   * What to publish now: the token of the period `publishedPathTokenPeriod` names; for KEY_PUBLISH_DELAY_MS
   * after the key changed, the replaced key's, so the other replicas learn the new key first.
   */
  toPublish(): PathsToPublish | undefined {
    if (!this.key) return undefined;
    const t = this.now().getTime();
    const period = pathTokenPeriod(t, this.clock);
    const newest = [period, period + 1].map((p) => pathToken(this.key!, p));
    const change = this.keyChange && t < this.keyChange.at + KEY_PUBLISH_DELAY_MS ? this.keyChange : undefined;
    const published = publishedPathTokenPeriod(t, this.clock);
    const token = pathToken(change?.oldKey ?? this.key, published);
    return {
      token,
      keep: [...newest, ...this.legacy].filter((x) => x !== token),
      current: !change && published === period,
    };
  }

  /** This replica's publication of `p` succeeded everywhere. */
  published(p: PathsToPublish): void {
    if (!p.current) return;
    const t = this.now().getTime();
    this.publishedPeriod = pathTokenPeriod(t, this.clock);
    this.retired = this.retired.map((r) => (r.until === Infinity ? { ...r, until: t + KEY_CHANGE_GRACE_MS } : r));
  }

  /** The next moments the accepted or published tokens change by time alone. */
  wakeTimes(): (Date | undefined)[] {
    const t = this.now().getTime();
    return [
      pathTokenChangeAt(t, this.clock),
      ...(this.keyChange ? [new Date(this.keyChange.at + KEY_PUBLISH_DELAY_MS)] : []),
      ...this.retired.filter((r) => r.until !== Infinity).map((r) => new Date(r.until)),
    ];
  }
}
