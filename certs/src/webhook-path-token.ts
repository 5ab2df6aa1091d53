/**
 * A secret in the webhook paths, so that only callers who can read the webhook configurations (the
 * API servers, cluster admins) can send the service a review. Without it anyone who can open a
 * connection to the webhook port can post a crafted review and learn from the answer whether an object
 * of some name exists (docs/security.md). The token lives in bootstrap mode's TLS Secret under its own
 * key, which renewals carry over; the service publishes `/t/<token>/<webhook>` as each webhook's path
 * and answers reviews only there. Pure: generation, the patch, and the parse of a request's path.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { JsonPatchOp, WebhookConfigurationView } from './inject.js';

/** The TLS Secret's key holding the token (base64 in data, like every key). */
export const PATH_TOKEN_KEY = 'webhook-path-token';

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
  /** Webhooks left alone: no route is known for their name. */
  unknown: string[];
}

/**
 * The JSON Patch that points every webhook of a configuration at its token path: `service.path`, or the
 * path of `url` (scheme, host and port kept). `routeOf` maps a webhook's name to its route; a name it does
 * not know is left alone. Each changed webhook gets a `test` of its name at its index, as caBundlePatch.
 */
export function webhookPathPatch(
  view: WebhookConfigurationView,
  token: string,
  routeOf: (webhookName: string) => string | undefined,
): PathPatch {
  const out: PathPatch = { ops: [], changed: [], unknown: [] };
  (view.webhooks ?? []).forEach((w, i) => {
    const route = routeOf(w.name);
    if (!route) return void out.unknown.push(w.name);
    const want = tokenPath(token, route);
    const cc = w.clientConfig ?? {};
    let op: JsonPatchOp | undefined;
    if (cc.service) {
      if (cc.service.path !== want) op = { op: 'add', path: `/webhooks/${i}/clientConfig/service/path`, value: want };
    } else if (cc.url) {
      const url = new URL(cc.url);
      if (url.pathname !== want) {
        url.pathname = want;
        op = { op: 'add', path: `/webhooks/${i}/clientConfig/url`, value: url.toString() };
      }
    }
    if (!op) return;
    out.ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: w.name }, op);
    out.changed.push(w.name);
  });
  return out;
}
