/** The probes port both services serve: three read-only answers, nothing else. */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { ProbeServer } from '../src/runtime/probe-server.js';

let ready = false;
let metricsFail = false;
const server = new ProbeServer({
  host: '127.0.0.1',
  port: 0,
  readiness: () =>
    ready ? { ready: true, reasons: [] } : { ready: false, reasons: ['caches not synced', 'no lease'] },
  metrics: {
    contentType: 'text/plain; version=0.0.4; charset=utf-8',
    metrics: async () => {
      if (metricsFail) throw new Error('collector broke');
      return 'kd_up 1\n';
    },
  },
});
let port = 0;
beforeAll(async () => {
  port = await server.listen();
});
afterAll(() => server.close());

function ask(
  method: string,
  path: string,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('ProbeServer', () => {
  it('/healthz is ok; /readyz says why it is not ready, then ok', async () => {
    expect(await ask('GET', '/healthz')).toMatchObject({ status: 200, body: 'ok\n' });
    expect(await ask('GET', '/readyz')).toMatchObject({
      status: 503,
      body: 'not ready: caches not synced; no lease\n',
    });
    ready = true;
    expect(await ask('GET', '/readyz?verbose')).toMatchObject({ status: 200, body: 'ok\n' });
  });

  it('/metrics in the registry content type; 500 when collecting fails', async () => {
    const m = await ask('GET', '/metrics');
    expect({ status: m.status, body: m.body, type: m.headers['content-type'] }).toEqual({
      status: 200,
      body: 'kd_up 1\n',
      type: 'text/plain; version=0.0.4; charset=utf-8',
    });
    metricsFail = true;
    expect(await ask('GET', '/metrics')).toMatchObject({ status: 500, body: 'metrics failed\n' });
    metricsFail = false;
  });

  it('refuses writes with 405 and Allow, and any other path with 404', async () => {
    const post = await ask('POST', '/readyz');
    expect({ status: post.status, allow: post.headers.allow }).toEqual({ status: 405, allow: 'GET, HEAD' });
    expect(await ask('GET', '/validate-kdcluster')).toMatchObject({ status: 404 });
    expect((await ask('HEAD', '/healthz')).status).toBe(200);
  });
});
