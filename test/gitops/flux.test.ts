/**
 * Real Flux (source-controller + kustomize-controller, pinned in test/controlplane/bins/flux-*) drives
 * the examples from a Git repository on 127.0.0.1, with the manifests of examples/gitops/flux/ (only
 * names, URL, namespaces and intervals changed), while the admission service and the reconciler run.
 * The chart layer (HelmRelease) is not applied: helm-controller is not obtainable here, so the services
 * run as processes and the infra layer holds the Namespace only.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { useTestEnv } from '../support/cluster.js';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.js';
import { engineListeners, startFlux, type RunningEngine } from '../support/gitops-engines.js';
import {
  CLUSTERS,
  CONNECTED,
  GITOPS_EXAMPLES,
  addForbiddenConnection,
  addNotebookConnection,
  allSynced,
  clusterWrites,
  connectionStates,
  createMemberPodsAndWaitDelivered,
  exampleTree,
  generators,
  notebookWriters,
  waitNotebookSeesSparkDefaults,
  pick,
  readDocs,
  removeCluster,
  sparkWorkers,
  startKdServices,
  watchGenerators,
  type Doc,
  type KdServices,
  type Tree,
} from '../support/gitops-scenario.js';
import { getJson, kubectlOk, podConfigMeta } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';

const env = useTestEnv();
const FLUX = join(GITOPS_EXAMPLES, 'flux');
/** Seconds between reconciliations of every Flux object here (10m in the examples). */
const INTERVAL = 5;
const fluxNs = `${env.namespace}-flux`;
const LAYERS = ['kd-infra', 'kd-examples', 'kd-examples-wave-1', 'kd-examples-wave-2', 'kd-examples-wave-3'];

let git: GitHttpServer;
let flux: RunningEngine | undefined;
let services: KdServices | undefined;
let tree: Tree;
const started = Date.now();

/** The examples' Flux objects, pointed at this test's repository, namespaces and intervals. */
function fluxObjects(url: string): Doc[] {
  const source = pick(readDocs(join(FLUX, 'kd-connections.yaml')), 'GitRepository');
  source.metadata.namespace = fluxNs;
  source.spec.url = url;
  source.spec.interval = `${INTERVAL}s`;
  const layers = ['kd-infra.yaml', 'kd-examples.yaml', 'kd-examples-clusters.yaml'].flatMap((f) =>
    readDocs(join(FLUX, f)).filter((d) => d.kind === 'Kustomization'),
  );
  for (const k of layers) {
    k.metadata.namespace = fluxNs;
    k.spec.interval = `${INTERVAL}s`;
    k.spec.retryInterval = '2s';
    k.spec.timeout = '90s';
    if (k.spec.targetNamespace !== undefined) k.spec.targetNamespace = env.namespace;
    // The infra layer of this repository: the Namespace only (see the file comment).
    if (k.metadata.name === 'kd-infra') k.spec.path = './infra';
  }
  return [source, ...layers];
}

/** The repository content: the examples, and the infra layer with the examples' Namespace renamed. */
function withInfra(t: Tree): Tree {
  const ns = pick(readDocs(join(FLUX, 'infra', 'namespaces.yaml')), 'Namespace', 'my-team');
  ns.metadata.name = env.namespace;
  ns.metadata.labels = { 'kd-test': 'true' };
  return { ...t, 'infra/namespaces.yaml': stringify(ns) };
}

async function kustomizations(): Promise<Record<string, Doc>> {
  const list = await getJson<{ items: Doc[] }>(env, ['kustomizations.kustomize.toolkit.fluxcd.io'], fluxNs);
  return Object.fromEntries(list.items.map((k) => [k.metadata.name, k]));
}
const ready = (k: Doc | undefined): Doc | undefined =>
  ((k?.status?.conditions ?? []) as Doc[]).find((c) => c.type === 'Ready');

/** Every layer Ready at `sha`. */
async function allApplied(sha: string): Promise<boolean> {
  const ks = await kustomizations();
  return LAYERS.every(
    (n) => ready(ks[n])?.status === 'True' && String(ks[n]?.status?.lastAppliedRevision ?? '').endsWith(sha),
  );
}

function commit(next: Tree, message: string): string {
  const files: Record<string, string | null> = { ...next };
  for (const f of Object.keys(tree)) if (!(f in next)) files[f] = null;
  tree = next;
  return git.commit(files, message);
}

const failureContext = () => `\n${flux?.output() ?? ''}`;

beforeAll(async () => {
  services = await startKdServices(env);
  git = await startGitHttpServer('kd-gitops');
  tree = {};
  flux = await startFlux(env, fluxNs);
}, 30 * 60_000);

afterAll(async () => {
  await flux?.stop();
  await services?.stop();
  await git?.close();
  process.stderr.write(`[gitops] Flux suite: ${Math.round((Date.now() - started) / 1000)} s\n`);
});

describe(`Flux (source-controller + kustomize-controller v1.9.6) drives the examples`, () => {
  let firstGenerators: Record<string, number>;

  it('Flux listens on 127.0.0.1 only', () => {
    const listeners = engineListeners(flux!);
    for (const p of ['source-controller', 'kustomize-controller'])
      expect(listeners.some((l) => l.startsWith(`${p} `))).toBe(true);
    expect(listeners.filter((l) => !/ 127\.0\.0\.1:\d+$/.test(l))).toEqual([]);
  });

  it('1. first sync: every layer Ready, everything applied by kustomize-controller, generators set by the webhook, configmeta delivered', async () => {
    const sha = commit(withInfra(exampleTree()), 'examples');
    const objects = fluxObjects(git.url);
    // What the examples say, not what the test says: server-side apply with prune and the drift rule.
    for (const k of objects.filter((o) => o.kind === 'Kustomization')) {
      expect(k.spec.prune).toBe(true);
      expect(k.spec.wait).toBe(true);
    }
    await kubectlOk(env, ['apply', '-f', '-'], {
      namespace: fluxNs,
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    });
    await eventually('every Kustomization Ready at the first commit', () => allApplied(sha), 300_000, 500).catch(
      (e: Error) => {
        throw new Error(e.message + failureContext());
      },
    );
    const g = await generators(env);
    // Set on create for a cluster with connections; the others have none (they need none).
    for (const c of CONNECTED) expect(g[c]).toBeGreaterThanOrEqual(1);
    // Applied by Flux (server-side apply, its field manager), generator set by the webhook, not in Git.
    const nb = await getJson(env, ['kdcluster', 'notebook', '--show-managed-fields']);
    expect((nb.metadata.managedFields as Doc[]).map((m) => m.manager)).toContain('kustomize-controller');
    const inGit = parseAllDocuments(tree['examples/40-clusters.yaml']!).map((d) => d.toJS() as Doc);
    expect(inGit.filter((d) => d.spec.configMetaGenerator !== undefined)).toEqual([]);

    await createMemberPodsAndWaitDelivered(env);
    const cm = await podConfigMeta(env, 'notebook-0');
    expect(cm!.doc.connections.configmaps.model[0].data.name).toBe('resnet50');
    firstGenerators = await generators(env);
  }, 420_000);

  it(`2. steady state over ${6 * INTERVAL} s (six intervals) while an out-of-band ConfigMap edit raises generators: Flux reverts the ConfigMap, never writes a kdcluster, no generator goes down`, async () => {
    const since = new Date();
    // Out of band: not in Git. Flux owns that field (server-side apply) and puts Git's value back on its
    // next interval — the edit and the revert are two content changes the reconciler delivers.
    await kubectlOk(env, ['patch', 'configmap', 'model-prediction', '--type=merge', '-p', '{"data":{"path":"/oob"}}']);
    const watched = await watchGenerators(env, 6 * INTERVAL * 1000);
    expect(watched.decreases).toEqual([]);
    const cm = await getJson(env, ['configmap', 'model-prediction']);
    expect(cm.data.path).toBe('/models/resnet50/3');
    for (const c of ['training-cluster', 'spark-logs-nightly', 'notebook'])
      expect(watched.last[c]).toBeGreaterThan(firstGenerators[c]!);
    for (const c of ['kafka-events', 'pg-main']) expect(watched.last[c]).toBe(firstGenerators[c]);
    // No drift reported on kdclusters: kustomize-controller dry-ran them every interval and applied none.
    expect(clusterWrites(env, 'kustomize-controller', since)).toEqual([]);
    // No layer reports a failure; each is Ready between its reconciles (during one, with 5 s intervals,
    // kustomize-controller sets Ready=Unknown/Progressing for a moment, and a layer whose interval comes
    // while the one it depends on is mid-reconcile waits with Ready=False, reason DependencyNotReady).
    const ks = await kustomizations();
    for (const n of LAYERS) {
      const c = ready(ks[n]);
      if (c?.status === 'False') expect([n, c.reason]).toEqual([n, 'DependencyNotReady']);
    }
    await eventually(
      'every layer Ready',
      async () => {
        const now = await kustomizations();
        return LAYERS.every((n) => ready(now[n])?.status === 'True');
      },
      60_000,
      250,
    );
    await eventually('delivered', () => allSynced(env, CLUSTERS), 60_000);
  }, 240_000);

  it('3. a commit that adds a connection: applied, the webhook raises the generator exactly once, the pod gets the new configmeta', async () => {
    const before = await generators(env);
    const since = new Date();
    const sha = commit(addNotebookConnection(tree), 'notebook: also spark-defaults');
    await eventually('applied', () => allApplied(sha), 120_000, 500);
    await waitNotebookSeesSparkDefaults(env);
    const after = await generators(env);
    expect(after.notebook).toBe(before.notebook! + 1);
    expect(after['training-cluster']).toBe(before['training-cluster']);
    // The audit filter of test 2 does see this engine's writes: here it wrote the notebook.
    expect(notebookWriters(env, since)).toContainEqual(expect.stringContaining('kustomize-controller'));
  }, 180_000);

  it("4. a commit with a forbidden connection: the layer reports the webhook's denial, nothing of it is applied; the fixing commit recovers", async () => {
    const good = tree;
    const sha = commit(addForbiddenConnection(tree), 'notebook-sql (denied) + a third spark worker');
    const denial = await eventually(
      'the wave-2 Kustomization reports the denial',
      async () => {
        const c = ready((await kustomizations())['kd-examples-wave-2']);
        return c?.status === 'False' && /denied the request/.test(String(c.message)) ? String(c.message) : false;
      },
      120_000,
      500,
    );
    expect(denial).toContain('validate-kdcluster.kd-connections.hpe.com');
    expect(denial).toContain('pg-main');
    // kustomize-controller dry-runs the whole layer first: the admitted change of the same commit and layer
    // is not applied either.
    expect((await kustomizations())['kd-examples-wave-2']!.status.lastAttemptedRevision).toContain(sha);
    expect(await sparkWorkers(env)).toBe(2);
    expect((await env.kubectl(['get', 'kdcluster', 'notebook-sql'])).code).not.toBe(0);

    const fixed = commit(good, 'revert');
    await eventually('recovered', () => allApplied(fixed), 120_000, 500);
    expect(await sparkWorkers(env)).toBe(2);
  }, 300_000);

  it('5. a commit that removes a kdcluster: pruned, the cluster connected to it reports Missing', async () => {
    commit(removeCluster(tree, 'kafka-events'), 'remove kafka-events');
    // Pruned by the layer that applied it (later layers may wait: see the health check below).
    await eventually(
      'kafka-events pruned',
      async () => (await env.kubectl(['get', 'kdcluster', 'kafka-events'])).code !== 0,
      120_000,
      500,
    ).catch((e: Error) => {
      throw new Error(e.message + failureContext());
    });
    await eventually(
      'spark-logs-nightly reports kafka-events Missing',
      async () => (await connectionStates(env, 'spark-logs-nightly'))['cluster/kafka-events'] === 'Missing',
      60_000,
    );
    // The cluster left behind is Stalled (its Ready condition says why), so Flux's health check (wait: true)
    // reports it on the layer that applies it: the user sees the dangling connection in Flux too.
    const health = await eventually(
      "a layer's Ready condition names spark-logs-nightly",
      async () => {
        const ks = await kustomizations();
        const c = LAYERS.map((n) => ready(ks[n])).find(
          (r) => r?.status === 'False' && String(r.message).includes('spark-logs-nightly'),
        );
        return c ? String(c.message) : false;
      },
      120_000,
      500,
    );
    expect(health).toMatch(/KubeDirectorCluster|kdcluster|spark-logs-nightly/);
  }, 330_000);
});
