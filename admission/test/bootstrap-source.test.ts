/**
 * BootstrapCertificateSource against an in-memory API (Secrets, webhook configurations, events) that
 * applies JSON Patch `test` ops and create conflicts the way the API server does. Watching is off:
 * each test drives reconcile() itself, and simulates the other replica by writing to the fake.
 */
import { describe, expect, it } from '@jest/globals';
import {
  createCA,
  createServingCert,
  inspectCertificate,
  isIssuedBy,
  newPathToken,
  nextPathTokenData,
  PATH_TOKEN_KEY,
  PATH_TOKEN_PREVIOUS_KEY,
  splitPemBlocks,
} from '@kd-connections/certs';
import { KubeApiError, silentLogger, type EventInput, type KubeClient } from '@kd-connections/shared/runtime';
import { BootstrapCertificateSource } from '../src/tls/bootstrap-certificate-source.js';
import { generateCertificates } from '../src/tls/certificate-generator.js';
import type { SecretObject } from '@kd-connections/certs';

const NS = 'kd';
const SECRET_PATH = `/api/v1/namespaces/${NS}/secrets`;
const CONFIG = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hooks';

interface ClientConfig {
  caBundle?: string;
  url?: string;
  service?: { name: string; namespace: string; path?: string };
}

interface Call {
  method: string;
  path: string;
  status: number;
}

/** Just enough of the API server for the bootstrapper: one Secret, one validating configuration. */
class FakeApi {
  secret: SecretObject | undefined;
  config = {
    metadata: { name: 'hooks', resourceVersion: '1' },
    webhooks: [
      { name: 'a.example.com', clientConfig: { url: 'https://127.0.0.1:1/a' } as ClientConfig },
      { name: 'b.example.com', clientConfig: { service: { name: 'svc', namespace: NS } } as ClientConfig },
    ],
  };
  calls: Call[] = [];
  events: EventInput[] = [];
  private rv = 100;
  /** Every configuration patch refused (a policy engine, lost RBAC). */
  refuseConfigPatch = false;
  /** Runs before a Secret write is applied: another replica writing first. */
  beforeSecretWrite: (() => void) | undefined;

  client(): KubeClient {
    const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
      try {
        const out = this.handle(method, path, body);
        this.calls.push({ method, path, status: method === 'POST' ? 201 : 200 });
        return structuredClone(out);
      } catch (e) {
        this.calls.push({ method, path, status: (e as KubeApiError).status });
        throw e;
      }
    };
    return {
      get: (path: string) => call('GET', path),
      request: (method: string, path: string, o: { body?: unknown } = {}) => call(method, path, o.body),
      jsonPatch: (path: string, ops: unknown[]) => call('PATCH', path, ops),
      close: () => undefined,
    } as unknown as KubeClient;
  }

  private handle(method: string, path: string, body?: unknown): unknown {
    const fail = (status: number, message: string) => new KubeApiError(status, 'Failure', message);
    // As KubeClient.jsonPatch reports a failed `test` (its dry run of the tests alone failed too).
    const testFailed = () =>
      new KubeApiError(
        422,
        'Invalid',
        'the server rejected our request due to an error in our request',
        undefined,
        undefined,
        'test-failed',
      );
    const ops = body as { op: string; path: string; value: unknown }[];
    const key = `${method} ${path}`;
    if (key === `GET ${SECRET_PATH}/tls`) {
      if (!this.secret) throw fail(404, 'not found');
      return this.secret;
    }
    if (key === `POST ${SECRET_PATH}`) {
      this.beforeSecretWrite?.();
      if (this.secret) throw fail(409, 'secrets "tls" already exists');
      this.secret = structuredClone(body) as SecretObject;
      this.secret.metadata.resourceVersion = String(++this.rv);
      this.secret.metadata.uid = 'uid-1';
      return this.secret;
    }
    if (key === `PATCH ${SECRET_PATH}/tls`) {
      this.beforeSecretWrite?.();
      if (!this.secret) throw fail(404, 'not found');
      const rv = ops.find((o) => o.op === 'test' && o.path === '/metadata/resourceVersion');
      if (rv && rv.value !== this.secret.metadata.resourceVersion) throw testFailed();
      if (this.secret.immutable) throw fail(422, 'data: Forbidden: field is immutable when `immutable` is set');
      for (const o of ops) {
        if (o.op === 'add' && o.path === '/data') this.secret.data = o.value as Record<string, string>;
        else if (o.op === 'add' && o.path.startsWith('/data/')) this.secret.data![o.path.slice(6)] = o.value as string;
      }
      this.secret.metadata.resourceVersion = String(++this.rv);
      return this.secret;
    }
    if (key === `GET ${CONFIG}`) return this.config;
    if (key === `PATCH ${CONFIG}`) {
      if (this.refuseConfigPatch) throw fail(403, 'forbidden: a policy refuses webhook configuration changes');
      for (const o of ops.filter((x) => x.op === 'test')) {
        const actual =
          o.path === '/metadata/resourceVersion'
            ? this.config.metadata.resourceVersion
            : this.config.webhooks[Number(o.path.split('/')[2])]?.name;
        if (actual !== o.value) throw testFailed();
      }
      for (const o of ops.filter((x) => x.op === 'add')) {
        // /webhooks/<i>/clientConfig/<field>[/<field>]
        const [, , i, , field, sub] = o.path.split('/');
        const cc = this.config.webhooks[Number(i)]!.clientConfig as Record<string, unknown>;
        if (sub) (cc[field!] as Record<string, unknown>)[sub] = o.value;
        else cc[field!] = o.value;
      }
      this.config.metadata.resourceVersion = String(++this.rv);
      return this.config;
    }
    throw fail(500, `fake: no route for ${key}`);
  }

  secretWrites(): Call[] {
    return this.calls.filter((c) => c.path.startsWith(SECRET_PATH) && c.method !== 'GET');
  }

  bundle(): string[] {
    const pem = Buffer.from(this.config.webhooks[0]!.clientConfig.caBundle ?? '', 'base64').toString();
    return splitPemBlocks(pem).map((b) => inspectCertificate(b.pem).fingerprint256);
  }

  secretPem(key: string): string {
    return Buffer.from(this.secret?.data?.[key] ?? '', 'base64').toString();
  }
}

class Sink {
  installed: string[] = [];
  setCertificate(certPem: string): void {
    this.installed.push(inspectCertificate(certPem).fingerprint256);
  }
}

const BITS = 1024;
const fp = (pem: string) => inspectCertificate(pem).fingerprint256;

function source(
  api: FakeApi,
  over: {
    servingLifetimeMs?: number;
    now?: () => Date;
    routes?: (name: string) => string | undefined;
    pathToken?: boolean;
    pathTokenRotationMs?: number;
  } = {},
) {
  return new BootstrapCertificateSource({
    client: api.client(),
    secretNamespace: NS,
    secretName: 'tls',
    wanted: { service: { name: 'svc', namespace: NS }, ipAddresses: ['127.0.0.1'] },
    webhookConfigurations: [{ kind: 'validating', name: 'hooks' }],
    servingLifetimeMs: over.servingLifetimeMs ?? 3_600_000,
    caLifetimeMs: 36_000_000,
    log: silentLogger,
    events: { record: (e: EventInput) => void api.events.push(e) },
    identity: 'test-replica',
    generate: async (req) => generateCertificates(req),
    caPropagationDelayMs: 5,
    watch: false,
    keyBits: BITS,
    ...(over.now ? { now: over.now } : {}),
    ...(over.routes ? { webhookRoutes: over.routes, pathToken: over.pathToken ?? true } : {}),
    ...(over.pathTokenRotationMs !== undefined ? { pathTokenRotationMs: over.pathTokenRotationMs } : {}),
  });
}

/** A Secret as another replica would have written it. */
function otherReplicasSecret(): SecretObject {
  const ca = createCA({ keyBits: BITS, commonName: 'winner' });
  const leaf = createServingCert({
    ca,
    service: { name: 'svc', namespace: NS },
    ipAddresses: ['127.0.0.1'],
    keyBits: BITS,
  });
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  return {
    metadata: { name: 'tls', namespace: NS, resourceVersion: '50', uid: 'uid-winner' },
    type: 'kubernetes.io/tls',
    data: {
      'tls.crt': b64(leaf.certPem),
      'tls.key': b64(leaf.keyPem),
      'ca.crt': b64(ca.certPem),
      'ca.key': b64(ca.keyPem),
    },
  };
}

describe('BootstrapCertificateSource', () => {
  it('creates the Secret, publishing its CA before writing it, and serves the new pair', async () => {
    const api = new FakeApi();
    const sink = new Sink();
    const src = source(api);
    await src.start(sink);
    src.stop();
    expect(api.secret?.type).toBe('kubernetes.io/tls');
    const ca = api.secretPem('ca.crt');
    expect(isIssuedBy(api.secretPem('tls.crt'), ca)).toBe(true);
    expect(api.secretPem('ca.key')).toContain('PRIVATE KEY');
    expect(sink.installed).toEqual([fp(api.secretPem('tls.crt'))]);
    expect(api.bundle()).toEqual([fp(ca)]);
    // Trust before use: the configuration was patched before the Secret was created.
    const order = api.calls
      .filter((c) => c.method !== 'GET')
      .map((c) => `${c.method} ${c.path === CONFIG ? 'config' : 'secret'}`);
    expect(order).toEqual(['PATCH config', 'POST secret']);
    expect(src.notReadyReasons()).toEqual([]);
    expect(api.events.map((e) => [e.type, e.reason])).toEqual([['Normal', 'CertificateCreated']]);
  });

  it('losing the create race: serves the winner Secret and withdraws its own CA', async () => {
    const api = new FakeApi();
    const winner = otherReplicasSecret();
    api.beforeSecretWrite = () => {
      api.beforeSecretWrite = undefined;
      api.secret = winner;
    };
    const sink = new Sink();
    const src = source(api);
    await src.start(sink);
    src.stop();
    expect(api.secretWrites().map((c) => [c.method, c.status])).toEqual([['POST', 409]]);
    expect(sink.installed).toEqual([fp(api.secretPem('tls.crt'))]);
    expect(api.bundle()).toEqual([fp(api.secretPem('ca.crt'))]);
    expect(src.notReadyReasons()).toEqual([]);
  });

  it('a renewal conflict means another replica renewed: no second write, their pair is served', async () => {
    const api = new FakeApi();
    let now = new Date();
    const sink = new Sink();
    const src = source(api, { servingLifetimeMs: 60_000, now: () => now });
    await src.start(sink);
    const created = api.secretPem('tls.crt');
    // 50 s later the 60 s certificate is due; another replica renews first (same CA, new leaf).
    now = new Date(now.getTime() + 50_000);
    const theirs = generateCertificates({
      ca: { certPem: api.secretPem('ca.crt'), keyPem: api.secretPem('ca.key') },
      caLifetimeMs: 36_000_000,
      servingLifetimeMs: 60_000,
      service: { name: 'svc', namespace: NS },
      dnsNames: [],
      ipAddresses: ['127.0.0.1'],
      keyBits: BITS,
      now,
    });
    api.beforeSecretWrite = () => {
      api.beforeSecretWrite = undefined;
      api.secret!.data!['tls.crt'] = Buffer.from(theirs.serving.certPem).toString('base64');
      api.secret!.data!['tls.key'] = Buffer.from(theirs.serving.keyPem).toString('base64');
      api.secret!.metadata.resourceVersion = '999';
    };
    await src.reconcile();
    src.stop();
    expect(api.secretWrites().map((c) => [c.method, c.status])).toEqual([
      ['POST', 201],
      ['PATCH', 422],
    ]);
    expect(sink.installed).toEqual([fp(created), fp(theirs.serving.certPem)]);
  });

  it('an immutable broken Secret: reported, retried, not ready once the served certificate expires', async () => {
    const api = new FakeApi();
    let now = new Date();
    const sink = new Sink();
    const src = source(api, { servingLifetimeMs: 60_000, now: () => now });
    await src.start(sink);
    api.secret!.immutable = true;
    api.secret!.data!['tls.crt'] = Buffer.from('garbage').toString('base64');
    await src.reconcile();
    expect(api.secretWrites().map((c) => [c.method, c.status])).toEqual([['POST', 201]]); // no write attempted
    expect(src.notReadyReasons()).toEqual([]); // the pair in use is still valid
    const warnings = api.events.filter((e) => e.type === 'Warning').map((e) => e.reason);
    expect(warnings).toEqual(['CertificateSecretInvalid', 'CertificateBootstrapFailed']);
    expect(api.events.find((e) => e.reason === 'CertificateBootstrapFailed')!.note).toMatch(
      /immutable .* delete it and it is created again/,
    );
    now = new Date(now.getTime() + 61_000);
    const reasons = src.notReadyReasons();
    src.stop();
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/^serving certificate expired at .*: Secret kd\/tls is immutable/);
    expect(sink.installed).toHaveLength(1);
  });

  it('puts the CA back when the configuration lost its caBundle (e.g. a helm upgrade), without writing the Secret', async () => {
    const api = new FakeApi();
    const src = source(api);
    await src.start(new Sink());
    delete api.config.webhooks[0]!.clientConfig.caBundle;
    await src.reconcile();
    src.stop();
    expect(api.bundle()).toEqual([fp(api.secretPem('ca.crt'))]);
    expect(api.secretWrites()).toHaveLength(1);
  });

  describe('with a webhook path token', () => {
    const routes = (name: string) => ({ 'a.example.com': '/a', 'b.example.com': '/b' })[name];
    const paths = (api: FakeApi) => [
      api.config.webhooks[0]!.clientConfig.url,
      api.config.webhooks[1]!.clientConfig.service?.path,
    ];
    const tokenPaths = (t: string) => [`https://127.0.0.1:1/t/${t}/a`, `/t/${t}/b`];
    const tokenIn = (api: FakeApi) => Buffer.from(api.secret?.data?.[PATH_TOKEN_KEY] ?? '', 'base64').toString();

    it('keeps a token in the Secret, accepts it, and points the webhook at it', async () => {
      const api = new FakeApi();
      const src = source(api, { routes });
      expect(src.pathTokens()).toEqual([]);
      await src.start(new Sink());
      src.stop();
      const token = tokenIn(api);
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(src.pathTokens()).toEqual([token]);
      expect(paths(api)).toEqual(tokenPaths(token));
      expect(src.notReadyReasons()).toEqual([]);
    });

    it('a renewal carries the token over; a second replica uses the same one and writes nothing', async () => {
      let now = new Date();
      const api = new FakeApi();
      const first = source(api, { routes, servingLifetimeMs: 60_000, now: () => now });
      await first.start(new Sink());
      const token = tokenIn(api);
      const writes = api.secretWrites().length;
      const second = source(api, { routes, servingLifetimeMs: 60_000, now: () => now });
      await second.start(new Sink());
      expect(second.pathTokens()).toEqual([token]);
      expect(api.secretWrites()).toHaveLength(writes);
      now = new Date(now.getTime() + 45_000);
      await first.reconcile();
      first.stop();
      second.stop();
      expect(api.secretWrites().length).toBeGreaterThan(writes);
      expect(tokenIn(api)).toBe(token);
      expect(paths(api)).toEqual(tokenPaths(token));
    });

    it('adds a token to a Secret of an older version in one write, and puts a reset path back', async () => {
      const api = new FakeApi();
      api.secret = otherReplicasSecret();
      const src = source(api, { routes });
      await src.start(new Sink());
      expect(api.secretWrites().map((c) => c.method)).toEqual(['PATCH']);
      const token = tokenIn(api);
      expect(src.pathTokens()).toEqual([token]);
      api.config.webhooks[0]!.clientConfig.url = 'https://127.0.0.1:1/a';
      await src.reconcile();
      src.stop();
      expect(paths(api)).toEqual(tokenPaths(token));
      expect(api.secretWrites()).toHaveLength(1);
    });

    it('two replicas adding a token at once: the later one reads and uses the first one, no error', async () => {
      const api = new FakeApi();
      api.secret = otherReplicasSecret();
      const theirs = newPathToken();
      let raced = false;
      api.beforeSecretWrite = () => {
        if (raced) return;
        raced = true;
        const written = nextPathTokenData(
          { current: undefined, previous: undefined, issuedAt: undefined },
          new Date(),
          theirs,
        );
        Object.assign(api.secret!.data!, written);
        api.secret!.metadata.resourceVersion = '77';
      };
      const src = source(api, { routes });
      await src.start(new Sink());
      src.stop();
      expect(src.pathTokens()).toEqual([theirs]);
      expect(paths(api)).toEqual(tokenPaths(theirs));
      expect(api.secretWrites().map((c) => `${c.method} ${c.status}`)).toEqual(['PATCH 422']);
      expect(api.events.filter((e) => e.type === 'Warning')).toEqual([]);
      expect(src.notReadyReasons()).toEqual([]);
    });

    it('without the token, the paths it left are taken back to the bare routes', async () => {
      const api = new FakeApi();
      const on = source(api, { routes });
      await on.start(new Sink());
      on.stop();
      const token = tokenIn(api);
      expect(paths(api)).toEqual(tokenPaths(token));
      const off = source(api, { routes, pathToken: false });
      await off.start(new Sink());
      off.stop();
      expect(off.pathTokens()).toEqual([]);
      expect(paths(api)).toEqual(['https://127.0.0.1:1/a', '/b']);
      expect(off.notReadyReasons()).toEqual([]);
    });

    it('a Secret deleted: created again with a new token; the old one stays accepted and published for the overlap', async () => {
      let now = new Date('2026-12-06T12:00:00Z');
      const later = (s: number) => (now = new Date(Date.parse('2026-12-06T12:00:00Z') + s * 1000));
      const api = new FakeApi();
      const src = source(api, { routes, now: () => now });
      await src.start(new Sink());
      const old = tokenIn(api);
      api.secret = undefined;
      later(1);
      await src.reconcile();
      const next = tokenIn(api);
      expect(next).not.toBe(old);
      expect(src.pathTokens()).toEqual([next, old]);
      expect(paths(api)).toEqual(tokenPaths(old));
      later(11);
      await src.reconcile();
      expect(paths(api)).toEqual(tokenPaths(next));
      expect(src.pathTokens()).toEqual([next, old]);
      // The overlap ends; later rotations never bring the old token back.
      later(302);
      await src.reconcile();
      expect(src.pathTokens()).toEqual([next]);
      later(3602);
      await src.reconcile();
      src.stop();
      expect(src.pathTokens()).not.toContain(old);
    });

    it('two replicas, one clock an hour ahead: one rotation, no path taken back, each accepts both while it may be called with either', async () => {
      const base = Date.parse('2026-12-06T12:00:00Z');
      let t = 0;
      const api = new FakeApi();
      const a = source(api, { routes, now: () => new Date(base + 3_600_000 + t * 1000) });
      const b = source(api, { routes, now: () => new Date(base + t * 1000) });
      await a.start(new Sink());
      await b.start(new Sink());
      const first = tokenIn(api);
      expect([a.pathTokens(), b.pathTokens()]).toEqual([[first], [first]]);
      // A's clock reaches the rotation an hour before B's.
      t = 3600;
      await a.reconcile();
      const second = tokenIn(api);
      expect(second).not.toBe(first);
      await b.reconcile();
      expect(paths(api)).toEqual(tokenPaths(first));
      expect([a.pathTokens(), b.pathTokens()]).toEqual([
        [second, first],
        [second, first],
      ]);
      t = 3610;
      await a.reconcile();
      expect(paths(api)).toEqual(tokenPaths(second));
      // B, still inside its own publishAfter, leaves A's newer path as it is.
      t = 3605 + 1;
      await b.reconcile();
      expect(paths(api)).toEqual(tokenPaths(second));
      expect(tokenIn(api)).toBe(second);
      a.stop();
      b.stop();
    });

    it('a publication that keeps failing keeps the previous token accepted past the overlap', async () => {
      let now = new Date('2026-12-06T12:00:00Z');
      const at = (s: number) => (now = new Date(Date.parse('2026-12-06T12:00:00Z') + s * 1000));
      const api = new FakeApi();
      const src = source(api, { routes, now: () => now, pathTokenRotationMs: 40_000 });
      await src.start(new Sink());
      const first = tokenIn(api);
      api.refuseConfigPatch = true;
      at(40);
      await src.reconcile();
      const second = tokenIn(api);
      at(51);
      await src.reconcile();
      at(65);
      await src.reconcile();
      // Past the 20 s overlap: the API servers still call the first token's path, so it is still accepted.
      expect(paths(api)).toEqual(tokenPaths(first));
      expect(src.pathTokens()).toEqual([second, first]);
      expect(api.events.map((e) => e.note).join('\n')).toContain('cannot set the webhook paths');
      expect(api.events.map((e) => e.note).join('\n')).not.toContain(second);
      api.refuseConfigPatch = false;
      at(66);
      await src.reconcile();
      expect(paths(api)).toEqual(tokenPaths(second));
      expect(src.pathTokens()).toEqual([second]);
      src.stop();
    });

    it('an immutable Secret without a token: said so, retried, not ready (every review would be refused)', async () => {
      const api = new FakeApi();
      api.secret = { ...otherReplicasSecret(), immutable: true };
      const sink = new Sink();
      const src = source(api, { routes });
      await src.start(sink);
      src.stop();
      expect(src.pathTokens()).toEqual([]);
      expect(sink.installed).toHaveLength(1);
      expect(src.notReadyReasons()).toEqual([expect.stringContaining('no webhook path token from Secret kd/tls yet')]);
      expect(paths(api)).toEqual(['https://127.0.0.1:1/a', undefined]);
      expect(api.events.map((e) => [e.type, e.reason, e.note])).toContainEqual([
        'Warning',
        'CertificateBootstrapFailed',
        expect.stringContaining(`is immutable and holds no valid ${PATH_TOKEN_KEY}; delete it`),
      ]);
    });

    it('rotates: the new token published only after publishAfter, the previous accepted through its grace', async () => {
      let now = new Date('2026-12-06T12:00:00Z');
      const api = new FakeApi();
      // rotation 40 s: publish after 10 s, previous accepted for 20 s.
      const src = source(api, { routes, now: () => now, pathTokenRotationMs: 40_000 });
      await src.start(new Sink());
      const first = tokenIn(api);
      expect(paths(api)).toEqual(tokenPaths(first));
      const at = async (seconds: number) => {
        now = new Date(Date.parse('2026-12-06T12:00:00Z') + seconds * 1000);
        await src.reconcile();
        return { tokens: src.pathTokens(), paths: paths(api), current: tokenIn(api) };
      };
      expect((await at(39)).current).toBe(first);
      const rotated = await at(40);
      const second = rotated.current;
      expect(second).not.toBe(first);
      // Written, not yet published: the API servers keep calling the first, which every replica accepts.
      expect(rotated).toEqual({ tokens: [second, first], paths: tokenPaths(first), current: second });
      expect(await at(50)).toEqual({ tokens: [second, first], paths: tokenPaths(second), current: second });
      expect(await at(60)).toEqual({ tokens: [second], paths: tokenPaths(second), current: second });
      const third = (await at(80)).current;
      expect([third === second, third === first]).toEqual([false, false]);
      src.stop();
      expect(Buffer.from(api.secret!.data![PATH_TOKEN_PREVIOUS_KEY]!, 'base64').toString()).toBe(second);
    });
  });
});
