/** Installs the chart's CRDs (the single copy in charts/kd-connections/crds) and waits until served. */
import { join } from 'node:path';
import { repoRoot } from './processes.js';
import type { TestEnv } from './cluster.js';

export const CRD_DIR = join(repoRoot, 'charts', 'kd-connections', 'crds');

export async function ensureCrds(env: TestEnv): Promise<void> {
  // Several test files may do this at once; apply is idempotent, a lost create race is retried.
  for (let attempt = 1; ; attempt++) {
    const r = await env.kubectl(['apply', '--server-side', '--force-conflicts', '-f', CRD_DIR], { namespace: false });
    if (r.code === 0) break;
    if (attempt >= 5) throw new Error(`installing CRDs failed: ${r.stderr}`);
    await new Promise((ok) => setTimeout(ok, 500 * attempt));
  }
  const w = await env.kubectl(
    [
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/kubedirectorclusters.kubedirector.hpe.com',
      'crd/kubedirectorapps.kubedirector.hpe.com',
    ],
    { namespace: false },
  );
  if (w.code !== 0) throw new Error(`CRDs not established: ${w.stderr}`);
}
