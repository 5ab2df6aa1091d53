/**
 * The baselines of the direct admission benchmark, run as a process of its own (forked with IPC), two
 * bare `node:https` servers with the same TLS settings as the admission service (the very `tlsOptions`
 * of admission/dist, and the same server timeouts):
 * - "baseline" (the reference of the throughput target): reads each request body to the end and answers one fixed AdmissionReview —
 *   the cost of TLS and HTTP alone;
 * - "minimal": the least a webhook the API server accepts can do — parses the body, and answers with
 *   the request's uid and a one-operation JSON Patch built and base64-encoded per request.
 * Only one of them is under load at a time, so the process's CPU time belongs to that one.
 *
 * IPC: the parent sends {cert, key, answer}; this process replies {ports}, then answers {cmd: 'stats'}
 * with its process.cpuUsage(), RSS and the number of requests each server served.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { SecureContextOptions } from 'node:tls';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot } from '../support/processes.js';

interface Setup {
  cert: string;
  key: string;
  answer: string;
}

export interface ServerStats {
  cpuMicros: number;
  rssBytes: number;
  served: number;
}

export type BaselineKind = 'baseline' | 'minimal';

const send = (m: unknown) => process.send!(m);

async function main(setup: Setup): Promise<void> {
  const certificate = join(repoRoot, 'admission/dist/tls/certificate.js');
  const server = join(repoRoot, 'admission/dist/server.js');
  const { tlsOptions, MIN_TLS_VERSION } = (await import(pathToFileURL(certificate).href)) as {
    tlsOptions: (cert: string, key: string) => SecureContextOptions;
    MIN_TLS_VERSION: string;
  };
  const t = (await import(pathToFileURL(server).href)) as Record<string, number>;
  const fixed = Buffer.from(setup.answer);
  const served: Record<BaselineKind, number> = { baseline: 0, minimal: 0 };
  const answer: Record<BaselineKind, (body: Buffer) => Buffer> = {
    baseline: () => fixed,
    minimal: (body) => {
      const review = JSON.parse(body.toString('utf8')) as { apiVersion: string; request: { uid: string } };
      const patch = [{ op: 'add', path: '/spec/configMetaGenerator', value: 2 }];
      return Buffer.from(
        JSON.stringify({
          apiVersion: review.apiVersion,
          kind: 'AdmissionReview',
          response: {
            uid: review.request.uid,
            allowed: true,
            patchType: 'JSONPatch',
            patch: Buffer.from(JSON.stringify(patch)).toString('base64'),
          },
        }),
      );
    },
  };
  const servers = (['baseline', 'minimal'] as const).map((kind) => {
    const srv = https.createServer({ minVersion: MIN_TLS_VERSION } as https.ServerOptions, (req, res) => {
      const chunks: Buffer[] = [];
      // The fixed answer needs the body read, not kept.
      req.on('data', kind === 'baseline' ? () => {} : (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        served[kind]++;
        const out = answer[kind](Buffer.concat(chunks));
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': out.length });
        res.end(out);
      });
    });
    srv.keepAliveTimeout = t.KEEP_ALIVE_TIMEOUT_MS!;
    srv.headersTimeout = t.HEADERS_TIMEOUT_MS!;
    srv.requestTimeout = t.REQUEST_TIMEOUT_MS!;
    srv.setSecureContext(tlsOptions(setup.cert, setup.key));
    return { kind, srv };
  });
  for (const { srv } of servers) await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  process.on('message', (m: { cmd?: string; kind?: BaselineKind }) => {
    if (m.cmd === 'stats') {
      const c = process.cpuUsage();
      const stats: ServerStats = {
        cpuMicros: c.user + c.system,
        rssBytes: process.memoryUsage().rss,
        served: served[m.kind ?? 'baseline'],
      };
      send({ stats });
    } else if (m.cmd === 'stop') {
      for (const { srv } of servers) {
        srv.closeAllConnections();
        srv.close();
      }
      process.exit(0);
    }
  });
  send({
    ports: Object.fromEntries(servers.map(({ kind, srv }) => [kind, (srv.address() as AddressInfo).port])),
  });
}

process.once('message', (m: Setup) => {
  main(m).catch((e) => {
    console.error(e);
    process.exit(1);
  });
});
process.on('disconnect', () => process.exit(0));
