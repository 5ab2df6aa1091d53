/**
 * Plain HTTP for the kubelet and scrapers, on a port of its own: GET (or HEAD) /healthz, /readyz and
 * /metrics, nothing else. Both services serve it the same way; it never serves a review, so it needs no
 * TLS and no client certificate (admission's HTTPS port may demand the API server's certificate).
 */
import http from 'node:http';
import { listenOn } from './listen.js';

export interface Readiness {
  ready: boolean;
  /** Why not, for the /readyz body (empty when ready). */
  reasons: string[];
}

/** What /metrics serves: a prom-client Registry fits. */
export interface MetricsSource {
  metrics(): Promise<string>;
  readonly contentType: string;
}

export interface ProbeServerOptions {
  host: string;
  port: number;
  readiness: () => Readiness;
  metrics: MetricsSource;
}

export class ProbeServer {
  private readonly server: http.Server;

  constructor(private readonly opts: ProbeServerOptions) {
    this.server = http.createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      const send = (status: number, body: string, type = 'text/plain; charset=utf-8') => {
        res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      };
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('Allow', 'GET, HEAD');
        return send(405, 'only GET\n');
      }
      if (path === '/healthz') return send(200, 'ok\n');
      if (path === '/readyz') {
        const r = opts.readiness();
        return r.ready ? send(200, 'ok\n') : send(503, `not ready: ${r.reasons.join('; ')}\n`);
      }
      if (path === '/metrics') {
        opts.metrics.metrics().then(
          (text) => send(200, text, opts.metrics.contentType),
          () => send(500, 'metrics failed\n'),
        );
        return;
      }
      send(404, 'only /healthz, /readyz and /metrics here\n');
    });
    this.server.keepAliveTimeout = 5_000;
    this.server.headersTimeout = 10_000;
    this.server.requestTimeout = 10_000;
  }

  /** Binds (SO_REUSEPORT, see listen.ts) and resolves with the port. */
  listen(): Promise<number> {
    return listenOn(this.server, this.opts.port, this.opts.host);
  }

  async close(): Promise<void> {
    if (!this.server.listening) return;
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    this.server.closeAllConnections();
    await closed;
  }
}
