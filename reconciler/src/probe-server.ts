/** Plain HTTP /healthz, /readyz and /metrics for the kubelet and Prometheus. */
import http from 'node:http';
import type { AddressInfo, ListenOptions } from 'node:net';
import type { Registry } from 'prom-client';

export interface ProbeServer {
  port: number;
  close(): Promise<void>;
}

export async function startProbeServer(
  host: string,
  port: number,
  ready: () => boolean,
  registry: Registry,
): Promise<ProbeServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405, { Allow: 'GET' }).end();
    } else if (path === '/healthz') {
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const ok = ready();
      res.writeHead(ok ? 200 : 503, { 'Content-Type': 'text/plain' }).end(ok ? 'ok\n' : 'caches not synced\n');
    } else if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        (e: Error) => res.writeHead(500).end(e.message),
      );
    } else {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    }
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    // SO_REUSEPORT (Node >= 22.12): on the host network the next pod of a rolling update binds beside this one.
    server.listen({ reusePort: true, port, host } as ListenOptions, () => ok());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
