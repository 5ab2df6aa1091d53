/**
 * A secret in the webhook paths, so that only callers who know it (the API servers, readers of the webhook
 * configurations) can send the service a review. Without it anyone who can open a connection to the
 * webhook port can post a crafted review and learn from the answer whether an object of some name exists
 * (docs/security.md). The token lives in bootstrap mode's TLS Secret under keys of its own, which
 * renewals carry over; the service publishes `/t/<token>/<webhook>` as each webhook's path and answers
 * reviews only there. It is rotated: the API server quotes the URL in the error a writer gets when a call
 * fails, so a token may leak; a leaked one works until the next rotation plus a short overlap.
 * Pure: generation, rotation, the patch, and the parse of a request's path.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { JsonPatchOp, WebhookConfigurationView } from './inject.js';

/** The TLS Secret's keys: the token, the one it replaced, and when it was issued (base64 in data, like every key). */
export const PATH_TOKEN_KEY = 'webhook-path-token';
export const PATH_TOKEN_PREVIOUS_KEY = 'webhook-path-token-previous';
export const PATH_TOKEN_ISSUED_KEY = 'webhook-path-token-issued';

const PREFIX = '/t/';
/** 32 random bytes, base64url without padding: 43 characters, safe in a URL path. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export function newPathToken(): string {
  return randomBytes(32).toString('base64url');
}

export function isPathToken(value: string | undefined): value is string {
  return value !== undefined && TOKEN.test(value);
}

/** The token a Secret's data holds, when it holds a well-formed one. */
export function pathTokenIn(data: Record<string, string> | undefined): string | undefined {
  const raw = data?.[PATH_TOKEN_KEY];
  const token = raw === undefined ? undefined : Buffer.from(raw, 'base64').toString('utf8');
  return isPathToken(token) ? token : undefined;
}

export interface PathTokenState {
  current: string | undefined;
  previous: string | undefined;
  /** When `current` was issued; undefined when not recorded (treated as due for rotation). */
  issuedAt: Date | undefined;
}

export function pathTokenState(data: Record<string, string> | undefined): PathTokenState {
  const text = (k: string) => (data?.[k] === undefined ? undefined : Buffer.from(data[k], 'base64').toString('utf8'));
  const issued = text(PATH_TOKEN_ISSUED_KEY);
  const at = issued === undefined ? NaN : Date.parse(issued);
  const previous = text(PATH_TOKEN_PREVIOUS_KEY);
  return {
    current: pathTokenIn(data),
    previous: isPathToken(previous) ? previous : undefined,
    issuedAt: Number.isNaN(at) ? undefined : new Date(at),
  };
}

/**
 * The timing of one rotation period, on each replica's own clock: a replica publishes a token it learned
 * `publishAfterMs` after it first saw it (the other replicas read it from the Secret meanwhile; the old
 * path works all along), and accepts the one it replaced for `graceMs` after that — longer while its own
 * publication of the new one has not succeeded. Only the rotation's due time uses the writer's clock
 * (`issuedAt`): a skewed clock can only rotate early or late, never drop a token still in use.
 */
export interface PathTokenTiming {
  /** 0: never rotated. */
  rotationMs: number;
  publishAfterMs: number;
  graceMs: number;
}

export const PATH_TOKEN_ROTATION_MS = 3_600_000;
const PUBLISH_AFTER_MS = 10_000;
const GRACE_MS = 300_000;

/** The timing for a rotation period: publish after min(10 s, ¼), accept the previous for min(5 min, ½). */
export function pathTokenTiming(rotationMs: number): PathTokenTiming {
  if (rotationMs <= 0) return { rotationMs: 0, publishAfterMs: PUBLISH_AFTER_MS, graceMs: GRACE_MS };
  return {
    rotationMs,
    publishAfterMs: Math.min(PUBLISH_AFTER_MS, rotationMs / 4),
    graceMs: Math.min(GRACE_MS, rotationMs / 2),
  };
}

/** What the Secret needs: a first token, the next one, or nothing. */
export function pathTokenDue(state: PathTokenState, now: Date, timing: PathTokenTiming): 'add' | 'rotate' | undefined {
  if (!state.current) return 'add';
  if (timing.rotationMs <= 0) return undefined;
  if (!state.issuedAt || now.getTime() >= state.issuedAt.getTime() + timing.rotationMs) return 'rotate';
  return undefined;
}

/** The Secret data keys (base64) for a new token issued now, the current one (if any) becoming previous. */
export function nextPathTokenData(state: PathTokenState, now: Date, token = newPathToken()): Record<string, string> {
  const b64 = (v: string) => Buffer.from(v, 'utf8').toString('base64');
  return {
    [PATH_TOKEN_KEY]: b64(token),
    [PATH_TOKEN_ISSUED_KEY]: b64(now.toISOString()),
    ...(state.current ? { [PATH_TOKEN_PREVIOUS_KEY]: b64(state.current) } : {}),
  };
}

/** One replica's view of the token: what it accepts and publishes, timed on its own clock. */
export interface LocalPathToken {
  current: string;
  /** The token `current` replaced: the Secret's previous one, else the one this replica had before. */
  previous?: string;
  /** When this replica first saw `current` (its own clock, epoch ms). */
  seenAtMs: number;
  /** Whether this replica's publication of `current` has succeeded. */
  published: boolean;
  /** A first token, nothing to replace: published at once. */
  fresh: boolean;
}

/** The local view after reading the Secret's state (unchanged when its current token is the one known). */
export function learnPathToken(
  local: LocalPathToken | undefined,
  state: PathTokenState,
  nowMs: number,
): LocalPathToken | undefined {
  if (!state.current) return local;
  if (local?.current === state.current) return local;
  const previous = state.previous ?? local?.current;
  return {
    current: state.current,
    ...(previous && previous !== state.current ? { previous } : {}),
    seenAtMs: nowMs,
    published: false,
    fresh: previous === undefined,
  };
}

/** The tokens a review may come with now: the current one, and the previous one during its grace. */
export function acceptedPathTokens(
  local: LocalPathToken | undefined,
  nowMs: number,
  timing: PathTokenTiming,
): string[] {
  if (!local) return [];
  const inGrace = !local.published || nowMs < local.seenAtMs + timing.graceMs;
  return local.previous && inGrace ? [local.current, local.previous] : [local.current];
}

/** Whether the current token may be published now (else the webhooks keep whichever accepted token they carry). */
export function publishCurrentNow(local: LocalPathToken, nowMs: number, timing: PathTokenTiming): boolean {
  return local.fresh || !local.previous || nowMs >= local.seenAtMs + timing.publishAfterMs;
}

/** The next moment the token state changes by time alone: publication, end of grace, the rotation due. */
export function pathTokenWakeAt(
  local: LocalPathToken | undefined,
  state: PathTokenState,
  nowMs: number,
  timing: PathTokenTiming,
): Date | undefined {
  const times: number[] = [];
  if (local?.previous) times.push(local.seenAtMs + timing.publishAfterMs, local.seenAtMs + timing.graceMs);
  if (state.issuedAt && timing.rotationMs > 0) times.push(state.issuedAt.getTime() + timing.rotationMs);
  const future = times.filter((t) => t > nowMs);
  return future.length > 0 ? new Date(Math.min(...future)) : undefined;
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
