/**
 * Helpers for the integration suites: the repository paths they read, installing the CRDs (cluster-scoped,
 * shared by every test file on the control plane, so installed idempotently), and reading kubectl tables.
 */
import { expect } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { RunResult, TestEnv } from '../support/cluster.js';

export const repoPath = (rel: string): string => fileURLToPath(new URL(`../../${rel}`, import.meta.url));

export const CRD_DIR = repoPath('charts/kd-connections/crds');
export const CRD_NAMES = ['kubedirectorapps.kubedirector.hpe.com', 'kubedirectorclusters.kubedirector.hpe.com'];

/** Fails with kubectl's own output when the command did not succeed. */
export function ok(r: RunResult, what: string): RunResult {
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}):\n${r.stderr}\n${r.stdout}`);
  return r;
}

/**
 * kubectl apply of the CRDs (idempotent) and a wait until the API server serves them. Other test files
 * install them at the same time; a lost create race ("already exists") is retried.
 */
export async function installCrds(env: TestEnv): Promise<RunResult> {
  let applied: RunResult;
  for (let attempt = 1; ; attempt++) {
    applied = await env.kubectl(['apply', '-f', CRD_DIR], { namespace: false });
    if (applied.code === 0 || attempt >= 5) break;
    await new Promise((r) => setTimeout(r, 500 * attempt));
  }
  ok(applied, 'kubectl apply CRDs');
  ok(
    await env.kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...CRD_NAMES.map((n) => `crd/${n}`)], {
      namespace: false,
    }),
    'kubectl wait Established',
  );
  return applied;
}

/** The YAML documents of a file, as plain objects. */
export function yamlDocs(path: string): Record<string, unknown>[] {
  return parseAllDocuments(readFileSync(path, 'utf8')).map((d) => d.toJSON() as Record<string, unknown>);
}

/** A kubectl table (default output) as rows of header → cell. Columns are separated by two or more spaces. */
export function parseTable(stdout: string): { headers: string[]; rows: Record<string, string>[] } {
  const lines = stdout.split('\n').filter((l) => l.trim() !== '');
  expect(lines.length).toBeGreaterThan(0);
  const header = lines[0]!;
  // Cell boundaries are where header words start: kubectl pads every column to the header's start.
  const starts: number[] = [];
  const re = /(\S+(?: \S+)*)/g;
  for (let m = re.exec(header); m; m = re.exec(header)) starts.push(m.index);
  const headers = starts.map((s, i) => header.slice(s, starts[i + 1]).trim());
  const rows = lines
    .slice(1)
    .map((line) => Object.fromEntries(headers.map((h, i) => [h, line.slice(starts[i], starts[i + 1]).trim()])));
  return { headers, rows };
}
