/**
 * `npm run images [-- --tag T] [--registry R] [--label key=value]... [--source URL] [--out DIR] [--image NAME]...
 *  [--push R[/ORG] [--insecure]]`:
 * builds the admission, reconciler and guestconfig (the member pods' sidecar) images, each an OCI image
 * index for linux/amd64 and linux/arm64 in an OCI archive (with Docker's manifest.json for amd64, so
 * `docker load` reads it too), into dist/images/, and writes dist/images/images.json with each image's
 * name, index digest, per-architecture manifest digests and size. The workspaces must be compiled first
 * (`npm run images` runs `tsc -b`).
 *
 * With --push, each image index is then pushed with crane (push.ts) to `R[/ORG]/kd-connections/<image>:<tag>`
 * (both architectures, tag = --tag, default the version) and checked to have the built digest there; the
 * images are built under that name (--registry defaults to the --push target), so the name in their SBOMs
 * is the one pushed. Prints `pushed <reference> <digest>` per image.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gitRevision } from './git-revision.js';
import { buildGuestconfigImage, GUESTCONFIG } from './guestconfig-image.js';
import { checkPushTarget, pushImages, requireCrane } from './push.js';
import {
  buildServiceImage,
  DEFAULT_REGISTRY,
  packageVersion,
  type Service,
  SERVICES,
  sourceAddress,
} from './service-images.js';

const IMAGES = [...SERVICES, GUESTCONFIG] as const;

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

function main(): void {
  const { values } = parseArgs({
    options: {
      tag: { type: 'string' },
      registry: { type: 'string' },
      label: { type: 'string', multiple: true, default: [] },
      out: { type: 'string', default: join(repoRoot, 'dist', 'images') },
      image: { type: 'string', multiple: true },
      source: { type: 'string' },
      // The old name of --image, from when it built only the services.
      service: { type: 'string', multiple: true },
      push: { type: 'string' },
      insecure: { type: 'boolean', default: false },
    },
  });
  // Checked before anything is built: a wrong target or a missing crane fails in a second, not after the build.
  const push = values.push === undefined ? undefined : checkPushTarget(values.push);
  const crane = push === undefined ? undefined : requireCrane();
  const version = packageVersion(repoRoot);
  const labels: Record<string, string> = {};
  for (const l of values.label) {
    const eq = l.indexOf('=');
    if (eq < 1) throw new Error(`--label ${l}: expected key=value`);
    labels[l.slice(0, eq)] = l.slice(eq + 1);
  }
  const images = [...(values.image ?? []), ...(values.service ?? [])];
  for (const i of images)
    if (!(IMAGES as readonly string[]).includes(i)) throw new Error(`--image ${i}: one of ${IMAGES.join(', ')}`);
  const revision = gitRevision(repoRoot);
  const source = sourceAddress(values.source, repoRoot);
  const opts = {
    repoRoot,
    outDir: values.out,
    tag: values.tag ?? version,
    registry: values.registry ?? push ?? DEFAULT_REGISTRY,
    labels,
    ...(revision ? { revision } : {}),
    ...(source ? { source } : {}),
  };
  const built = (images.length ? images : IMAGES).map((image) => {
    const t0 = Date.now();
    const img = image === GUESTCONFIG ? buildGuestconfigImage(opts) : buildServiceImage(image as Service, opts);
    console.log(
      `${img.name}  ${img.digest}  ${(img.bytes / 1e6).toFixed(1)} MB  ${((Date.now() - t0) / 1000).toFixed(1)} s  → ${img.archive}`,
    );
    for (const [arch, digest] of Object.entries(img.platforms))
      console.log(`  linux/${arch}  ${digest}  SBOM ${img.sboms[arch]}`);
    return img;
  });
  writeFileSync(join(values.out, 'images.json'), `${JSON.stringify(built, null, 2)}\n`);
  if (push === undefined) return;
  for (const pushed of pushImages(built, push, opts.tag, {
    ...(crane ? { crane } : {}),
    insecure: values.insecure,
    progress: 'inherit',
  })) {
    console.log(`pushed ${pushed.reference}  ${pushed.digest}`);
    console.log(`  ${pushed.pinned}`);
  }
}

main();
