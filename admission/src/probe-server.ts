/**
 * Plain HTTP for the kubelet and scrapers: GET /healthz, /readyz and /metrics on a port of their own.
 * With client-certificate authentication on (--client-ca-file) the HTTPS port refuses every connection
 * without the API server's certificate, probes included; this port serves only these three read-only
 * answers, never a review, so it needs no TLS and no client certificate.
 */
import http from 'node:http';
import type { Readiness } from './app.js';
import type { AdmissionMetrics } from './metrics.js';
import { listenOn } from './listen.js';

export interface ProbeServerOptions {
  host: string;
  port: number;
  readiness: () => Readiness;
  metrics: AdmissionMetrics;
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
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'only GET\n');
      if (path === '/healthz') return send(200, 'ok\n');
      if (path === '/readyz') {
        const r = opts.readiness();
        return r.ready ? send(200, 'ok\n') : send(503, `not ready: ${r.reasons.join('; ')}\n`);
      }
      if (path === '/metrics') {
        opts.metrics.registry.metrics().then(
          (text) => send(200, text, opts.metrics.registry.contentType),
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

  async listen(): Promise<number> {
    return listenOn(this.server, this.opts.port, this.opts.host);
  }

  async close(): Promise<void> {
    if (!this.server.listening) return;
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    this.server.closeAllConnections();
    await closed;
  }
}
