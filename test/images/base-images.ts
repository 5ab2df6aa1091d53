/**
 * The images the node needs, built from pinned inputs on this machine and cached as OCI archives:
 * - the sandbox ("pause") image: kubernetes' own build/pause/linux/pause.c from the Go module cache
 *   (the module the kubelet is built from), compiled with gcc -static;
 * - a busybox image: Debian's busybox-static package (apt-get download + dpkg -x, nothing installed),
 *   with a symlink per applet, for member pods and tests;
 * - the kd-guestconfig sidecar image: the same busybox plus the sidecar's program from shared/
 *   (sidecarProgram()), which the pod webhook injects into member pods.
 * An archive is rebuilt only when its recipe (this file's IMAGE_RECIPE) or its input changed: the
 * busybox-static version apt offers (downloaded exactly) and, for the sidecar, the program's bytes.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_GUESTCONFIG_IMAGE,
  GUESTCONFIG_DIR,
  SIDECAR_PRIVATE_DIR,
  SIDECAR_PROGRAM,
  SIDECAR_SOURCE_DIR,
  TOOLS_DIR,
  sidecarProgram,
} from '@kd-connections/shared';
import { goArch, writeOciArchive } from './oci-image.js';

export const PAUSE_IMAGE = 'kd.invalid/pause:local';
export const BUSYBOX_IMAGE = 'kd.invalid/busybox:local';
/** The admission service's default --guestconfig-image: the harness and `npm start` use this build. */
export const GUESTCONFIG_IMAGE = DEFAULT_GUESTCONFIG_IMAGE;
/** Bump when what goes into an image changes without its inputs changing. */
const IMAGE_RECIPE = '1';

const here = dirname(fileURLToPath(import.meta.url));
/** bins/kube-node pins the kubernetes module whose pause.c we compile (from test/images or test/dist/images). */
const kubeNodeModule = [
  resolve(here, '../controlplane/bins/kube-node'),
  resolve(here, '../../controlplane/bins/kube-node'),
].find((d) => existsSync(join(d, 'go.mod')));

export function imageCacheDir(): string {
  return (
    process.env.KD_IMAGE_CACHE ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'kd-connections', 'images')
  );
}

export interface BuiltImage {
  name: string;
  archive: string;
}

function goBinary(): string {
  for (const dir of (process.env.PATH ?? '').split(':').concat('/usr/local/go/bin')) {
    if (dir && existsSync(join(dir, 'go'))) return join(dir, 'go');
  }
  throw new Error('go is needed to find pause.c in the module cache (install Go or put it on PATH)');
}

/** pause.c of the pinned kubernetes module (downloaded into the module cache if it is not there yet). */
function pauseSource(): string {
  if (!kubeNodeModule) throw new Error('test/controlplane/bins/kube-node/go.mod not found');
  const gomod = readFileSync(join(kubeNodeModule, 'go.mod'), 'utf8');
  const version = /k8s\.io\/kubernetes (v\S+)/.exec(gomod)?.[1];
  if (!version) throw new Error(`no k8s.io/kubernetes version in ${kubeNodeModule}/go.mod`);
  const out = execFileSync(goBinary(), ['mod', 'download', '-json', `k8s.io/kubernetes@${version}`], {
    cwd: kubeNodeModule,
    env: { ...process.env, GOTOOLCHAIN: 'local', GOWORK: 'off', GOFLAGS: '-mod=readonly' },
    encoding: 'utf8',
  });
  const dir = (JSON.parse(out) as { Dir?: string }).Dir;
  const file = dir && join(dir, 'build/pause/linux/pause.c');
  if (!file || !existsSync(file)) throw new Error(`pause.c not found in k8s.io/kubernetes@${version} (${dir})`);
  return file;
}

/**
 * The archive of image `name`, built by `build` into an empty root file system unless the cached one was
 * built from the same `inputKey` (and recipe). Tests build their own images with it.
 */
export function cachedImage(
  name: string,
  inputKey: string,
  build: (rootfs: string) => { entrypoint?: string[]; cmd?: string[]; keepOwners?: boolean },
): string {
  const cache = imageCacheDir();
  const file = name.replace(/[^a-z0-9]+/g, '-');
  const archive = join(cache, `${file}.tar`);
  const stamp = createHash('sha256').update(`${IMAGE_RECIPE}\n${inputKey}`).digest('hex').slice(0, 16);
  const stampFile = `${archive}.stamp`;
  if (existsSync(archive) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return archive;
  mkdirSync(cache, { recursive: true });
  const rootfs = mkdtempSync(join(tmpdir(), 'kd-rootfs-'));
  try {
    const { keepOwners, ...cfg } = build(rootfs);
    writeOciArchive(rootfs, { name, architecture: goArch(process.arch), ...cfg }, archive, { keepOwners });
    writeFileSync(stampFile, stamp);
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
  return archive;
}

function pauseImage(): BuiltImage {
  const src = pauseSource();
  const archive = cachedImage(PAUSE_IMAGE, readFileSync(src, 'utf8'), (rootfs) => {
    execFileSync('gcc', ['-Os', '-Wall', '-static', '-DVERSION=kd-local', '-o', join(rootfs, 'pause'), src]);
    execFileSync('strip', [join(rootfs, 'pause')]);
    return { entrypoint: ['/pause'] };
  });
  return { name: PAUSE_IMAGE, archive };
}

/** The busybox-static version apt offers here; apt-get download fetches exactly that .deb. */
export function busyboxVersion(): string {
  const policy = execFileSync('apt-cache', ['policy', 'busybox-static'], { encoding: 'utf8' });
  const version = /Candidate:\s*(\S+)/.exec(policy)?.[1];
  if (!version || version === '(none)') throw new Error('apt has no busybox-static package (run apt-get update)');
  return version;
}

/**
 * A busybox root file system in `rootfs`: /bin/busybox with a symlink per applet, the usual top-level
 * directories, and passwd/group with root and nobody.
 */
export function writeBusyboxRootfs(rootfs: string, version: string): void {
  const dl = mkdtempSync(join(tmpdir(), 'kd-deb-'));
  try {
    execFileSync('apt-get', ['download', '-q', `busybox-static=${version}`], { cwd: dl, stdio: 'ignore' });
    const deb = readdirSync(dl).find((f) => f.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download busybox-static=${version} wrote no .deb`);
    execFileSync('dpkg', ['-x', join(dl, deb), join(dl, 'x')]);
    for (const d of ['bin', 'etc', 'tmp', 'proc', 'sys', 'dev', 'root', 'var']) mkdirSync(join(rootfs, d));
    execFileSync('cp', [join(dl, 'x/bin/busybox'), join(rootfs, 'bin/busybox')]);
    const applets = execFileSync(join(rootfs, 'bin/busybox'), ['--list'], { encoding: 'utf8' }).split('\n');
    for (const a of applets) if (a && a !== 'busybox') symlinkSync('busybox', join(rootfs, 'bin', a));
    writeFileSync(
      join(rootfs, 'etc/passwd'),
      'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n',
    );
    writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
  } finally {
    rmSync(dl, { recursive: true, force: true });
  }
}

function busyboxImage(): BuiltImage {
  const version = busyboxVersion();
  const archive = cachedImage(BUSYBOX_IMAGE, `busybox-static=${version}`, (rootfs) => {
    writeBusyboxRootfs(rootfs, version);
    return { cmd: ['/bin/sh'] };
  });
  return { name: BUSYBOX_IMAGE, archive };
}

/**
 * The sidecar: busybox (its `cp`, `mv`, `readlink`, `cmp`, `sleep`, `test` and the `cat` the reconnect
 * hook runs through kubectl exec) and the program. The mount points exist in the image, so the
 * read-only root file system needs nothing created at start.
 */
function guestconfigImage(): BuiltImage {
  const version = busyboxVersion();
  const program = sidecarProgram();
  const archive = cachedImage(GUESTCONFIG_IMAGE, `busybox-static=${version}\n${program}`, (rootfs) => {
    writeBusyboxRootfs(rootfs, version);
    const file = join(rootfs, SIDECAR_PROGRAM.slice(1));
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, program, { mode: 0o755 });
    for (const d of [SIDECAR_SOURCE_DIR, SIDECAR_PRIVATE_DIR, TOOLS_DIR, GUESTCONFIG_DIR])
      mkdirSync(join(rootfs, d.slice(1)), { recursive: true });
    return { entrypoint: [SIDECAR_PROGRAM] };
  });
  return { name: GUESTCONFIG_IMAGE, archive };
}

/** Builds (or finds cached) the pause, busybox and kd-guestconfig archives. */
export function ensureBaseImages(): BuiltImage[] {
  return [pauseImage(), busyboxImage(), guestconfigImage()];
}
