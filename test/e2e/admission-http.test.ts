/**
 * The built service over real HTTPS, without the API server in between: every bad input, the TLS
 * settings, certificate hot reload, `--secret-connections=false`, and a SIGTERM drain.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import tls from 'node:tls';
import { createCA, createServingCert } from '@kd-connections/certs';
import { useTestEnv } from '../support/cluster.js';
import { httpsGet, type RunningAdmission, startAdmission } from '../support/services.js';
import { installCrds } from '../support/crds.js';
import { sleep } from '../support/processes.js';

const env = useTestEnv();
let svc: RunningAdmission;
const MAX = 7 * 1024 * 1024;

beforeAll(async () => {
  await installCrds(env);
  svc = await startAdmission(env, ['--secret-connections=false', '--tls-poll-interval=0.2', '--shutdown-delay=3']);
}, 60_000);

afterAll(async () => {
  await svc?.stop();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function post(path: string, body: string | undefined, headers: Record<string, string | number> = {}): Promise<Answer> {
  return new Promise((ok, fail) => {
    const req = https.request(
      svc.url(path),
      {
        method: 'POST',
        ca: env.info.webhookCaPem,
        agent: false,
        headers: {
          'Content-Type': 'application/json',
          ...(body !== undefined ? { 'Content-Length': Buffer.byteLength(body) } : {}),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

function review(overrides: Record<string, unknown> = {}, request: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'b1f0c2d3-0000-4000-8000-000000000001',
      kind: { group: 'kubedirector.hpe.com', version: 'v1beta1', kind: 'KubeDirectorCluster' },
      operation: 'CREATE',
      namespace: env.namespace,
      name: 'probe',
      object: {
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        metadata: { name: 'probe', namespace: env.namespace },
        spec: { app: 'postgres', connections: { secrets: ['db-creds'] } },
      },
      ...request,
    },
    ...overrides,
  });
}

describe('reviews over HTTPS', () => {
  it('echo uid and apiVersion (v1 and v1beta1) and refuse Secret connections when they are disabled', async () => {
    for (const apiVersion of ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']) {
      const res = await post('/validate-kdcluster', review({ apiVersion }));
      expect(res.status).toBe(200);
      const out = JSON.parse(res.body);
      expect(out).toMatchObject({
        apiVersion,
        kind: 'AdmissionReview',
        response: { uid: 'b1f0c2d3-0000-4000-8000-000000000001', allowed: false },
      });
      expect(out.response.status.message).toContain(
        '- spec.connections.secrets[0]: secret connections are disabled in this installation',
      );
    }
  });

  it('keeps connections alive for 100 s', async () => {
    const agent = new https.Agent({ keepAlive: true });
    try {
      const res = await new Promise<Answer>((ok, fail) => {
        https
          .get(svc.url('/healthz'), { ca: env.info.webhookCaPem, agent }, (r) => {
            r.resume();
            r.on('end', () => ok({ status: r.statusCode ?? 0, headers: r.headers, body: '' }));
          })
          .on('error', fail);
      });
      expect(res.headers.connection).toBe('keep-alive');
      expect(res.headers['keep-alive']).toBe('timeout=100');
    } finally {
      agent.destroy();
    }
  });

  it('does not watch Secrets when Secret connections are disabled', async () => {
    const metrics = await svc.metrics();
    expect(metrics).toMatch(/^kd_admission_cache_objects\{cache="configmaps"\} \d+$/m);
    expect(metrics).not.toContain('cache="secrets"');
    expect(metrics).toMatch(/^kd_admission_ready 1$/m);
  });
});

describe('bad input over HTTPS', () => {
  const cases: [string, () => Promise<Answer>, number, string][] = [
    [
      'a wrong content type',
      () => post('/validate-kdcluster', review(), { 'Content-Type': 'application/yaml' }),
      415,
      'Content-Type must be application/json, got "application/yaml"',
    ],
    ['bad JSON', () => post('/mutate-kdcluster', '{"apiVersion":'), 400, 'request body is not valid JSON: '],
    ['an empty body', () => post('/mutate-kdcluster', ''), 400, 'request body is empty; expected an AdmissionReview'],
    [
      'a wrong kind',
      () => post('/validate-kdapp', review({ kind: 'Status' })),
      400,
      'kind must be "AdmissionReview", got "Status"',
    ],
    [
      'a wrong apiVersion',
      () => post('/mutate-pod', review({ apiVersion: 'admission.k8s.io/v2alpha1' })),
      400,
      'apiVersion must be "admission.k8s.io/v1" (or v1beta1), got "admission.k8s.io/v2alpha1"',
    ],
    [
      'a missing request',
      () => post('/validate-kdcluster', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' })),
      400,
      'request is missing: an AdmissionReview sent to a webhook carries a request',
    ],
    [
      'a missing request.uid',
      () => post('/validate-kdcluster', review({}, { uid: undefined })),
      400,
      'request.uid is missing or empty (got nothing): the API server matches the response to the request by it',
    ],
    [
      'a declared body over 7 MiB',
      () => post('/validate-kdcluster', undefined, { 'Content-Length': MAX + 1 }),
      413,
      `request body of ${MAX + 1} bytes exceeds the limit of ${MAX} bytes (7 MiB)`,
    ],
    [
      'GET on a webhook path',
      () => httpsGet(svc.url('/mutate-pod'), env.info.webhookCaPem),
      405,
      'method GET not allowed; POST an AdmissionReview',
    ],
    ['an unknown path', () => post('/convert', review()), 404, 'no webhook at /convert'],
  ];
  it.each(cases)('%s', async (_what, send, status, message) => {
    const res = await send();
    expect(res.status).toBe(status);
    if (message.endsWith(': ')) expect(res.body.startsWith(message)).toBe(true);
    else expect(res.body).toBe(message + '\n');
  });

  it('answers 413 to a chunked body past 7 MiB that never ends', async () => {
    const res = await new Promise<Answer>((ok, fail) => {
      let answered = false;
      const req = https.request(svc.url('/validate-kdcluster'), {
        method: 'POST',
        ca: env.info.webhookCaPem,
        agent: false,
        headers: { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' },
      });
      req.on('response', (r) => {
        answered = true;
        let body = '';
        r.on('data', (c: Buffer) => (body += c.toString()));
        r.on('end', () => ok({ status: r.statusCode ?? 0, headers: r.headers, body }));
      });
      req.on('error', (e) => (answered ? undefined : fail(e)));
      const chunk = Buffer.alloc(256 * 1024, 0x20);
      let sent = 0;
      const pump = () => {
        while (!answered && sent <= MAX) {
          const n = Math.min(chunk.length, MAX + 1 - sent);
          sent += n;
          if (!req.write(chunk.subarray(0, n))) return void req.once('drain', pump);
        }
      };
      pump();
    });
    expect(res.status).toBe(413);
    expect(res.body).toBe(`request body exceeds the limit of ${MAX} bytes (7 MiB)\n`);
    expect(res.headers.connection).toBe('close');
  });

  it('counted every refusal and is still healthy', async () => {
    expect(await svc.requests({ result: 'rejected' })).toBeGreaterThanOrEqual(8);
    expect((await httpsGet(svc.url('/healthz'), env.info.webhookCaPem)).status).toBe(200);
    expect(svc.logs().filter((l) => l.level === 'error')).toEqual([]);
  });
});

function handshake(
  opts: tls.ConnectionOptions,
): Promise<{ protocol: string | null; cipher: string; fingerprint: string }> {
  return new Promise((ok, fail) => {
    const s = tls.connect({ host: '127.0.0.1', port: svc.port, ...opts }, () => {
      ok({
        protocol: s.getProtocol(),
        cipher: s.getCipher().name,
        fingerprint: s.getPeerX509Certificate()?.fingerprint256 ?? '',
      });
      s.end();
    });
    s.on('error', fail);
  });
}

describe('TLS', () => {
  it('speaks TLS ≥ 1.2 with AEAD suites only', async () => {
    const ca = env.info.webhookCaPem;
    expect((await handshake({ ca })).protocol).toBe('TLSv1.3');
    expect((await handshake({ ca, maxVersion: 'TLSv1.2' })).cipher).toMatch(/GCM|CHACHA20/);
    await expect(
      handshake({ ca, maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES256-SHA384:AES256-SHA' }),
    ).rejects.toThrow(/(sslv3|ssl\/tls) alert handshake failure/);
    await expect(
      handshake({ ca, minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }),
    ).rejects.toThrow(/tlsv1 alert protocol version/);
  });

  it('reloads rotated certificate files without a restart', async () => {
    const original = new X509Certificate(env.info.webhookServing.certPem).fingerprint256;
    expect((await handshake({ ca: env.info.webhookCaPem })).fingerprint).toBe(original);
    const ca = createCA({ commonName: 'rotated-ca' });
    const next = createServingCert({ ca, ipAddresses: ['127.0.0.1'], commonName: 'rotated' });
    svc.writeCertificate(next.certPem, next.keyPem);
    const want = new X509Certificate(next.certPem).fingerprint256;
    for (let i = 0; ; i++) {
      const h = await handshake({ ca: ca.certPem }).catch(() => undefined);
      if (h?.fingerprint === want) break;
      if (i > 300) throw new Error('rotated certificate not served');
      await sleep(50);
    }
    expect(svc.logs().filter((l) => l.msg === 'serving certificate reloaded').length).toBeGreaterThanOrEqual(1);
    expect(svc.logs().filter((l) => l.msg === 'listening')).toHaveLength(1);
    // Back to the control plane's pair for the tests that follow.
    svc.writeCertificate(env.info.webhookServing.certPem, env.info.webhookServing.keyPem);
    for (let i = 0; ; i++) {
      const h = await handshake({ ca: env.info.webhookCaPem }).catch(() => undefined);
      if (h?.fingerprint === original) break;
      if (i > 300) throw new Error('original certificate not served again');
      await sleep(50);
    }
  });
});

describe('SIGTERM', () => {
  it('turns readiness off, stops accepting, finishes the in-flight review with Connection: close and exits 0', async () => {
    const body = review();
    const req = https.request(svc.url('/validate-kdcluster'), {
      method: 'POST',
      ca: env.info.webhookCaPem,
      agent: false,
      headers: {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        Expect: '100-continue',
      },
    });
    const answer = new Promise<Answer>((ok, fail) => {
      req.on('response', (r) => {
        let text = '';
        r.on('data', (c: Buffer) => (text += c.toString()));
        r.on('end', () => ok({ status: r.statusCode ?? 0, headers: r.headers, body: text }));
      });
      req.on('error', fail);
    });
    // "100 Continue" proves the server has the request (it is in flight, not an idle connection).
    const continued = new Promise<void>((r) => req.once('continue', () => r()));
    req.flushHeaders();
    await continued;
    req.write(body.slice(0, 50));

    svc.signal('SIGTERM');
    // Not ready at once, while still answering during --shutdown-delay...
    for (let i = 0; ; i++) {
      const r = await httpsGet(svc.url('/readyz'), env.info.webhookCaPem);
      if (r.status === 503) {
        expect(r.body).toBe('not ready: shutting down\n');
        expect(r.headers.connection).toBe('close');
        break;
      }
      if (i > 100) throw new Error('readiness never turned off');
      await sleep(20);
    }
    // ...then the listener closes: new connections are refused.
    for (let i = 0; ; i++) {
      const refused = await httpsGet(svc.url('/healthz'), env.info.webhookCaPem).then(
        () => false,
        (e: NodeJS.ErrnoException) => e.code === 'ECONNREFUSED',
      );
      if (refused) break;
      if (i > 400) throw new Error('listener never closed');
      await sleep(25);
    }
    expect(svc.logs().some((l) => l.msg === 'stopped')).toBe(false);

    req.end(body.slice(50));
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.headers.connection).toBe('close');
    expect(JSON.parse(res.body).response.uid).toBe('b1f0c2d3-0000-4000-8000-000000000001');
    expect(await svc.exit).toEqual({ code: 0, signal: null });
    expect(svc.logs().find((l) => l.msg === 'stopped')).toMatchObject({ forced: false });
  });
});
