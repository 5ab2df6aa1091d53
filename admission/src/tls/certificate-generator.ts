/**
 * CA and serving-certificate generation for bootstrap mode, off the main thread: RSA key generation
 * and node-forge's signing (pure JavaScript) take from a few hundred milliseconds to a few seconds,
 * which on the event loop would stall every review in flight during a renewal.
 */
import { Worker } from 'node:worker_threads';
import { createCA, createServingCert, type CertPair } from '@kd-connections/certs';
import type { Logger } from '@kd-connections/shared/runtime';

export interface GenerateRequest {
  /** Issue the serving certificate from this CA; absent: create a new CA first. */
  ca?: CertPair;
  caLifetimeMs: number;
  servingLifetimeMs: number;
  service?: { name: string; namespace: string };
  dnsNames: string[];
  ipAddresses: string[];
  keyBits?: number;
  /** Issuance time (default: now). */
  now?: Date;
}

export interface Generated {
  ca: CertPair;
  serving: CertPair;
  caCreated: boolean;
  /** Time spent generating (CA key and certificate when created, serving key and certificate). */
  generationMs: number;
}

export type Generator = (req: GenerateRequest) => Promise<Generated>;

/** Generates on the calling thread (the worker's body; also used by unit tests). */
export function generateCertificates(req: GenerateRequest): Generated {
  const started = performance.now();
  const ca =
    req.ca ??
    createCA({
      commonName: 'kd-connections-admission-ca',
      lifetimeMs: req.caLifetimeMs,
      ...(req.keyBits ? { keyBits: req.keyBits } : {}),
      ...(req.now ? { now: req.now } : {}),
    });
  const serving = createServingCert({
    ca,
    ...(req.service ? { service: req.service } : {}),
    dnsNames: req.dnsNames,
    ipAddresses: req.ipAddresses,
    lifetimeMs: req.servingLifetimeMs,
    ...(req.keyBits ? { keyBits: req.keyBits } : {}),
    ...(req.now ? { now: req.now } : {}),
  });
  return { ca, serving, caCreated: !req.ca, generationMs: Math.round(performance.now() - started) };
}

export class WorkerStartError extends Error {
  override name = 'WorkerStartError';
}

/** Runs generateCertificates in a worker thread that exits when done. */
export function generateInWorker(req: GenerateRequest, timeoutMs = 120_000): Promise<Generated> {
  return new Promise((ok, fail) => {
    let worker: Worker;
    try {
      worker = new Worker(new URL('./generate-worker.js', import.meta.url), { workerData: req });
    } catch (e) {
      fail(new WorkerStartError((e as Error).message));
      return;
    }
    let settled = false;
    const settle = (f: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      f();
    };
    const timer = setTimeout(
      () =>
        settle(() => (void worker.terminate(), fail(new Error(`certificate generation took over ${timeoutMs} ms`)))),
      timeoutMs,
    );
    worker.once('message', (m: { ok?: Generated; error?: string }) =>
      settle(() => (m.ok ? ok(m.ok) : fail(new Error(`certificate generation failed: ${m.error}`)))),
    );
    // An error before any message means the worker could not even load.
    worker.once('error', (e) => settle(() => fail(new WorkerStartError(e.message))));
    worker.once('exit', (code) => settle(() => fail(new WorkerStartError(`worker exited with code ${code}`))));
  });
}

/** In a worker thread; on the calling thread (with a warning) when no worker can start. */
export function workerGenerator(log: Logger): Generator {
  return async (req) => {
    try {
      return await generateInWorker(req);
    } catch (e) {
      if (!(e instanceof WorkerStartError)) throw e;
      log.warn('certificate worker unavailable; generating on the main thread', { error: e.message });
      return generateCertificates(req);
    }
  };
}
