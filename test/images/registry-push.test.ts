/**
 * `npm run images -- --push <registry>` against a real registry: CNCF Distribution's `registry` on
 * 127.0.0.1 (test/support/oci-registry.ts), the guestconfig image index built as `npm run images` builds it,
 * pushed through pushImages (what build.ts calls) with go-containerregistry's crane, then read back with
 * crane: the index by tag has the built digest and bytes, lists linux/amd64 and linux/arm64, and each
 * platform's manifest, config and layers are the archive's. Nothing leaves 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildGuestconfigImage } from '../../images/src/guestconfig-image.js';
import { sha256Digest } from '../../images/src/oci-image.js';
import {
  checkPushTarget,
  CRANE_BUILD_SCRIPT,
  findCrane,
  pushImage,
  pushImages,
  requireCrane,
} from '../../images/src/push.js';
import type { BuiltImage } from '../../images/src/service-images.js';
import { ensureRegistryBinaries } from '../controlplane/binaries.js';
import { listeningAddresses } from '../controlplane/listening-sockets.js';
import { startRegistry, type LocalRegistry } from '../support/oci-registry.js';
import { repoRoot } from '../support/processes.js';
import { readArchive, type ArchiveIndex } from './oci-archive-reader.js';

const TAG = 'push-test';

describe('pushing an image index to a real registry with crane', () => {
  let registry: LocalRegistry | undefined;
  let crane: string;
  let work: string;
  let built: BuiltImage;
  let archive: ArchiveIndex;

  /** crane's stdout (bytes as the registry served them, for manifests). */
  const craneRead = (args: string[]): Buffer =>
    execFileSync(crane, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26 });
  const blobOfArchive = (digest: string) =>
    readFileSync(join(archive.dir, 'blobs', 'sha256', digest.slice('sha256:'.length)));

  beforeAll(async () => {
    const bins = await ensureRegistryBinaries(['registry', 'crane']);
    crane = bins.crane;
    registry = await startRegistry({ binary: bins.registry });
    work = mkdtempSync(join(tmpdir(), 'kd-registry-push-test-'));
    // As `npm run images -- --push <host>` builds it: the push target is the image's registry.
    built = buildGuestconfigImage({
      repoRoot,
      tag: TAG,
      registry: registry.host,
      revision: 'test',
      outDir: join(work, 'out'),
    });
    archive = readArchive(built.archive, work);
  }, 600_000);

  afterAll(async () => {
    await registry?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('runs the registry on its 127.0.0.1 port and nowhere else', () => {
    expect(registry!.host).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(listeningAddresses(registry!.pid)).toEqual([registry!.host]);
  });

  it('pushes the index; by tag the registry serves the built digest and bytes, for linux/amd64 and linux/arm64', () => {
    const host = registry!.host;
    const [pushed, ...more] = pushImages([built], host, TAG, { crane });
    expect(more).toEqual([]);
    const reference = `${host}/kd-connections/guestconfig:${TAG}`;
    expect(reference).toBe(built.name);
    expect(pushed).toEqual({
      image: 'guestconfig',
      reference,
      digest: built.digest,
      pinned: `${host}/kd-connections/guestconfig@${built.digest}`,
    });

    // Read back with crane, apart from pushImage's own check.
    expect(craneRead(['digest', reference]).toString().trim()).toBe(built.digest);
    const rawIndex = craneRead(['manifest', reference]);
    expect(sha256Digest(rawIndex)).toBe(built.digest);
    expect(rawIndex.equals(blobOfArchive(built.digest))).toBe(true);
    const index = JSON.parse(rawIndex.toString()) as {
      mediaType: string;
      manifests: { digest: string; platform: { os: string; architecture: string } }[];
    };
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`).sort()).toEqual([
      'linux/amd64',
      'linux/arm64',
    ]);
    expect(
      craneRead(['ls', `${host}/kd-connections/guestconfig`])
        .toString()
        .trim()
        .split('\n'),
    ).toEqual([TAG]);

    for (const m of index.manifests) {
      const arch = m.platform.architecture;
      expect(m.digest).toBe(built.platforms[arch]);
      const repo = `${host}/kd-connections/guestconfig`;
      const raw = craneRead(['manifest', `${repo}@${m.digest}`]);
      expect(raw.equals(blobOfArchive(m.digest))).toBe(true);
      // crane resolves the platform through the index the same way a node's runtime does.
      expect(craneRead(['manifest', '--platform', `linux/${arch}`, reference]).equals(raw)).toBe(true);
      const manifest = JSON.parse(raw.toString()) as { config: { digest: string }; layers: { digest: string }[] };
      expect(craneRead(['config', `${repo}@${m.digest}`]).equals(blobOfArchive(manifest.config.digest))).toBe(true);
      expect(JSON.parse(craneRead(['config', `${repo}@${m.digest}`]).toString())).toMatchObject({ architecture: arch });
      for (const layer of manifest.layers) {
        const blob = craneRead(['blob', `${repo}@${layer.digest}`]);
        expect(sha256Digest(blob)).toBe(layer.digest);
        expect(blob.equals(blobOfArchive(layer.digest))).toBe(true);
      }
    }
    expect(registry!.log()).toMatch(/PUT \/v2\/kd-connections\/guestconfig\/manifests\/push-test/);
  }, 120_000);

  it('refuses an archive whose index is not the digest the build reported, before pushing anything', () => {
    const other = `sha256:${'0'.repeat(64)}`;
    const reference = `${registry!.host}/kd-connections/refused:${TAG}`;
    expect(() => pushImage(built.archive, reference, other, { crane })).toThrow(
      new RegExp(`holds the image index ${built.digest}, not ${other}`),
    );
    expect(() => craneRead(['digest', reference])).toThrow(/MANIFEST_UNKNOWN|NAME_UNKNOWN|not found/i);
  });

  it('names what is wrong with a push target, and how to build a missing crane', () => {
    expect(checkPushTarget('127.0.0.1:5000')).toBe('127.0.0.1:5000');
    expect(checkPushTarget('registry.example.com/team')).toBe('registry.example.com/team');
    for (const bad of ['https://registry.example.com', 'Registry.example.com', 'host/org:tag', 'host/'])
      expect(() => checkPushTarget(bad)).toThrow(/expected <registry>\[\/<org>\]/);
    const empty = mkdtempSync(join(tmpdir(), 'kd-no-crane-'));
    try {
      const env = { PATH: empty, KD_BIN_CACHE: empty };
      expect(findCrane(env)).toBeUndefined();
      expect(() => requireCrane(env)).toThrow(`bash ${CRANE_BUILD_SCRIPT} crane`);
      expect(findCrane({ PATH: empty, KD_BIN_DIR: join(crane, '..'), KD_BIN_CACHE: empty })).toBe(crane);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
