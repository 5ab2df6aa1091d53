/**
 * The guestconfig sidecar image `npm run images` builds (images/src/guestconfig-image.ts): reproducible,
 * named as the chart's default refers to it, with what the sidecar's program runs, and the same root file
 * system as the sidecar image the node tests use.
 */
import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { SIDECAR_PROGRAM, sidecarProgram } from '@kd-connections/shared';
import { buildGuestconfigImage, guestconfigImageName } from '../../images/src/guestconfig-image.js';
import { readInputs } from '../../images/src/image-inputs.js';
import { repoRoot } from '../support/processes.js';
import { guestconfigImage } from './base-images.js';

interface Layout {
  config: { config: { Entrypoint?: string[]; Labels?: Record<string, string> }; rootfs: { diff_ids: string[] } };
  listing: string;
}

/** Unpacks an image archive (one layer) into `dir`/root; returns its config and the layer's listing. */
function unpack(archive: string, dir: string): Layout {
  mkdirSync(join(dir, 'layout'), { recursive: true });
  mkdirSync(join(dir, 'root'), { recursive: true });
  execFileSync('tar', ['-xf', archive, '-C', join(dir, 'layout')]);
  const [docker] = JSON.parse(readFileSync(join(dir, 'layout', 'manifest.json'), 'utf8'));
  const [layer] = docker.Layers as string[];
  const blob = join(dir, 'layout', layer!);
  const listing = execFileSync('tar', ['--numeric-owner', '-tvzf', blob], {
    encoding: 'utf8',
    env: { ...process.env, TZ: 'UTC' },
  });
  execFileSync('tar', ['-xzf', blob, '-C', join(dir, 'root')]);
  return { config: JSON.parse(readFileSync(join(dir, 'layout', docker.Config), 'utf8')), listing };
}

describe('the guestconfig sidecar image', () => {
  it("is named as the chart's default podWebhook image", () => {
    const chartDir = join(repoRoot, 'charts', 'kd-connections');
    const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8'));
    const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8'));
    const chartRef = `${values.image.registry}/${values.webhook.podWebhook.image.repository}:${chart.appVersion}`;
    expect(guestconfigImageName(chart.appVersion)).toBe(chartRef);
  });

  it('pins its busybox by hash', () => {
    expect(readInputs().guestconfig.busybox).toMatchObject({
      package: 'busybox-static',
      sha256: expect.stringMatching(/^[a-f0-9]{64}$/),
    });
  });

  it('gives the same digest twice; runs the sidecar program with busybox and the applets it uses', () => {
    const work = mkdtempSync(join(tmpdir(), 'kd-guestconfig-image-test-'));
    try {
      const opts = { repoRoot, tag: 'determinism', revision: 'test' };
      const a = buildGuestconfigImage({ ...opts, outDir: join(work, 'a') });
      const b = buildGuestconfigImage({ ...opts, outDir: join(work, 'b') });
      expect(a.name).toBe('localhost/kd-connections/guestconfig:determinism');
      expect(a.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
      expect(b.digest).toBe(a.digest);
      expect(readFileSync(b.archive).equals(readFileSync(a.archive))).toBe(true);

      const { config, listing } = unpack(a.archive, join(work, 'x'));
      expect(config.config.Entrypoint).toEqual([SIDECAR_PROGRAM]);
      expect(config.config.Labels).toMatchObject({
        'org.opencontainers.image.title': 'kd-connections-guestconfig',
        'org.opencontainers.image.revision': 'test',
        'org.opencontainers.image.licenses': 'Apache-2.0 AND GPL-2.0-only',
      });
      const root = join(work, 'x', 'root');
      expect(readFileSync(join(root, SIDECAR_PROGRAM.slice(1)), 'utf8')).toBe(sidecarProgram());
      expect(statSync(join(root, SIDECAR_PROGRAM.slice(1))).mode & 0o777).toBe(0o755);
      // The applets the program and the reconnect hook run, each a link to the static busybox.
      for (const applet of ['sh', 'cp', 'mv', 'readlink', 'cmp', 'sleep', 'test', 'cat', 'stat', 'chmod'])
        expect(readlinkSync(join(root, 'bin', applet))).toBe('busybox');
      expect(execFileSync(join(root, 'bin/busybox'), ['echo', 'runs'], { encoding: 'utf8' })).toBe('runs\n');
      expect(lstatSync(join(root, 'usr/share/doc/busybox-static/copyright')).isFile()).toBe(true);
      // / readable by the non-root user restricted pods run the sidecar as; /tmp sticky; owner 0/0, time 0.
      const lines = listing.trim().split('\n');
      expect(lines.find((l) => / \.\/$/.test(l))).toMatch(/^drwxr-xr-x /);
      expect(lines.find((l) => / \.\/tmp\/$/.test(l))).toMatch(/^drwxrwxrwt /);
      for (const line of lines) expect(line).toMatch(/^\S+ 0\/0 +\d+ 1970-01-01 00:00 /);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);

  it('has the same root file system as the sidecar image the node tests run', () => {
    const work = mkdtempSync(join(tmpdir(), 'kd-guestconfig-image-test-'));
    try {
      const product = buildGuestconfigImage({ repoRoot, tag: 'same', outDir: join(work, 'a') });
      const harness = guestconfigImage();
      const p = unpack(product.archive, join(work, 'p')).config.rootfs.diff_ids;
      const h = unpack(harness.archive, join(work, 'h')).config.rootfs.diff_ids;
      expect(h).toEqual(p);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);
});
