/**
 * What every section of the benchmark shares: the control plane it starts for itself, a TestEnv per
 * namespace (the interface the test helpers take, built here without jest), bounded-concurrency
 * creation of many objects, and the machine description every report carries.
 */
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { errorStatus } from '@kd-connections/shared/runtime';
import { gitRevision } from '../../images/src/git-revision.js';
import type { ControlPlane } from '../controlplane/controlplane.js';
import type { TestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { repoRoot, runKubectl, sleep } from '../support/processes.js';

export function kubeConfigOf(cp: ControlPlane): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfigPath);
  return kc;
}

/** A namespace of the bench's own (created here) and the TestEnv the support helpers expect. */
export async function benchEnv(cp: ControlPlane, namespace: string): Promise<TestEnv> {
  const kc = kubeConfigOf(cp);
  await createNamespace(kc, namespace, { 'kd-bench': 'true' });
  const info = cp.info();
  return {
    info,
    kc,
    namespace,
    kubectl: (args, opts) => runKubectl(info, namespace, args, { ...opts, timeoutMs: 120_000 }),
    helm() {
      throw new Error('helm is not used by the benchmark');
    },
  };
}

/** Runs `fn` over `items` with at most `limit` in flight; the first failure rejects after the rest settle. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (t: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (next < items.length && failure === undefined) {
      const i = next++;
      try {
        out[i] = await fn(items[i]!, i);
      } catch (e) {
        failure ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure;
  return out;
}

/**
 * Retries a create on 429/5xx/connection errors (the API server sheds load rather than queueing it).
 * "Already exists" on a retry means an earlier attempt got through: that is success (undefined).
 */
export async function withRetry<T>(what: string, fn: () => Promise<T>, attempts = 6): Promise<T | undefined> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      const code = errorStatus(e);
      if (code === 409 && i > 1) return undefined;
      // No status: the request never got an answer (connection reset, timeout).
      const retryable = code === undefined || code === 429 || code >= 500;
      if (!retryable || i >= attempts) throw new Error(`${what}: ${(e as Error).message}`, { cause: e });
      await sleep(100 * 2 ** i);
    }
  }
}

export interface MachineInfo {
  cores: number;
  cpuModel: string;
  node: string;
  platform: string;
  totalMemMiB: number;
  freeMemMiB: number;
  loadAverage: number[];
  /** The commit the bench ran on, `-dirty` when tracked files differed from it (the figures are then of no commit). */
  revision?: string;
}

export function machineInfo(): MachineInfo {
  const c = cpus();
  return {
    revision: gitRevision(repoRoot) ?? 'unknown (not a git checkout)',
    cores: c.length,
    cpuModel: c[0]?.model?.trim() ?? 'unknown',
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    totalMemMiB: Math.round(totalmem() / 2 ** 20),
    freeMemMiB: Math.round(freemem() / 2 ** 20),
    loadAverage: loadAverage(),
  };
}

export function loadAverage(): number[] {
  return loadavg().map((x) => Math.round(x * 100) / 100);
}

/** Elapsed-time helper: `const t = timer(); ...; t()` → milliseconds. */
export function timer(): () => number {
  const start = process.hrtime.bigint();
  return () => Number(process.hrtime.bigint() - start) / 1e6;
}

/** Progress on stderr; the report is the output. */
export function say(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}
