/** Runs the built reconciler (reconciler/dist/main.js) against the test control plane. */
import { freePort } from '../controlplane/net.js';
import type { TestEnv } from './cluster.js';
import { startService, type ServiceProcess } from './processes.js';
import { metricSum } from './prometheus-text.js';

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
    return metricSum(text, name, labels);
  };
  return Object.assign(p, { port, identity, metric });
}
