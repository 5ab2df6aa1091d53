/**
 * The Argo CD health check in docs/operations.md, run by Lua 5.4 (what Argo CD embeds: gopher-lua speaks
 * 5.1, and the snippet keeps to what both have) against statuses that buildStatus produces: Healthy only
 * when Ready=True for the current generation, Degraded when Stalled, Progressing otherwise.
 */
import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildStatus, type StatusInput } from '../src/plan/cluster-status.js';
import type { KDClusterStatus } from '../src/domain/types.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const README = join(ROOT, 'docs', 'operations.md');
/** The ConfigMap users merge into argocd-cm; test/gitops/argocd.test.ts installs it in a real Argo CD. */
const EXAMPLE = join(ROOT, 'examples', 'gitops', 'argocd', 'argocd-cm-kdcluster-health.yaml');

/** The YAML between the README's markers (`data:` and the customization). */
function snippetBlock(): string {
  const text = readFileSync(README, 'utf8');
  const block = /<!-- argocd-health-lua: begin[^>]*-->\n```yaml\n([\s\S]*?)```\n<!-- argocd-health-lua: end -->/.exec(
    text,
  );
  if (!block) throw new Error(`${README}: no argocd-health-lua block`);
  return block[1]!;
}

/** The Lua body of the health customization between the README's markers. */
function snippet(): string {
  const lines = snippetBlock().split('\n');
  const start = lines.findIndex((l) =>
    l.includes('resource.customizations.health.kubedirector.hpe.com_KubeDirectorCluster: |'),
  );
  if (start < 0) throw new Error('the block has no health customization for KubeDirectorCluster');
  return lines
    .slice(start + 1)
    .map((l) => l.replace(/^ {4}/, ''))
    .join('\n');
}

/** A JSON value as a Lua table constructor. */
function lua(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `{${v.map(lua).join(', ')}}`;
  return `{${Object.entries(v as Record<string, unknown>)
    .map(([k, x]) => `[${JSON.stringify(k)}] = ${lua(x)}`)
    .join(', ')}}`;
}

function health(obj: unknown): { status: string; message: string } {
  const program = `local obj = ${lua(obj)}\nlocal function check()\n${snippet()}\nend\nlocal hs = check()\nio.write(hs.status, "\\n", hs.message or "")`;
  let out: string;
  try {
    out = execFileSync('lua5.4', ['-'], { input: program, encoding: 'utf8' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error('lua5.4 is not installed (Debian package lua5.4; .ci/run installs it)');
    throw e;
  }
  const [status, ...message] = out.split('\n');
  return { status: status!, message: message.join('\n') };
}

const T0 = '2026-12-03T10:00:00Z';
const base: StatusInput = {
  previous: undefined,
  generation: 4,
  connections: [{ kind: 'ConfigMap', name: 'model', state: 'Connected' }],
  hash: 'h',
  members: [{ pod: 'p0', role: 'controller', id: 'p0', fqdn: 'p0.x', domain: 'x', ready: true, present: true }],
  delivery: { generator: 2, synced: ['p0'], failed: {} },
  now: T0,
};
const cluster = (status: KDClusterStatus | undefined, generation = 4) => ({
  metadata: { name: 'nb', generation },
  ...(status ? { status } : {}),
});

describe('the README Argo CD health check', () => {
  it('Healthy when Ready=True for the current generation', () => {
    expect(health(cluster(buildStatus(base)))).toEqual({
      status: 'Healthy',
      message: '1/1 connections connected; configmeta generator 2 written to 1/1 member pods',
    });
  });

  it('Progressing before the reconciler wrote any status', () => {
    expect(health(cluster(undefined)).status).toBe('Progressing');
  });

  it('Progressing when the status describes an older generation, even with Ready=True', () => {
    expect(health(cluster(buildStatus(base), 5))).toEqual({
      status: 'Progressing',
      message: 'the reconciler has not seen generation 5 yet',
    });
  });

  it('Progressing while a pod write is retried (Reconciling)', () => {
    const s = buildStatus({ ...base, delivery: { generator: 2, synced: [], failed: { p0: 'conflict' } } });
    expect(health(cluster(s))).toEqual({
      status: 'Progressing',
      message: expect.stringMatching(/^PodPatchFailed: configmeta generator 2 written to 0\/1 member pods/),
    });
  });

  it('Degraded when Stalled: the user has to act', () => {
    const s = buildStatus({ ...base, connections: [{ kind: 'ConfigMap', name: 'model', state: 'Missing' }] });
    expect(health(cluster(s))).toEqual({ status: 'Degraded', message: 'Missing: configmap model: Missing' });
  });

  it('is the same check as examples/gitops/argocd/argocd-cm-kdcluster-health.yaml (the one real Argo CD runs)', () => {
    const example = readFileSync(EXAMPLE, 'utf8');
    const data = example.slice(example.indexOf('\ndata:\n') + 1);
    expect(data).toBe(snippetBlock());
  });
});
