/**
 * Writes an OCI image layout — gzip layers, their config, a manifest and an index — and packs it into
 * the tar archive `ctr images import` reads. The runtime never pulls: every image a pod uses is built
 * here from files on this machine and imported, and pods say `imagePullPolicy: Never`. The same archive
 * carries Docker's `manifest.json`, so `docker load` reads it too. The product images (images/) are
 * written by this builder as well.
 *
 * The JSON documents come from a pure function (tested without a file system); the I/O around it packs
 * the root file system with GNU tar in a fixed order with fixed owners and times, so the same inputs give
 * the same digests.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';

export const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

export interface ImageSpec {
  /** A full reference, e.g. kd.invalid/busybox:local. `.invalid` can never resolve to a registry. */
  name: string;
  entrypoint?: string[];
  cmd?: string[];
  env?: string[];
  /** GOARCH spelling (amd64, arm64). */
  architecture: string;
  /** uid:gid the process runs as. */
  user?: string;
  workingDir?: string;
  /** e.g. ['9443/tcp'] */
  exposedPorts?: string[];
  labels?: Record<string, string>;
}

export interface Blob {
  digest: string;
  bytes: Buffer;
}

export function sha256Digest(bytes: Buffer | string): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** The Go architecture name of a Node.js process.arch. */
export function goArch(nodeArch: string): string {
  const map: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x' };
  const a = map[nodeArch];
  if (!a) throw new Error(`no OCI architecture known for process.arch "${nodeArch}"`);
  return a;
}

/** gzip of identical layers (both service images share two) is computed once per process. */
const gzipByDiffId = new Map<string, Buffer>();

/** Forgets the compressed layers (a determinism test's second build must compress its own). */
export function forgetCompressedLayers(): void {
  gzipByDiffId.clear();
}
function gzipOnce(tar: Buffer): Buffer {
  const id = sha256Digest(tar);
  let gz = gzipByDiffId.get(id);
  if (!gz) gzipByDiffId.set(id, (gz = gzipSync(tar)));
  return gz;
}

/**
 * The blobs and index of an image. Each entry of `layerTars` is an uncompressed layer, lowest first (its
 * digest is the config's diff_id); the layer blob is its gzip.
 */
export function ociImage(
  spec: ImageSpec,
  layerTars: Buffer | readonly Buffer[],
): { blobs: Blob[]; index: object; layout: object; dockerManifest: object[] } {
  if (!/^[a-z0-9.-]+(:\d+)?\/[a-z0-9._/-]+:[\w][\w.-]{0,127}$/.test(spec.name)) {
    throw new Error(`image name "${spec.name}" is not a full reference (host/path:tag)`);
  }
  const tars = Buffer.isBuffer(layerTars) ? [layerTars] : layerTars;
  const gzipped = tars.map((t) => gzipOnce(t));
  const layers: Descriptor[] = gzipped.map((gz) => ({
    mediaType: MEDIA.layer,
    digest: sha256Digest(gz),
    size: gz.length,
  }));
  const config = Buffer.from(
    JSON.stringify({
      architecture: spec.architecture,
      os: 'linux',
      config: {
        ...(spec.user ? { User: spec.user } : {}),
        ...(spec.exposedPorts ? { ExposedPorts: Object.fromEntries(spec.exposedPorts.map((p) => [p, {}])) } : {}),
        ...(spec.entrypoint ? { Entrypoint: spec.entrypoint } : {}),
        ...(spec.cmd ? { Cmd: spec.cmd } : {}),
        Env: spec.env ?? ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
        ...(spec.workingDir ? { WorkingDir: spec.workingDir } : {}),
        ...(spec.labels ? { Labels: spec.labels } : {}),
      },
      rootfs: { type: 'layers', diff_ids: tars.map((t) => sha256Digest(t)) },
    }),
  );
  const configDesc: Descriptor = { mediaType: MEDIA.config, digest: sha256Digest(config), size: config.length };
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA.manifest,
      config: configDesc,
      layers,
      ...(spec.labels ? { annotations: spec.labels } : {}),
    }),
  );
  const index = {
    schemaVersion: 2,
    mediaType: MEDIA.index,
    manifests: [
      {
        mediaType: MEDIA.manifest,
        digest: sha256Digest(manifest),
        size: manifest.length,
        platform: { architecture: spec.architecture, os: 'linux' },
        annotations: {
          // containerd names the imported image after this one; the OCI one keeps other tools happy.
          'io.containerd.image.name': spec.name,
          'org.opencontainers.image.ref.name': spec.name.slice(spec.name.lastIndexOf(':') + 1),
        },
      },
    ],
  };
  const blobPath = (d: string) => `blobs/sha256/${d.slice('sha256:'.length)}`;
  return {
    blobs: [
      ...layers.map((l, i) => ({ digest: l.digest, bytes: gzipped[i]! })),
      { digest: configDesc.digest, bytes: config },
      { digest: sha256Digest(manifest), bytes: manifest },
    ],
    index,
    layout: { imageLayoutVersion: '1.0.0' },
    // `docker load` reads this (gzip layers included); containerd and skopeo read index.json.
    dockerManifest: [
      { Config: blobPath(configDesc.digest), RepoTags: [spec.name], Layers: layers.map((l) => blobPath(l.digest)) },
    ],
  };
}

/**
 * GNU tar of a directory with sorted names, owner root and time zero: the same files give the same bytes.
 * `keepOwners` records each file's numeric owner instead (an image with a non-root user's files; the
 * builder, root, chowned them).
 */
export function reproducibleTar(dir: string, out: string, opts: { keepOwners?: boolean } = {}): void {
  mkdirSync(dirname(out), { recursive: true });
  execFileSync('tar', [
    '-C',
    dir,
    '--sort=name',
    '--mtime=@0',
    ...(opts.keepOwners ? [] : ['--owner=0', '--group=0']),
    '--numeric-owner',
    '--format=posix',
    '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
    '-cf',
    out,
    '.',
  ]);
}

/** One platform's image of a multi-platform one: its configuration and uncompressed layers, lowest first. */
export interface PlatformImage {
  spec: ImageSpec;
  layerTars: readonly Buffer[];
}

/**
 * A multi-platform image: one manifest per platform (as ociImage writes it) under an image index that
 * carries `annotations`; the layout's index.json names that image index (`name`), so containerd imports
 * one image and unpacks the node's platform. Docker's manifest.json (`docker load` knows no index) lists
 * the platform `dockerArchitecture` (default the first).
 */
export function ociImageIndex(
  name: string,
  images: readonly PlatformImage[],
  annotations: Record<string, string> = {},
  dockerArchitecture = images[0]?.spec.architecture,
): {
  blobs: Blob[];
  index: object;
  layout: object;
  dockerManifest: object[];
  digest: string;
  platforms: Record<string, string>;
} {
  const built = images.map((i) => ({ arch: i.spec.architecture, image: ociImage({ ...i.spec, name }, i.layerTars) }));
  const blobs = new Map<string, Blob>();
  for (const { image } of built) for (const b of image.blobs) blobs.set(b.digest, b);
  const manifests = built.map(({ image }) => {
    const { annotations: _names, ...descriptor } = (image.index as { manifests: (Descriptor & object)[] })
      .manifests[0]!;
    return descriptor;
  });
  const imageIndex = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA.index,
      manifests,
      ...(Object.keys(annotations).length ? { annotations } : {}),
    }),
  );
  const digest = sha256Digest(imageIndex);
  blobs.set(digest, { digest, bytes: imageIndex });
  const docker = built.find((b) => b.arch === dockerArchitecture) ?? built[0]!;
  return {
    blobs: [...blobs.values()],
    index: {
      schemaVersion: 2,
      mediaType: MEDIA.index,
      manifests: [
        {
          mediaType: MEDIA.index,
          digest,
          size: imageIndex.length,
          annotations: {
            'io.containerd.image.name': name,
            'org.opencontainers.image.ref.name': name.slice(name.lastIndexOf(':') + 1),
          },
        },
      ],
    },
    layout: { imageLayoutVersion: '1.0.0' },
    dockerManifest: docker.image.dockerManifest,
    digest,
    platforms: Object.fromEntries(manifests.map((m, i) => [built[i]!.arch, m.digest])),
  };
}

/** Packs a layout (blobs, index.json, oci-layout, Docker's manifest.json) into the archive `archive`. */
function writeLayoutArchive(
  image: { blobs: Blob[]; index: object; layout: object; dockerManifest: object[] },
  work: string,
  archive: string,
): void {
  const layout = join(work, 'layout');
  mkdirSync(join(layout, 'blobs', 'sha256'), { recursive: true });
  for (const b of image.blobs)
    writeFileSync(join(layout, 'blobs', 'sha256', b.digest.slice('sha256:'.length)), b.bytes);
  writeFileSync(join(layout, 'index.json'), JSON.stringify(image.index));
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify(image.layout));
  writeFileSync(join(layout, 'manifest.json'), JSON.stringify(image.dockerManifest));
  // A name of this process's own: two test runs may build the same image at once.
  const tmp = `${archive}.${process.pid}.tmp`;
  reproducibleTar(layout, tmp);
  execFileSync('mv', ['-f', tmp, archive]);
}

let layerCount = 0;

/** Each directory as one uncompressed layer (reproducibleTar), lowest first. */
function layerTars(dirs: readonly string[], work: string, opts: { keepOwners?: boolean }): Buffer[] {
  return dirs.map((dir, i) => {
    const file = join(work, `layer-${layerCount++}-${i}.tar`);
    reproducibleTar(dir, file, opts);
    return readFileSync(file);
  });
}

/**
 * Packs each directory of `rootfs` as one layer (lowest first) and writes the OCI archive to `archive`.
 * Returns the manifest's digest: the image's digest in a registry after a push that keeps the blobs.
 */
export function writeOciArchive(
  rootfs: string | readonly string[],
  spec: ImageSpec,
  archive: string,
  opts: { keepOwners?: boolean } = {},
): string {
  const work = mkdtempSync(join(tmpdir(), 'kd-oci-'));
  try {
    const image = ociImage(spec, layerTars(typeof rootfs === 'string' ? [rootfs] : rootfs, work, opts));
    writeLayoutArchive(image, work, archive);
    return (image.index as { manifests: Descriptor[] }).manifests[0]!.digest;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * A multi-platform image (ociImageIndex) of one root file system per platform (each a list of layer
 * directories) written to `archive`. Returns the image index's digest (the image's digest in a registry)
 * and each architecture's manifest digest.
 */
export function writeOciIndexArchive(
  name: string,
  platforms: readonly { rootfs: readonly string[]; spec: ImageSpec }[],
  archive: string,
  annotations: Record<string, string> = {},
): { digest: string; platforms: Record<string, string> } {
  const work = mkdtempSync(join(tmpdir(), 'kd-oci-'));
  try {
    const image = ociImageIndex(
      name,
      platforms.map((p) => ({ spec: p.spec, layerTars: layerTars(p.rootfs, work, {}) })),
      annotations,
    );
    writeLayoutArchive(image, work, archive);
    return { digest: image.digest, platforms: image.platforms };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
