/**
 * The guestconfig sidecar image, which the pod webhook injects into every member pod (admission's
 * --guestconfig-image, the chart's podWebhook.image): Debian's static busybox (pinned in
 * images/inputs.json) with a symlink per applet — its `cp`, `mv`, `readlink`, `cmp`, `sleep`, `test` and
 * the `cat` the reconnect hook runs — and the sidecar's program from shared/ (sidecarProgram()). busybox is
 * static, so the image needs no C runtime. The mount points exist in the image, so the read-only root file
 * system needs nothing created at start. The test harness builds its sidecar from the same root file
 * system (test/images/base-images.ts), so the node tests run what users get.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  GUESTCONFIG_DIR,
  SIDECAR_PRIVATE_DIR,
  SIDECAR_PROGRAM,
  SIDECAR_SOURCE_DIR,
  TOOLS_DIR,
  sidecarProgram,
} from '@kd-connections/shared';
import { type ImageInputs, readInputs, unpackDebianFiles } from './image-inputs.js';
import { goArch, type ImageSpec, writeOciArchive } from './oci-image.js';
import {
  type BuildOptions,
  type BuiltImage,
  DEFAULT_REGISTRY,
  type ImageIdentity,
  normalizeModes,
  packageVersion,
} from './service-images.js';

export const GUESTCONFIG = 'guestconfig';

export function guestconfigImageName(tag: string, registry = DEFAULT_REGISTRY): string {
  return `${registry ? `${registry}/` : ''}kd-connections/${GUESTCONFIG}:${tag}`;
}

/** What the image runs and says about itself. */
export function guestconfigImageSpec(id: Omit<ImageIdentity, 'nodeVersion'>): ImageSpec {
  return {
    name: id.name,
    architecture: id.architecture,
    entrypoint: [SIDECAR_PROGRAM],
    env: ['PATH=/bin'],
    labels: {
      'org.opencontainers.image.title': 'kd-connections-guestconfig',
      'org.opencontainers.image.description':
        'kd-connections guestconfig sidecar: keeps /etc/guestconfig/configmeta.json current in a member pod (busybox)',
      'org.opencontainers.image.version': id.version,
      // The program is the project's; busybox is GPL-2.0 (its copyright file is in the image).
      'org.opencontainers.image.licenses': 'Apache-2.0 AND GPL-2.0-only',
      ...(id.revision ? { 'org.opencontainers.image.revision': id.revision } : {}),
      ...id.labels,
    },
  };
}

/**
 * A busybox root file system in `rootfs`: the pinned static busybox with a link per applet, the usual
 * top-level folders, passwd/group with root and nobody, and what `more` adds; modes normalized, /tmp sticky.
 * The test harness's busybox images are built with it too.
 */
export function writeBusyboxRootfs(
  rootfs: string,
  inputs: ImageInputs = readInputs(),
  more: (rootfs: string) => void = () => undefined,
): void {
  chmodSync(rootfs, 0o755); // a temporary folder is 0700: the layer's "./" would make / unreadable to non-root
  unpackDebianFiles(inputs.guestconfig.busybox, rootfs);
  for (const d of ['etc', 'proc', 'sys', 'dev', 'root', 'var', 'tmp']) mkdirSync(join(rootfs, d), { recursive: true });
  const applets = execFileSync(join(rootfs, 'bin/busybox'), ['--list'], { encoding: 'utf8' }).split('\n');
  for (const a of applets) if (a && a !== 'busybox') symlinkSync('busybox', join(rootfs, 'bin', a));
  writeFileSync(
    join(rootfs, 'etc/passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n',
  );
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
  more(rootfs);
  normalizeModes(rootfs);
  chmodSync(join(rootfs, 'tmp'), 0o1777);
}

/** The sidecar's root file system in `rootfs`: busybox, the program, the folders it mounts. */
export function writeGuestconfigRootfs(rootfs: string, inputs: ImageInputs = readInputs()): void {
  writeBusyboxRootfs(rootfs, inputs, () => {
    const program = join(rootfs, SIDECAR_PROGRAM.slice(1));
    mkdirSync(dirname(program), { recursive: true });
    writeFileSync(program, sidecarProgram(), { mode: 0o755 });
    for (const d of [SIDECAR_SOURCE_DIR, SIDECAR_PRIVATE_DIR, TOOLS_DIR, GUESTCONFIG_DIR])
      mkdirSync(join(rootfs, d.slice(1)), { recursive: true });
  });
}

export function buildGuestconfigImage(opts: BuildOptions): BuiltImage {
  const inputs = opts.inputs ?? readInputs();
  const architecture = goArch(process.arch);
  if (architecture !== inputs.architecture) {
    throw new Error(`images/inputs.json pins ${inputs.architecture} inputs; this machine is ${architecture}`);
  }
  const name = guestconfigImageName(opts.tag, opts.registry);
  const rootfs = mkdtempSync(join(tmpdir(), 'kd-image-guestconfig-'));
  try {
    writeGuestconfigRootfs(rootfs, inputs);
    const spec = guestconfigImageSpec({
      name,
      version: packageVersion(opts.repoRoot),
      ...(opts.revision ? { revision: opts.revision } : {}),
      architecture,
      ...(opts.labels ? { labels: opts.labels } : {}),
    });
    mkdirSync(opts.outDir, { recursive: true });
    const archive = join(opts.outDir, `${GUESTCONFIG}.tar`);
    const digest = writeOciArchive(rootfs, spec, archive);
    return { image: GUESTCONFIG, name, archive, digest, bytes: statSync(archive).size };
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}
