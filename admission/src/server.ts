/**
 * The HTTPS server around the Express app: TLS ≥ 1.2 with AEAD suites, a certificate that can be
 * replaced at any time (setSecureContext: new handshakes use it; a kept-alive connection set up with the
 * old one gets `Connection: close` on its next answer, so clients move over without a failed request),
 * keep-alive longer than the API server's 90 s idle timeout, and a graceful shutdown that stops
 * accepting, tells clients to close, lets in-flight reviews finish and then returns. Optionally every
 * client must present a certificate signed by a given CA (the API server authenticating itself, as an
 * AdmissionConfiguration kubeConfigFile sets up), with its CN or a SAN from an allow-list.
 */
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { RequestListener } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { listenOn, silentLogger, type Logger } from '@kd-connections/shared/runtime';
import { checkPair, tlsOptions, type CertificateSink } from './tls/certificate.js';
import type { AdmissionMetrics } from './metrics.js';

/** The API server's pooled connections idle out after 90 s; closing first would race a reused socket. */
export const KEEP_ALIVE_TIMEOUT_MS = 100_000;
/** Above the keep-alive timeout (Node measures it on kept-alive sockets too). */
export const HEADERS_TIMEOUT_MS = 105_000;
/** A whole request, body included; webhooks time out after at most 30 s anyway. */
export const REQUEST_TIMEOUT_MS = 120_000;

/**
 * While draining, a connection silent this long is a client's spare, not one about to carry a request:
 * a client that opens a connection for a request sends it within milliseconds of the handshake.
 */
export const SILENT_CONNECTION_MS = 1000;

/** The certificate a connection was set up with (SHA-256 fingerprint), and whether it was told to close. */
const SERVED = Symbol('servedCertificate');
const OPENED = Symbol('openedAt');
const SECURED = Symbol('securedAt');
const RECYCLED = Symbol('recycled');
type TaggedSocket = TLSSocket & { [SERVED]?: string; [RECYCLED]?: boolean; [OPENED]?: number; [SECURED]?: number };

export interface ServerOptions {
  app: RequestListener;
  host: string;
  port: number;
  log?: Logger;
  metrics?: AdmissionMetrics;
  /** Default HEADERS_TIMEOUT_MS. */
  headersTimeoutMs?: number;
  /** Default REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  /** PEM of the CA(s) client certificates must chain to; set: a connection without one is refused in the handshake. */
  clientCaPem?: string;
  /** With clientCaPem: the client certificate's CN or a SAN must be one of these; empty: any. */
  clientAllowedNames?: string[];
}

/** CN and SAN values (DNS, IP, URI, email) of a peer certificate, as Node describes it. */
function certificateNames(cert: { subject?: Record<string, unknown>; subjectaltname?: string }): string[] {
  const names: string[] = [];
  const cn = cert.subject?.CN;
  for (const v of Array.isArray(cn) ? cn : [cn]) if (typeof v === 'string') names.push(v);
  for (const part of (cert.subjectaltname ?? '').split(', ')) {
    const at = part.indexOf(':');
    if (at > 0) names.push(part.slice(at + 1));
  }
  return names;
}

export class AdmissionServer implements CertificateSink {
  readonly server: https.Server;
  private loaded = false;
  private fingerprint: string | undefined;
  private closing = false;
  private firstCertificate: Promise<void>;
  private resolveFirst!: () => void;
  private readonly sockets = new Set<Socket>();
  /** Connections past the TLS handshake (the TLS sockets, whose bytesRead counts decrypted bytes). */
  private readonly secured = new Set<TaggedSocket>();
  private readonly log: Logger;

  constructor(private readonly opts: ServerOptions) {
    this.log = opts.log ?? silentLogger;
    this.firstCertificate = new Promise((r) => (this.resolveFirst = r));
    // No certificate yet: listen() waits for the first setCertificate, so no handshake ever lacks one.
    const headersTimeout = opts.headersTimeoutMs ?? HEADERS_TIMEOUT_MS;
    const requestTimeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    const mtls = opts.clientCaPem !== undefined;
    this.server = https.createServer(
      {
        minVersion: 'TLSv1.2',
        keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
        headersTimeout,
        requestTimeout,
        // Node checks both timeouts on this period (default 30 s); lowered only with lowered timeouts.
        connectionsCheckingInterval: Math.min(
          30_000,
          Math.max(100, Math.floor(Math.min(headersTimeout, requestTimeout) / 2)),
        ),
        requestCert: mtls,
        rejectUnauthorized: mtls,
      } as https.ServerOptions,
      (req, res) => {
        // A connection set up with a replaced certificate is closed after this answer: the client's
        // next handshake gets the new one, long before the old one expires or its CA leaves the bundle.
        const s = req.socket as TaggedSocket;
        if (s[SERVED] !== undefined && s[SERVED] !== this.fingerprint) {
          res.setHeader('Connection', 'close');
          if (!s[RECYCLED]) {
            s[RECYCLED] = true;
            this.opts.metrics?.tlsConnectionsRecycled.inc();
          }
        }
        opts.app(req, res);
      },
    );
    const allowed = new Set(opts.clientAllowedNames ?? []);
    this.server.on('secureConnection', (s: TaggedSocket) => {
      s[SERVED] = s.getX509Certificate()?.fingerprint256;
      s[SECURED] = Date.now();
      this.secured.add(s);
      s.once('close', () => this.secured.delete(s));
      // Node's headersTimeout starts at a request's first byte, so a connection that never sends one
      // would be held (a descriptor each) forever; it gets the same time to send it. (bytesRead counts
      // decrypted bytes: zero means no request was even begun; one begun is Node's to time out.)
      const idle = setTimeout(() => {
        if (s.bytesRead === 0) s.destroy();
      }, headersTimeout);
      idle.unref();
      s.once('close', () => clearTimeout(idle));
      // The chain was verified in the handshake; the names are checked here, before any request is read.
      if (mtls && allowed.size > 0) {
        const names = certificateNames(s.getPeerCertificate());
        if (!names.some((n) => allowed.has(n))) {
          this.log.warn('client certificate name not allowed; connection closed', { names: names.slice(0, 8) });
          s.destroy();
        }
      }
    });
    // Node 20 takes these from the assignment rather than from the options in some paths; set both.
    this.server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    this.server.headersTimeout = headersTimeout;
    this.server.requestTimeout = requestTimeout;
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      (s as TaggedSocket)[OPENED] = Date.now();
      s.on('close', () => this.sockets.delete(s));
    });
    this.server.on('tlsClientError', (e) => this.log.debug('TLS handshake failed', { error: e.message }));
  }

  setCertificate(certPem: string, keyPem: string): void {
    let info;
    try {
      info = checkPair(certPem, keyPem);
    } catch (e) {
      this.opts.metrics?.tlsReloads.inc({ result: 'rejected' });
      throw e;
    }
    this.server.setSecureContext({
      ...tlsOptions(certPem, keyPem),
      ...(this.opts.clientCaPem !== undefined ? { ca: this.opts.clientCaPem } : {}),
    });
    this.fingerprint = new X509Certificate(certPem).fingerprint256;
    const first = !this.loaded;
    this.loaded = true;
    this.opts.metrics?.tlsReloads.inc({ result: 'loaded' });
    this.opts.metrics?.tlsNotAfter.set(info.notAfter.getTime() / 1000);
    this.log.info(first ? 'serving certificate loaded' : 'serving certificate reloaded', {
      subject: info.subject.replace(/\n/g, ', '),
      notAfter: info.notAfter.toISOString(),
      fingerprint: info.fingerprint256.slice(0, 16),
    });
    this.resolveFirst();
  }

  get tlsLoaded(): boolean {
    return this.loaded;
  }

  get draining(): boolean {
    return this.closing;
  }

  /** Listens once a certificate is loaded; resolves with the bound port. */
  async listen(): Promise<number> {
    if (!this.loaded) this.log.info('waiting for a serving certificate before listening');
    await this.firstCertificate;
    return listenOn(this.server, this.opts.port, this.opts.host);
  }

  /** Marks the server as draining (readiness goes false, answers carry Connection: close). */
  beginDrain(): void {
    this.closing = true;
  }

  /**
   * Stops accepting, closes every connection not carrying a request (kept-alive ones between requests
   * at once, ones that never sent a request once silent for SILENT_CONNECTION_MS), waits for in-flight
   * requests to finish (up to `timeoutMs`, then cuts what is left) and resolves when the listener is closed.
   */
  async shutdown(timeoutMs: number): Promise<{ forced: boolean }> {
    this.closing = true;
    if (!this.server.listening) return { forced: false };
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    // close() only stops accepting; sockets between requests would otherwise sit out keepAliveTimeout.
    this.server.closeIdleConnections();
    let forced = false;
    const timer = setTimeout(() => {
      forced = true;
      // What each connection had done (bytes in and out, seconds open) tells a stuck request from an idle peer.
      const now = Date.now();
      const open = [...this.sockets]
        .slice(0, 8)
        .map(
          (s) =>
            `read ${s.bytesRead} B, written ${s.bytesWritten} B, ` +
            `open ${Math.round((now - ((s as TaggedSocket)[OPENED] ?? now)) / 1000)} s`,
        );
      this.log.warn('drain timeout; closing remaining connections', {
        open: this.sockets.size,
        // Past the handshake; the rest are still in it (or never began it).
        secured: this.secured.size,
        connections: open,
      });
      this.server.closeAllConnections();
      for (const s of this.sockets) s.destroy();
    }, timeoutMs);
    timer.unref();
    // Node's closeIdleConnections only closes connections between two requests. Two kinds it cannot see
    // hold the drain to its timeout otherwise, and neither can be carrying a request:
    // - connected, no byte sent (not even a TLS ClientHello): not an HTTP connection yet;
    // - past the handshake, no request byte sent: Node counts it as a request in progress from the
    //   handshake on. An HTTP client leaves these in its pool when it dialed for a request that another
    //   connection then carried (Go's transport does, so the API server does).
    // Both are closed once silent for SILENT_CONNECTION_MS; a socket that finished its request while
    // draining goes idle, and is closed as it appears.
    const sweep = () => {
      this.server.closeIdleConnections();
      const before = Date.now() - SILENT_CONNECTION_MS;
      for (const s of this.sockets) {
        if (s.bytesRead === 0 && ((s as TaggedSocket)[OPENED] ?? 0) < before) s.destroy();
      }
      for (const s of this.secured) {
        if (s.bytesRead === 0 && (s[SECURED] ?? 0) < before) s.destroy();
      }
    };
    sweep();
    const sweeping = setInterval(sweep, 100);
    sweeping.unref();
    await closed;
    clearTimeout(timer);
    clearInterval(sweeping);
    return { forced };
  }
}
