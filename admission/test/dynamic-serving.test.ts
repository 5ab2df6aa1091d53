/**
 * DynamicServingSource against an in-memory API (Secrets, webhook configurations, events) that applies
 * JSON Patch `test` ops and create conflicts the way the API server does. Watching is off: each test
 * drives reconcile() itself, and simulates another replica with a second source on the same fake.
 */
import { describe, expect, it } from '@jest/globals';
import {
  createCA,
  createServingCert,
  inspectCertificate,
  splitPemBlocks,
  type SecretObject,
} from '@kd-connections/certs';
import { KubeApiError, silentLogger, type EventInput, type KubeClient } from '@kd-connections/shared/runtime';
import { DynamicServingSource } from '../src/tls/dynamic-serving.js';
import { pathToken } from '../src/path-token/path-token-rules.js';
import { certificateFacts, isIssuedBy } from '../../test/support/certificate-facts.js';

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

/** Just enough of the API server for dynamic serving: one Secret, one validating configuration. */
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
  pems: string[] = [];
  setCertificate(certPem: string): void {
    this.installed.push(inspectCertificate(certPem).fingerprint256);
    this.pems.push(certPem);
  }
  get last(): string {
    return this.pems.at(-1)!;
  }
}

const BITS = 1024;
const HOUR = 3_600_000;
const fp = (pem: string) => inspectCertificate(pem).fingerprint256;
const routes = (name: string) => ({ 'a.example.com': '/a', 'b.example.com': '/b' })[name];

interface Over {
  servingLifetimeMs?: number;
  caLifetimeMs?: number;
  now?: () => Date;
  pathToken?: boolean;
  pathTokenRotationMs?: number;
  caPropagationDelayMs?: number;
}

function source(api: FakeApi, over: Over = {}) {
  return new DynamicServingSource({
    client: api.client(),
    secretNamespace: NS,
    secretName: 'tls',
    wanted: { service: { name: 'svc', namespace: NS }, ipAddresses: ['127.0.0.1'] },
    webhookConfigurations: [{ kind: 'validating', name: 'hooks' }],
    servingLifetimeMs: over.servingLifetimeMs ?? HOUR,
    caLifetimeMs: over.caLifetimeMs ?? 10 * HOUR,
    log: silentLogger,
    events: { record: (e: EventInput) => void api.events.push(e) },
    identity: 'test-replica',
    caPropagationDelayMs: over.caPropagationDelayMs ?? 0,
    pruneAfterMs: 1_000,
    watch: false,
    keyBits: BITS,
    ...(over.now ? { now: over.now } : {}),
    ...(over.pathToken !== undefined ? { webhookRoutes: routes, pathToken: over.pathToken } : {}),
    ...(over.pathTokenRotationMs !== undefined ? { pathTokenRotationMs: over.pathTokenRotationMs } : {}),
  });
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** A Secret as another replica (or, with `legacy`, an earlier version sharing one leaf) would have written it. */
function othersSecret(legacy = false): SecretObject {
  // 0.1.0's Secret is read on the tests' pinned clock (hours after the epoch).
  const when = legacy ? { now: new Date(0), lifetimeMs: 100 * HOUR } : {};
  const ca = createCA({ keyBits: BITS, commonName: 'winner', ...when });
  const leaf = createServingCert({ ca, service: { name: 'svc', namespace: NS }, keyBits: BITS, ...when });
  const data: Record<string, string> = legacy
    ? {
        'tls.crt': b64(leaf.certPem),
        'tls.key': b64(leaf.keyPem),
        'ca.crt': b64(ca.certPem),
        'ca.key': b64(ca.keyPem),
        'webhook-path-token': b64('L'.repeat(43)),
        'webhook-path-token-issued': b64(new Date(10 * HOUR).toISOString()),
      }
    : {
        'ca.crt': b64(ca.certPem),
        'ca.key': b64(ca.keyPem),
        'tls.crt': b64(ca.certPem),
        'tls.key': b64(ca.keyPem),
        'webhook-path-key': b64('k'.repeat(32)),
      };
  return {
    metadata: { name: 'tls', namespace: NS, resourceVersion: '50', uid: 'uid-winner' },
    type: 'kubernetes.io/tls',
    data,
  };
}

describe('DynamicServingSource', () => {
  it('creates the CA Secret, publishes the CA, and serves a leaf of its own that the Secret never holds', async () => {
    const api = new FakeApi();
    const sink = new Sink();
    const src = source(api);
    await src.start(sink);
    src.stop();
    expect(api.secret?.type).toBe('kubernetes.io/tls');
    const ca = inspectCertificate(api.secretPem('ca.crt'));
    expect(ca.isCA).toBe(true);
    expect(fp(api.secretPem('ca.crt'))).toBe(ca.fingerprint256);
    expect(Buffer.from(api.secret!.data!['webhook-path-key']!, 'base64')).toHaveLength(32);
    expect(sink.installed).toHaveLength(1);
    expect(isIssuedBy(sink.last, ca)).toBe(true);
    expect(Object.values(api.secret!.data!).map((v) => Buffer.from(v, 'base64').toString())).not.toContain(sink.last);
    expect(certificateFacts(sink.last).dnsNames).toContain('svc.kd.svc');
    expect(api.bundle()).toEqual([ca.fingerprint256]);
    const order = api.calls
      .filter((c) => c.method !== 'GET')
      .map((c) => `${c.method} ${c.path === CONFIG ? 'config' : 'secret'}`);
    expect(order).toEqual(['POST secret', 'PATCH config']);
    expect(src.notReadyReasons()).toEqual([]);
    expect(api.events.map((e) => [e.type, e.reason])).toEqual([['Normal', 'CACreated']]);
  });

  it('a second replica writes nothing and signs a leaf with a key of its own from the same CA', async () => {
    const api = new FakeApi();
    const [one, two] = [new Sink(), new Sink()];
    const a = source(api);
    await a.start(one);
    const writes = api.calls.filter((c) => c.method !== 'GET').length;
    const b = source(api);
    await b.start(two);
    a.stop();
    b.stop();
    expect(api.calls.filter((c) => c.method !== 'GET')).toHaveLength(writes);
    expect(two.installed).toHaveLength(1);
    expect(two.installed[0]).not.toBe(one.installed[0]);
    expect(isIssuedBy(two.last, api.secretPem('ca.crt'))).toBe(true);
  });

  it('losing the create race: signs from the winner CA', async () => {
    const api = new FakeApi();
    const winner = othersSecret();
    api.beforeSecretWrite = () => {
      api.beforeSecretWrite = undefined;
      api.secret = winner;
    };
    const sink = new Sink();
    const src = source(api);
    await src.start(sink);
    src.stop();
    expect(api.secretWrites().map((c) => [c.method, c.status])).toEqual([['POST', 409]]);
    expect(isIssuedBy(sink.last, api.secretPem('ca.crt'))).toBe(true);
    expect(api.bundle()).toEqual([fp(api.secretPem('ca.crt'))]);
  });

  it('signs only after the CA has been in every caBundle for the propagation delay', async () => {
    const api = new FakeApi();
    let now = new Date();
    const sink = new Sink();
    const src = source(api, { now: () => now, caPropagationDelayMs: 2_000 });
    await src.start(sink);
    expect(api.bundle()).toHaveLength(1);
    expect(sink.installed).toEqual([]);
    expect(src.notReadyReasons()[0]).toMatch(/^no serving certificate from the CA in Secret kd\/tls yet/);
    now = new Date(now.getTime() + 2_000);
    await src.reconcile();
    src.stop();
    expect(sink.installed).toHaveLength(1);
  });

  it('renews its leaf at two thirds of its lifetime without any write', async () => {
    const api = new FakeApi();
    let now = new Date();
    const sink = new Sink();
    const src = source(api, { servingLifetimeMs: 60_000, now: () => now });
    await src.start(sink);
    const writes = api.calls.filter((c) => c.method !== 'GET').length;
    now = new Date(now.getTime() + 30_000);
    await src.reconcile();
    expect(sink.installed).toHaveLength(1);
    now = new Date(now.getTime() + 11_000);
    await src.reconcile();
    src.stop();
    expect(sink.installed).toHaveLength(2);
    expect(api.calls.filter((c) => c.method !== 'GET')).toHaveLength(writes);
  });

  it('rotates the CA at two thirds: old and new CA trusted until no old leaf can be served, then the old one leaves', async () => {
    const api = new FakeApi();
    let now = new Date();
    const sink = new Sink();
    const src = source(api, { servingLifetimeMs: 60_000, caLifetimeMs: 3_000_000, now: () => now });
    await src.start(sink);
    const oldCA = fp(api.secretPem('ca.crt'));
    now = new Date(now.getTime() + 2_001_000);
    await src.reconcile();
    const newCA = fp(api.secretPem('ca.crt'));
    expect(newCA).not.toBe(oldCA);
    expect(splitPemBlocks(api.secretPem('ca-previous.crt')).map((b) => fp(b.pem))).toEqual([oldCA]);
    expect(api.bundle()).toEqual([newCA, oldCA]);
    expect(isIssuedBy(sink.last, api.secretPem('ca.crt'))).toBe(true);
    expect(api.events.map((e) => e.reason)).toEqual(['CACreated', 'CARotated']);
    // The new CA's notBefore (backdated 5 min) + 5 min + 30 s slack + one serving lifetime: the old CA is no
    // longer wanted…
    now = new Date(now.getTime() + 91_000);
    await src.reconcile();
    expect(api.bundle()).toEqual([newCA, oldCA]);
    // …and leaves the bundle once seen unwanted for pruneAfterMs.
    now = new Date(now.getTime() + 1_000);
    await src.reconcile();
    src.stop();
    expect(api.bundle()).toEqual([newCA]);
  });

  it('a rotation conflict means another replica rotated: no second write, their CA is used', async () => {
    const api = new FakeApi();
    let now = new Date();
    const sink = new Sink();
    const src = source(api, { caLifetimeMs: 600_000, servingLifetimeMs: 60_000, now: () => now });
    await src.start(sink);
    const theirs = othersSecret();
    api.beforeSecretWrite = () => {
      api.beforeSecretWrite = undefined;
      api.secret = { ...theirs, metadata: { ...theirs.metadata, resourceVersion: '999' } };
    };
    now = new Date(now.getTime() + 401_000);
    await src.reconcile();
    src.stop();
    expect(api.secretWrites().map((c) => [c.method, c.status])).toEqual([
      ['POST', 201],
      ['PATCH', 422],
    ]);
    expect(isIssuedBy(sink.last, api.secretPem('ca.crt'))).toBe(true);
    expect(api.secretPem('ca.crt')).toBe(Buffer.from(theirs.data!['ca.crt']!, 'base64').toString());
  });

  it('an immutable broken Secret: reported, retried, not ready once the served leaf expires', async () => {
    const api = new FakeApi();
    let now = new Date();
    const sink = new Sink();
    const src = source(api, { servingLifetimeMs: 60_000, now: () => now });
    await src.start(sink);
    api.secret!.immutable = true;
    api.secret!.data!['ca.crt'] = b64('garbage');
    await src.reconcile();
    expect(api.secretWrites().map((c) => [c.method, c.status])).toEqual([['POST', 201]]);
    expect(src.notReadyReasons()).toEqual([]);
    const warnings = api.events.filter((e) => e.type === 'Warning').map((e) => e.reason);
    expect(warnings).toEqual(['CertificateSecretInvalid', 'CertificateBootstrapFailed']);
    expect(api.events.find((e) => e.reason === 'CertificateBootstrapFailed')!.note).toMatch(
      /immutable .* delete it and it is created again/,
    );
    now = new Date(now.getTime() + 61_000);
    const reasons = src.notReadyReasons();
    src.stop();
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(
      /^serving certificate expired at .*: Secret kd\/tls: cannot write a new CA: the Secret is immutable/,
    );
    expect(sink.installed).toHaveLength(1);
  });

  it("0.1.0's Secret: the same CA, the 0.1.0 token kept published and accepted until no 0.1.0 replica can be left", async () => {
    const api = new FakeApi();
    api.secret = othersSecret(true);
    const legacy = 'L'.repeat(43);
    const ca = api.secretPem('ca.crt');
    api.config.webhooks[0]!.clientConfig.url = `https://127.0.0.1:1/t/${legacy}/a`;
    api.config.webhooks[0]!.clientConfig.caBundle = b64(ca);
    let now = 10 * HOUR + 60_000;
    const sink = new Sink();
    const src = source(api, { pathToken: true, now: () => new Date(now) });
    await src.start(sink);
    // One write: the path key added, the CA and 0.1.0's token untouched; 0.1.0's path left as it is.
    expect(api.secretWrites().map((c) => [c.method, c.status])).toEqual([['PATCH', 200]]);
    expect(fp(api.secretPem('ca.crt'))).toBe(fp(ca));
    expect(api.secretPem('webhook-path-token')).toBe(legacy);
    expect(api.bundle()).toEqual([fp(ca)]);
    expect(isIssuedBy(sink.last, ca)).toBe(true);
    expect(api.config.webhooks[0]!.clientConfig.url).toBe(`https://127.0.0.1:1/t/${legacy}/a`);
    expect(src.pathTokens()).toContain(legacy);
    // Two hours after the path key was added (and 0.1.0 last issued it), the token goes and the derived one
    // is published.
    now = 12 * HOUR + 59_000;
    await src.reconcile();
    expect(api.secret.data!['webhook-path-token']).toBeDefined();
    now = 12 * HOUR + 60_000;
    await src.reconcile();
    const t12 = pathToken(Buffer.from(api.secret.data!['webhook-path-key']!, 'base64'), 12);
    expect(api.secret.data!['webhook-path-token']).toBeUndefined();
    expect(api.config.webhooks[0]!.clientConfig.url).toBe(`https://127.0.0.1:1/t/${t12}/a`);
    expect(api.events.map((e) => e.reason)).toEqual(['PathKeyAdded', 'LegacyPathTokenRemoved']);
    expect(src.pathTokens()).toContain(legacy);
    now += 60_000;
    src.stop();
    expect(src.pathTokens()).not.toContain(legacy);
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
    const paths = (api: FakeApi) => [
      api.config.webhooks[0]!.clientConfig.url,
      api.config.webhooks[1]!.clientConfig.service?.path,
    ];
    const tokenPaths = (t: string) => [`https://127.0.0.1:1/t/${t}/a`, `/t/${t}/b`];
    const key = (api: FakeApi) => Buffer.from(api.secret!.data!['webhook-path-key']!, 'base64');
    const at = (ms: number) => () => new Date(ms);

    it('derives the token from the Secret key and the period, accepts it, and points every webhook at it', async () => {
      const api = new FakeApi();
      const t0 = 10 * HOUR + 600_000;
      const src = source(api, { pathToken: true, now: at(t0) });
      await src.start(new Sink());
      src.stop();
      const token = pathToken(key(api), 10);
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(paths(api)).toEqual(tokenPaths(token));
      expect(src.pathTokens()).toEqual([token]);
      // A second replica derives the same token and writes nothing.
      const writes = api.calls.filter((c) => c.method !== 'GET').length;
      const other = source(api, { pathToken: true, now: at(t0 + 1_000) });
      await other.start(new Sink());
      other.stop();
      expect(other.pathTokens()).toEqual([token]);
      expect(api.calls.filter((c) => c.method !== 'GET')).toHaveLength(writes);
    });

    it('rotates with the period: the previous token accepted through the grace, the next one within the skew', async () => {
      const api = new FakeApi();
      let now = 10 * HOUR + 600_000;
      const src = source(api, { pathToken: true, now: () => new Date(now) });
      await src.start(new Sink());
      const [t10, t11, t12] = [10, 11, 12].map((p) => pathToken(key(api), p)) as [string, string, string];
      now = 11 * HOUR - 10_000; // within the 30 s skew before period 11
      expect(src.pathTokens()).toEqual([t10, t11]);
      now = 11 * HOUR + 1_000;
      expect(src.pathTokens()).toEqual([t11, t10]); // not yet published by this replica
      // Published only 30 s into the period: a replica whose clock is behind accepts it by then.
      await src.reconcile();
      expect(paths(api)).toEqual(tokenPaths(t10));
      now = 11 * HOUR + 30_000;
      await src.reconcile();
      expect(paths(api)).toEqual(tokenPaths(t11));
      expect(src.pathTokens()).toEqual([t11, t10]);
      now = 11 * HOUR + 300_000; // grace over
      expect(src.pathTokens()).toEqual([t11]);
      // A replica whose clock runs ahead published period 12's token: this one leaves it there.
      api.config.webhooks[0]!.clientConfig.url = tokenPaths(t12)[0];
      now = 12 * HOUR - 20_000;
      await src.reconcile();
      src.stop();
      expect(paths(api)[0]).toBe(tokenPaths(t12)[0]);
      expect(src.pathTokens()).toEqual([t11, t12]);
    });

    it('a publication that keeps failing keeps the previous token accepted past the grace', async () => {
      const api = new FakeApi();
      let now = 10 * HOUR + 600_000;
      const src = source(api, { pathToken: true, now: () => new Date(now) });
      await src.start(new Sink());
      const t10 = pathToken(key(api), 10);
      api.refuseConfigPatch = true;
      now = 11 * HOUR + 400_000;
      await src.reconcile();
      expect(paths(api)).toEqual(tokenPaths(t10));
      expect(src.pathTokens()).toContain(t10);
      api.refuseConfigPatch = false;
      await src.reconcile();
      src.stop();
      expect(src.pathTokens()).not.toContain(t10);
    });

    it('turned off: the token paths it left are taken back to the bare routes', async () => {
      const api = new FakeApi();
      const on = source(api, { pathToken: true });
      await on.start(new Sink());
      on.stop();
      const off = source(api, { pathToken: false });
      await off.start(new Sink());
      off.stop();
      expect(paths(api)).toEqual(['https://127.0.0.1:1/a', '/b']);
      expect(off.pathTokens()).toEqual([]);
    });

    it('a Secret deleted: created again with a new key; the old tokens accepted until the new paths are out, plus a minute', async () => {
      const api = new FakeApi();
      let now = 10 * HOUR + 600_000;
      const src = source(api, { pathToken: true, now: () => new Date(now) });
      await src.start(new Sink());
      const old = pathToken(key(api), 10);
      api.secret = undefined;
      api.refuseConfigPatch = true;
      await src.reconcile();
      const fresh = pathToken(key(api), 10);
      expect(fresh).not.toBe(old);
      expect(paths(api)).toEqual(tokenPaths(old));
      now += 120_000;
      expect(src.pathTokens()).toEqual(expect.arrayContaining([fresh, old]));
      api.refuseConfigPatch = false;
      await src.reconcile();
      expect(paths(api)).toEqual(tokenPaths(fresh));
      now += 59_000;
      expect(src.pathTokens()).toContain(old);
      now += 1_000;
      src.stop();
      expect(src.pathTokens()).toEqual([fresh]);
    });

    it('turned off during an upgrade from 0.1.0: the paths behind its token go back to the bare routes', async () => {
      const api = new FakeApi();
      api.secret = othersSecret(true);
      api.config.webhooks[0]!.clientConfig.url = `https://127.0.0.1:1/t/${'L'.repeat(43)}/a`;
      const src = source(api, { pathToken: false, now: () => new Date(10 * HOUR + 60_000) });
      await src.start(new Sink());
      src.stop();
      expect(paths(api)).toEqual(['https://127.0.0.1:1/a', '/b']);
    });

    it('a Secret deleted: the new CA keeps the published one trusted; the old token published 10 s more, so the other replica learns the new key first', async () => {
      const api = new FakeApi();
      let now = 10 * HOUR + 600_000;
      const clock = () => new Date(now);
      const [a, b] = [source(api, { pathToken: true, now: clock }), source(api, { pathToken: true, now: clock })];
      const [sa, sb] = [new Sink(), new Sink()];
      await a.start(sa);
      await b.start(sb);
      const oldCA = fp(api.secretPem('ca.crt'));
      const old = pathToken(key(api), 10);
      api.secret = undefined;
      await a.reconcile();
      const fresh = pathToken(key(api), 10);
      // The CA every leaf is signed by stays in the Secret (as previous) and in the bundle.
      expect(splitPemBlocks(api.secretPem('ca-previous.crt')).map((x) => fp(x.pem))).toEqual([oldCA]);
      expect(api.bundle()).toEqual([fp(api.secretPem('ca.crt')), oldCA]);
      expect(paths(api)).toEqual(tokenPaths(old));
      expect(a.pathTokens()).toEqual(expect.arrayContaining([fresh, old]));
      await b.reconcile();
      expect(b.pathTokens()).toEqual(expect.arrayContaining([fresh, old]));
      now += 10_000;
      await a.reconcile();
      await b.reconcile();
      expect(paths(api)).toEqual(tokenPaths(fresh));
      expect([isIssuedBy(sa.last, api.secretPem('ca.crt')), isIssuedBy(sb.last, api.secretPem('ca.crt'))]).toEqual([
        true,
        true,
      ]);
      now += 60_000;
      a.stop();
      b.stop();
      expect([a.pathTokens(), b.pathTokens()]).toEqual([[fresh], [fresh]]);
    });

    it('an immutable Secret without a path key: said so, retried, no review accepted', async () => {
      const api = new FakeApi();
      const s = othersSecret();
      delete s.data!['webhook-path-key'];
      api.secret = { ...s, immutable: true };
      const src = source(api, { pathToken: true });
      await src.start(new Sink());
      src.stop();
      expect(src.pathTokens()).toEqual([]);
      expect(src.notReadyReasons()[0]).toMatch(/^no webhook path key from Secret kd\/tls yet: .*immutable/);
      expect(api.secretWrites()).toEqual([]);
    });
  });
});
