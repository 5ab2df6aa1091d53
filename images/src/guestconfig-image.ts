/**
 * The guestconfig sidecar image, which the pod webhook injects into every member pod (admission's
 * --guestconfig-image, the chart's podWebhook.image): Debian's static busybox (pinned in
 * images/inputs.json) with a symlink per applet — its `cp`, `mv`, `readlink`, `cmp`, `sleep`, `test` and
 * the `cat` the reconnect hook runs — and the sidecar's program from shared/ (sidecarProgram()). busybox is
 * static, so the image needs no C runtime. The mount points exist in the image, so the read-only root file
 * system needs nothing created at start. The test harness builds its sidecar from the same root file
 * system (test/images/base-images.ts), so the node tests run what users get.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { sidecarProgram } from '@kd-connections/shared/delivery';
import {
  GUESTCONFIG_DIR,
  SIDECAR_PRIVATE_DIR,
  SIDECAR_PROGRAM,
  SIDECAR_SOURCE_DIR,
  TOOLS_DIR,
} from '@kd-connections/shared/domain';
import { type Arch, hostArch, type ImageInputs, readInputs, unpackDebianFiles } from './image-inputs.js';
import { type ImageSpec, writeOciIndexArchive } from './oci-image.js';
import {
  type BuildOptions,
  type BuiltImage,
  DEFAULT_REGISTRY,
  type ImageIdentity,
  imageName,
  ociAnnotations,
  normalizeModes,
  packageVersion,
  sbomLayer,
} from './service-images.js';
import { debianSbomPackage, spdxDocument } from './sbom.js';

export const GUESTCONFIG = 'guestconfig';
/** Bump when writeBusyboxRootfs or writeGuestconfigRootfs change what they write (cached builds of it are keyed on it). */
export const ROOTFS_RECIPE = '1';
/** The program is the project's; busybox is GPL-2.0 (its copyright file is in the image). */
const LICENSES = 'Apache-2.0 AND GPL-2.0-only';

export function guestconfigImageName(tag: string, registry = DEFAULT_REGISTRY): string {
  return imageName(GUESTCONFIG, tag, registry);
}

/** What the image runs and says about itself. */
export function guestconfigImageSpec(id: Omit<ImageIdentity, 'nodeVersion'>): ImageSpec {
  return {
    name: id.name,
    architecture: id.architecture,
    entrypoint: [SIDECAR_PROGRAM],
    env: ['PATH=/bin'],
    labels: {
      ...ociAnnotations('kd-connections-guestconfig', LICENSES, id),
      'org.opencontainers.image.description':
        'kd-connections guestconfig sidecar: keeps /etc/guestconfig/configmeta.json current in a member pod (busybox)',
      ...id.labels,
    },
  };
}

/**
 * A busybox root file system of `arch` in `rootfs`: the pinned static busybox with a link per applet (the
 * pinned list: a binary of another architecture cannot be asked for its own), the usual top-level folders,
 * passwd/group with root and nobody, and what `more` adds; modes normalized, /tmp sticky. The test
 * harness's busybox images are built with it too (for the machine's architecture).
 */
export function writeBusyboxRootfs(
  rootfs: string,
  inputs: ImageInputs = readInputs(),
  more: (rootfs: string) => void = () => undefined,
  arch: Arch = hostArch(),
): void {
  chmodSync(rootfs, 0o755); // a temporary folder is 0700: the layer's "./" would make / unreadable to non-root
  unpackDebianFiles(inputs.guestconfig.busybox, arch, rootfs);
  for (const d of ['etc', 'proc', 'sys', 'dev', 'root', 'var', 'tmp']) mkdirSync(join(rootfs, d), { recursive: true });
  for (const a of inputs.guestconfig.applets) symlinkSync('busybox', join(rootfs, 'bin', a));
  writeFileSync(
    join(rootfs, 'etc/passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n',
  );
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
  more(rootfs);
  normalizeModes(rootfs);
  chmodSync(join(rootfs, 'tmp'), 0o1777);
}

/** The sidecar's root file system of `arch` in `rootfs`: busybox, the program, the folders it mounts. */
export function writeGuestconfigRootfs(rootfs: string, inputs: ImageInputs = readInputs(), arch = hostArch()): void {
  writeBusyboxRootfs(
    rootfs,
    inputs,
    () => {
      const program = join(rootfs, SIDECAR_PROGRAM.slice(1));
      mkdirSync(dirname(program), { recursive: true });
      writeFileSync(program, sidecarProgram(), { mode: 0o755 });
      for (const d of [SIDECAR_SOURCE_DIR, SIDECAR_PRIVATE_DIR, TOOLS_DIR, GUESTCONFIG_DIR])
        mkdirSync(join(rootfs, d.slice(1)), { recursive: true });
    },
    arch,
  );
}

export function buildGuestconfigImage(opts: BuildOptions): BuiltImage {
  const inputs = opts.inputs ?? readInputs();
  const name = guestconfigImageName(opts.tag, opts.registry);
  const version = packageVersion(opts.repoRoot);
  const work = mkdtempSync(join(tmpdir(), 'kd-image-guestconfig-'));
  try {
    const sboms: Record<string, string> = {};
    const platforms = inputs.architectures.map((arch) => {
      const rootfs = join(work, arch);
      const sbom = join(work, `${arch}-sbom`);
      mkdirSync(rootfs);
      mkdirSync(sbom);
      writeGuestconfigRootfs(rootfs, inputs, arch);
      const doc = spdxDocument({ name, version, arch, license: LICENSES }, [
        debianSbomPackage(inputs.guestconfig.busybox, arch),
      ]);
      sboms[arch] = sbomLayer(sbom, doc, join(opts.outDir, `${GUESTCONFIG}-${arch}.spdx.json`));
      const spec = guestconfigImageSpec({
        name,
        version,
        ...(opts.revision ? { revision: opts.revision } : {}),
        architecture: arch,
        ...(opts.labels ? { labels: opts.labels } : {}),
      });
      return { rootfs: [rootfs, sbom], spec };
    });
    mkdirSync(opts.outDir, { recursive: true });
    const archive = join(opts.outDir, `${GUESTCONFIG}.tar`);
    const annotations = ociAnnotations('kd-connections-guestconfig', LICENSES, { ...opts, version });
    const written = writeOciIndexArchive(name, platforms, archive, annotations);
    return { image: GUESTCONFIG, name, archive, ...written, sboms, bytes: statSync(archive).size };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
