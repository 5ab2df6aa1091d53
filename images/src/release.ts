/**
 * A release to any OCI registry: the three image indexes (both architectures) pushed with crane, then the
 * chart packaged and pushed as an OCI artifact with helm, under one target `<registry>[/<org>]`:
 *
 *   <target>/kd-connections/{admission,reconciler,guestconfig}:<version>   (version = the chart's appVersion)
 *   oci://<target>/charts/kd-connections, version = the chart's version
 *
 * The result says how to install exactly what was pushed (chart by version, images by digest). `npm run
 * release -- <target> [--plain-http]` is the CLI (release-cli.ts); the chart tests run this same function
 * against the harness's registry.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildGuestconfigImage, GUESTCONFIG } from './guestconfig-image.js';
import { checkPushTarget, pushImages, type PushedImage } from './push.js';
import { buildServiceImage, SERVICES, type BuiltImage, type BuildOptions } from './service-images.js';

export const CHART_DIR = join('charts', 'kd-connections');

export interface ReleaseOptions {
  repoRoot: string;
  /** `<registry>[/<org>]`, e.g. ghcr.io/example or 127.0.0.1:5000. */
  target: string;
  /** Plain HTTP to the registry (crane --insecure, helm --plain-http): a registry on loopback. */
  plainHttp?: boolean;
  /** The helm binary, and the environment it runs in (its cache and config folders). */
  helm: string;
  helmEnv?: NodeJS.ProcessEnv;
  crane?: string;
  /** Passed to the image builds (labels, revision, source, outDir). */
  build?: Partial<Pick<BuildOptions, 'labels' | 'revision' | 'source' | 'outDir'>>;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export interface ReleasedChart {
  /** `oci://<target>/charts/kd-connections`. */
  reference: string;
  version: string;
  appVersion: string;
  /** The chart artifact's manifest digest, as helm push reports it. */
  digest: string;
}

export interface Release {
  images: (PushedImage & { image: string; built: BuiltImage })[];
  chart: ReleasedChart;
  /** The `--set` values that install these images by digest from this registry. */
  values: string[];
  /** The whole install command, for the notes of a release. */
  installCommand: string;
}

/** `version:` and `appVersion:` of Chart.yaml (top-level keys only). */
export function chartVersions(repoRoot: string): { version: string; appVersion: string } {
  const text = readFileSync(join(repoRoot, CHART_DIR, 'Chart.yaml'), 'utf8');
  const key = (k: string) => {
    const m = new RegExp(`^${k}:\\s*["']?([^"'\\s]+)`, 'm').exec(text);
    if (!m) throw new Error(`${CHART_DIR}/Chart.yaml has no ${k}`);
    return m[1]!;
  };
  return { version: key('version'), appVersion: key('appVersion') };
}

/** The values that pin each image of a release by digest under `target`. */
export function releaseValues(target: string, digests: Record<string, string>): string[] {
  const at: Record<string, string> = {
    admission: 'admission.image.digest',
    reconciler: 'reconciler.image.digest',
    [GUESTCONFIG]: 'webhook.podWebhook.image.digest',
  };
  return [
    `image.registry=${target}`,
    ...Object.entries(at).map(([image, key]) => {
      const d = digests[image];
      if (!d) throw new Error(`release: no digest for the ${image} image`);
      return `${key}=${d}`;
    }),
  ];
}

/** values.yaml with `image.registry` set to the release's target (exactly that one line changes). */
export function releasedValuesYaml(values: string, target: string): string {
  const lines = values.split('\n');
  const at = lines.flatMap((l, i) => (l === '  registry: localhost' ? [i] : []));
  // The top-level key the line belongs to: the nearest line above it that is not indented.
  const owner = at.length === 1 ? lines.slice(0, at[0]).findLast((l) => /^\S/.test(l) && !l.startsWith('#')) : '';
  if (owner !== 'image:')
    throw new Error(`${CHART_DIR}/values.yaml: expected one "  registry: localhost" line, under image:`);
  lines[at[0]!] = `  registry: ${target}`;
  return lines.join('\n');
}

/** Packages the chart (its default registry set to the target) and pushes it to `oci://<target>/charts`. */
export function publishChart(o: ReleaseOptions): ReleasedChart {
  const { version, appVersion } = chartVersions(o.repoRoot);
  const out = mkdtempSync(join(tmpdir(), 'kd-chart-'));
  const helm = (args: string[]) =>
    execFileSync(o.helm, args, { encoding: 'utf8', env: o.helmEnv ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const chart = join(out, 'kd-connections');
    cpSync(join(o.repoRoot, CHART_DIR), chart, { recursive: true });
    const values = join(chart, 'values.yaml');
    writeFileSync(values, releasedValuesYaml(readFileSync(values, 'utf8'), o.target));
    helm(['package', chart, '--destination', out]);
    const [tgz] = readdirSync(out).filter((f) => f.endsWith('.tgz'));
    if (tgz !== `kd-connections-${version}.tgz`) throw new Error(`helm package wrote ${tgz ?? 'nothing'}`);
    const base = `oci://${o.target}/charts`;
    // helm push reports "Pushed: …" and "Digest: sha256:…" on stderr (its progress writer), not stdout.
    const pushed = spawnSync(o.helm, ['push', join(out, tgz), base, ...(o.plainHttp ? ['--plain-http'] : [])], {
      encoding: 'utf8',
      env: o.helmEnv ?? process.env,
    });
    const said = `${pushed.stdout ?? ''}${pushed.stderr ?? ''}`.trim();
    if (pushed.status !== 0) throw new Error(`helm push ${tgz} ${base} failed: ${said || pushed.error?.message}`);
    const digest = /Digest:\s*(sha256:[0-9a-f]{64})/.exec(said)?.[1];
    if (!digest) throw new Error(`helm push ${tgz}: no digest in its output: ${said}`);
    return { reference: `${base}/kd-connections`, version, appVersion, digest };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** Builds and pushes the three images (tag = appVersion), then the chart; see the file comment. */
export function release(o: ReleaseOptions): Release {
  const target = checkPushTarget(o.target);
  const { appVersion } = chartVersions(o.repoRoot);
  // Archives in a folder of its own are removed once pushed; a given build.outDir keeps them.
  const ownDir = o.build?.outDir ? undefined : mkdtempSync(join(tmpdir(), 'kd-release-'));
  const opts: BuildOptions = {
    repoRoot: o.repoRoot,
    outDir: o.build?.outDir ?? ownDir!,
    tag: appVersion,
    // Built under the name they are pushed to: the name is in each image's SBOM.
    registry: target,
    ...(o.build?.labels ? { labels: o.build.labels } : {}),
    ...(o.build?.revision ? { revision: o.build.revision } : {}),
    ...(o.build?.source ? { source: o.build.source } : {}),
  };
  try {
    return releaseFrom(o, target, opts);
  } finally {
    if (ownDir) rmSync(ownDir, { recursive: true, force: true });
  }
}

function releaseFrom(o: ReleaseOptions, target: string, opts: BuildOptions): Release {
  const log = o.log ?? (() => {});
  const built = [...SERVICES.map((s) => buildServiceImage(s, opts)), buildGuestconfigImage(opts)];
  for (const b of built) log(`built ${b.name} ${b.digest}`);
  const pushed = pushImages(built, target, opts.tag, {
    ...(o.crane ? { crane: o.crane } : {}),
    insecure: o.plainHttp ?? false,
  });
  for (const p of pushed) log(`pushed ${p.reference} ${p.digest}`);
  const chart = publishChart({ ...o, target });
  log(`pushed ${chart.reference}:${chart.version} ${chart.digest}`);
  const values = releaseValues(target, Object.fromEntries(pushed.map((p) => [p.image, p.digest])));
  const installCommand = [
    `helm install kd-connections ${chart.reference} --version ${chart.version}`,
    '--namespace kd-system --create-namespace',
    ...(o.plainHttp ? ['--plain-http'] : []),
    ...values.map((v) => `--set ${v}`),
  ].join(' \\\n  ');
  return {
    images: pushed.map((p, i) => ({ ...p, built: built[i]! })),
    chart,
    values,
    installCommand,
  };
}
