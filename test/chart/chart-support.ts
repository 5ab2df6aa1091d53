/**
 * Helpers for the chart tests: render the chart, read container args out of it, make a kubeconfig from
 * a ServiceAccount token, run the services on loopback the way the chart's Deployments would (with the
 * harness's one service starter, test/support/services.ts), and read
 * `kubectl auth can-i --list`.
 *
 * Safety: the chart is only ever INSTALLED in url mode with a 127.0.0.1 URL. Service-mode manifests are
 * rendered (helm template) and inspected, never applied, apart from RBAC objects picked out of them.
 */
import { expect } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { TestEnv } from '../support/cluster.js';
import { ok, repoRoot } from '../support/processes.js';
import { startAdmission, startReconciler, type ReconcilerProcess, type RunningAdmission } from '../support/services.js';

export const CHART = join(repoRoot, 'charts', 'kd-connections');
export const EXAMPLES = join(repoRoot, 'examples');

export type Doc = Record<string, any>;

export function parseDocs(text: string): Doc[] {
  return parseAllDocuments(text)
    .map((d) => d.toJSON() as Doc | null)
    .filter((d): d is Doc => d !== null && typeof d === 'object');
}

/** `--set` arguments from a flat map (values are passed as given; lists as {a,b}). */
export function sets(values: Record<string, string | number | boolean>): string[] {
  return Object.entries(values).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
}

/**
 * `helm template` of the chart. Without `tests`, the `helm test` hooks are left out (--skip-tests): they are
 * not part of what an install applies (Argo CD skips them too), only of `helm test`.
 */
export async function helmTemplate(
  env: TestEnv,
  release: string,
  namespace: string,
  args: string[] = [],
  o: { tests?: boolean } = {},
): Promise<{ docs: Doc[]; text: string }> {
  const skip = o.tests ? [] : ['--skip-tests'];
  const r = ok(
    await env.helm(['template', release, CHART, '--namespace', namespace, ...skip, ...args]),
    'helm template',
  );
  return { docs: parseDocs(r.stdout), text: r.stdout };
}

/**
 * Every rendered object is valid for the real API server: a server-side dry run with strict field
 * validation (nothing is persisted; webhook configurations' CEL is compiled) answers for each, cleanly.
 */
export async function expectServerDryRunClean(env: TestEnv, docs: Doc[]): Promise<void> {
  // The CRDs may exist already on the shared control plane (other files apply them server-side): a
  // client-side apply would then warn about the missing last-applied annotation, so they go server-side.
  const crds = docs.filter((d) => d.kind === 'CustomResourceDefinition');
  const rest = docs.filter((d) => d.kind !== 'CustomResourceDefinition');
  const runs: [string[], Doc[]][] = [
    [['apply', '--dry-run=server', '--validate=strict'], rest],
    [
      [
        'apply',
        '--server-side',
        '--force-conflicts',
        '--field-manager=kd-render-check',
        '--dry-run=server',
        '--validate=strict',
      ],
      crds,
    ],
  ];
  for (const [args, items] of runs) {
    if (items.length === 0) continue;
    const r = await env.kubectl([...args, '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items }),
      namespace: false,
    });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout.trim().split('\n')).toHaveLength(items.length);
    for (const line of r.stdout.trim().split('\n')) expect(line).toMatch(/ \(server dry run\)$/);
  }
}

export function find(docs: Doc[], kind: string, name?: string): Doc[] {
  return docs.filter((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
}

export function one(docs: Doc[], kind: string, name?: string): Doc {
  const found = find(docs, kind, name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name ?? ''}, found ${found.length}`);
  return found[0]!;
}

export function containerArgs(deployment: Doc): string[] {
  return deployment.spec.template.spec.containers[0].args as string[];
}

/** The chart's args without those of bootstrap mode (its Secret, Service, configurations, path token). */
export function withoutBootstrapArgs(args: string[]): string[] {
  const bootstrapOnly = ['--tls-', '--service-', '--webhook-configurations', '--webhook-path-token'];
  return args.filter((a) => !bootstrapOnly.some((p) => a.startsWith(p)));
}

/** Replaces (or adds) `--flag=value` arguments; `undefined` drops the flag. */
export function withArgs(args: string[], overrides: Record<string, string | undefined>): string[] {
  const kept = args.filter((a) => !Object.keys(overrides).some((f) => a === `--${f}` || a.startsWith(`--${f}=`)));
  return [
    ...kept,
    ...Object.entries(overrides)
      .filter(([, v]) => v !== undefined)
      .map(([f, v]) => `--${f}=${v}`),
  ];
}

export function randomName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

export class TempDir {
  readonly path = mkdtempSync(join(tmpdir(), 'kd-chart-test-'));
  file(name: string, content: string, mode = 0o600): string {
    const p = join(this.path, name);
    writeFileSync(p, content, { mode });
    return p;
  }
  remove(): void {
    rmSync(this.path, { recursive: true, force: true });
  }
}

/**
 * A kubeconfig that authenticates with a TokenRequest token of a ServiceAccount — what a pod of the
 * chart's Deployment would get mounted.
 */
export async function serviceAccountKubeconfig(env: TestEnv, dir: TempDir, namespace: string, sa: string) {
  const token = ok(
    await env.kubectl(['create', 'token', sa, '--duration=2h'], { namespace }),
    `kubectl create token ${sa}`,
  ).stdout.trim();
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'kd-test',
        cluster: {
          server: env.info.server,
          'certificate-authority-data': Buffer.from(env.info.caPem).toString('base64'),
        },
      },
    ],
    users: [{ name: sa, user: { token } }],
    contexts: [{ name: sa, context: { cluster: 'kd-test', user: sa, namespace } }],
    'current-context': sa,
  };
  return dir.file(`kubeconfig-${sa}`, JSON.stringify(kubeconfig));
}

export interface LoopbackAdmission extends RunningAdmission {
  /** The chart's container args with what only makes sense in a pod replaced. */
  args: string[];
}

/**
 * Runs the admission service with the args the chart gives its container, except what only makes sense
 * in a pod: it listens on 127.0.0.1:`port` with the control plane's webhook serving pair from files.
 */
export async function startLoopbackAdmission(
  env: TestEnv,
  dir: TempDir,
  chartArgs: string[],
  kubeconfig: string,
  port: number,
): Promise<LoopbackAdmission> {
  const cert = dir.file('webhook-tls.crt', env.info.webhookServing.certPem, 0o644);
  const key = dir.file('webhook-tls.key', env.info.webhookServing.keyPem);
  const args = withArgs(chartArgs, {
    port: String(port),
    'bind-address': '127.0.0.1',
    'tls-cert-file': cert,
    'tls-key-file': key,
    kubeconfig,
    // Every review's line: the tests read them (the chart's default, info, logs only denials).
    'log-level': 'debug',
  });
  const svc = await startAdmission(env, args, { port, kubeconfig, certificateFiles: false });
  return Object.assign(svc, { args });
}

export interface LoopbackReconciler extends ReconcilerProcess {
  /** The chart's container args with what only makes sense in a pod replaced. */
  args: string[];
}

/** Runs the reconciler with the chart's container args; metrics on loopback, identity like a pod's. */
export async function startLoopbackReconciler(
  env: TestEnv,
  chartArgs: string[],
  kubeconfig: string,
  identity: string,
): Promise<LoopbackReconciler> {
  // The metrics address is chosen by startReconciler (a free port on 127.0.0.1).
  const args = withArgs(chartArgs, { 'metrics-bind-address': undefined, kubeconfig, 'watch-timeout-seconds': '60' });
  // No namespace: the chart's flags say what to watch. KD_RECONCILER_LEADER_ELECT_IDENTITY comes from the pod name in the chart
  // (fieldRef); here it is given directly.
  const rec = await startReconciler(
    { info: env.info },
    { args, kubeconfig, env: { KD_RECONCILER_LEADER_ELECT_IDENTITY: identity } },
  );
  return Object.assign(rec, { args });
}

export interface CanIRow {
  resource: string;
  nonResourceUrls: string;
  resourceNames: string[];
  verbs: string[];
}

/** Parses the table `kubectl auth can-i --list` prints. */
export function parseCanI(stdout: string): CanIRow[] {
  const lines = stdout.trim().split('\n');
  const header = lines.shift() ?? '';
  if (!/^Resources\s+Non-Resource URLs\s+Resource Names\s+Verbs/.test(header))
    throw new Error(`unexpected can-i header: ${header}`);
  return lines.map((line) => {
    // Columns: resource, [urls], [names], [verbs]; the bracketed lists may hold spaces.
    const m = /^(\S*)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$/.exec(line);
    if (!m) throw new Error(`unexpected can-i line: ${line}`);
    const list = (s: string) => s.split(/\s+/).filter(Boolean);
    return { resource: m[1]!, nonResourceUrls: m[2]!, resourceNames: list(m[3]!), verbs: list(m[4]!).sort() };
  });
}

/** One canonical string per (resource, names, verb) so sets can be compared. */
export function permissions(rows: CanIRow[]): string[] {
  const out = new Set<string>();
  for (const r of rows) {
    const target = r.resource || `url:${r.nonResourceUrls}`;
    const names = r.resourceNames.length ? `[${[...r.resourceNames].sort().join(',')}]` : '';
    for (const v of r.verbs) out.add(`${target}${names} ${v}`);
  }
  return [...out].sort();
}

export async function canIList(env: TestEnv, user: string, namespace: string): Promise<CanIRow[]> {
  const r = ok(await env.kubectl(['auth', 'can-i', '--list', `--as=${user}`], { namespace }), 'can-i --list');
  return parseCanI(r.stdout);
}

/** What the account may do in `namespace` beyond what every authenticated ServiceAccount may do. */
export async function grantedBeyondBaseline(
  env: TestEnv,
  namespace: string,
  saNamespace: string,
  sa: string,
): Promise<{ extra: string[]; rows: CanIRow[] }> {
  const rows = await canIList(env, `system:serviceaccount:${saNamespace}:${sa}`, namespace);
  // An account with no bindings at all, in the same namespace: discovery, self-reviews and the like.
  const baseline = new Set(
    permissions(await canIList(env, `system:serviceaccount:${saNamespace}:kd-no-bindings-${sa.length}`, namespace)),
  );
  return { extra: permissions(rows).filter((p) => !baseline.has(p)), rows };
}
