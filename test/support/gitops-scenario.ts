/**
 * What the GitOps engine tests share: the Git repository content made from examples/ (the commits are
 * edits of those files), the kd-connections services the engines work against (admission with its
 * webhooks registered for the test namespace, the reconciler watching it), and the witnesses — the
 * generators over time and the API server's audit log of the engine's writes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { writes, type AuditEvent } from './audit.js';
import type { TestEnv } from './cluster.js';
import { installCrds } from './crds.js';
import { getJson, kubectlOk, memberPod, podConfigMeta } from './kd-objects.js';
import { eventually, repoRoot, sleep } from './processes.js';
import { startAdmission, startReconciler, type ReconcilerProcess, type RunningAdmission } from './services.js';
import { registerWebhooks, waitUntilLive, type Registration } from './webhook-configurations.js';

export type Doc = Record<string, any>;
export const EXAMPLES = join(repoRoot, 'examples');
export const GITOPS_EXAMPLES = join(EXAMPLES, 'gitops');
export const CLUSTERS = ['kafka-events', 'training-cluster', 'spark-logs-nightly', 'notebook', 'pg-main'];
/** The example clusters with connections (the others never get a generator: they need none). */
export const CONNECTED = ['training-cluster', 'spark-logs-nightly', 'notebook'];
const EXAMPLE_FILES = [
  'kustomization.yaml',
  '10-apps.yaml',
  '20-configmaps.yaml',
  '30-secrets.yaml',
  '40-clusters.yaml',
];

export function readDocs(path: string): Doc[] {
  return parseAllDocuments(readFileSync(path, 'utf8')).map((d) => {
    if (d.errors.length > 0) throw new Error(`${path}: ${d.errors.map((e) => e.message).join('; ')}`);
    return d.toJS() as Doc;
  });
}

/** The one document of `kind` named `name` (or the only one of that kind). */
export function pick(docs: Doc[], kind: string, name?: string): Doc {
  const hits = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
  if (hits.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${hits.length}`);
  return structuredClone(hits[0]!);
}

/** Repository path → content: the example manifests under examples/, as committed to a user's repo. */
export type Tree = Record<string, string>;

export function exampleTree(): Tree {
  return Object.fromEntries(
    EXAMPLE_FILES.map((f) => [`examples/${f}`, readFileSync(join(EXAMPLES, f), 'utf8')] as const),
  );
}

/** Edits the documents of one file of the tree (drop a document by returning undefined). */
export function editDocs(tree: Tree, file: string, edit: (d: Doc) => Doc | undefined): Tree {
  const docs = parseAllDocuments(tree[file]!)
    .map((d) => edit(d.toJS() as Doc))
    .filter((d): d is Doc => d !== undefined);
  return { ...tree, [file]: docs.map((d) => stringify(d)).join('---\n') };
}

export const CLUSTERS_FILE = 'examples/40-clusters.yaml';

/** Commit: the notebook also connects to the spark-defaults ConfigMap. */
export function addNotebookConnection(tree: Tree): Tree {
  return editDocs(tree, CLUSTERS_FILE, (d) => {
    if (d.metadata.name === 'notebook') d.spec.connections.configmaps = ['model-prediction', 'spark-defaults'];
    return d;
  });
}

/**
 * Commit: the denied example (a notebook connected to postgres, which the notebook's app does not allow)
 * in wave 2, after pg-main, and in the same commit and wave a change the webhook admits (spark-logs-nightly
 * gets a third worker): whether that change lands shows whether the engine applies a commit all or nothing.
 */
export function addForbiddenConnection(tree: Tree): Tree {
  const denied = pick(readDocs(join(EXAMPLES, 'denied', 'notebook-to-postgres.yaml')), 'KubeDirectorCluster');
  denied.metadata.annotations = { 'argocd.argoproj.io/sync-wave': '2' };
  const edited = editDocs(tree, CLUSTERS_FILE, (d) => {
    if (d.metadata.name === 'spark-logs-nightly') d.spec.roles.find((r: Doc) => r.id === 'worker').members = 3;
    return d;
  });
  return { ...edited, [CLUSTERS_FILE]: `${edited[CLUSTERS_FILE]!}---\n${stringify(denied)}` };
}

/** Workers of spark-logs-nightly in the API server (2 in the examples, 3 after the forbidden commit). */
export async function sparkWorkers(env: TestEnv): Promise<number> {
  const c = await cluster(env, 'spark-logs-nightly');
  return (c.spec.roles as Doc[]).find((r) => r.id === 'worker')!.members as number;
}

/** Commit: a kdcluster removed from Git. */
export function removeCluster(tree: Tree, name: string): Tree {
  return editDocs(tree, CLUSTERS_FILE, (d) => (d.metadata.name === name ? undefined : d));
}

/** The kd-connections services for the test namespace: admission (webhooks live) and the reconciler. */
export interface KdServices {
  admission: RunningAdmission;
  reconciler: ReconcilerProcess;
  stop(): Promise<void>;
}

export async function startKdServices(env: TestEnv): Promise<KdServices> {
  await installCrds(env);
  const admission = await startAdmission(env);
  let registration: Registration | undefined;
  let reconciler: ReconcilerProcess | undefined;
  const stop = async () => {
    await registration?.remove();
    await reconciler?.stop();
    await admission.stop();
  };
  try {
    registration = await registerWebhooks(env, admission);
    await waitUntilLive(env);
    reconciler = await startReconciler(env);
    await reconciler.waitReady();
  } catch (e) {
    await stop();
    throw e;
  }
  return { admission, reconciler, stop };
}

export async function cluster(env: TestEnv, name: string): Promise<Doc> {
  return getJson(env, ['kdcluster', name]);
}

/** spec.configMetaGenerator of every kdcluster in the namespace. */
export async function generators(env: TestEnv): Promise<Record<string, number>> {
  const list = await getJson<{ items: Doc[] }>(env, ['kdcluster']);
  return Object.fromEntries(list.items.map((c) => [c.metadata.name, c.spec.configMetaGenerator ?? 0]));
}

/** The state of each of a cluster's connections (Connected, Missing, ...), by "kind/name". */
export async function connectionStates(env: TestEnv, name: string): Promise<Record<string, string>> {
  const c = await cluster(env, name);
  return Object.fromEntries(
    ((c.status?.connections ?? []) as Doc[]).map((x) => [`${String(x.kind).toLowerCase()}/${x.name}`, x.state]),
  );
}

/** Every listed cluster's pods are at its generator (ConfigMetaSynced) for its current spec. */
export async function allSynced(env: TestEnv, names: string[]): Promise<boolean> {
  for (const name of names) {
    const c = await cluster(env, name);
    const cond = ((c.status?.conditions ?? []) as Doc[]).find((x) => x.type === 'ConfigMetaSynced');
    if (cond?.status !== 'True' || c.status?.lastConfigMetaGenerator !== (c.spec.configMetaGenerator ?? 0))
      return false;
  }
  return true;
}

/**
 * Member pods (not in Git: KubeDirector creates them); the pod webhook and reconciler handle them. Every
 * seat of the two clusters that get pods is filled (one StatefulSet per role, so one ordinal run each),
 * so their first delivery does not wait; the other clusters have no pods.
 */
export const MEMBER_PODS = [
  ['training-cluster-0', 'training-cluster', 'RESTServer'],
  ['training-cluster-1', 'training-cluster', 'RESTServer'],
  ['training-cluster-lb-0', 'training-cluster', 'LoadBalancer'],
  ['notebook-0', 'notebook', 'controller'],
] as const;

/** Creates the member pods (through the pod webhook) and waits until every cluster's pods hold configmeta. */
export async function createMemberPodsAndWaitDelivered(env: TestEnv): Promise<void> {
  for (const [pod, c, role] of MEMBER_PODS)
    await kubectlOk(env, ['create', '-f', '-'], { input: JSON.stringify(memberPod(pod, c, role, { mutated: false })) });
  await eventually(
    'all clusters synced, member pods hold configmeta',
    async () => {
      if (!(await allSynced(env, CLUSTERS))) return false;
      for (const [pod] of MEMBER_PODS) if (!(await podConfigMeta(env, pod))) return false;
      return true;
    },
    60_000,
  );
}

/** After addNotebookConnection: the notebook's pod holds configmeta with the spark-config ConfigMaps. */
export async function waitNotebookSeesSparkDefaults(env: TestEnv): Promise<void> {
  await eventually(
    'notebook-0 holds configmeta with spark-defaults',
    async () => {
      const cm = await podConfigMeta(env, 'notebook-0');
      return (await allSynced(env, ['notebook'])) && cm?.doc.connections.configmaps['spark-config'] !== undefined;
    },
    60_000,
  );
}

/**
 * Samples the generators every `everyMs` for `durationMs` and reports any that went down (a GitOps
 * engine re-applying a stale value would do that).
 */
export async function watchGenerators(
  env: TestEnv,
  durationMs: number,
  everyMs = 500,
): Promise<{ samples: number; decreases: string[]; last: Record<string, number> }> {
  const end = Date.now() + durationMs;
  let last = await generators(env);
  const decreases: string[] = [];
  let samples = 1;
  while (Date.now() < end) {
    await sleep(everyMs);
    const now = await generators(env);
    samples++;
    for (const [name, g] of Object.entries(now))
      if (last[name] !== undefined && g < last[name]!) decreases.push(`${name}: ${last[name]} → ${g}`);
    last = now;
  }
  return { samples, decreases, last };
}

/**
 * Writes by a client (user agent substring) to kdclusters of the namespace since `since`, dry runs left
 * out (they change nothing: a dry-run apply is how both engines compute drift).
 */
export function clusterWrites(env: TestEnv, userAgent: string, since: Date): AuditEvent[] {
  return writes(env.info.auditLogPath, { namespace: env.namespace, userAgent, since }).filter(
    (e) => e.objectRef?.resource === 'kubedirectorclusters' && !/[?&]dryRun=/.test(e.requestURI),
  );
}

/**
 * User agents of every write to the notebook kdcluster since `since`: proves that the user-agent filter
 * of a "no writes" check does match the engine (client-go names the agent after argv[0]).
 */
export function notebookWriters(env: TestEnv, since: Date): string[] {
  return clusterWrites(env, '', since)
    .filter((e) => e.objectRef?.name === 'notebook')
    .map((e) => e.userAgent ?? '');
}
