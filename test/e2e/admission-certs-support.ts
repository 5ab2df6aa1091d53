/**
 * Helpers for the dynamic-serving tests: replicas of the admission service in bootstrap mode (each
 * signing its own leaf from the CA Secret) behind one loopback address (a TCP round-robin balancer, standing in for the Service), what the TLS
 * Secret and the webhook configurations hold, what each replica serves, and a bounded request loop
 * through the API server that counts every failed admission.
 */
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  type EventsV1Event,
} from '@kubernetes/client-node';
import { inspectCertificate, splitPemBlocks } from '@kd-connections/certs';
import { isIssuedBy } from '../support/certificate-facts.js';
import type { TestEnv } from '../support/cluster.js';
import { sleep } from '../support/processes.js';
import { type RunningAdmission, startAdmission } from '../support/services.js';
import { WEBHOOK_NAMES } from '../support/webhook-configurations.js';

const G = { group: 'kubedirector.hpe.com', version: 'v1beta1' } as const;

/** A TCP round-robin balancer on 127.0.0.1: each new connection goes to the next backend port. */
export interface Balancer {
  readonly port: number;
  setBackends(ports: number[]): void;
  close(): Promise<void>;
}

export async function startBalancer(): Promise<Balancer> {
  let backends: number[] = [];
  let next = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    if (backends.length === 0) return void client.destroy();
    const upstream = net.connect(backends[next++ % backends.length]!, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    const end = () => (client.destroy(), upstream.destroy());
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    port: (server.address() as net.AddressInfo).port,
    setBackends: (ports) => void (backends = [...ports]),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

/** SHA-256 of a DER certificate, lower-case hex (the certs library's fingerprint256). */
export const fingerprint = (pem: string): string => inspectCertificate(pem).fingerprint256;

export interface SecretState {
  resourceVersion: string;
  /** The CA (ca.crt). */
  caPem: string;
  /** ca.crt and ca-previous.crt: every CA a replica's leaf may be signed by. */
  trustedPem: string;
  ca?: string;
  previousCAs: string[];
  immutable: boolean;
}

export async function readTlsSecret(env: TestEnv, name: string): Promise<SecretState> {
  const s = await env.kc.makeApiClient(CoreV1Api).readNamespacedSecret({ name, namespace: env.namespace });
  const get = (k: string) => Buffer.from(s.data?.[k] ?? '', 'base64').toString('utf8');
  let ca: string | undefined;
  try {
    ca = fingerprint(get('ca.crt'));
  } catch {
    ca = undefined;
  }
  return {
    resourceVersion: s.metadata!.resourceVersion!,
    caPem: get('ca.crt'),
    trustedPem: get('ca.crt') + get('ca-previous.crt'),
    ca,
    previousCAs: splitPemBlocks(get('ca-previous.crt')).map((b) => fingerprint(b.pem)),
    immutable: s.immutable === true,
  };
}

/** The CA fingerprints in each webhook's caBundle, for both configurations named `name`. */
export async function caBundles(env: TestEnv, name: string): Promise<string[][]> {
  const api = env.kc.makeApiClient(AdmissionregistrationV1Api);
  const v = await api.readValidatingWebhookConfiguration({ name });
  const m = await api.readMutatingWebhookConfiguration({ name });
  return [...(v.webhooks ?? []), ...(m.webhooks ?? [])].map((w) =>
    splitPemBlocks(Buffer.from(w.clientConfig.caBundle ?? '', 'base64').toString('utf8')).map((b) =>
      fingerprint(b.pem),
    ),
  );
}

/** The certificate a replica presents in a TLS handshake (not verified: the tests compare it). */
export function servedPem(port: number): Promise<string> {
  return new Promise((ok, fail) => {
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const pem = s.getPeerX509Certificate()?.toString() ?? '';
      s.end();
      ok(pem);
    });
    s.on('error', fail);
  });
}

export async function served(port: number): Promise<{ fingerprint: string; x509: X509Certificate }> {
  const pem = await servedPem(port);
  return { fingerprint: fingerprint(pem), x509: new X509Certificate(pem) };
}

/** Whether the certificate a replica serves was signed by the given CA. */
export async function servesLeafOf(port: number, caPem: string): Promise<boolean> {
  return isIssuedBy(await servedPem(port), caPem);
}

/** GET /readyz without verifying the certificate (it may have expired: that is what is being probed). */
export function readyz(port: number): Promise<{ status: number; body: string }> {
  return new Promise((ok, fail) => {
    https
      .get({ host: '127.0.0.1', port, path: '/readyz', rejectUnauthorized: false, agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
      })
      .on('error', fail);
  });
}

export interface BootstrapReplicaOptions {
  secretName: string;
  /** Webhook configuration name (validating and mutating) whose caBundle the replicas keep; none if absent. */
  configuration?: string;
  servingLifetime?: string;
  caLifetime?: string;
  extraArgs?: string[];
}

export function bootstrapArgs(env: TestEnv, o: BootstrapReplicaOptions): string[] {
  return [
    '--tls-mode=bootstrap',
    `--tls-secret-name=${o.secretName}`,
    `--tls-secret-namespace=${env.namespace}`,
    '--service-name=kd-connections-admission',
    `--service-namespace=${env.namespace}`,
    '--extra-ip-addresses=127.0.0.1',
    `--webhook-configurations=${o.configuration ? `validating/${o.configuration},mutating/${o.configuration}` : ''}`,
    ...(o.servingLifetime ? [`--serving-cert-lifetime=${o.servingLifetime}`] : []),
    ...(o.caLifetime ? [`--ca-lifetime=${o.caLifetime}`] : []),
    ...(o.extraArgs ?? []),
  ];
}

/** Starts `count` replicas in the same instant (a race for the Secret); resolves when all are ready. */
export function startBootstrapReplicas(
  env: TestEnv,
  count: number,
  o: BootstrapReplicaOptions,
): Promise<RunningAdmission[]> {
  const trustedCa = async () => (await readTlsSecret(env, o.secretName)).trustedPem;
  return Promise.all(
    Array.from({ length: count }, () =>
      startAdmission(env, bootstrapArgs(env, o), { certificateFiles: false, trustedCa }),
    ),
  );
}

export async function secretEvents(env: TestEnv, secretName: string, reason?: string): Promise<EventsV1Event[]> {
  const list = await env.kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: env.namespace });
  return list.items.filter(
    (e) => e.regarding?.kind === 'Secret' && e.regarding.name === secretName && (!reason || e.reason === reason),
  );
}

export interface LoadResult {
  sent: number;
  failures: string[];
  endedBy: 'stop' | 'count' | 'time';
}

export interface Load {
  /** Requests sent so far. */
  sent(): number;
  failures(): string[];
  stop(): Promise<LoadResult>;
}

/**
 * Server-side dry-run kdcluster creates through the API server, one after the other, alternating an
 * allowed one (must come back mutated: the mutating webhook is failurePolicy Ignore, so a failed call
 * would otherwise go unnoticed) and a denied one (must be denied by the validating webhook with its
 * message; a failed call would be a 500 "failed calling webhook"). Bounded by count and time. Needs
 * the marker app and ConfigMap of waitUntilLive.
 */
export function startLoad(env: TestEnv, bounds = { maxRequests: 4000, maxMs: 180_000, pauseMs: 20 }): Load {
  const custom = env.kc.makeApiClient(CustomObjectsApi);
  const failures: string[] = [];
  let sent = 0;
  let stopped = false;
  const started = Date.now();
  const create = (name: string, spec: Record<string, unknown>) =>
    custom.createNamespacedCustomObject({
      ...G,
      plural: 'kubedirectorclusters',
      namespace: env.namespace,
      dryRun: 'All',
      body: { apiVersion: `${G.group}/${G.version}`, kind: 'KubeDirectorCluster', metadata: { name }, spec },
    });
  const loop = (async (): Promise<LoadResult['endedBy']> => {
    for (;;) {
      if (stopped) return 'stop';
      if (sent >= bounds.maxRequests) return 'count';
      if (Date.now() - started > bounds.maxMs) return 'time';
      const i = sent++;
      const at = new Date().toISOString();
      if (i % 2 === 0) {
        try {
          const got = (await create('load-allowed', {
            app: 'marker-app',
            roles: [{ id: 'a', members: 1 }],
            connections: { configmaps: ['marker-cm'] },
          })) as { spec?: { configMetaGenerator?: number } };
          if (got.spec?.configMetaGenerator !== 1) failures.push(`${at} #${i}: allowed create came back unmutated`);
        } catch (e) {
          failures.push(`${at} #${i}: allowed create failed: ${describe(e)}`);
        }
      } else {
        try {
          await create('load-denied', { app: 'load-app-that-does-not-exist', roles: [{ id: 'a', members: 1 }] });
          failures.push(`${at} #${i}: denied create was allowed`);
        } catch (e) {
          const body = String((e as { body?: unknown }).body ?? '');
          const denied = (e as { code?: number }).code === 403 && body.includes(WEBHOOK_NAMES.validateCluster);
          if (!denied || !body.includes('not found')) failures.push(`${at} #${i}: denied create: ${describe(e)}`);
        }
      }
      await sleep(bounds.pauseMs);
    }
  })();
  return {
    sent: () => sent,
    failures: () => [...failures],
    async stop() {
      stopped = true;
      const endedBy = await loop;
      return { sent, failures: [...failures], endedBy };
    },
  };
}

function describe(e: unknown): string {
  const code = (e as { code?: number }).code;
  const body = (e as { body?: unknown }).body;
  return `${code ?? ''} ${typeof body === 'string' ? body.slice(0, 400) : (e as Error).message}`.trim();
}

/** Sum of one counter over replicas (e.g. kd_admission_tls_connections_recycled_total). */
export async function counterSum(replicas: RunningAdmission[], name: string): Promise<number> {
  let sum = 0;
  for (const r of replicas) {
    const m = new RegExp(`^${name} (\\d+(?:\\.\\d+)?)$`, 'm').exec(await r.metrics());
    sum += m ? Number(m[1]) : 0;
  }
  return sum;
}
