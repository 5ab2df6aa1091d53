/**
 * The two images the node needs, built from pinned inputs on this machine and cached as OCI archives:
 * - the sandbox ("pause") image: kubernetes' own build/pause/linux/pause.c from the Go module cache
 *   (the module the kubelet is built from), compiled with gcc -static;
 * - a busybox image: Debian's busybox-static package (apt-get download + dpkg -x, nothing installed),
 *   with a symlink per applet, for member pods and tests.
 * An archive is rebuilt only when its recipe (this file's IMAGE_RECIPE) or its input changed.
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
import { goArch, writeOciArchive } from './oci-image.js';

export const PAUSE_IMAGE = 'kd.invalid/pause:local';
export const BUSYBOX_IMAGE = 'kd.invalid/busybox:local';
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

function cached(name: string, inputKey: string, build: (rootfs: string) => { entrypoint?: string[]; cmd?: string[] }) {
  const cache = imageCacheDir();
  const file = name.replace(/[^a-z0-9]+/g, '-');
  const archive = join(cache, `${file}.tar`);
  const stamp = createHash('sha256').update(`${IMAGE_RECIPE}\n${inputKey}`).digest('hex').slice(0, 16);
  const stampFile = `${archive}.stamp`;
  if (existsSync(archive) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return archive;
  mkdirSync(cache, { recursive: true });
  const rootfs = mkdtempSync(join(tmpdir(), 'kd-rootfs-'));
  try {
    const cfg = build(rootfs);
    writeOciArchive(rootfs, { name, architecture: goArch(process.arch), ...cfg }, archive);
    writeFileSync(stampFile, stamp);
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
  return archive;
}

function pauseImage(): BuiltImage {
  const src = pauseSource();
  const archive = cached(PAUSE_IMAGE, readFileSync(src, 'utf8'), (rootfs) => {
    execFileSync('gcc', ['-Os', '-Wall', '-static', '-DVERSION=kd-local', '-o', join(rootfs, 'pause'), src]);
    execFileSync('strip', [join(rootfs, 'pause')]);
    return { entrypoint: ['/pause'] };
  });
  return { name: PAUSE_IMAGE, archive };
}

function busyboxImage(): BuiltImage {
  // The candidate version pins the input; apt-get download fetches exactly that .deb.
  const policy = execFileSync('apt-cache', ['policy', 'busybox-static'], { encoding: 'utf8' });
  const version = /Candidate:\s*(\S+)/.exec(policy)?.[1];
  if (!version || version === '(none)') throw new Error('apt has no busybox-static package (run apt-get update)');
  const archive = cached(BUSYBOX_IMAGE, `busybox-static=${version}`, (rootfs) => {
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
    return { cmd: ['/bin/sh'] };
  });
  return { name: BUSYBOX_IMAGE, archive };
}

/** Builds (or finds cached) the pause and busybox archives. */
export function ensureBaseImages(): BuiltImage[] {
  return [pauseImage(), busyboxImage()];
}
