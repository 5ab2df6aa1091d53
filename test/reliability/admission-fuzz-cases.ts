/**
 * Generated bad input for the admission service (fast-check arbitraries), and the oracle that says
 * which answer each one must get. The oracle is written from the admission rules as documented (admission/README.md,
 * docs/architecture.md), not from the service's code, so a regression there cannot hide in here:
 *
 *   unknown path → 404; a webhook path with a method other than POST → 405; Content-Type other than
 *   application/json or a Content-Encoding other than identity → 415; a body (declared or counted)
 *   over 7 MiB → 413; an empty body, bad JSON, or JSON that is not an AdmissionReview envelope
 *   (object, kind AdmissionReview, apiVersion admission.k8s.io/v1 or v1beta1, request an object with a
 *   non-empty string uid) → 400; anything else → 200 with a well-formed AdmissionReview response that
 *   echoes apiVersion and uid.
 */
import fc from 'fast-check';

export const MAX_BODY = 7 * 1024 * 1024;
export const WEBHOOK_PATHS = ['/validate-kdcluster', '/mutate-kdcluster', '/validate-kdapp', '/mutate-pod'] as const;

export interface FuzzCase {
  /** What the generator made, for failure messages. */
  label: string;
  method: string;
  path: string;
  headers: Record<string, string | number>;
  body: Buffer;
  /** No Content-Length: the body goes chunked. */
  chunked?: boolean;
}

export type Expected = { status: 200; apiVersion: string; uid: string } | { status: 400 | 404 | 405 | 413 | 415 };

/** Objects the namespace holds, so generated names hit the caches as well as miss them. */
export const EXISTING = { app: 'fuzz-app', configmap: 'fuzz-cm', secret: 'fuzz-secret', cluster: 'fuzz-peer' };

// ---------------------------------------------------------------------------------------------------
// Values

const NAMES = [
  EXISTING.app,
  EXISTING.configmap,
  EXISTING.secret,
  EXISTING.cluster,
  'missing-thing',
  'a'.repeat(63),
  'a'.repeat(64),
  `${'a'.repeat(61)}.b`,
  'a'.repeat(253),
  'a'.repeat(254),
  'a~b',
  'a/b',
  '~1',
  '~0',
  '~01',
  '/',
  '~',
  '..',
  '.',
  '',
  ' ',
  'UPPER',
  '-a',
  'a-',
  'a..b',
  'ünïcödé',
  '名前',
  '😀',
  'a\u0000b',
  '\ud800',
  'a\nb',
  '%2e%2e',
  '../kube-system',
];

const KEYS = [
  '~',
  '/',
  '~1',
  '~0',
  'a/b',
  'a~1b',
  '/~/',
  '__proto__',
  'constructor',
  'toString',
  'valueOf',
  'hasOwnProperty',
  '',
  ' ',
  '$ref',
  '名前',
  '\u0000',
  'kubedirector.hpe.com/kdcluster',
  'kubedirector.hpe.com/configmeta',
  'kubedirector.hpe.com/configmeta-volume',
];

/** Replaced by deeply nested JSON text after JSON.stringify (which itself would overflow the stack). */
const DEEP = /"@@deep:(\d+):(array|object)@@"/g;
const deepMarker = (depth: number, shape: 'array' | 'object') => `@@deep:${depth}:${shape}@@`;
function deepText(depth: number, shape: string): string {
  return shape === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

export const nameArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...NAMES) },
  { weight: 2, arbitrary: fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$/) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
);

const keyArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...KEYS) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
);

const hugeStringArb = fc.oneof(
  { weight: 20, arbitrary: fc.constant('x'.repeat(64 * 1024)) },
  { weight: 4, arbitrary: fc.constant('x'.repeat(512 * 1024)) },
  { weight: 1, arbitrary: fc.constant('é'.repeat(1024 * 1024)) },
);

const scalarArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, -0.5, 2 ** 53 + 1, 1e308, -1e308, Number.MAX_SAFE_INTEGER, 0.1),
  nameArb,
  fc.string({ unit: 'binary', maxLength: 200 }),
);

/** A wrong value of any type, sometimes big or deep. */
export const valueArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 15, arbitrary: scalarArb },
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: fc.dictionary(keyArb, scalarArb, { maxKeys: 6 }) },
  { weight: 2, arbitrary: fc.array(nameArb, { maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constant({ toString: 1, valueOf: 1 }) },
  { weight: 1, arbitrary: fc.constant([]) },
  { weight: 1, arbitrary: fc.constant({}) },
  {
    weight: 1,
    arbitrary: fc
      .record({ depth: fc.constantFrom(10, 100, 1000, 10_000, 100_000), shape: fc.constantFrom('array', 'object') })
      .map(({ depth, shape }) => deepMarker(depth, shape as 'array' | 'object')),
  },
  { weight: 1, arbitrary: hugeStringArb },
  { weight: 1, arbitrary: fc.array(fc.constantFrom(...NAMES), { minLength: 100, maxLength: 300 }) },
);

const uidArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: fc.uuid() },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 64 }) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '名前', '\ud800', 'x'.repeat(10_000), '"quoted"', '\u0000') },
  { weight: 1, arbitrary: scalarArb },
  { weight: 1, arbitrary: fc.constantFrom(undefined, null, 0, 1, true, [], {}, ['a']) },
);

// ---------------------------------------------------------------------------------------------------
// Reviews: realistic templates, then mutated

const G = 'kubedirector.hpe.com';
type Json = Record<string, any>;

function cluster(ns: string, name: string, connections: Json, generator?: unknown): Json {
  return {
    apiVersion: `${G}/v1beta1`,
    kind: 'KubeDirectorCluster',
    metadata: { name, namespace: ns, labels: { team: 'fuzz' }, annotations: { note: 'x' } },
    spec: {
      app: EXISTING.app,
      roles: [{ id: 'controller', members: 1, resources: { limits: { cpu: '1' } } }],
      connections,
      ...(generator !== undefined ? { configMetaGenerator: generator } : {}),
    },
  };
}

function app(ns: string, name: string, connectableTo: unknown): Json {
  return {
    apiVersion: `${G}/v1beta1`,
    kind: 'KubeDirectorApp',
    metadata: { name, namespace: ns },
    spec: {
      label: { name: 'fuzz' },
      distroID: 'fuzz/app',
      version: '1.2.3',
      category: 'fuzz',
      roles: [{ id: 'controller', cardinality: '1' }],
      ...(connectableTo !== undefined ? { connectable_to: connectableTo } : {}),
    },
  };
}

function pod(ns: string, name: string): Json {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: ns,
      labels: { 'kubedirector.hpe.com/kdcluster': EXISTING.cluster, 'kubedirector.hpe.com/role': 'controller' },
      annotations: {},
    },
    spec: {
      containers: [
        { name: 'app', image: 'registry.invalid/app:1', volumeMounts: [{ name: 'data', mountPath: '/data' }] },
        { name: 'side', image: 'registry.invalid/side:1' },
      ],
      volumes: [{ name: 'data', emptyDir: {} }],
    },
  };
}

function envelope(kind: { group: string; version: string; kind: string }, resource: string, request: Json): Json {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '00000000-0000-4000-8000-000000000000',
      kind,
      resource: { group: kind.group, version: kind.version, resource },
      requestKind: kind,
      requestResource: { group: kind.group, version: kind.version, resource },
      userInfo: { username: 'fuzz', groups: ['system:authenticated'] },
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
      ...request,
    },
  };
}

const CLUSTER_KIND = { group: G, version: 'v1beta1', kind: 'KubeDirectorCluster' };
const APP_KIND = { group: G, version: 'v1beta1', kind: 'KubeDirectorApp' };
const POD_KIND = { group: '', version: 'v1', kind: 'Pod' };

const connectionsArb = fc.record(
  {
    clusters: fc.array(nameArb, { maxLength: 4 }),
    configmaps: fc.array(nameArb, { maxLength: 4 }),
    secrets: fc.array(nameArb, { maxLength: 3 }),
  },
  { requiredKeys: [] },
);

const versionArb = fc.oneof(
  fc.constantFrom('1.2.3', '>=1 <2', '^1.0.0', '~1.2', '1.x', '*', '', 'not a version', '>=2.4 <3', '||', '1.2.3-rc.1'),
  fc.string({ maxLength: 20 }),
);
const connectableArb = fc.oneof(
  fc.constant(undefined),
  fc.constant([]),
  fc.array(
    fc.record({ category: nameArb, distroID: nameArb, version: versionArb, extra: valueArb }, { requiredKeys: [] }),
    { maxLength: 4 },
  ),
);

const operationArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('CREATE', 'UPDATE') },
  { weight: 1, arbitrary: fc.constantFrom('DELETE', 'CONNECT', 'create', '', 'PATCH') },
  { weight: 1, arbitrary: scalarArb },
);

interface Template {
  path: string;
  review: Json;
}

function clusterReviewArb(ns: string, path: string, generator: (gen: unknown) => unknown): fc.Arbitrary<Template> {
  return fc
    .record({
      name: nameArb,
      op: operationArb,
      now: connectionsArb,
      was: connectionsArb,
      gen: valueArb,
      oldGen: fc.nat(9),
    })
    .map(({ name, op, now, was, gen, oldGen }) => ({
      path,
      review: envelope(CLUSTER_KIND, 'kubedirectorclusters', {
        name,
        namespace: ns,
        operation: op,
        object: cluster(ns, name, now, generator(gen)),
        ...(op === 'UPDATE' ? { oldObject: cluster(ns, name, was, oldGen) } : {}),
      }),
    }));
}

function templateArb(ns: string): fc.Arbitrary<Template> {
  const objName = nameArb;
  return fc.oneof(
    // The validating webhook is only ever sent generators the schema allows; the mutating one sees
    // the object before the schema check, so any value.
    clusterReviewArb(ns, '/validate-kdcluster', (gen) => (typeof gen === 'number' ? gen : undefined)),
    clusterReviewArb(ns, '/mutate-kdcluster', (gen) => gen),
    fc
      .record({ name: objName, op: operationArb, now: connectableArb, was: connectableArb })
      .map(({ name, op, now, was }) => ({
        path: '/validate-kdapp',
        review: envelope(APP_KIND, 'kubedirectorapps', {
          name,
          namespace: ns,
          operation: op,
          object: app(ns, name, now),
          ...(op === 'UPDATE' ? { oldObject: app(ns, name, was) } : {}),
        }),
      })),
    fc.record({ name: objName, op: operationArb }).map(({ name, op }) => ({
      path: '/mutate-pod',
      review: envelope(POD_KIND, 'pods', { name, namespace: ns, operation: op, object: pod(ns, name) }),
    })),
  );
}

/** Every path (as a list of keys) into a JSON document. */
function paths(doc: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(prefix);
  if (out.length > 400) return out;
  if (Array.isArray(doc)) doc.forEach((v, i) => paths(v, [...prefix, i], out));
  else if (doc !== null && typeof doc === 'object')
    for (const [k, v] of Object.entries(doc)) paths(v, [...prefix, k], out);
  return out;
}

interface Mutation {
  at: number;
  action: 'delete' | 'replace' | 'addKey' | 'setUid';
  key: string;
  value: unknown;
  uid: unknown;
}

const mutationArb: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  action: fc.constantFrom('delete', 'replace', 'replace', 'addKey', 'setUid'),
  key: keyArb,
  value: valueArb,
  uid: uidArb,
});

function mutate(review: Json, mutation: Mutation): string {
  // fc.constant values are shared between samples: never let a document hold (or become) one of them.
  const m = { ...mutation, value: structuredClone(mutation.value), uid: structuredClone(mutation.uid) };
  if (m.action === 'setUid') {
    if (review.request && typeof review.request === 'object' && !Array.isArray(review.request)) {
      review.request.uid = m.uid;
      return `request.uid=${short(m.uid)}`;
    }
    return 'setUid on a request that is gone';
  }
  const all = paths(review).filter((p) => p.length > 0);
  if (all.length === 0) return 'nothing to mutate';
  const path = all[m.at % all.length]!;
  const parent = path.slice(0, -1).reduce<any>((o, k) => o[k], review);
  const last = path[path.length - 1]!;
  const where = path.join('.');
  if (m.action === 'delete') {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
    return `delete ${where}`;
  }
  if (m.action === 'addKey') {
    const target = parent[last];
    if (target !== null && typeof target === 'object' && !Array.isArray(target)) {
      Object.defineProperty(target, m.key, { value: m.value, enumerable: true, writable: true, configurable: true });
      return `add ${where}[${JSON.stringify(m.key)}]=${short(m.value)}`;
    }
  }
  parent[last] = m.value;
  return `set ${where}=${short(m.value)}`;
}

function short(v: unknown): string {
  const s = typeof v === 'string' ? JSON.stringify(v) : (JSON.stringify(v) ?? String(v));
  return s.length > 60 ? `${s.slice(0, 60)}…(${s.length})` : s;
}

function serialize(doc: unknown): string {
  return (JSON.stringify(doc) ?? '').replace(DEEP, (_m, depth: string, shape: string) =>
    deepText(Number(depth), shape),
  );
}

const json = { 'Content-Type': 'application/json' };

function post(
  label: string,
  path: string,
  text: string | Buffer,
  headers: Record<string, string | number> = json,
): FuzzCase {
  const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  return { label, method: 'POST', path, headers: { ...headers, 'Content-Length': body.length }, body };
}

/** A review from a template with 0-4 mutations, mostly to its own webhook, sometimes to another. */
function reviewCaseArb(ns: string): fc.Arbitrary<FuzzCase> {
  return fc
    .record({
      t: templateArb(ns),
      mutations: fc.array(mutationArb, { maxLength: 4 }),
      otherPath: fc.option(fc.constantFrom(...WEBHOOK_PATHS), { freq: 6 }),
      query: fc.constantFrom('', '', '', '?timeout=10s', '?timeout=%ZZ&x'),
      contentType: fc.constantFrom(
        'application/json',
        'application/json',
        'application/json; charset=utf-8',
        'Application/JSON',
      ),
    })
    .map(({ t, mutations, otherPath, query, contentType }) => {
      const review = structuredClone(t.review);
      const done = mutations.map((m) => mutate(review, m));
      const path = (otherPath ?? t.path) + query;
      return post(`review ${path} [${done.join('; ')}]`, path, serialize(review), { 'Content-Type': contentType });
    });
}

/** Bodies that are not a review at all. */
function garbageCaseArb(ns: string): fc.Arbitrary<FuzzCase> {
  const path = fc.constantFrom(...WEBHOOK_PATHS);
  const valid = templateArb(ns).map((t) => serialize(t.review));
  return fc.oneof(
    fc
      .record({ path, v: fc.jsonValue({ maxDepth: 4 }) })
      .map(({ path, v }) => post(`json value ${short(v)}`, path, serialize(v))),
    fc
      .record({ path, s: fc.string({ unit: 'binary', maxLength: 300 }) })
      .map(({ path, s }) => post(`text ${short(s)}`, path, s)),
    fc
      .record({ path, bytes: fc.uint8Array({ maxLength: 600 }) })
      .map(({ path, bytes }) => post(`${bytes.length} random bytes`, path, Buffer.from(bytes))),
    fc.record({ path, text: valid, cut: fc.double({ min: 0, max: 1, noNaN: true }) }).map(({ path, text, cut }) => {
      const at = Math.floor(text.length * cut);
      return post(`review truncated at ${at}/${text.length}`, path, text.slice(0, at));
    }),
    fc
      .record({ path, text: valid, junk: fc.constantFrom('\ufeff', 'x', ',', '}', ']', '\u0000', ' {}') })
      .map(({ path, text, junk }) =>
        junk === '\ufeff'
          ? post('review with a BOM', path, junk + text)
          : post(`review + ${short(junk)}`, path, text + junk),
      ),
    fc
      .record({ path, depth: fc.constantFrom(1000, 10_000, 100_000), shape: fc.constantFrom('array', 'object') })
      .map(({ path, depth, shape }) => post(`top-level ${shape} nested ${depth} deep`, path, deepText(depth, shape))),
    fc
      .record({
        path,
        v: valueArb,
        kind: fc.constantFrom('AdmissionReview', 'Status', 'admissionreview', ''),
        api: fc.constantFrom('admission.k8s.io/v1', 'admission.k8s.io/v1beta1', 'admission.k8s.io/v2', 'v1', ''),
      })
      .map(({ path, v, kind, api }) =>
        post(
          `envelope kind=${kind} apiVersion=${api} request=${short(v)}`,
          path,
          serialize({ apiVersion: api, kind, request: v }),
        ),
      ),
  );
}

/** HTTP-level wrongness: method, path, content type, encoding, declared length. */
function httpCaseArb(ns: string): fc.Arbitrary<FuzzCase> {
  const valid = templateArb(ns);
  return fc.oneof(
    fc
      .record({ t: valid, method: fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD') })
      .map(({ t, method }) => ({ ...post(`${method} ${t.path}`, t.path, serialize(t.review)), method })),
    fc
      .record({
        t: valid,
        method: fc.constantFrom('POST', 'GET', 'PUT'),
        path: fc.constantFrom(
          '/',
          '/convert',
          '/validate',
          '/validate-kdclusterx',
          '/validate-kdcluster/extra',
          '/mutate-pod/%2e%2e',
          '/%E0%A4%A',
          '/healthz/x',
          '/metrics/validate-kdcluster',
          '/v1/validate-kdcluster',
        ),
      })
      .map(({ t, method, path }) => ({ ...post(`${method} ${path}`, path, serialize(t.review)), method })),
    fc
      .record({
        t: valid,
        type: fc.constantFrom(
          undefined,
          '',
          'text/plain',
          'application/jsonp',
          'application/json-patch+json',
          'application/merge-patch+json',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/json,text/plain',
          'application/yaml',
          'json',
          '*/*',
        ),
      })
      .map(({ t, type }) => {
        const headers: Record<string, string | number> = type === undefined ? {} : { 'Content-Type': type };
        return post(`Content-Type ${String(type)}`, t.path, serialize(t.review), headers);
      }),
    fc
      .record({ t: valid, enc: fc.constantFrom('gzip', 'br', 'deflate', 'compress', '', 'identity', 'IDENTITY') })
      .map(({ t, enc }) =>
        post(`Content-Encoding ${JSON.stringify(enc)}`, t.path, serialize(t.review), {
          ...json,
          'Content-Encoding': enc,
        }),
      ),
    fc.record({ t: valid, len: fc.constantFrom(MAX_BODY + 1, 2 ** 31, 1e12) }).map(({ t, len }) => ({
      ...post(`declared Content-Length ${len}`, t.path, Buffer.alloc(0)),
      headers: { ...json, 'Content-Length': len },
      body: Buffer.alloc(0),
    })),
    valid.map((t) => ({ ...post('chunked review', t.path, serialize(t.review)), headers: json, chunked: true })),
  );
}

/** Fixed cases at the size limit (sent once each, not drawn): exactly 7 MiB and one byte more. */
export function sizeLimitCases(ns: string): FuzzCase[] {
  const base = envelope(CLUSTER_KIND, 'kubedirectorclusters', {
    uid: 'size-limit-uid',
    name: 'big',
    namespace: ns,
    operation: 'CREATE',
    object: { ...cluster(ns, 'big', {}), padding: '' },
  });
  const at = (size: number) => {
    base.request.object.padding = '';
    const empty = JSON.stringify(base).length;
    base.request.object.padding = 'p'.repeat(size - empty);
    const text = JSON.stringify(base);
    if (Buffer.byteLength(text) !== size) throw new Error('size-limit case has the wrong size');
    return text;
  };
  const exact = at(MAX_BODY);
  const over = at(MAX_BODY + 1);
  return [
    post('exactly 7 MiB', '/validate-kdcluster', exact),
    post('7 MiB + 1 byte', '/validate-kdcluster', over),
    { ...post('7 MiB + 1 byte, chunked', '/mutate-kdcluster', over), headers: json, chunked: true },
    { ...post('exactly 7 MiB, chunked', '/mutate-kdcluster', exact), headers: json, chunked: true },
  ];
}

/** The whole generator: reviews (most), garbage bodies and HTTP-level mistakes. */
export function caseArb(ns: string): fc.Arbitrary<FuzzCase> {
  return fc.oneof(
    { weight: 14, arbitrary: reviewCaseArb(ns) },
    { weight: 3, arbitrary: garbageCaseArb(ns) },
    { weight: 3, arbitrary: httpCaseArb(ns) },
  );
}

// ---------------------------------------------------------------------------------------------------
// Oracle

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export function expected(c: FuzzCase): Expected {
  const pathname = c.path.split('?')[0]!;
  if (!(WEBHOOK_PATHS as readonly string[]).includes(pathname)) return { status: 404 };
  if (c.method !== 'POST') return { status: 405 };
  const type = c.headers['Content-Type'];
  const media = String(type ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();
  if (media !== 'application/json') return { status: 415 };
  const enc = c.headers['Content-Encoding'];
  if (enc !== undefined && String(enc).toLowerCase() !== 'identity') return { status: 415 };
  const declared = c.headers['Content-Length'];
  if (declared !== undefined && Number(declared) > MAX_BODY) return { status: 413 };
  if (c.body.length > MAX_BODY) return { status: 413 };
  if (c.body.length === 0) return { status: 400 };
  let doc: unknown;
  try {
    doc = JSON.parse(c.body.toString('utf8'));
  } catch {
    return { status: 400 };
  }
  if (!isObject(doc) || doc.kind !== 'AdmissionReview') return { status: 400 };
  if (doc.apiVersion !== 'admission.k8s.io/v1' && doc.apiVersion !== 'admission.k8s.io/v1beta1') return { status: 400 };
  const request = doc.request;
  if (!isObject(request) || typeof request.uid !== 'string' || request.uid === '') return { status: 400 };
  return { status: 200, apiVersion: doc.apiVersion, uid: request.uid };
}

/** What is wrong with an answer, or undefined when it is the one the oracle expects. */
export function checkAnswer(
  c: FuzzCase,
  want: Expected,
  got: { status: number; headers: Record<string, string | string[] | undefined>; body: Buffer },
): string | undefined {
  if (got.status !== want.status)
    return `status ${got.status}, want ${want.status}: ${got.body.toString().slice(0, 300)}`;
  if (want.status === 405 && got.headers.allow !== 'POST') return `405 without Allow: POST`;
  if (want.status !== 200) {
    if (c.method !== 'HEAD' && got.body.toString().trim() === '') return `${got.status} without a message`;
    return undefined;
  }
  if (!String(got.headers['content-type']).startsWith('application/json'))
    return `content-type ${got.headers['content-type']}`;
  let out: any;
  try {
    out = JSON.parse(got.body.toString('utf8'));
  } catch {
    return `200 with a body that is not JSON: ${got.body.toString().slice(0, 200)}`;
  }
  if (out?.apiVersion !== want.apiVersion) return `apiVersion ${out?.apiVersion}, want ${want.apiVersion}`;
  if (out.kind !== 'AdmissionReview') return `kind ${out.kind}`;
  const r = out.response;
  if (!isObject(r)) return 'no response object';
  if (r.uid !== want.uid) return `uid ${short(r.uid)} is not the request's ${short(want.uid)}`;
  if (typeof r.allowed !== 'boolean') return `allowed is ${short(r.allowed)}`;
  if (!r.allowed) {
    const s = r.status as any;
    if (!isObject(s) || !Number.isInteger(s.code) || (s.code as number) < 400 || (s.code as number) > 599)
      return `a denial without a 4xx/5xx status code: ${short(s)}`;
    if (typeof s.message !== 'string' || s.message === '') return 'a denial without a message';
    if (r.patch !== undefined) return 'a denial with a patch';
  }
  if (r.patch !== undefined) {
    if (r.patchType !== 'JSONPatch') return `patchType ${short(r.patchType)}`;
    let ops: any;
    try {
      ops = JSON.parse(Buffer.from(String(r.patch), 'base64').toString('utf8'));
    } catch {
      return 'patch is not base64 JSON';
    }
    if (!Array.isArray(ops) || ops.length === 0) return `patch is not a non-empty array: ${short(ops)}`;
    for (const op of ops) {
      if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string' || !op.path.startsWith('/'))
        return `malformed patch operation ${short(op)}`;
    }
  }
  if (r.warnings !== undefined) {
    // eslint-disable-next-line no-control-regex
    if (!Array.isArray(r.warnings) || r.warnings.some((w) => typeof w !== 'string' || /[\u0000-\u001f]/.test(w)))
      return `warnings must be single-line strings: ${short(r.warnings)}`;
  }
  return undefined;
}
