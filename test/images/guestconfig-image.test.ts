/**
 * The guestconfig sidecar image `npm run images` builds (images/src/guestconfig-image.ts): reproducible,
 * named as the chart's default refers to it, with what the sidecar's program runs, and the same root file
 * system as the sidecar image the node tests use.
 */
import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { sidecarProgram } from '@kd-connections/shared/delivery';
import { SIDECAR_PROGRAM } from '@kd-connections/shared/domain';
import { buildGuestconfigImage, guestconfigImageName } from '../../images/src/guestconfig-image.js';
import { hostArch, readInputs, unpackDebianFiles } from '../../images/src/image-inputs.js';
import { SBOM_PATH } from '../../images/src/sbom.js';
import { forgetCompressedLayers } from '../../images/src/oci-image.js';
import { elfMachine, readArchive, unpackPlatform } from './oci-archive-reader.js';
import { repoRoot } from '../support/processes.js';
import { guestconfigImage } from './base-images.js';

describe('the guestconfig sidecar image', () => {
  it("is named as the chart's default podWebhook image", () => {
    const chartDir = join(repoRoot, 'charts', 'kd-connections');
    const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8'));
    const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8'));
    const chartRef = `${values.image.registry}/${values.webhook.podWebhook.image.repository}:${chart.appVersion}`;
    expect(guestconfigImageName(chart.appVersion)).toBe(chartRef);
  });

  it("pins its busybox by hash for both architectures, and the applet list this machine's busybox gives", () => {
    const inputs = readInputs();
    const busybox = inputs.guestconfig.busybox;
    expect(busybox.package).toBe('busybox-static');
    for (const a of [busybox.amd64, busybox.arm64]) expect(a?.sha256).toMatch(/^[a-f0-9]{64}$/);
    const dir = mkdtempSync(join(tmpdir(), 'kd-busybox-'));
    try {
      unpackDebianFiles(busybox, hostArch(), dir);
      const listed = execFileSync(join(dir, 'bin/busybox'), ['--list'], { encoding: 'utf8' }).trim().split('\n');
      expect(inputs.guestconfig.applets).toEqual(listed.filter((a) => a !== 'busybox'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives the same digest twice; for amd64 and arm64, runs the sidecar program with busybox and the applets it uses', () => {
    const work = mkdtempSync(join(tmpdir(), 'kd-guestconfig-image-test-'));
    try {
      const opts = { repoRoot, tag: 'determinism', revision: 'test' };
      const a = buildGuestconfigImage({ ...opts, outDir: join(work, 'a') });
      forgetCompressedLayers(); // the second build compresses for itself
      const b = buildGuestconfigImage({ ...opts, outDir: join(work, 'b') });
      expect(a.name).toBe('localhost/kd-connections/guestconfig:determinism');
      expect(a.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
      expect(b.digest).toBe(a.digest);
      expect(readFileSync(b.archive).equals(readFileSync(a.archive))).toBe(true);

      const archive = readArchive(a.archive, work);
      expect(archive.index.annotations).toMatchObject({
        'org.opencontainers.image.title': 'kd-connections-guestconfig',
        'org.opencontainers.image.revision': 'test',
        'org.opencontainers.image.licenses': 'Apache-2.0 AND GPL-2.0-only',
      });
      expect(archive.index.manifests.map((m) => m.platform?.architecture)).toEqual(['amd64', 'arm64']);
      for (const [arch, machine] of [
        ['amd64', 62],
        ['arm64', 183],
      ] as const) {
        const root = join(work, arch);
        const { config, listing } = unpackPlatform(archive, arch, root);
        expect(config.architecture).toBe(arch);
        expect(config.config.Entrypoint).toEqual([SIDECAR_PROGRAM]);
        expect(config.config.Labels).toMatchObject({ 'org.opencontainers.image.title': 'kd-connections-guestconfig' });
        expect(elfMachine(join(root, 'bin/busybox'))).toBe(machine);
        expect(readFileSync(join(root, SIDECAR_PROGRAM.slice(1)), 'utf8')).toBe(sidecarProgram());
        expect(statSync(join(root, SIDECAR_PROGRAM.slice(1))).mode & 0o777).toBe(0o755);
        // The applets the program and the reconnect hook run, each a link to the static busybox.
        for (const applet of ['sh', 'cp', 'mv', 'readlink', 'cmp', 'sleep', 'test', 'cat', 'stat', 'chmod'])
          expect(readlinkSync(join(root, 'bin', applet))).toBe('busybox');
        expect(lstatSync(join(root, 'usr/share/doc/busybox-static/copyright')).isFile()).toBe(true);
        // Its SBOM, in the image and beside the archive: the busybox package of this architecture.
        const sbom = readFileSync(join(root, SBOM_PATH.slice(1)), 'utf8');
        expect(readFileSync(a.sboms[arch]!, 'utf8')).toBe(sbom);
        const busybox = JSON.parse(sbom).packages.find((p: { name: string }) => p.name === 'busybox-static');
        expect(busybox.checksums).toEqual([
          { algorithm: 'SHA256', checksumValue: readInputs().guestconfig.busybox[arch]!.sha256 },
        ]);
        // / readable by the non-root user restricted pods run the sidecar as; /tmp sticky; owner 0/0, time 0.
        const lines = listing.trim().split('\n');
        expect(lines.find((l) => / \.\/$/.test(l))).toMatch(/^drwxr-xr-x /);
        expect(lines.find((l) => / \.\/tmp\/$/.test(l))).toMatch(/^drwxrwxrwt /);
        for (const line of lines) expect(line).toMatch(/^\S+ 0\/0 +\d+ 1970-01-01 00:00 /);
      }
      expect(execFileSync(join(work, 'amd64', 'bin/busybox'), ['echo', 'runs'], { encoding: 'utf8' })).toBe('runs\n');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);

  it('has the same root file system as the sidecar image the node tests run', () => {
    const work = mkdtempSync(join(tmpdir(), 'kd-guestconfig-image-test-'));
    try {
      const product = buildGuestconfigImage({ repoRoot, tag: 'same', outDir: join(work, 'a') });
      const harness = guestconfigImage();
      const p = unpackPlatform(readArchive(product.archive, join(work, 'p')), hostArch(), join(work, 'p', 'root'));
      // The harness's image is a single manifest (the layout's index names it directly).
      const h = readArchive(harness.archive, join(work, 'h'));
      const hManifest = h.json<{ config: { digest: string } }>(h.top.manifests[0]!.digest);
      // Its one layer is the product's first (the product's second holds its SBOM).
      expect(h.json(hManifest.config.digest).rootfs.diff_ids).toEqual(p.config.rootfs.diff_ids.slice(0, 1));
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);
});
