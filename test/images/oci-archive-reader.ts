/**
 * Reads an image archive the way containerd does (index.json → image index → a platform's manifest →
 * config and layers), for the image tests: what each platform's image holds, unpacked.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { architecture: string; os: string };
  annotations?: Record<string, string>;
}

export interface ArchiveIndex {
  /** The layout's index.json. */
  top: { manifests: Descriptor[] };
  /** The image index it names. */
  index: { mediaType: string; manifests: Descriptor[]; annotations?: Record<string, string> };
  /** Reads a blob of the archive as JSON. */
  json<T = any>(digest: string): T;
  /** The extracted layout. */
  dir: string;
}

const blobPath = (dir: string, digest: string) => join(dir, 'blobs', 'sha256', digest.slice('sha256:'.length));

/** Extracts `archive` into `dir`/layout and reads its image index. */
export function readArchive(archive: string, dir: string): ArchiveIndex {
  const layout = join(dir, 'layout');
  mkdirSync(layout, { recursive: true });
  execFileSync('tar', ['-xf', archive, '-C', layout]);
  const json = <T>(digest: string) => JSON.parse(readFileSync(blobPath(layout, digest), 'utf8')) as T;
  const top = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as ArchiveIndex['top'];
  return { top, index: json(top.manifests[0]!.digest), json, dir: layout };
}

/**
 * Unpacks the layers of the `arch` image, lowest first, into `root`; returns its config, its layers'
 * digests and the listing of every entry (`tar -tv`, numeric owners, UTC).
 */
export function unpackPlatform(
  archive: ArchiveIndex,
  arch: string,
  root: string,
): { config: any; layers: string[]; listing: string } {
  const m = archive.index.manifests.find((d) => d.platform?.architecture === arch);
  if (!m) throw new Error(`no ${arch} manifest in the image index`);
  const manifest = archive.json<{ config: Descriptor; layers: Descriptor[] }>(m.digest);
  mkdirSync(root, { recursive: true });
  let listing = '';
  for (const layer of manifest.layers) {
    const blob = blobPath(archive.dir, layer.digest);
    listing += execFileSync('tar', ['--numeric-owner', '-tvzf', blob], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
      env: { ...process.env, TZ: 'UTC' },
    });
    execFileSync('tar', ['-xzf', blob, '-C', root]);
  }
  return { config: archive.json(manifest.config.digest), layers: manifest.layers.map((l) => l.digest), listing };
}

/** The machine an ELF file is built for: 62 is x86-64, 183 is AArch64. */
export function elfMachine(file: string): number {
  const head = readFileSync(file).subarray(0, 20);
  if (head.subarray(0, 4).toString('latin1') !== '\x7fELF') throw new Error(`${file} is not an ELF file`);
  return head.readUInt16LE(18);
}
