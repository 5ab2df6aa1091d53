/**
 * shared/ is one folder per concern, and the concerns depend one way (docs/architecture.md, "Layers"):
 * read from the sources' own import lines, so a new import against the arrows fails here.
 */
import { describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../src', import.meta.url));
const PACKAGE = JSON.parse(readFileSync(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8')) as {
  exports: Record<string, unknown>;
};

/** Which concern may import which: everything else is against the arrows. */
const ALLOWED: Record<string, string[]> = {
  primitives: [],
  domain: ['primitives'],
  configmeta: ['domain', 'primitives'],
  // The plans name the events they ask for by the recorder's input type.
  plan: ['configmeta', 'domain', 'primitives', 'runtime'],
  delivery: ['domain', 'primitives'],
  inspect: ['configmeta', 'domain', 'primitives'],
  runtime: ['primitives'],
  caches: ['configmeta', 'domain', 'primitives', 'runtime'],
  kubedirector: ['runtime'],
};
const MAX_LINES = 400;

const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(SRC, f));

/** Relative imports of a file, as absolute .ts paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)\.js'/g)].map((m) =>
    resolve(dirname(file), `${m[1]}.ts`),
  );
}
const concernOf = (file: string) => relative(SRC, file).split('/')[0]!;

describe('shared/src layers', () => {
  it('every file sits in a concern folder, and the package exports exactly those folders', () => {
    expect(files.filter((f) => dirname(f) === SRC).map((f) => relative(SRC, f))).toEqual([]);
    const folders = [...new Set(files.map(concernOf))].sort();
    expect(folders).toEqual(Object.keys(ALLOWED).sort());
    expect(Object.keys(PACKAGE.exports).sort()).toEqual(folders.map((f) => `./${f}`));
    for (const f of folders) expect(existsSync(join(SRC, f, 'index.ts'))).toBe(true);
  });

  it('imports point one way between concerns', () => {
    const against = files.flatMap((file) =>
      importsOf(file)
        .filter((to) => concernOf(to) !== concernOf(file) && !ALLOWED[concernOf(file)]!.includes(concernOf(to)))
        .map((to) => `${relative(SRC, file)} → ${relative(SRC, to)}`),
    );
    expect(against).toEqual([]);
  });

  it('no file imports a file that imports it back (no circle of any length)', () => {
    // Entry points count too: a file importing its own concern's index.ts closes a circle through it.
    const graph = new Map(files.map((f) => [f, importsOf(f)]));
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (f: string, path: string[]): void => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'open') {
        circles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(SRC, p)).join(' → '));
        return;
      }
      state.set(f, 'open');
      for (const to of graph.get(f) ?? []) visit(to, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of files) visit(f, []);
    expect(circles).toEqual([]);
  });

  it(`no file is over ${MAX_LINES} lines`, () => {
    const long = files
      .map((f) => ({ file: relative(SRC, f), lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > MAX_LINES);
    expect(long).toEqual([]);
  });

  it('the concern entry points list their own folder only (no barrel of everything)', () => {
    for (const folder of Object.keys(ALLOWED)) {
      const entries = [...readFileSync(join(SRC, folder, 'index.ts'), 'utf8').matchAll(/from '([^']+)'/g)].map(
        (m) => m[1]!,
      );
      expect({ folder, outside: entries.filter((e) => !/^\.\/[^/]+\.js$/.test(e)) }).toEqual({ folder, outside: [] });
    }
  });
});
