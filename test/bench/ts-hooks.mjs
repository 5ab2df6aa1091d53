/** Module hooks for ts-loader.mjs: resolve `./x.js` to `./x.ts` next to a .ts importer, transpile .ts. */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath, URL } from 'node:url';
import ts from 'typescript';

export async function resolve(specifier, context, next) {
  const parent = context.parentURL;
  if (
    parent?.endsWith('.ts') &&
    specifier.endsWith('.js') &&
    (specifier.startsWith('./') || specifier.startsWith('../'))
  ) {
    const url = new URL(specifier.slice(0, -3) + '.ts', parent);
    if (existsSync(fileURLToPath(url))) return { url: url.href, format: 'module', shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return next(url, context);
  const fileName = fileURLToPath(url);
  const out = ts.transpileModule(await readFile(fileName, 'utf8'), {
    fileName,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      verbatimModuleSyntax: true,
      inlineSourceMap: true,
      inlineSources: true,
    },
  });
  return { format: 'module', source: out.outputText, shortCircuit: true };
}
