/**
 * The images the node needs, built from pinned inputs on this machine and cached as OCI archives:
 * - the sandbox ("pause") image: kubernetes' own build/pause/linux/pause.c from the Go module cache
 *   (the module the kubelet is built from), compiled with gcc -static;
 * - a busybox image: Debian's busybox-static package pinned in images/inputs.json (apt-get download +
 *   dpkg -x, nothing installed), with a symlink per applet, for member pods and tests;
 * - the kd-guestconfig sidecar image: the product's own root file system (images/src/guestconfig-image.ts:
 *   the pinned busybox of images/inputs.json and the sidecar's program), which the pod webhook injects
 *   into member pods.
 * An archive is rebuilt only when its recipe (this file's IMAGE_RECIPE) or its input changed: the pinned
 * busybox and, for the sidecar, the program's bytes.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sidecarProgram } from '@kd-connections/shared/delivery';
import { DEFAULT_GUESTCONFIG_IMAGE, SIDECAR_PROGRAM } from '@kd-connections/shared/domain';
import {
  goArch,
  readInputs,
  ROOTFS_RECIPE,
  writeBusyboxRootfs,
  writeGuestconfigRootfs,
  writeOciArchive,
} from '@kd-connections/images';

export const PAUSE_IMAGE = 'kd.invalid/pause:local';
export const BUSYBOX_IMAGE = 'kd.invalid/busybox:local';
/** The admission service's default --guestconfig-image: the harness's build (`npm start` pushes the product's to a registry). */
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

/**
 * The cache key of an image built on the pinned busybox (images/inputs.json): the package, its applets and
 * the product's root file system recipe (a change in any rebuilds the harness's images).
 */
export function busyboxKey(inputs = readInputs()): string {
  return JSON.stringify([inputs.guestconfig, ROOTFS_RECIPE]);
}

function busyboxImage(): BuiltImage {
  const archive = cachedImage(BUSYBOX_IMAGE, busyboxKey(), (rootfs) => {
    writeBusyboxRootfs(rootfs);
    return { cmd: ['/bin/sh'] };
  });
  return { name: BUSYBOX_IMAGE, archive };
}

/** The sidecar, built from the product image's root file system (only its name and labels differ). */
export function guestconfigImage(): BuiltImage {
  const archive = cachedImage(GUESTCONFIG_IMAGE, `${busyboxKey()}\n${sidecarProgram()}`, (rootfs) => {
    writeGuestconfigRootfs(rootfs);
    return { entrypoint: [SIDECAR_PROGRAM] };
  });
  return { name: GUESTCONFIG_IMAGE, archive };
}

/** Builds (or finds cached) the pause, busybox and kd-guestconfig archives. */
export function ensureBaseImages(): BuiltImage[] {
  return [pauseImage(), busyboxImage(), guestconfigImage()];
}
