/**
 * Real Argo CD v2.14.21 (application-controller + repo-server + Redis, pinned in
 * test/controlplane/bins/argocd) syncs the examples from a Git repository on 127.0.0.1 with the
 * Application of examples/gitops/argocd/kd-examples.yaml and the kdcluster health check of
 * argocd-cm-kdcluster-health.yaml — once with ServerSideApply=true as the example says, once without it
 * (Argo CD's default client-side apply) — while the admission service and the reconciler run.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { useTestEnv, type TestEnv } from '../support/cluster.js';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.js';
import { engineListeners, startArgoCd, type RunningEngine } from '../support/gitops-engines.js';
import {
  CLUSTERS,
  CONNECTED,
  GITOPS_EXAMPLES,
  addForbiddenConnection,
  addNotebookConnection,
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
import { getJson, kubectlOk } from '../support/kd-objects.js';
import { waitForNode } from '../node/node-support.js';
import { eventually } from '../support/processes.js';

const ARGO = join(GITOPS_EXAMPLES, 'argocd');
/** Seconds between reconciliations of an Application (Argo CD's default is 180). */
const RESYNC = 5;
const modes = [
  { name: 'ServerSideApply=true', env: useTestEnv('argocd-ssa'), serverSide: true },
  { name: 'client-side apply (the default)', env: useTestEnv('argocd-csa'), serverSide: false },
] as const;
const argoNs = `${modes[0].env.namespace}-argocd`;
let argo: RunningEngine | undefined;
const started = Date.now();

beforeAll(async () => {
  // Argo CD prunes with foreground deletion (its default): the API server only marks the object and the
  // garbage collector of kube-controller-manager, which runs with the test node, finishes the deletion.
  await waitForNode();
  const health = pick(readDocs(join(ARGO, 'argocd-cm-kdcluster-health.yaml')), 'ConfigMap');
  argo = await startArgoCd(modes[0].env, argoNs, { settings: health.data, resyncSeconds: RESYNC });
}, 40 * 60_000);

afterAll(async () => {
  await argo?.stop();
  process.stderr.write(`[gitops] Argo CD suite: ${Math.round((Date.now() - started) / 1000)} s\n`);
});

const UA = 'argocd-application-controller';

it('Argo CD listens on 127.0.0.1 only (the application-controller is built with its metrics address patched)', () => {
  const listeners = engineListeners(argo!);
  for (const p of ['redis-server', 'argocd-repo-server', 'argocd-application-controller'])
    expect(listeners.some((l) => l.startsWith(`${p} `))).toBe(true);
  expect(listeners.filter((l) => !/ 127\.0\.0\.1:\d+$/.test(l))).toEqual([]);
});

for (const mode of modes) {
  describe(`Argo CD v2.14.21, ${mode.name}, drives the examples`, () => {
    const env: TestEnv = mode.env;
    const appName = `kd-examples-${mode.serverSide ? 'ssa' : 'csa'}`;
    let git: GitHttpServer;
    let services: KdServices | undefined;
    let tree: Tree = {};
    let firstGenerators: Record<string, number>;

    const application = async (): Promise<Doc> => getJson(env, ['application', appName], argoNs);
    const resourceStates = (app: Doc) => (app.status?.resources ?? []) as Doc[];
    /** Synced and Healthy at `sha`, no operation running. */
    const settledAt = async (sha: string): Promise<Doc | false> => {
      const app = await application();
      const s = app.status ?? {};
      return s.sync?.status === 'Synced' &&
        s.sync?.revision === sha &&
        s.health?.status === 'Healthy' &&
        s.operationState?.phase !== 'Running'
        ? app
        : false;
    };
    /** What a Git host's webhook does: ask for a refresh now rather than at the next resync. */
    const refresh = () =>
      kubectlOk(env, ['annotate', '--overwrite', 'application', appName, 'argocd.argoproj.io/refresh=normal'], {
        namespace: argoNs,
      });
    /** Commits `next` as the whole tree; then asks for a refresh unless the Application does not exist yet. */
    const commit = async (next: Tree, message: string, o: { refresh: boolean } = { refresh: true }) => {
      const files: Record<string, string | null> = { ...next };
      for (const f of Object.keys(tree)) if (!(f in next)) files[f] = null;
      tree = next;
      const sha = git.commit(files, message);
      if (o.refresh) await refresh();
      return sha;
    };
    const failureContext = () => `\n${argo?.output() ?? ''}`;

    beforeAll(async () => {
      services = await startKdServices(env);
      git = await startGitHttpServer(appName);
    }, 5 * 60_000);
    afterAll(async () => {
      // Not left reconciling against a stopped Git server while the next mode runs.
      await env.kubectl(['delete', 'application', appName, '--wait=false', '--ignore-not-found'], {
        namespace: argoNs,
      });
      await services?.stop();
      await git?.close();
    });

    it('1. first sync: Synced and Healthy (the kdcluster health check gates each wave), generators set by the webhook, configmeta delivered', async () => {
      const sha = await commit(exampleTree(), 'examples', { refresh: false });
      const app = pick(readDocs(join(ARGO, 'kd-examples.yaml')), 'Application');
      app.metadata.name = appName;
      app.metadata.namespace = argoNs;
      app.spec.source.repoURL = git.url;
      app.spec.source.targetRevision = 'main';
      app.spec.destination.namespace = env.namespace;
      // What the example says: automated sync with prune and self-heal, ignore rule, RespectIgnoreDifferences.
      expect(app.spec.syncPolicy.automated).toEqual({ prune: true, selfHeal: true });
      expect(app.spec.syncPolicy.syncOptions).toContain('RespectIgnoreDifferences=true');
      expect(app.spec.syncPolicy.syncOptions).toContain('ServerSideApply=true');
      if (!mode.serverSide)
        app.spec.syncPolicy.syncOptions = (app.spec.syncPolicy.syncOptions as string[]).filter(
          (o) => o !== 'ServerSideApply=true',
        );
      await kubectlOk(env, ['apply', '-f', '-'], { namespace: argoNs, input: JSON.stringify(app) });
      const synced = await eventually(
        'Synced and Healthy at the first commit',
        () => settledAt(sha),
        240_000,
        500,
      ).catch(async (e: Error) => {
        const status = JSON.stringify((await application().catch((): Doc => ({}))).status ?? {});
        throw new Error(`${e.message}\nApplication status: ${status}${failureContext()}`);
      });
      // The health check was consulted for every kdcluster.
      const kd = resourceStates(synced).filter((r) => r.kind === 'KubeDirectorCluster');
      expect(kd.map((r) => [r.name, r.health?.status]).sort()).toEqual(CLUSTERS.map((c) => [c, 'Healthy']).sort());
      const g = await generators(env);
      // Set on create for a cluster with connections; the others have none (they need none).
      for (const c of CONNECTED) expect(g[c]).toBeGreaterThanOrEqual(1);

      await createMemberPodsAndWaitDelivered(env);
      firstGenerators = await generators(env);
    }, 360_000);

    it(`2. steady state over ${6 * RESYNC} s (six resyncs) while an out-of-band ConfigMap edit raises generators: self-heal reverts the ConfigMap, kdclusters stay Synced and are never written, no generator goes down`, async () => {
      const since = new Date();
      // Out of band: not in Git. Self-heal puts Git's value back: two content changes the reconciler delivers.
      await kubectlOk(env, [
        'patch',
        'configmap',
        'model-prediction',
        '--type=merge',
        '-p',
        '{"data":{"path":"/oob"}}',
      ]);
      let kdOutOfSync: string[] = [];
      const sampler = (async () => {
        const end = Date.now() + 6 * RESYNC * 1000;
        while (Date.now() < end) {
          const app = await application();
          kdOutOfSync = kdOutOfSync.concat(
            resourceStates(app)
              .filter((r) => r.kind === 'KubeDirectorCluster' && r.status !== 'Synced')
              .map((r) => `${r.name}: ${r.status}`),
          );
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      const watched = await watchGenerators(env, 6 * RESYNC * 1000);
      await sampler;
      expect(watched.decreases).toEqual([]);
      expect(kdOutOfSync).toEqual([]);
      await eventually(
        'self-heal reverted the ConfigMap',
        async () => (await getJson(env, ['configmap', 'model-prediction'])).data.path === '/models/resnet50/3',
        60_000,
      );
      // Self-heal is an automated sync of the out-of-sync resources only (no history entry): exactly the ConfigMap.
      const op = (await application()).status?.operationState;
      expect(Date.parse(op?.startedAt)).toBeGreaterThanOrEqual(Math.floor(since.getTime() / 1000) * 1000);
      expect(op?.operation?.initiatedBy?.automated).toBe(true);
      expect(((op?.syncResult?.resources ?? []) as Doc[]).map((r) => `${r.kind}/${r.name}`)).toEqual([
        'ConfigMap/model-prediction',
      ]);
      for (const c of ['training-cluster', 'spark-logs-nightly', 'notebook'])
        expect(watched.last[c]).toBeGreaterThan(firstGenerators[c]!);
      expect(clusterWrites(env, UA, since).map((e) => `${e.verb} ${e.objectRef?.name}`)).toEqual([]);
    }, 180_000);

    it('3. a commit that adds a connection: synced, the webhook raises the generator exactly once, the pod gets the new configmeta', async () => {
      const before = await generators(env);
      const since = new Date();
      const sha = await commit(addNotebookConnection(tree), 'notebook: also spark-defaults');
      await eventually('synced', () => settledAt(sha), 120_000, 500);
      await waitNotebookSeesSparkDefaults(env);
      const after = await generators(env);
      expect(after.notebook).toBe(before.notebook! + 1);
      // The audit filter of test 2 does see this engine's writes: here it wrote the notebook (a failure
      // lists every writer's user agent).
      expect(notebookWriters(env, since)).toContainEqual(expect.stringContaining(UA));
    }, 180_000);

    it("4. a commit with a forbidden connection: the sync fails with the webhook's denial; the fixing commit recovers", async () => {
      const good = tree;
      await commit(addForbiddenConnection(tree), 'notebook-sql (denied) + a third spark worker');
      const message = await eventually(
        'the sync reports the denial',
        async () => {
          const op = (await application()).status?.operationState;
          const texts = [op?.message, ...((op?.syncResult?.resources ?? []) as Doc[]).map((r) => r.message)];
          return texts.find((t) => /denied the request/.test(String(t))) ?? false;
        },
        120_000,
        500,
      );
      expect(message).toContain('validate-kdcluster.kd-connections.hpe.com');
      expect(message).toContain('pg-main');
      expect((await env.kubectl(['get', 'kdcluster', 'notebook-sql'])).code).not.toBe(0);
      // Argo CD's dry run before a sync is client-side (the webhook is not asked), and a wave's objects are
      // applied together: the admitted change of the same wave lands although its commit failed.
      expect(await sparkWorkers(env)).toBe(3);

      const fixed = await commit(good, 'revert');
      await eventually('recovered', () => settledAt(fixed), 120_000, 500);
      expect(await sparkWorkers(env)).toBe(2);
    }, 300_000);

    it('5. a commit that removes a kdcluster: pruned, the cluster connected to it reports Missing and the health check says Degraded', async () => {
      await commit(removeCluster(tree, 'kafka-events'), 'remove kafka-events');
      await eventually(
        'pruned',
        async () => (await env.kubectl(['get', 'kdcluster', 'kafka-events'])).code !== 0,
        120_000,
      );
      await eventually(
        'spark-logs-nightly reports kafka-events Missing',
        async () => (await connectionStates(env, 'spark-logs-nightly'))['cluster/kafka-events'] === 'Missing',
        60_000,
      );
      await eventually(
        'the Application shows spark-logs-nightly Degraded',
        async () =>
          resourceStates(await application()).find(
            (r) => r.kind === 'KubeDirectorCluster' && r.name === 'spark-logs-nightly',
          )?.health?.status === 'Degraded',
        60_000,
      );
    }, 240_000);
  });
}
