/**
 * Hostile load against the running admission service: AdmissionReview builders for the reviews the
 * issue describes, a poster that records each answer's latency, and samplers for RSS (VmHWM) and
 * readiness while a flood runs. Used by admission-hostile-*.test.ts.
 */
import https from 'node:https';
import { procStatus } from './admission-support.js';

type Json = Record<string, unknown>;

const G = 'kubedirector.hpe.com';
export const CLUSTER_KIND = { group: G, version: 'v1beta1', kind: 'KubeDirectorCluster' };
export const APP_KIND = { group: G, version: 'v1beta1', kind: 'KubeDirectorApp' };

let uids = 0;

/** A CREATE review as the API server sends it. */
export function review(kind: typeof CLUSTER_KIND, namespace: string, object: Json): Buffer {
  const resource = kind.kind === 'KubeDirectorApp' ? 'kubedirectorapps' : 'kubedirectorclusters';
  const metadata = (object.metadata ?? {}) as Json;
  return Buffer.from(
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: `00000000-0000-4000-8000-${String(++uids).padStart(12, '0')}`,
        kind,
        resource: { group: G, version: 'v1beta1', resource },
        namespace,
        name: metadata.name,
        operation: 'CREATE',
        userInfo: { username: 'hostile', groups: ['system:authenticated'] },
        object: { ...object, metadata: { ...metadata, namespace } },
        dryRun: false,
      },
    }),
  );
}

/**
 * A kdapp review of about `bytes` bytes whose six connectable_to versions are each a unique, valid
 * semver range of a sixth of it (padding between two comparators, which semver collapses): what the
 * version memos kept whole before they were bounded in bytes. Returned as parts that share one
 * padding buffer, so a hundred of them in flight cost the test process almost nothing.
 */
export function hugeRangeAppReview(namespace: string, n: number, bytes: number): Buffer[] {
  const each = Math.floor((bytes - 2048) / 6);
  const marker = '@@PAD@@';
  const connectable_to = Array.from({ length: 6 }, (_, i) => ({ version: `>=1.${n}.${i}${marker} <9.${n}.${i}` }));
  const whole = review(APP_KIND, namespace, {
    apiVersion: `${G}/v1beta1`,
    kind: 'KubeDirectorApp',
    metadata: { name: `huge-${n}` },
    spec: { label: { name: 'x' }, distroID: 'x/y', version: '1.0', configSchemaVersion: 8, connectable_to },
  }).toString('utf8');
  const pad = padding(each);
  const parts: Buffer[] = [];
  const pieces = whole.split(marker);
  pieces.forEach((piece, i) => {
    parts.push(Buffer.from(piece));
    if (i < pieces.length - 1) parts.push(pad);
  });
  return parts;
}

const paddings = new Map<number, Buffer>();
function padding(n: number): Buffer {
  let b = paddings.get(n);
  if (!b) {
    b = Buffer.alloc(n, ' ');
    paddings.set(n, b);
  }
  return b;
}

/** A kdcluster review connecting `count` ConfigMaps (and optionally Secrets, clusters) that do not exist. */
export function manyConnectionsReview(
  namespace: string,
  name: string,
  app: string,
  counts: { configmaps?: number; secrets?: number; clusters?: number },
  padBytes = 0,
): Buffer {
  const names = (prefix: string, k = 0) => Array.from({ length: k }, (_, i) => `${prefix}-${name}-${i}`);
  return review(CLUSTER_KIND, namespace, {
    apiVersion: `${G}/v1beta1`,
    kind: 'KubeDirectorCluster',
    metadata: { name, ...(padBytes > 0 ? { annotations: { pad: 'p'.repeat(padBytes) } } : {}) },
    spec: {
      app,
      roles: [{ id: 'controller', members: 1 }],
      connections: {
        configmaps: names('cm', counts.configmaps),
        secrets: names('s', counts.secrets),
        clusters: names('c', counts.clusters),
      },
    },
  });
}

export interface Timed {
  status: number;
  /** The AdmissionReview's response when the answer was one. */
  response?: { allowed?: boolean; status?: { code?: number; message?: string } };
  text: string;
  ms: number;
}

/** POSTs `body` (one buffer, or parts written in order) and times the answer. */
export async function post(
  port: number,
  path: string,
  body: Buffer | Buffer[],
  ca: string,
  agent: https.Agent | false = false,
  /** For attack traffic: a connection the server drops before answering (EPIPE, ECONNRESET — e.g. its
   * request timeout ending a body that is still arriving on a loaded machine) counts as status 0 "reset". */
  resetIsAnswer = false,
): Promise<Timed> {
  const parts = Array.isArray(body) ? body : [body];
  const length = parts.reduce((n, p) => n + p.length, 0);
  const t0 = process.hrtime.bigint();
  const got = await new Promise<{ status: number; body: Buffer }>((ok, fail) => {
    let answered = false;
    const req = https.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path,
      headers: { 'Content-Type': 'application/json', 'Content-Length': length },
      ca,
      agent,
    });
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on('error', fail);
    });
    // A server that answers before reading everything (busy, 413) ends the write with EPIPE: the answer counts.
    req.on('error', (e) => {
      if (answered) return;
      const code = (e as NodeJS.ErrnoException).code;
      if (resetIsAnswer && (code === 'EPIPE' || code === 'ECONNRESET'))
        ok({ status: 0, body: Buffer.from(`reset: ${code}`) });
      else fail(e);
    });
    const write = async () => {
      for (const p of parts) {
        if (!req.write(p)) await new Promise<void>((r) => req.once('drain', r).once('close', r));
        if (req.destroyed) return;
      }
      req.end();
    };
    void write();
  });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const text = got.body.toString('utf8');
  let response: Timed['response'];
  if (got.status === 200) {
    try {
      response = (JSON.parse(text) as { response?: Timed['response'] }).response;
    } catch {
      response = undefined;
    }
  }
  return { status: got.status, response, text, ms };
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

export interface Sampler {
  /** Highest RSS seen, MiB (VmHWM: the peak since the process started, so no spike is missed). */
  peakMiB(): number;
  /** /readyz answers other than 200 while sampling. */
  notReady(): number;
  readyChecks(): number;
  stop(): Promise<void>;
}

/** Samples readiness every `intervalMs` until stopped. */
export function sample(pid: number, readyz: () => Promise<number>, intervalMs = 100): Sampler {
  let stopped = false;
  let bad = 0;
  let checks = 0;
  const loop = (async () => {
    while (!stopped) {
      const status = await readyz().catch(() => 0);
      checks++;
      if (status !== 200) bad++;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    peakMiB: () => procStatus(pid).hwmKiB / 1024,
    notReady: () => bad,
    readyChecks: () => checks,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

/** Runs `task` for each of `count` items with at most `concurrency` at a time. */
export async function pool<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array<T>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      out[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return out;
}

/** "allowed", "denied: <message>", "busy" (429 with a sentence), "reset", or what else came back. */
export function outcome(a: Timed): string {
  if (a.status === 200 && a.response) {
    return a.response.allowed ? 'allowed' : `denied: ${a.response.status?.message ?? ''}`;
  }
  if (a.status === 429 && /busy/.test(a.text)) return 'busy';
  if (a.status === 0 && a.text.startsWith('reset: ')) return 'reset';
  return `${a.status} ${a.text.slice(0, 200)}`;
}
