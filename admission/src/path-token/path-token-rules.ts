/**
 * A secret in the webhook paths, so that only callers who know it (the API servers, readers of the webhook
 * configurations) can send the service a review. Without it anyone who can open a connection to the
 * webhook port can post a crafted review and learn from the answer whether an object of some name exists
 * (docs/security.md). The service publishes `/t/<token>/<webhook>` as each webhook's path and answers
 * reviews only there.
 *
 * Tokens are derived, not stored: HMAC-SHA256 of the CA Secret's `webhook-path-key` and the number of the
 * rotation period, so every replica computes the same token from its own clock and nothing is written
 * when it changes. It changes every period because the API server quotes the URL in the error a writer
 * gets when a call fails, so a token may leak; a leaked one works until the period after it ends.
 * Pure: derivation, which tokens are accepted when, the patch, and the parse of a request's path.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { JsonPatchOp, WebhookConfigurationView } from '@kd-connections/certs';

const PREFIX = '/t/';

/**
 * One rotation period's timing on each replica's own clock: a period's token is published `skewMs` after
 * the period begins and accepted from `skewMs` before it, so replicas whose clocks differ by up to twice
 * `skewMs` never publish a token another refuses; the previous period's stays accepted for `graceMs` into
 * a period (the API servers see a new path within a second or two).
 */
export interface PathTokenClock {
  /** 0: never rotated. */
  rotationMs: number;
  graceMs: number;
  skewMs: number;
}

export const PATH_TOKEN_ROTATION_MS = 3_600_000;

/** The timing for a rotation period: the previous token for min(5 min, ½), the next one min(30 s, ¼) early. */
export function pathTokenClock(rotationMs: number): PathTokenClock {
  return { rotationMs, graceMs: Math.min(300_000, rotationMs / 2), skewMs: Math.min(30_000, rotationMs / 4) };
}

/** The rotation period `nowMs` falls in. */
export function pathTokenPeriod(nowMs: number, clock: PathTokenClock): number {
  return clock.rotationMs > 0 ? Math.floor(nowMs / clock.rotationMs) : 0;
}

/** The period whose token a replica publishes now: the current one from `skewMs` into it, else the previous. */
export function publishedPathTokenPeriod(nowMs: number, clock: PathTokenClock): number {
  const p = pathTokenPeriod(nowMs, clock);
  return clock.rotationMs > 0 && nowMs < p * clock.rotationMs + clock.skewMs ? p - 1 : p;
}

/** The token of one period: 32 bytes of HMAC, base64url without padding (43 characters, safe in a path). */
export function pathToken(key: Buffer, period: number): string {
  return createHmac('sha256', key).update(`kd-connections webhook path token ${period}`).digest('base64url');
}

/**
 * The tokens a review may come with now: this period's; the previous one during the grace, or while this
 * replica has not yet seen this period's published (`published` false); the next one within the skew.
 */
export function acceptedPathTokens(key: Buffer, nowMs: number, clock: PathTokenClock, published: boolean): string[] {
  const p = pathTokenPeriod(nowMs, clock);
  const out = [pathToken(key, p)];
  if (clock.rotationMs <= 0) return out;
  const start = p * clock.rotationMs;
  if (!published || nowMs < start + clock.graceMs) out.push(pathToken(key, p - 1));
  if (nowMs >= start + clock.rotationMs - clock.skewMs) out.push(pathToken(key, p + 1));
  return out;
}

/** The next moment the accepted or published tokens change by time alone. */
export function pathTokenChangeAt(nowMs: number, clock: PathTokenClock): Date | undefined {
  if (clock.rotationMs <= 0) return undefined;
  const start = pathTokenPeriod(nowMs, clock) * clock.rotationMs;
  const next = [
    start + clock.skewMs,
    start + clock.graceMs,
    start + clock.rotationMs - clock.skewMs,
    start + clock.rotationMs,
  ];
  return new Date(Math.min(...next.filter((t) => t > nowMs)));
}

/** The path a webhook whose own route is `route` ("/validate-kdcluster") is published at. */
export function tokenPath(token: string, route: string): string {
  return `${PREFIX}${token}${route}`;
}

/**
 * The route of a request path if it starts with `/t/<one of tokens>`; undefined otherwise. Compared in
 * constant time: the time of a refusal must not tell how much of a guessed token was right.
 */
export function routeBehindToken(path: string, tokens: readonly string[]): string | undefined {
  if (!path.startsWith(PREFIX)) return undefined;
  const end = path.indexOf('/', PREFIX.length);
  if (end < 0) return undefined;
  const given = Buffer.from(path.slice(PREFIX.length, end), 'utf8');
  let match = false;
  for (const t of tokens) {
    const want = Buffer.from(t, 'utf8');
    if (want.length === given.length && timingSafeEqual(want, given)) match = true;
  }
  return match ? path.slice(end) : undefined;
}

export interface PathPatch {
  ops: JsonPatchOp[];
  /** Webhooks whose path the patch sets. */
  changed: string[];
  /** Webhooks left alone: no route is known for their name, or their path is not one of ours. */
  unknown: string[];
}

const TOKEN_SEGMENT = /\/t\/[A-Za-z0-9_-]{43}$/;

/**
 * The path a webhook should have, from the one it has: `[prefix][/t/<token>]<route>`, keeping a prefix
 * in front of the route (a url behind a proxy) and replacing any token segment; undefined when the
 * current path is neither empty nor ends with the route (someone else's path: left alone).
 */
function wantedPath(
  current: string | undefined,
  route: string,
  token: string | undefined,
  keep: readonly string[],
): string | undefined {
  let base: string;
  if (current === undefined || current === '' || current === '/') base = '';
  else if (current.endsWith(route)) {
    const head = current.slice(0, -route.length);
    const segment = TOKEN_SEGMENT.exec(head)?.[0];
    // Behind a token that is still good: left as it is (a newer one is never taken back to an older one).
    if (segment && keep.includes(segment.slice(PREFIX.length))) return current;
    base = segment ? head.slice(0, -segment.length) : head;
  } else return undefined;
  return token ? `${base}${tokenPath(token, route)}` : `${base}${route}`;
}

/**
 * The JSON Patch that points every webhook of a configuration at its path — behind `token`, or the bare
 * route when there is none (a token path left by an earlier setting is taken back): `service.path`, or the
 * path of `url` (scheme, host and port kept). A path behind one of the `keep` tokens is left as it is.
 * `routeOf` maps a webhook's name to its route; a name it does not know, or a path that is not ours, is
 * left alone. Each changed webhook gets a `test` of its name at its index, as caBundlePatch.
 */
export function webhookPathPatch(
  view: WebhookConfigurationView,
  token: string | undefined,
  routeOf: (webhookName: string) => string | undefined,
  keep: readonly string[] = [],
): PathPatch {
  const out: PathPatch = { ops: [], changed: [], unknown: [] };
  (view.webhooks ?? []).forEach((w, i) => {
    const route = routeOf(w.name);
    const cc = w.clientConfig ?? {};
    let op: JsonPatchOp | undefined;
    if (route && cc.service) {
      const want = wantedPath(cc.service.path, route, token, keep);
      if (want === undefined) return void out.unknown.push(w.name);
      if (cc.service.path !== want) op = { op: 'add', path: `/webhooks/${i}/clientConfig/service/path`, value: want };
    } else if (route && cc.url) {
      let url: URL;
      try {
        url = new URL(cc.url);
      } catch {
        return void out.unknown.push(w.name);
      }
      const want = wantedPath(url.pathname, route, token, keep);
      if (want === undefined) return void out.unknown.push(w.name);
      if (url.pathname !== want) {
        url.pathname = want;
        op = { op: 'add', path: `/webhooks/${i}/clientConfig/url`, value: url.toString() };
      }
    } else {
      return void out.unknown.push(w.name);
    }
    if (!op) return;
    out.ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: w.name }, op);
    out.changed.push(w.name);
  });
  return out;
}
