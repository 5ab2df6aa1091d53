/**
 * `npm run pack:kubectl-plugin [-- --out DIR]`: the kubectl plugin as an npm package tarball
 * (kubectl-kd-connections-<version>.tgz, default in dist/kubectl-plugin/), installable with
 * `npm install -g <tarball>` without a registry, or published with `npm publish <tarball>`.
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { packKubectlPlugin } from './kubectl-plugin-package.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values } = parseArgs({
  options: { out: { type: 'string', default: resolve(repoRoot, 'dist', 'kubectl-plugin') } },
});
console.log(packKubectlPlugin(repoRoot, resolve(values.out!)));
