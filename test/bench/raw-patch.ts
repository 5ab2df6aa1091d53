/**
 * The API server's limit for the fan-out: a bare client making the same pod patches the reconciler
 * makes for one ConfigMap edit — every member pod, the configmeta annotation and its hash replaced by
 * values of the same size, the same JSON Patch with its `test` preconditions — as fast as the API
 * server accepts them, with the reconciler's concurrency (clusters in parallel × pod patches in flight
 * per cluster). Run with the reconciler stopped, so nothing else writes the pods.
 *
 * At full strength, as client-go talks to the API server: one HTTP/2 connection multiplexing every patch
 * (client-go's default), and, measured beside it, HTTP/1.1 with kept-alive connections (one per patch in
 * flight). Not through client-node's generated client, which opens a new TLS connection per request and
 * so measured a limit below what the product (kept-alive) reaches. The limit is the faster of the two.
 */
import https from 'node:https';
import http2 from 'node:http2';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_CONFIGMETA, ANNOTATION_CONFIGMETA_HASH } from '@kd-connections/shared/domain';
import { setAnnotationsPatch } from '@kd-connections/shared/primitives';
import { mapLimit, timer } from './env.js';
import { round } from './stats.js';

export type RawTransport = 'http2' | 'http1-keepalive';

export interface RawPatchRun {
  transport: RawTransport;
  seconds: number;
  patchesPerSecond: number;
  failed: number;
  /** The first failure's status and message, when any failed. */
  firstError?: string;
}

export interface RawPatchResult {
  pods: number;
  /** Clusters in parallel × pod patches in flight per cluster: the reconciler's defaults. */
  concurrency: { clusters: number; podsPerCluster: number };
  meanPatchBytes: number;
  /** The faster transport's run: the limit. */
  transport: RawTransport;
  seconds: number;
  patchesPerSecond: number;
  failed: number;
  /** Each transport's run, in the order measured. */
  runs: RawPatchRun[];
}

type Send = (path: string, body: string) => Promise<{ status: number; text: string }>;

/** One TLS identity from the kubeconfig: what both transports present. */
async function tlsOptions(kc: KubeConfig): Promise<{ server: URL; tls: https.RequestOptions }> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('raw patch: the kubeconfig has no current cluster');
  const tls: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(tls);
  return { server: new URL(cluster.server), tls };
}

/** HTTP/2, one session: every patch a stream on it. */
async function http2Sender(kc: KubeConfig): Promise<{ send: Send; close: () => void }> {
  const { server, tls } = await tlsOptions(kc);
  const session = http2.connect(server.origin, {
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    headers: tls.headers,
  } as http2.SecureClientSessionOptions);
  await new Promise<void>((ok, fail) => {
    session.once('connect', () => ok());
    session.once('error', fail);
  });
  const auth = (tls.headers as Record<string, string> | undefined)?.Authorization;
  const send: Send = (path, body) =>
    new Promise((ok, fail) => {
      const req = session.request({
        ':method': 'PATCH',
        ':path': path,
        'content-type': 'application/json-patch+json',
        accept: 'application/json',
        ...(auth ? { authorization: auth } : {}),
      });
      let status = 0;
      const chunks: Buffer[] = [];
      req.on('response', (h) => (status = Number(h[':status'])));
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => ok({ status, text: Buffer.concat(chunks).toString('utf8') }));
      req.on('error', fail);
      req.end(body);
    });
  return { send, close: () => session.close() };
}

/** HTTP/1.1 with kept-alive connections, at most `sockets` of them. */
async function keepAliveSender(kc: KubeConfig, sockets: number): Promise<{ send: Send; close: () => void }> {
  const { server, tls } = await tlsOptions(kc);
  const agent = new https.Agent({ keepAlive: true, maxSockets: sockets, ca: tls.ca, cert: tls.cert, key: tls.key });
  const send: Send = (path, body) =>
    new Promise((ok, fail) => {
      const req = https.request(
        {
          agent,
          host: server.hostname,
          port: server.port,
          method: 'PATCH',
          path,
          headers: {
            ...(tls.headers as Record<string, string> | undefined),
            'Content-Type': 'application/json-patch+json',
            Accept: 'application/json',
            'Content-Length': Buffer.byteLength(body),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => ok({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        },
      );
      req.on('error', fail);
      req.end(body);
    });
  return { send, close: () => agent.destroy() };
}

/** A value of the same length that differs (the last character changed), so every patch is a real write. */
function sameSize(value: string): string {
  if (value === '') return 'x';
  const last = value[value.length - 1];
  return value.slice(0, -1) + (last === '0' ? '1' : '0');
}

/** The member pods, grouped by cluster, each with its patch (values of the same size, `test` on the current ones). */
async function planPatches(
  core: CoreV1Api,
  namespace: string,
): Promise<{ byCluster: V1Pod[][]; patches: Map<V1Pod, string>; bytes: number }> {
  const pods = (await core.listNamespacedPod({ namespace })).items.filter(
    (p) => p.metadata?.annotations?.[ANNOTATION_CONFIGMETA] !== undefined,
  );
  const byCluster = new Map<string, V1Pod[]>();
  const patches = new Map<V1Pod, string>();
  let bytes = 0;
  for (const p of pods) {
    const c = p.metadata?.labels?.['kubedirector.hpe.com/kdcluster'] ?? '';
    byCluster.set(c, [...(byCluster.get(c) ?? []), p]);
    const ann = p.metadata!.annotations!;
    // The configmeta text changes inside (its length kept), as an edited ConfigMap's content would.
    const text = ann[ANNOTATION_CONFIGMETA]!;
    const at = text.lastIndexOf('"version":"') + 11;
    const values = {
      [ANNOTATION_CONFIGMETA]:
        at < 11 ? sameSize(text) : text.slice(0, at) + (text[at] === '0' ? '1' : '0') + text.slice(at + 1),
      [ANNOTATION_CONFIGMETA_HASH]: sameSize(ann[ANNOTATION_CONFIGMETA_HASH] ?? ''),
    };
    const body = JSON.stringify(
      setAnnotationsPatch(p.metadata as Parameters<typeof setAnnotationsPatch>[0], values, ANNOTATION_CONFIGMETA_HASH),
    );
    patches.set(p, body);
    bytes += Buffer.byteLength(body);
  }
  return { byCluster: [...byCluster.values()], patches, bytes };
}

export async function rawPatchRate(
  kc: KubeConfig,
  namespace: string,
  concurrency: { clusters: number; podsPerCluster: number },
): Promise<RawPatchResult> {
  const core = kc.makeApiClient(CoreV1Api);
  const runs: RawPatchRun[] = [];
  let pods = 0;
  let meanPatchBytes = 0;
  for (const transport of ['http2', 'http1-keepalive'] as const) {
    // Planned from the pods as they are now: each run writes every pod once, each patch a real write.
    const plan = await planPatches(core, namespace);
    pods = plan.patches.size;
    meanPatchBytes = Math.round(plan.bytes / Math.max(1, pods));
    const sender =
      transport === 'http2'
        ? await http2Sender(kc)
        : await keepAliveSender(kc, concurrency.clusters * concurrency.podsPerCluster);
    let failed = 0;
    let firstError: string | undefined;
    const t = timer();
    try {
      await mapLimit(plan.byCluster, concurrency.clusters, (members) =>
        mapLimit(members, concurrency.podsPerCluster, async (p) => {
          const path = `/api/v1/namespaces/${namespace}/pods/${p.metadata!.name!}`;
          try {
            const r = await sender.send(path, plan.patches.get(p)!);
            if (r.status >= 300) throw new Error(`${r.status} ${r.text.slice(0, 200)}`);
          } catch (e) {
            failed++;
            firstError ??= e instanceof Error ? e.message : String(e);
          }
        }),
      );
    } finally {
      sender.close();
    }
    const seconds = t() / 1000;
    runs.push({
      transport,
      seconds: round(seconds),
      patchesPerSecond: round((pods - failed) / seconds),
      failed,
      ...(firstError ? { firstError } : {}),
    });
  }
  const best = runs.reduce((a, b) => (b.patchesPerSecond > a.patchesPerSecond ? b : a));
  return {
    pods,
    concurrency,
    meanPatchBytes,
    transport: best.transport,
    seconds: best.seconds,
    patchesPerSecond: best.patchesPerSecond,
    failed: best.failed,
    runs,
  };
}
