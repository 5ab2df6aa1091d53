/**
 * The software bill of materials of an image, from its pinned inputs alone (images/inputs.json and
 * package-lock.json): an SPDX 2.3 JSON document per image and architecture, listing every package whose
 * files the image holds — the Debian packages (version, .deb sha256, pool address), the Node.js package
 * (npm integrity), each npm package of the service's production closure (version, integrity, license as
 * the lock states them) and the project's own workspaces. No scanner is involved: what was put in is what
 * is listed. Reproducible like the image: no time of its own (SOURCE_DATE_EPOCH, else the epoch).
 */
import { createHash } from 'node:crypto';
import { type Arch, debianPoolUrl, type DebianInput, type ImageInputs } from './image-inputs.js';
import type { Closure, Lockfile } from './production-closure.js';

export interface SbomPackage {
  name: string;
  version: string;
  /** Package URL (purl): pkg:deb/…, pkg:npm/…. */
  purl: string;
  license?: string;
  downloadLocation?: string;
  checksums?: { algorithm: 'SHA256' | 'SHA512'; checksumValue: string }[];
  supplier?: string;
}

/** Where in every image its SBOM is (and beside the archive as <image>-<arch>.spdx.json). */
export const SBOM_PATH = '/usr/share/doc/kd-connections/sbom.spdx.json';

export function debianSbomPackage(deb: DebianInput, arch: Arch): SbomPackage {
  const version = encodeURIComponent(deb.version);
  return {
    name: deb.package,
    version: deb.version,
    purl: `pkg:deb/debian/${deb.package}@${version}?arch=${arch}&distro=debian-12`,
    downloadLocation: debianPoolUrl(deb, arch),
    checksums: [{ algorithm: 'SHA256', checksumValue: deb[arch]!.sha256 }],
    supplier: 'Organization: Debian',
  };
}

/** An npm "sha512-<base64>" integrity as an SPDX checksum (hex). */
function integrityChecksum(integrity: string | undefined): SbomPackage['checksums'] {
  const m = /^sha512-(.+)$/.exec(integrity ?? '');
  return m ? [{ algorithm: 'SHA512', checksumValue: Buffer.from(m[1]!, 'base64').toString('hex') }] : undefined;
}

export function nodeSbomPackage(inputs: ImageInputs, arch: Arch): SbomPackage {
  const { package: pkg, integrity } = inputs.node[arch]!;
  const version = inputs.node.version;
  return {
    name: pkg,
    version,
    purl: `pkg:npm/${pkg}@${version}`,
    license: 'MIT',
    downloadLocation: `https://registry.npmjs.org/${pkg}/-/${pkg}-${version}.tgz`,
    ...(integrityChecksum(integrity) ? { checksums: integrityChecksum(integrity)! } : {}),
  };
}

/** The npm packages and workspaces of a production closure, as package-lock.json states them. */
export function npmSbomPackages(lock: Lockfile, closure: Closure): SbomPackage[] {
  const installed = closure.packages.map((loc) => {
    const entry = lock.packages[loc]!;
    const name = loc.slice(loc.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const checksums = integrityChecksum(entry.integrity);
    return {
      name,
      version: entry.version ?? '',
      purl: `pkg:npm/${name.startsWith('@') ? `%40${name.slice(1)}` : name}@${entry.version}`,
      ...(entry.license ? { license: entry.license } : {}),
      ...(entry.resolved ? { downloadLocation: entry.resolved } : {}),
      ...(checksums ? { checksums } : {}),
    };
  });
  const workspaces = closure.workspaces.map((ws) => {
    const entry = lock.packages[ws]!;
    const name = entry.name ?? ws;
    return {
      name,
      version: entry.version ?? '',
      purl: `pkg:npm/${name.replace(/^@/, '%40')}@${entry.version}`,
      license: entry.license ?? 'Apache-2.0',
    };
  });
  // One entry per name and version (a package nested twice at one version is one package).
  const seen = new Map<string, SbomPackage>();
  for (const p of [...workspaces, ...installed]) seen.set(p.purl, p);
  return [...seen.values()].sort((a, b) => (a.purl < b.purl ? -1 : a.purl > b.purl ? 1 : 0));
}

const spdxId = (i: number) => `SPDXRef-Package-${i}`;

/** The SPDX 2.3 document of `image` (its reference, version, architecture, licenses) holding `packages`. */
export function spdxDocument(
  image: { name: string; version: string; arch: string; license: string },
  packages: readonly SbomPackage[],
  epochSeconds = Number(process.env.SOURCE_DATE_EPOCH ?? 0),
): object {
  const fingerprint = createHash('sha256')
    .update(JSON.stringify([image, packages]))
    .digest('hex')
    .slice(0, 32);
  const root = {
    SPDXID: 'SPDXRef-Image',
    name: image.name,
    versionInfo: image.version,
    primaryPackagePurpose: 'CONTAINER',
    downloadLocation: 'NOASSERTION',
    licenseConcluded: 'NOASSERTION',
    licenseDeclared: image.license,
    copyrightText: 'NOASSERTION',
    filesAnalyzed: false,
  };
  return {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `${image.name} linux/${image.arch}`,
    documentNamespace: `https://kd-connections.invalid/spdx/${image.name.replace(/[^A-Za-z0-9.-]/g, '-')}/${image.arch}/${fingerprint}`,
    creationInfo: {
      created: new Date(Number.isFinite(epochSeconds) ? epochSeconds * 1000 : 0)
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
      creators: ['Tool: kd-connections images/src/sbom.ts'],
    },
    packages: [
      root,
      ...packages.map((p, i) => ({
        SPDXID: spdxId(i),
        name: p.name,
        versionInfo: p.version,
        downloadLocation: p.downloadLocation ?? 'NOASSERTION',
        ...(p.supplier ? { supplier: p.supplier } : {}),
        licenseConcluded: 'NOASSERTION',
        licenseDeclared: p.license ?? 'NOASSERTION',
        copyrightText: 'NOASSERTION',
        filesAnalyzed: false,
        ...(p.checksums ? { checksums: p.checksums } : {}),
        externalRefs: [{ referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: p.purl }],
      })),
    ],
    relationships: [
      { spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: 'SPDXRef-Image' },
      ...packages.map((_, i) => ({
        spdxElementId: 'SPDXRef-Image',
        relationshipType: 'CONTAINS',
        relatedSpdxElement: spdxId(i),
      })),
    ],
  };
}
