/**
 * A small JSON client for the reads client-node does not do well: paginated lists, streaming watches
 * with bookmarks and server-side timeouts, and metadata-only (PartialObjectMetadata) requests, so the
 * admission service never holds Secret data (client-node 2 still cannot ask for those). Authentication
 * comes from a KubeConnection (kubeconfig.ts, or client-node's KubeConfig); one keep-alive agent serves
 * every request.
 */
import https from 'node:https';
import http from 'node:http';
import type net from 'node:net';
import tls from 'node:tls';
import type { KubeConnection } from './kubeconfig.js';
import { keepAliveAgent } from './keep-alive-agent.js';

export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    readonly details?: unknown,
    /** The answer's body as received (a Status object, usually), at most 4 KiB. */
    readonly body?: string,
    /**
     * Set by jsonPatch when the patch did not apply: whether one of its `test` operations failed
     * (the object moved on) or the patch itself does not fit the object.
     */
    readonly patchFailure?: 'test-failed' | 'not-applicable',
  ) {
    super(message);
    this.name = 'KubeApiError';
  }
}

/** HTTP status of an error from this client or from client-node's ApiException, if it has one. */
export function errorStatus(e: unknown): number | undefined {
  if (e instanceof KubeApiError) return e.status;
  const code =
    (e as { code?: unknown; statusCode?: unknown } | null)?.code ?? (e as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/**
 * A write refused because the object moved on since it was read: a 409 (a create that found the object,
 * a delete whose uid/resourceVersion precondition failed) or a JSON Patch whose `test` operation failed.
 * Every other 422 — a patch that does not fit the object, an object the schema refuses — is an error.
 * kube-apiserver answers a failed `test` and a failed `replace`/`remove` with the same body (see
 * isUnappliedPatch), so only jsonPatch, which knows the patch it sent, can tell them apart.
 */
export function isConflict(e: unknown): boolean {
  const s = errorStatus(e);
  if (s === 409) return true;
  return s === 422 && e instanceof KubeApiError && e.patchFailure === 'test-failed';
}

/**
 * Whether a 422 is kube-apiserver's answer to a JSON Patch that could not be applied (any operation:
 * a `test` that failed, a path that does not exist): reason Invalid, the generic message, no details.
 * A schema or validation rejection names the object and its causes instead.
 */
export function isUnappliedPatch(status: number | undefined, body: string | undefined): boolean {
  if (status !== 422 || !body) return false;
  try {
    const s = JSON.parse(body) as { reason?: string; message?: string; details?: Record<string, unknown> };
    return (
      s.reason === 'Invalid' &&
      s.message === 'the server rejected our request due to an error in our request' &&
      Object.keys(s.details ?? {}).length === 0
    );
  } catch {
    return false;
  }
}

export const ACCEPT_JSON = 'application/json';
export const ACCEPT_META = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
export const ACCEPT_META_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  accept?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** What a scoped client checks before each request (see KubeClient.scoped). */
export interface RequestScope {
  signal: AbortSignal;
  /** Called synchronously before each request; it may abort `signal` (e.g. a lease found expired). */
  guard?: () => void;
}

export class KubeClient {
  readonly server: string;
  private readonly agent: http.Agent;
  private scope: RequestScope | undefined;

  constructor(
    private readonly kc: KubeConnection,
    private readonly userAgent = 'kd-connections',
  ) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/+$/, '');
    this.agent = keepAliveAgent(this.server.startsWith('https:') ? 'https:' : 'http:', 64);
  }

  /**
   * The same client (connection pool, credentials) whose every request carries `scope.signal`: once it
   * fires, nothing more is sent and requests in flight are cut. The reconciler writes through one scoped
   * to its leadership, so a replica that lost the lease stops writing. close() belongs to the parent.
   */
  scoped(scope: RequestScope): KubeClient {
    const c = Object.create(this) as KubeClient;
    c.scope = scope;
    return c;
  }

  /** Throws AbortError when this client's scope is over; nothing is sent then. */
  private checkScope(what: string): void {
    if (!this.scope) return;
    this.scope.guard?.();
    if (this.scope.signal.aborted) throw abortError(what);
  }

  private async options(path: string, opts: RequestOptions): Promise<{ url: URL; req: https.RequestOptions }> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const req: https.RequestOptions = { headers: {} };
    await this.kc.applyToHTTPSOptions(req);
    req.agent = this.agent;
    req.method = 'GET';
    req.headers = {
      ...(req.headers as Record<string, string>),
      Accept: opts.accept ?? ACCEPT_JSON,
      'User-Agent': this.userAgent,
    };
    return { url, req };
  }

  /** GET a JSON document; non-2xx answers become KubeApiError with the API's Status message. */
  get<T>(path: string, opts: RequestOptions = {}): Promise<T> {
    return this.request<T>('GET', path, opts);
  }

  /** Like get, but undefined when the object does not exist (404). */
  async getIfExists<T>(path: string, opts: RequestOptions = {}): Promise<T | undefined> {
    try {
      return await this.get<T>(path, opts);
    } catch (e) {
      if (errorStatus(e) === 404) return undefined;
      throw e;
    }
  }

  /**
   * Any JSON request. `body` is serialized with `contentType` (application/json by default; JSON Patch
   * writes pass application/json-patch+json). Non-2xx answers become KubeApiError.
   */
  async request<T>(
    method: string,
    path: string,
    opts: RequestOptions & { body?: unknown; contentType?: string } = {},
  ): Promise<T> {
    const { url, req } = await this.options(path, opts);
    req.method = method;
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    if (payload) {
      (req.headers as Record<string, string | number>)['Content-Type'] = opts.contentType ?? 'application/json';
      (req.headers as Record<string, string | number>)['Content-Length'] = payload.length;
    }
    const what = `${method} ${path}`;
    const mod = url.protocol === 'https:' ? https : http;
    this.checkScope(what);
    return new Promise<T>((ok, fail) => {
      const r = mod.request(url, req, (res) => {
        // Decoded as it arrives: a list page becomes one string in V8's heap, which a GC gives back,
        // instead of its chunks plus their concatenation in Buffers outside it.
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          const text = body;
          // The response's listeners outlive this call as long as anything holds the response.
          body = '';
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            try {
              ok((text ? JSON.parse(text) : {}) as T);
            } catch (e) {
              fail(new Error(`${what}: invalid JSON from the API server: ${(e as Error).message}`));
            }
          } else fail(apiError(status, text, what));
        });
        res.on('error', fail);
      });
      r.setTimeout(opts.timeoutMs ?? 30_000, () =>
        r.destroy(new Error(`${what}: timed out after ${opts.timeoutMs ?? 30_000} ms`)),
      );
      r.on('error', fail);
      onAbort(opts.signal, r, what);
      onAbort(this.scope?.signal, r, what);
      if (!this.scope) return r.end(payload);
      // A scoped request is sent only once its connection is ready, and only if the scope still holds
      // then: a new connection can take long enough (or the process be paused meanwhile) for the term
      // to end, and node would flush the request as soon as the handshake completes, with no check.
      r.once('socket', (socket) => {
        const send = () => {
          try {
            this.checkScope(what);
          } catch (e) {
            return r.destroy(e as Error);
          }
          r.end(payload);
        };
        if (connectionReady(socket)) send();
        else socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', send);
      });
    });
  }

  /**
   * PATCH with an RFC 6902 JSON Patch (the only kind of write the reconciler makes). When the server
   * says the patch did not apply, the patch's `test` operations alone are sent again as a dry run to
   * learn which it was: they fail too → a precondition conflict; they hold → the patch does not fit the
   * object (a bug or a schema mismatch, not worth a quick retry). The error says which (patchFailure).
   */
  async jsonPatch<T>(path: string, ops: unknown[], opts: RequestOptions = {}): Promise<T> {
    const send = (body: unknown[], o: RequestOptions) =>
      this.request<T>('PATCH', path, { ...o, body, contentType: 'application/json-patch+json' });
    try {
      return await send(ops, opts);
    } catch (e) {
      if (!(e instanceof KubeApiError) || !isUnappliedPatch(e.status, e.body)) throw e;
      const tests = ops.filter((op) => (op as { op?: unknown } | null)?.op === 'test');
      let testFailed = false;
      if (tests.length > 0) {
        try {
          await send(tests, { ...opts, query: { ...opts.query, dryRun: 'All' } });
        } catch (probe) {
          if (!(probe instanceof KubeApiError) || !isUnappliedPatch(probe.status, probe.body)) throw e;
          testFailed = true;
        }
      }
      const what = testFailed ? 'a test precondition failed' : 'the patch does not apply to the object';
      throw new KubeApiError(
        e.status,
        e.reason,
        `${e.message} (${what})`,
        e.details,
        e.body,
        testFailed ? 'test-failed' : 'not-applicable',
      );
    }
  }

  /**
   * Opens a watch and calls onEvent for every line. Resolves when the server ends the stream (its
   * timeoutSeconds), rejects on errors. `idleMs` cuts a connection that went silent (no bytes, not
   * even bookmarks), which a half-open TCP connection would otherwise keep forever.
   */
  async watch(
    path: string,
    opts: RequestOptions & { idleMs: number },
    onEvent: (e: { type: string; object: Record<string, unknown> }) => void,
  ): Promise<void> {
    const { url, req } = await this.options(path, { ...opts, query: { ...opts.query, watch: 1 } });
    const mod = url.protocol === 'https:' ? https : http;
    this.checkScope(`WATCH ${path}`);
    return new Promise<void>((resolve, reject) => {
      // The first outcome wins; an error raised by onEvent (e.g. 410 Gone) beats the abort it causes.
      let settled = false;
      let raised: Error | undefined;
      const ok = () => (settled ? undefined : ((settled = true), raised ? reject(raised) : resolve()));
      const fail = (e: Error) => (settled ? undefined : ((settled = true), reject(raised ?? e)));
      const r = mod.request(url, req, (res) => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => fail(apiError(status, Buffer.concat(chunks).toString('utf8'), `WATCH ${path}`)));
          return;
        }
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          let nl: number;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line) continue;
            try {
              onEvent(JSON.parse(line) as { type: string; object: Record<string, unknown> });
            } catch (e) {
              raised = e instanceof SyntaxError ? new Error(`WATCH ${path}: undecodable event`) : (e as Error);
              fail(raised);
              r.destroy();
              return;
            }
          }
        });
        res.on('end', () => ok());
        res.on('error', fail);
        res.on('aborted', () => fail(new Error(`WATCH ${path}: connection aborted`)));
      });
      r.setTimeout(opts.idleMs, () => r.destroy(new Error(`WATCH ${path}: no data for ${opts.idleMs} ms`)));
      r.on('error', fail);
      onAbort(opts.signal, r, `WATCH ${path}`);
      onAbort(this.scope?.signal, r, `WATCH ${path}`);
      r.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * Ends the request when the signal fires. Wired by hand rather than with http.request's `signal`
 * option, which does not fire for a signal created in another realm (jest's test context).
 */
function onAbort(signal: AbortSignal | undefined, r: http.ClientRequest, what: string): void {
  if (!signal) return;
  const abort = () => void r.destroy(abortError(what));
  if (signal.aborted) return abort();
  signal.addEventListener('abort', abort, { once: true });
  // Detach only when the whole exchange is over: a request's own 'close' can come before its response ends.
  r.once('response', (res: http.IncomingMessage) =>
    res.once('close', () => signal.removeEventListener('abort', abort)),
  );
  r.once('error', () => signal.removeEventListener('abort', abort));
}

function abortError(what: string): Error {
  return Object.assign(new Error(`${what}: aborted`), { name: 'AbortError' });
}

/** Whether a request failed because its signal (or its client's scope) was aborted. */
export function isAbortError(e: unknown): boolean {
  return e instanceof Error && e.name === 'AbortError';
}

function apiError(status: number, text: string, what: string): KubeApiError {
  let reason = '';
  let message = text.slice(0, 500);
  let details: unknown;
  try {
    const s = JSON.parse(text) as { reason?: string; message?: string; details?: unknown };
    reason = s.reason ?? '';
    message = s.message ?? message;
    details = s.details;
  } catch {
    // not a Status object; keep the raw text
  }
  return new KubeApiError(
    status,
    reason,
    `${what}: ${status} ${reason} ${message}`.trim(),
    details,
    text.slice(0, 4096),
  );
}

/** A socket a request can be written to now: connected, and for TLS with its handshake done. */
function connectionReady(socket: net.Socket): boolean {
  if (socket.connecting) return false;
  return !(socket instanceof tls.TLSSocket) || /^(TLS|SSL)/.test(socket.getProtocol() ?? '');
}
