/**
 * Every relative link in the project's Markdown resolves: the file exists, and an anchor names a heading
 * of the target (GitHub's slugs). Addresses on the web are not fetched (the tests stay on loopback).
 */
import { describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { repoRoot } from '../support/processes.js';

const SKIP = new Set(['node_modules', 'dist', '.git', 'results', 'bins']);

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (SKIP.has(name)) return [];
    if (statSync(p).isDirectory()) return markdownFiles(p);
    return name.endsWith('.md') ? [p] : [];
  });
}

/** The text outside fenced code blocks (links and headings there are examples). */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, '');

/** GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`, repeats numbered. */
export function headingAnchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(text).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe('Markdown links', () => {
  const files = markdownFiles(repoRoot);

  it('finds the project documentation', () => {
    const names = files.map((f) => relative(repoRoot, f));
    for (const f of [
      'README.md',
      'CHANGELOG.md',
      'docs/flags.md',
      'docs/reliability.md',
      'charts/kd-connections/README.md',
    ])
      expect(names).toContain(f);
  });

  it('headingAnchors follows GitHub: `Running next to KubeDirector` → running-next-to-kubedirector, repeats numbered', () => {
    expect([
      ...headingAnchors(
        '# Running next to KubeDirector\n## `helm test`\n## Pod spec, global values and labels\n## A\n## A\n',
      ),
    ]).toEqual(['running-next-to-kubedirector', 'helm-test', 'pod-spec-global-values-and-labels', 'a', 'a-1']);
  });

  it('every relative link names a file that exists and a heading it has', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      for (const m of prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/i.test(target)) continue;
        checked++;
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const resolved = path ? join(dirname(file), decodeURIComponent(path)) : file;
        const where = `${relative(repoRoot, file)}: ${target}`;
        if (!existsSync(resolved)) broken.push(`${where} (no such file)`);
        else if (anchor && resolved.endsWith('.md') && !headingAnchors(readFileSync(resolved, 'utf8')).has(anchor))
          broken.push(`${where} (no heading #${anchor})`);
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });
});
