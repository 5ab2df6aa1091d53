import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { goArch, MEDIA, ociImage, sha256Digest, writeOciArchive } from '../../images/src/oci-image.js';

const spec = { name: 'kd.invalid/busybox:local', cmd: ['/bin/sh'], architecture: 'amd64' };

describe('ociImage', () => {
  const layer = Buffer.from('pretend this is a tar');
  const img = ociImage(spec, layer);
  const byDigest = new Map(img.blobs.map((b) => [b.digest, b.bytes]));
  const index = img.index as { manifests: { digest: string; size: number; annotations: Record<string, string> }[] };

  it('names every blob by the sha256 of its bytes', () => {
    for (const b of img.blobs) expect(sha256Digest(b.bytes)).toBe(b.digest);
  });

  it('chains index → manifest → config and layer, with sizes, and the diff_id of the uncompressed layer', () => {
    const m = index.manifests[0]!;
    expect(m.annotations['io.containerd.image.name']).toBe(spec.name);
    expect(m.annotations['org.opencontainers.image.ref.name']).toBe('local');
    const manifestBytes = byDigest.get(m.digest)!;
    expect(manifestBytes.length).toBe(m.size);
    const manifest = JSON.parse(manifestBytes.toString());
    expect(manifest.mediaType).toBe(MEDIA.manifest);
    const config = JSON.parse(byDigest.get(manifest.config.digest)!.toString());
    expect(config).toMatchObject({ architecture: 'amd64', os: 'linux', config: { Cmd: ['/bin/sh'] } });
    expect(config.rootfs.diff_ids).toEqual([sha256Digest(layer)]);
    const layerBlob = byDigest.get(manifest.layers[0].digest)!;
    expect(manifest.layers[0]).toMatchObject({ mediaType: MEDIA.layer, size: layerBlob.length });
    expect(gunzipSync(layerBlob)).toEqual(layer);
  });

  it('is deterministic', () => {
    expect(ociImage(spec, layer)).toEqual(img);
  });

  it('refuses a name that is not a full reference', () => {
    expect(() => ociImage({ ...spec, name: 'busybox' }, layer)).toThrow(/image name "busybox" is not a full reference/);
  });

  it('maps Node.js architectures to OCI ones and names an unknown one', () => {
    expect(goArch('x64')).toBe('amd64');
    expect(goArch('arm64')).toBe('arm64');
    expect(() => goArch('mips')).toThrow(/process.arch "mips"/);
  });
});

describe('writeOciArchive', () => {
  it('writes a layout archive whose blobs match their names, the same bytes for the same files', () => {
    const work = mkdtempSync(join(tmpdir(), 'kd-oci-test-'));
    try {
      const rootfs = join(work, 'rootfs');
      mkdirSync(join(rootfs, 'bin'), { recursive: true });
      writeFileSync(join(rootfs, 'bin', 'hello'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
      writeOciArchive(rootfs, spec, join(work, 'a.tar'));
      writeOciArchive(rootfs, spec, join(work, 'b.tar'));
      expect(readFileSync(join(work, 'a.tar'))).toEqual(readFileSync(join(work, 'b.tar')));
      const out = join(work, 'out');
      mkdirSync(out);
      execFileSync('tar', ['-xf', join(work, 'a.tar'), '-C', out]);
      expect(JSON.parse(readFileSync(join(out, 'oci-layout'), 'utf8'))).toEqual({ imageLayoutVersion: '1.0.0' });
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      const blob = (d: string) => readFileSync(join(out, 'blobs', 'sha256', d.replace('sha256:', '')));
      const manifest = JSON.parse(blob(index.manifests[0].digest).toString());
      for (const d of [index.manifests[0].digest, manifest.config.digest, manifest.layers[0].digest]) {
        expect(sha256Digest(blob(d))).toBe(d);
      }
      const listing = execFileSync('tar', ['-tvzf', join(out, 'blobs', 'sha256', manifest.layers[0].digest.slice(7))], {
        encoding: 'utf8',
      });
      expect(listing).toMatch(/-rwxr-xr-x 0\/0 .* \.\/bin\/hello/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
