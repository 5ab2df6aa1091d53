/**
 * The kubectl plugin as an npm package, `kubectl-kd-connections-<version>.tgz`, which `npm install -g` (or
 * `npm publish`) takes as it is: the compiled plugin with the compiled `shared` library inside it (its
 * import rewritten to the copy), and every run-time dependency bundled (the production closure of the
 * `cli` workspace, from package-lock.json, copied from node_modules), so installing it needs no registry
 * and gets the versions the tests ran with. Its bin is `kubectl-kd_connections`: kubectl's name for
 * `kubectl kd-connections`. The workspaces must be compiled first.
 */
import { currentOutputFilter } from './built-output.js';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { productionClosure, type Lockfile } from './production-closure.js';

export const PLUGIN_PACKAGE = 'kubectl-kd-connections';
export const PLUGIN_BIN = 'kubectl-kd_connections';
const SHARED_IMPORT = /(from\s+|import\s*\(\s*)'@kd-connections\/shared\/([a-z-]+)'/g;

/** Copies the compiled .js files of workspace `ws` (recursively) to `to`: no declarations, maps or stale output. */
function copyJs(repoRoot: string, ws: string, to: string): void {
  cpSync(join(repoRoot, ws, 'dist'), to, { recursive: true, filter: currentOutputFilter(join(repoRoot, ws)) });
}

/**
 * Builds the tarball into `outDir` and returns its path. `npm` is the npm to run (`npm pack` writes the
 * tarball exactly as `npm publish` would upload it).
 */
export function packKubectlPlugin(repoRoot: string, outDir: string, npm = 'npm'): string {
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as Lockfile;
  const closure = productionClosure(lock, 'cli');
  const cliPkg = JSON.parse(readFileSync(join(repoRoot, 'cli', 'package.json'), 'utf8')) as {
    version: string;
    description: string;
    license: string;
  };
  const stage = mkdtempSync(join(tmpdir(), 'kd-plugin-pack-'));
  try {
    copyJs(repoRoot, 'cli', join(stage, 'dist'));
    copyJs(repoRoot, 'shared', join(stage, 'dist', 'shared'));
    for (const f of readdirSync(join(stage, 'dist')).filter((f) => f.endsWith('.js'))) {
      const path = join(stage, 'dist', f);
      const text = readFileSync(path, 'utf8').replace(SHARED_IMPORT, "$1'./shared/$2/index.js'");
      // A workspace import left over (a new form, or a file in a subfolder) would fail only on a user's machine.
      if (text.includes("'@kd-connections/")) throw new Error(`kubectl plugin package: ${f} still imports a workspace`);
      writeFileSync(path, text);
    }
    // The closure's packages at their paths in the lock (a nested copy stays nested), but those installed in
    // a workspace's own node_modules (shared/node_modules/semver): the package is one root, so at its top.
    const dependencies: Record<string, string> = {};
    const placed = new Map<string, string>();
    for (const at of closure.packages) {
      const to = at.replace(/^(?!node_modules\/)[^/]+\/node_modules\//, 'node_modules/');
      const before = placed.get(to);
      if (before) throw new Error(`kubectl plugin package: ${before} and ${at} would both be ${to}`);
      placed.set(to, at);
      cpSync(join(repoRoot, at), join(stage, to), { recursive: true });
      const top = /^node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(to);
      if (top) dependencies[top[1]!] = lock.packages[at]!.version!;
    }
    const pkg = {
      name: PLUGIN_PACKAGE,
      version: cliPkg.version,
      description: cliPkg.description,
      license: cliPkg.license,
      type: 'module',
      bin: { [PLUGIN_BIN]: 'dist/main.js' },
      engines: { node: '>=22' },
      files: ['dist'],
      dependencies,
      bundleDependencies: Object.keys(dependencies).sort(),
    };
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
    mkdirSync(outDir, { recursive: true });
    const out = execFileSync(npm, ['pack', '--json', '--pack-destination', outDir], {
      cwd: stage,
      encoding: 'utf8',
      env: { ...process.env, npm_config_ignore_scripts: 'true' },
    });
    const packed = JSON.parse(out) as { filename: string }[];
    return join(outDir, packed[0]!.filename);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}
