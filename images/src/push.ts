/**
 * Pushes a built image (an OCI image index archive of oci-image.ts) to a registry with go-containerregistry's
 * `crane`, not with a push of our own: `npm run images -- --push <registry>[/<org>]` and the tests both go
 * through pushImage.
 *
 * Each image goes to `<target>/kd-connections/<image>:<tag>` (imageName), target being `<registry>[/<org>]`.
 *
 * `crane push PATH REF` reads PATH as an OCI image layout when it is a directory (a file it reads as a
 * Docker tarball, which holds one platform only). The archive is that layout packed, so it is unpacked
 * first; its index.json names one entry, the image index, and crane pushes that index as it is — every
 * platform's manifest, config and layers, then the index under REF's tag — so the registry's digest is the
 * one the build computed. (`crane push --index` would push the layout's own index.json as a new index
 * around it: another digest.) Afterwards `crane digest REF` must report that digest, else the push fails.
 *
 * crane is built by test/controlplane/build-registry-bins.sh (pinned in test/controlplane/bins/crane) into
 * the same cache as the harness's other binaries; a crane on PATH works too. Credentials are crane's
 * (`crane auth login`, or Docker's config.json); registries on loopback and private addresses are spoken to
 * over plain HTTP, others over HTTPS unless `insecure`.
 */
import { execFileSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { type BuiltImage, imageName } from './service-images.js';

/** The script that builds crane (and the registry), relative to the repository root. */
export const CRANE_BUILD_SCRIPT = 'test/controlplane/build-registry-bins.sh';

/** The binary cache build-registry-bins.sh writes to (kept in step with its default). */
function binCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.KD_BIN_CACHE ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'kd-connections', 'bin');
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** crane from KD_BIN_DIR, then the binary cache, then PATH; undefined when none has it. */
export function findCrane(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return findTool('crane', env);
}

/** An executable `name` in KD_BIN_DIR, the harness's binary cache (crane, helm, …) or PATH. */
export function findTool(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dirs = [env.KD_BIN_DIR, binCacheDir(env), ...(env.PATH ?? '').split(delimiter)];
  return dirs
    .filter((d): d is string => !!d)
    .map((d) => join(d, name))
    .find(executable);
}

/** findCrane, or an error that says how to build it. */
export function requireCrane(env: NodeJS.ProcessEnv = process.env): string {
  const crane = findCrane(env);
  if (!crane) {
    throw new Error(
      `crane (go-containerregistry) is needed to push and was not found in KD_BIN_DIR, ${binCacheDir(env)} or PATH: ` +
        `build it with \`bash ${CRANE_BUILD_SCRIPT} crane\` (Go 1.26, from the Go module proxy, about half a minute)`,
    );
  }
  return crane;
}

/** A full reference `host[:port]/path:tag` (lower-case path), as a registry accepts it for a push. */
const REFERENCE = /^[a-z0-9.-]+(:\d+)?\/[a-z0-9._/-]+:[\w][\w.-]{0,127}$/;

/** Checks a `--push` target (`host[:port][/org...]`): what the image's path and tag are appended to. */
export function checkPushTarget(target: string): string {
  if (!/^[a-z0-9.-]+(:\d+)?(\/[a-z0-9._-]+)*$/.test(target))
    throw new Error(`--push ${target}: expected <registry>[/<org>], e.g. registry.example.com/team or 127.0.0.1:5000`);
  return target;
}

export interface PushedImage {
  /** The reference pushed to (its tag). */
  reference: string;
  /** The image index's digest in the registry (as `crane digest` reports it). */
  digest: string;
  /** `<repository>@<digest>`: what a pull by digest names. */
  pinned: string;
}

export interface PushOptions {
  crane?: string;
  /** crane's --insecure: plain HTTP (or unverified TLS) also for a registry that is not on a private address. */
  insecure?: boolean;
  /** Where crane's progress lines go (default: collected, and shown only when it fails). */
  progress?: 'inherit' | 'quiet';
}

/** The layout's index.json in an archive: it must name exactly one image index, the built one. */
function indexDigestOfLayout(layout: string, archive: string): string {
  const top = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as {
    manifests?: { mediaType?: string; digest?: string }[];
  };
  const entries = top.manifests ?? [];
  if (entries.length !== 1 || entries[0]!.mediaType !== 'application/vnd.oci.image.index.v1+json')
    throw new Error(
      `${archive}: index.json must name exactly one OCI image index (it names ${entries.length} entries)`,
    );
  return entries[0]!.digest!;
}

/**
 * Pushes the image index in `archive` (an OCI layout packed as tar) to `reference` with crane and checks
 * that the registry holds it under `expectedDigest` (the digest the build computed). Returns what the
 * registry reports.
 */
export function pushImage(
  archive: string,
  reference: string,
  expectedDigest: string,
  opts: PushOptions = {},
): PushedImage {
  if (!REFERENCE.test(reference)) throw new Error(`${reference} is not a full reference (host/path:tag)`);
  const crane = opts.crane ?? requireCrane();
  const flags = opts.insecure ? ['--insecure'] : [];
  const work = mkdtempSync(join(tmpdir(), 'kd-push-'));
  const run = (args: string[]): string => {
    try {
      return execFileSync(crane, [...args, ...flags], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', opts.progress === 'inherit' ? 'inherit' : 'pipe'],
        maxBuffer: 1 << 24,
      }).trim();
    } catch (e) {
      const err = e as { status?: number; stderr?: string };
      throw new Error(`crane ${args.join(' ')} failed (exit ${err.status ?? '?'}): ${err.stderr?.trim() ?? ''}`);
    }
  };
  try {
    execFileSync('tar', ['-xf', archive, '-C', work]);
    const inArchive = indexDigestOfLayout(work, archive);
    if (inArchive !== expectedDigest)
      throw new Error(`${archive} holds the image index ${inArchive}, not ${expectedDigest} as built`);
    // crane prints `<repository>@<digest>` of what it pushed.
    const printed = run(['push', work, reference]).split('\n').pop() ?? '';
    const pushed = printed.slice(printed.lastIndexOf('@') + 1);
    const digest = run(['digest', reference]);
    if (pushed !== expectedDigest || digest !== expectedDigest)
      throw new Error(
        `${reference}: built ${expectedDigest}, but crane push printed ${printed || 'nothing'} and crane digest says ${digest}`,
      );
    const repository = reference.slice(0, reference.lastIndexOf(':'));
    return { reference, digest, pinned: `${repository}@${digest}` };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * What `npm run images -- --push <target>` does after the build: pushes each image to
 * `<target>/kd-connections/<image>:<tag>` (pushImage), in order; stops at the first failure.
 */
export function pushImages(
  images: readonly Pick<BuiltImage, 'image' | 'archive' | 'digest'>[],
  target: string,
  tag: string,
  opts: PushOptions = {},
): (PushedImage & { image: string })[] {
  checkPushTarget(target);
  const crane = opts.crane ?? requireCrane();
  return images.map((img) => ({
    image: img.image,
    ...pushImage(img.archive, imageName(img.image, tag, target), img.digest, { ...opts, crane }),
  }));
}
