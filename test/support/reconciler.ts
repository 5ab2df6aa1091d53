/** Runs the built reconciler (reconciler/dist/main.js) against the test control plane. */
import { freePort } from '../controlplane/net.js';
import type { TestEnv } from './cluster.js';
import { startService, type ServiceProcess } from './processes.js';

export interface ReconcilerProcess extends ServiceProcess {
  port: number;
  identity: string;
  /** Current value of a Prometheus series, e.g. metric('kd_reconciler_api_writes_total', {kind: 'pod', result: 'ok'}). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
}

export async function startReconciler(
  env: TestEnv,
  opts: { identity?: string; args?: string[]; systemNamespace?: string; leaderElect?: boolean } = {},
): Promise<ReconcilerProcess> {
  const port = await freePort();
  const identity = opts.identity ?? `test-${Math.random().toString(36).slice(2, 8)}`;
  const p = startService('reconciler/dist/main.js', [
    `--kubeconfig=${env.info.kubeconfigPath}`,
    `--namespaces=${env.namespace}`,
    `--system-namespace=${opts.systemNamespace ?? env.namespace}`,
    `--lease-namespace=${env.namespace}`,
    `--identity=${identity}`,
    `--metrics-bind-address=127.0.0.1:${port}`,
    `--leader-elect=${opts.leaderElect ?? true}`,
    // Short watch timeouts keep reconnects exercised during the suite.
    '--watch-timeout-seconds=60',
    ...(opts.args ?? []),
  ]);
  const metric = async (name: string, labels: Record<string, string> = {}) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    let sum = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
      const m = /^([^{\s]+)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
      if (!m) continue;
      const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
      if (Object.entries(labels).every(([k, v]) => got[k] === v)) sum += Number(m[3]);
    }
    return sum;
  };
  return Object.assign(p, { port, identity, metric });
}
