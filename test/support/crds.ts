/**
 * The one CRD installer of the harness: the chart's CRDs (the single copy in
 * charts/kd-connections/files/crds, which the chart's templates/crds/ render), applied and waited for
 * until the API server serves them. Cluster tests, the benchmark, the soak and `npm start` all install
 * them this way.
 *
 * Server-side apply with one field manager: the CRDs are cluster-scoped, so every test file on the
 * shared control plane installs the same objects, often at the same moment. With one manager applying
 * one manifest, a second apply is a no-op on the server (no write, generation unchanged), there is no
 * client-side three-way merge racing against a concurrent writer, and no last-applied-configuration
 * annotation whose ownership a later client-side or server-side apply would have to reconcile (mixing
 * the two on one object is what made managers conflict). --force-conflicts takes the fields over from
 * any other manager that touched them first, e.g. helm creating the CRDs in the chart tests.
 */
import { join } from 'node:path';
import { eventually, ok, repoRoot, sleep, type RunResult } from './processes.js';

export const CRD_DIR = join(repoRoot, 'charts', 'kd-connections', 'files', 'crds');
export const CRD_NAMES = ['kubedirectorapps.kubedirector.hpe.com', 'kubedirectorclusters.kubedirector.hpe.com'];
export const CRD_FIELD_MANAGER = 'kd-connections-tests';

/** Runs kubectl against the cluster (TestEnv.kubectl has this shape; the namespace option is ignored here). */
export interface KubectlRunner {
  kubectl(args: string[], opts?: { namespace?: string | false }): Promise<RunResult>;
}

/** Applies the CRDs (idempotent) and waits until both are Established; returns kubectl apply's result. */
export async function installCrds(target: KubectlRunner): Promise<RunResult> {
  const apply = ['apply', '--server-side', `--field-manager=${CRD_FIELD_MANAGER}`, '--force-conflicts', '-f', CRD_DIR];
  let applied: RunResult;
  // Two first applies at once can both try to create; the loser gets a conflict and applies again.
  for (let attempt = 1; ; attempt++) {
    applied = await target.kubectl(apply, { namespace: false });
    if (applied.code === 0 || attempt >= 5) break;
    await sleep(500 * attempt);
  }
  ok(applied, 'kubectl apply --server-side CRDs');
  await waitEstablished(
    target,
    CRD_NAMES.map((n) => `crd/${n}`),
  );
  return applied;
}

/**
 * Waits until every CRD that `kubectl get <what>` names (`crd/<name>` …, or `-f <dir>`) is Established.
 * Not `kubectl wait --for=condition=Established`: on a CRD created a moment ago it fails at once with
 * "status.conditions accessor error" when the API server has not written any condition yet.
 */
export async function waitEstablished(target: KubectlRunner, what: string[]): Promise<void> {
  let pending: string[] = [];
  await eventually(
    `CRDs Established (${what.join(' ')})`,
    async () => {
      const r = ok(await target.kubectl(['get', ...what, '-o', 'json'], { namespace: false }), 'kubectl get CRDs');
      const got = JSON.parse(r.stdout) as CrdList | Crd;
      const crds = 'items' in got ? got.items : [got];
      pending = crds
        .filter((c) => !c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True'))
        .map((c) => c.metadata.name);
      return crds.length > 0 && pending.length === 0;
    },
    60_000,
    250,
  ).catch((e: Error) => {
    throw new Error(`${e.message}; not Established: ${pending.join(', ')}`);
  });
}

interface Crd {
  metadata: { name: string };
  status?: { conditions?: { type: string; status: string }[] };
}
interface CrdList {
  items: Crd[];
}
