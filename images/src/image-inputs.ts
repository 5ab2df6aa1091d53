/**
 * The pinned downloads of the product images (images/inputs.json), per architecture: the official Node.js
 * binary from the npm registry (`npm pack node-linux-<arch>@<version>`) and Debian packages (`apt-get
 * download pkg:arch=version`, else Debian's pool over HTTP — which serves only a version Debian has not
 * superseded yet: then update the pins, or put the .deb into the cache), kept in a cache and checked
 * against their pinned hashes every time they are used.
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
import { goArch } from './oci-image.js';

/** An image architecture, in OCI's (GOARCH) spelling. */
export type Arch = 'amd64' | 'arm64';

/** The machine's architecture, which the harness's own images are built for. */
export function hostArch(): Arch {
  const arch = goArch(process.arch);
  if (arch !== 'amd64' && arch !== 'arm64') throw new Error(`images are built for amd64 and arm64, not ${arch}`);
  return arch;
}

export interface DebianArchInput {
  sha256: string;
  /** Paths inside the package (no leading slash) that go into the image, as they are. */
  files: string[];
}

export interface DebianInput extends Partial<Record<Arch, DebianArchInput>> {
  package: string;
  version: string;
  /** Its folder in Debian's pool (main/g/glibc), for an architecture apt is not set up for. */
  pool: string;
}

export interface NodeInput extends Partial<Record<Arch, { package: string; integrity: string }>> {
  version: string;
}

export interface ImageInputs {
  /** What every image is built for (an OCI image index with one manifest each). */
  architectures: Arch[];
  node: NodeInput;
  /** The C runtime of the service images. */
  debian: DebianInput[];
  /** The guestconfig sidecar image: a static busybox, and its applets (one link each). */
  guestconfig: { busybox: DebianInput; applets: string[] };
}

/** images/inputs.json, from images/src (tests) and images/dist (the build) alike. */
export const INPUTS_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', 'inputs.json');

export function readInputs(file = INPUTS_FILE): ImageInputs {
  const inputs = JSON.parse(readFileSync(file, 'utf8')) as ImageInputs;
  const bad = (what: string) => new Error(`${file}: ${what}`);
  if (!inputs.architectures?.length) throw bad('architectures is empty');
  if (!inputs.guestconfig?.busybox) throw bad("guestconfig.busybox (the sidecar's busybox) is missing");
  if (!inputs.guestconfig.applets?.length) throw bad('guestconfig.applets is empty');
  for (const arch of inputs.architectures) {
    const node = inputs.node?.[arch];
    if (!node || !/^sha512-[A-Za-z0-9+/]+=*$/.test(node.integrity))
      throw bad(`node.${arch}.integrity must be the npm "sha512-…" integrity of its package`);
    for (const d of [...(inputs.debian ?? []), inputs.guestconfig.busybox]) {
      const a = d[arch];
      if (!a || !/^[a-f0-9]{64}$/.test(a.sha256))
        throw bad(`debian "${d.package}" needs the sha256 of its ${arch} .deb`);
      if (!a.files.length) throw bad(`debian "${d.package}" takes no ${arch} files`);
      if (!/^[a-z]+\/[a-z0-9.+-]+\/[a-z0-9.+-]+$/.test(d.pool))
        throw bad(`debian "${d.package}" needs its pool folder`);
    }
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
function download(cache: string, expectedName: string, get: (dir: string) => void): string {
  const target = join(cache, expectedName);
  if (existsSync(target)) return target;
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'kd-image-input-'));
  try {
    get(dir);
    const files = readdirSync(dir);
    if (files.length !== 1)
      throw new Error(`downloading ${expectedName} wrote ${files.length} files: ${files.join(', ')}`);
    renameSync(join(dir, files[0]!), target);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return target;
}

/** The Node.js package tarball of `arch`, verified against its pinned integrity. */
export function nodeTarball(inputs: ImageInputs, arch: Arch, cache = inputsCacheDir()): string {
  const { package: pkg, integrity } = inputs.node[arch]!;
  const version = inputs.node.version;
  const file = download(cache, `${pkg}-${version}.tgz`, (dir) =>
    execFileSync('npm', ['pack', `${pkg}@${version}`, '--pack-destination', dir, '--silent'], { stdio: 'ignore' }),
  );
  const actual = `sha512-${hashFile(file, 'sha512', 'base64')}`;
  if (actual !== integrity) {
    rmSync(file, { force: true }); // not kept: the next build downloads it again
    throw new Error(`${file}: integrity ${actual} is not the pinned ${integrity} (images/inputs.json node.${arch})`);
  }
  return file;
}

/** Debian's pool address of a package's .deb (the version without its epoch). */
export function debianPoolUrl(deb: DebianInput, arch: Arch): string {
  const version = deb.version.replace(/^\d+:/, '');
  return `http://deb.debian.org/debian/pool/${deb.pool}/${deb.package}_${version}_${arch}.deb`;
}

/** Fetches `url` into `dir` with Node's fetch, in a child process (the builder is synchronous). */
function fetchInto(url: string, dir: string): void {
  const program = `fetch(process.argv[1]).then(async (r) => {
    if (!r.ok) throw new Error(r.status + ' ' + r.statusText);
    require('node:fs').writeFileSync(process.argv[2], Buffer.from(await r.arrayBuffer()));
  }).catch((e) => { console.error(e.message); process.exit(1); });`;
  execFileSync(process.execPath, ['-e', program, url, join(dir, 'package.deb')], { stdio: 'pipe' });
}

/**
 * A Debian package of `arch` at its pinned version, verified against its pinned sha256: `apt-get download`
 * (the machine's mirrors), else Debian's pool over HTTP (an architecture apt is not set up for).
 */
export function debianPackage(deb: DebianInput, arch: Arch, cache = inputsCacheDir()): string {
  const pinned = deb[arch]!.sha256;
  const name = `${deb.package}_${deb.version.replace(/:/g, '%3a')}_${arch}.deb`;
  const file = download(cache, name, (dir) => {
    try {
      execFileSync('apt-get', ['download', '-q', `${deb.package}:${arch}=${deb.version}`], { cwd: dir, stdio: 'pipe' });
    } catch (apt) {
      const url = debianPoolUrl(deb, arch);
      try {
        fetchInto(url, dir);
      } catch (e) {
        throw new Error(
          `apt-get download ${deb.package}:${arch}=${deb.version} failed (${(apt as Error).message.split('\n')[0]}), ` +
            `and so did ${url} (${String((e as { stderr?: unknown }).stderr ?? (e as Error).message).trim()}); ` +
            `put the .deb (sha256 ${pinned}) into ${cache} as ${name}`,
        );
      }
    }
  });
  const actual = hashFile(file, 'sha256', 'hex');
  if (actual !== pinned) {
    rmSync(file, { force: true }); // not kept: the next build downloads it again
    throw new Error(
      `${file}: sha256 ${actual} is not the pinned ${pinned} (images/inputs.json, ${deb.package} ${arch})`,
    );
  }
  return file;
}

/** Copies the `arch` files of the pinned package into `dir` (same paths), naming any that is missing. */
export function unpackDebianFiles(deb: DebianInput, arch: Arch, dir: string, cache = inputsCacheDir()): void {
  const x = mkdtempSync(join(tmpdir(), 'kd-deb-x-'));
  try {
    execFileSync('dpkg-deb', ['-x', debianPackage(deb, arch, cache), x]);
    for (const f of deb[arch]!.files) {
      if (!lstatSync(join(x, f), { throwIfNoEntry: false }))
        throw new Error(`${deb.package}=${deb.version} (${arch}) has no ${f} (images/inputs.json)`);
      mkdirSync(dirname(join(dir, f)), { recursive: true });
      cpSync(join(x, f), join(dir, f), { verbatimSymlinks: true });
    }
  } finally {
    rmSync(x, { recursive: true, force: true });
  }
}
