/**
 * The HTTPS server around the Express app: TLS ≥ 1.2 with AEAD suites, a certificate that can be
 * replaced at any time (setSecureContext: new handshakes use it; a kept-alive connection set up with the
 * old one gets `Connection: close` on its next answer, so clients move over without a failed request),
 * keep-alive longer than the API server's 90 s idle timeout, and a graceful shutdown that stops
 * accepting, tells clients to close, lets in-flight reviews finish and then returns.
 */
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { RequestListener } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { silentLogger, type Logger } from '@kd-connections/shared';
import { checkPair, tlsOptions, type CertificateSink } from './tls/certificate.js';
import type { AdmissionMetrics } from './metrics.js';

/** The API server's pooled connections idle out after 90 s; closing first would race a reused socket. */
export const KEEP_ALIVE_TIMEOUT_MS = 100_000;
/** Above the keep-alive timeout (Node measures it on kept-alive sockets too). */
export const HEADERS_TIMEOUT_MS = 105_000;
/** A whole request, body included; webhooks time out after at most 30 s anyway. */
export const REQUEST_TIMEOUT_MS = 120_000;

/** The certificate a connection was set up with (SHA-256 fingerprint), and whether it was told to close. */
const SERVED = Symbol('servedCertificate');
const RECYCLED = Symbol('recycled');
type TaggedSocket = TLSSocket & { [SERVED]?: string; [RECYCLED]?: boolean };

export interface ServerOptions {
  app: RequestListener;
  host: string;
  port: number;
  log?: Logger;
  metrics?: AdmissionMetrics;
}

export class AdmissionServer implements CertificateSink {
  readonly server: https.Server;
  private loaded = false;
  private fingerprint: string | undefined;
  private closing = false;
  private firstCertificate: Promise<void>;
  private resolveFirst!: () => void;
  private readonly sockets = new Set<Socket>();
  private readonly log: Logger;

  constructor(private readonly opts: ServerOptions) {
    this.log = opts.log ?? silentLogger;
    this.firstCertificate = new Promise((r) => (this.resolveFirst = r));
    // No certificate yet: listen() waits for the first setCertificate, so no handshake ever lacks one.
    this.server = https.createServer(
      {
        minVersion: 'TLSv1.2',
        keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
        headersTimeout: HEADERS_TIMEOUT_MS,
        requestTimeout: REQUEST_TIMEOUT_MS,
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
    this.server.on('secureConnection', (s: TaggedSocket) => {
      s[SERVED] = s.getX509Certificate()?.fingerprint256;
    });
    // Node 20 takes these from the assignment rather than from the options in some paths; set both.
    this.server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    this.server.headersTimeout = HEADERS_TIMEOUT_MS;
    this.server.requestTimeout = REQUEST_TIMEOUT_MS;
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
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
    this.server.setSecureContext(tlsOptions(certPem, keyPem));
    this.fingerprint = new X509Certificate(certPem).fingerprint256;
    const first = !this.loaded;
    this.loaded = true;
    this.opts.metrics?.tlsReloads.inc({ result: 'loaded' });
    this.opts.metrics?.tlsNotAfter.set(info.notAfter.getTime() / 1000);
    this.log.info(first ? 'serving certificate loaded' : 'serving certificate reloaded', {
      subject: info.subject,
      notAfter: info.notAfter.toISOString(),
      fingerprint: info.fingerprint,
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
    await new Promise<void>((ok, fail) => {
      this.server.once('error', fail);
      this.server.listen(this.opts.port, this.opts.host, () => {
        this.server.off('error', fail);
        ok();
      });
    });
    return (this.server.address() as AddressInfo).port;
  }

  /** Marks the server as draining (readiness goes false, answers carry Connection: close). */
  beginDrain(): void {
    this.closing = true;
  }

  /**
   * Stops accepting, closes idle kept-alive connections, waits for in-flight requests to finish
   * (up to `timeoutMs`, then cuts what is left) and resolves when the listener is closed.
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
      this.log.warn('drain timeout; closing remaining connections', { open: this.sockets.size });
      this.server.closeAllConnections();
      for (const s of this.sockets) s.destroy();
    }, timeoutMs);
    timer.unref();
    // A socket that finished its request while draining goes idle; close those as they appear.
    const sweep = setInterval(() => this.server.closeIdleConnections(), 100);
    sweep.unref();
    await closed;
    clearTimeout(timer);
    clearInterval(sweep);
    return { forced };
  }
}
