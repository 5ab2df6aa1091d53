/**
 * `npm run release -- <registry>[/<org>] [--plain-http]`: builds the three images, pushes them with crane
 * and the chart with helm (release.ts), then prints the install command for exactly what was pushed.
 * helm and crane are taken from $HELM / $CRANE, else KD_BIN_DIR, the harness's binary cache or PATH.
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gitRevision } from './git-revision.js';
import { findTool, requireCrane } from './push.js';
import { release } from './release.js';
import { sourceAddress } from './service-images.js';

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { 'plain-http': { type: 'boolean', default: false }, source: { type: 'string' } },
});
if (positionals.length !== 1) fail('usage: npm run release -- <registry>[/<org>] [--plain-http] [--source URL]');
const revision = gitRevision(repoRoot);
const source = sourceAddress(values.source, repoRoot);
let crane: string;
try {
  crane = process.env.CRANE || requireCrane();
} catch (e) {
  fail((e as Error).message);
}
let r: ReturnType<typeof release>;
try {
  r = release({
    repoRoot,
    target: positionals[0]!,
    plainHttp: values['plain-http'],
    helm: process.env.HELM || findTool('helm') || fail('helm is needed to push the chart: put it on PATH or set $HELM'),
    crane,
    build: { ...(revision ? { revision } : {}), ...(source ? { source } : {}) },
    log: (line) => console.log(line),
  });
} catch (e) {
  process.stderr.write(`release failed: ${(e as Error).message}\n`);
  process.exit(1);
}
console.log(`\nInstall exactly this release:\n\n${r.installCommand}\n`);
