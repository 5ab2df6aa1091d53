/**
 * The HTTP edge: Express routes for the webhooks, health, readiness and metrics. Everything about a
 * review's content is decided by runWebhook; this file only enforces HTTP hygiene, logs one
 * line per review and counts it. Bad input always gets an answer, never an exception.
 *
 * Reviews are the hot path: a POST to a webhook's exact path is answered straight from node's request
 * and response, before Express (whose routing, request/response decoration and res.json cost about as
 * much CPU as deciding the review; docs/performance.md). Any other request — health, readiness, metrics,
 * other methods, unknown paths, and path variants Express also matches — goes through Express, which
 * answers a review the same way.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { routeBehindToken } from './path-token/path-token-rules.js';
import { errorMessage, type Logger, type Readiness } from '@kd-connections/shared/runtime';
import { parseAdmissionReview, type AdmissionReview } from './admission-review.js';
import type { BodyGarbage } from './body-garbage.js';
import type { AdmissionMetrics, RequestResult } from './metrics.js';
import { discardRest, MAX_BODY_BYTES, parseJson, precheck, readBody } from './request-body.js';
import type { NamespaceScope } from './namespace-scope.js';
import { reviewDeadlineMs } from './review-deadline.js';
import type { ReviewLimiter } from './review-limiter.js';
import { runWebhook, type Webhook, type WebhookDeps } from './webhook.js';

export interface AppOptions {
  webhooks: readonly Webhook[];
  deps: WebhookDeps;
  /** The namespaces the webhooks select; reviews for others are refused without a lookup. Default all. */
  namespaces?: NamespaceScope;
  metrics: AdmissionMetrics;
  log: Logger;
  readiness: () => Readiness;
  /** True once shutdown began: every answer then carries `Connection: close`. */
  draining?: () => boolean;
  maxBodyBytes?: number;
  /** Turns for reviews (in flight, bytes, queue); absent: no limit. */
  limiter?: ReviewLimiter;
  /** Longest a review may take, waiting included (lowered below the API server's ?timeout=); absent: none. */
  reviewDeadlineMs?: number;
  /**
   * Set: reviews are served only at `/t/<one of these>/<webhook path>` (webhook-path-token.ts in certs)
   * and the bare webhook paths are unknown. Absent: the bare paths.
   */
  pathTokens?: () => readonly string[];
  /** Told when a large body (LARGE_BODY_BYTES or more declared) was read and answered, and of body bytes read or drained. */
  garbage?: Pick<BodyGarbage, 'afterLargeReview' | 'consumed'>;
}

/** A body this large leaves tens of MiB of garbage (its bytes, its text, its parse). */
export const LARGE_BODY_BYTES = 1024 * 1024;

export function createApp(opts: AppOptions): RequestListener {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  const draining = opts.draining ?? (() => false);
  const limit = opts.maxBodyBytes ?? MAX_BODY_BYTES;

  // During shutdown the API server must stop reusing our connections (kubernetes/kubernetes#127335).
  app.use((_req, res, next) => {
    if (draining()) res.setHeader('Connection', 'close');
    next();
  });

  app.get('/healthz', (_req, res) => {
    text(res, 200, 'ok');
  });
  app.get('/readyz', (_req, res) => {
    const r = opts.readiness();
    if (r.ready) text(res, 200, 'ok');
    else text(res, 503, `not ready: ${r.reasons.join('; ')}`);
  });
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', opts.metrics.registry.contentType);
    res.end(await opts.metrics.registry.metrics());
  });

  // Behind a path token only the fast path below serves reviews: Express never sees a webhook's path.
  for (const webhook of opts.pathTokens ? [] : opts.webhooks) {
    app.post(webhook.path, (req, res) => serveReview(webhook, req, res, opts, limit, draining));
    app.all(webhook.path, (req, res) => {
      res.setHeader('Allow', 'POST');
      text(res, 405, `method ${req.method} not allowed; POST an AdmissionReview`);
    });
  }

  app.use((req, res) => text(res, 404, `no webhook at ${req.path}`));
  // Express 5 forwards rejected promises here; answer rather than drop the connection.
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => unhandled(err, res, opts));

  const byPath = new Map(opts.webhooks.map((w) => [w.path, w]));
  const tokens = opts.pathTokens;
  return (req, res) => {
    if (req.method === 'POST') {
      const url = req.url ?? '';
      const q = url.indexOf('?');
      // The API server calls exactly the configured URL, plus ?timeout=Ns.
      const path = q < 0 ? url : url.slice(0, q);
      const route = tokens ? routeBehindToken(path, tokens()) : path;
      const webhook = route === undefined ? undefined : byPath.get(route);
      if (webhook) {
        if (draining()) res.setHeader('Connection', 'close');
        serveReview(webhook, req, res, opts, limit, draining).catch((err: unknown) => unhandled(err, res, opts));
        return;
      }
      if (tokens) {
        // No body is read: a caller without the token learns nothing but that this path is not served.
        opts.metrics.pathRefused.inc();
        return answerThenDrain(req, res, 404, 'no webhook at this path', opts.garbage);
      }
    }
    app(req, res);
  };
}

function unhandled(err: unknown, res: ServerResponse, opts: AppOptions): void {
  opts.log.error('unhandled error in a request', { error: errorMessage(err) });
  if (!res.headersSent) text(res, 500, 'internal error');
  else res.end();
}

/** A plain-text answer (what Express's res.type().send() wrote, without Express). */
function text(res: ServerResponse, status: number, body: string): void {
  const bytes = Buffer.from(body + '\n', 'utf8');
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': bytes.length });
  res.end(bytes);
}

/**
 * Sends the whole answer at once but ends the response only after the unread body was read and
 * dropped (bounded, see discardRest), as Go's lingering close does: a connection closed with unread data
 * sends a TCP reset, and a client still writing its body would get EPIPE instead of reading the answer.
 */
function answerThenDrain(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: string,
  garbage?: Pick<BodyGarbage, 'consumed'>,
): void {
  if (req.complete) return text(res, status, body);
  const bytes = Buffer.from(body + '\n', 'utf8');
  // Closed after the answer even when kept alive: what the drain leaves unread (past its bounds) must
  // not be parsed as the next request, nor wait for the client's timeout.
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': bytes.length,
    Connection: 'close',
  });
  res.write(bytes);
  void discardRest(req, { onDropped: garbage && ((n) => garbage.consumed(n)) }).then(() => res.end());
}

/** A JSON answer (what Express's res.json() wrote: same content type, no ETag). */
function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const bytes = Buffer.from(JSON.stringify(value), 'utf8');
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': bytes.length });
  res.end(bytes);
}

/** A review from its first byte to its answer, counted in flight per webhook path meanwhile. */
async function serveReview(...args: Parameters<typeof answerReview>): Promise<void> {
  const [webhook, , , opts] = args;
  const labels = { webhook: webhook.path };
  opts.metrics.webhookInFlight.inc(labels);
  try {
    await answerReview(...args);
  } finally {
    opts.metrics.webhookInFlight.dec(labels);
  }
}

async function answerReview(
  webhook: Webhook,
  req: IncomingMessage,
  res: ServerResponse,
  opts: AppOptions,
  limit: number,
  draining: () => boolean,
): Promise<void> {
  const started = process.hrtime.bigint();
  const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
  const refuse = (status: number, message: string, reason: string) => {
    const result: RequestResult = status >= 500 ? 'error' : 'rejected';
    opts.metrics.observe(webhook, 'unknown', result, status, seconds());
    // The reason code, never the message: a JSON parser message quotes the body.
    opts.log.warn('review refused', { webhook: webhook.name, status, reason });
    // An unread or half-read body cannot be skipped on a kept-alive connection: closed after the answer.
    answerThenDrain(req, res, status, message, opts.garbage);
  };

  const early = precheck(req, limit);
  if (early && !early.ok) return refuse(early.status, early.message, early.reason);
  const arrived = performance.now();
  const deadlineMs = opts.reviewDeadlineMs === undefined ? undefined : reviewDeadlineMs(req.url, opts.reviewDeadlineMs);
  // A turn before the body is read: a waiting review holds a socket, not its body. A body without a
  // declared length counts as the largest allowed.
  const declared = Number(req.headers['content-length']);
  // Half the deadline at most is spent waiting, so a review that gets a turn has time to be decided.
  const turn = opts.limiter?.acquire(Number.isFinite(declared) ? declared : limit, (deadlineMs ?? 10_000) / 2);
  const got = turn instanceof Promise ? await turn : turn;
  if (got && !got.ok) {
    opts.metrics.busy(webhook.name, got.reason);
    opts.metrics.observe(webhook, 'unknown', 'rejected', 429, seconds());
    opts.log.warn('review refused', { webhook: webhook.name, status: 429, reason: `busy-${got.reason}` });
    res.setHeader('Retry-After', '1');
    return answerThenDrain(req, res, 429, got.message, opts.garbage);
  }
  try {
    await decideReview(webhook, req, res, opts, limit, draining, {
      started,
      arrived,
      deadline: deadlineMs === undefined ? undefined : arrived + deadlineMs,
      refuse,
    });
  } finally {
    got?.release();
    // Its body was read: the next large one must not pile its garbage on this one's.
    if (got && declared >= LARGE_BODY_BYTES) opts.garbage?.afterLargeReview();
  }
}

async function decideReview(
  webhook: Webhook,
  req: IncomingMessage,
  res: ServerResponse,
  opts: AppOptions,
  limit: number,
  draining: () => boolean,
  at: {
    started: bigint;
    arrived: number;
    deadline: number | undefined;
    refuse: (status: number, message: string, reason: string) => void;
  },
): Promise<void> {
  const { refuse } = at;
  const seconds = () => Number(process.hrtime.bigint() - at.started) / 1e9;
  const parsed = await readReview(req, limit, opts.garbage);
  if (!parsed.ok) return refuse(parsed.status, parsed.message, parsed.reason);

  const request = parsed.review.request;
  // A metric label must come from a closed set, whatever a client sends.
  const operation = OPERATIONS.has(request.operation as string) ? (request.operation as string) : 'other';
  const ident = {
    webhook: webhook.name,
    uid: clip(request.uid),
    kind: clip(request.kind?.kind),
    namespace: clip(request.namespace),
    name: clip(request.name || objectName(request.object)),
    operation,
    dryRun: request.dryRun === true,
  };
  let outcome;
  try {
    outcome = await runWebhook(webhook, parsed.review, opts.deps, opts.namespaces, {
      deadline: at.deadline,
      arrived: at.arrived,
    });
  } catch (e) {
    // Answer 500 so the configuration's failurePolicy decides (Fail for validation, Ignore for pods).
    opts.metrics.observe(webhook, operation, 'error', 500, seconds());
    opts.log.error('review failed', { ...ident, error: errorMessage(e), latencyMs: ms(seconds()) });
    return text(res, 500, `internal error: ${errorMessage(e)}`);
  }
  const d = outcome.decision;
  const patchOps = d.patch?.length ?? 0;
  const result: RequestResult = !d.allowed ? 'denied' : patchOps > 0 ? 'patched' : 'allowed';
  const latency = seconds();
  opts.metrics.observe(webhook, operation, result, 200, latency);
  // One line per review at debug (a busy cluster answers thousands a minute); a denial is worth an info line.
  opts.log[d.allowed ? 'debug' : 'info']('review', {
    ...ident,
    decision: result,
    code: d.allowed ? undefined : (d.code ?? 403),
    note: clip(d.note),
    fields: d.fields,
    patchOps,
    warnings: d.warnings?.length ?? 0,
    latencyMs: ms(latency),
  });
  if (draining()) res.setHeader('Connection', 'close');
  sendJson(res, 200, outcome.review);
}

/**
 * The body read and parsed, in a function of its own: the buffer and its text are garbage as soon as
 * it returns, not kept by the caller's frame while the review is decided.
 */
async function readReview(
  req: IncomingMessage,
  limit: number,
  garbage?: Pick<BodyGarbage, 'consumed'>,
): Promise<{ ok: true; review: AdmissionReview } | { ok: false; status: number; message: string; reason: string }> {
  const body = await readBody(req, limit, garbage && ((n) => garbage.consumed(n)));
  if (!body.ok) return body;
  const json = parseJson(body.body);
  if (!json.ok) return { ok: false, status: 400, message: json.message, reason: json.reason };
  const parsed = parseAdmissionReview(json.value);
  if (!parsed.ok) return { ok: false, status: 400, message: parsed.message, reason: 'invalid-review' };
  return { ok: true, review: parsed.review };
}

const OPERATIONS = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

/** Request fields go to logs as given; keep a hostile 7 MiB "uid" out of them. */
function clip(v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  return v.length > 256 ? v.slice(0, 256) + '…' : v;
}

function objectName(o: unknown): string | undefined {
  const m = (o as { metadata?: { name?: unknown; generateName?: unknown } } | null)?.metadata;
  const n = m?.name ?? m?.generateName;
  return typeof n === 'string' ? n : undefined;
}

const ms = (s: number) => Math.round(s * 1e6) / 1e3;
