import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export type Binary =
  'kube-apiserver' | 'etcd' | 'kubectl' | 'helm' | 'kubelet' | 'kube-scheduler' | 'kube-controller-manager';
/** What a control plane needs; the node's three are built on first use of a node. */
export const ALL_BINARIES: Binary[] = ['kube-apiserver', 'etcd', 'kubectl', 'helm'];
export const NODE_BINARIES: Binary[] = ['kubelet', 'kube-scheduler', 'kube-controller-manager'];
/** The OCI registry (CNCF Distribution) and its client (go-containerregistry's crane): build-registry-bins.sh. */
export type RegistryBinary = 'registry' | 'crane';
export const REGISTRY_BINARIES: RegistryBinary[] = ['registry', 'crane'];

const here = dirname(fileURLToPath(import.meta.url));
/** A build script beside the sources; from test/dist/controlplane it is two levels up. */
const script = (name: string) =>
  [join(here, name), resolve(here, '../../controlplane', name)].find((p) => existsSync(p));
const buildScript = script('build-bins.sh');
const registryBuildScript = script('build-registry-bins.sh');

/** The cache build-bins.sh writes to (kept in step with its default). */
export function binCacheDir(): string {
  return (
    process.env.KD_BIN_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'kd-connections', 'bin')
  );
}

/**
 * Where each binary comes from: KD_BIN_DIR, then KUBEBUILDER_ASSETS (envtest's variable, for people who
 * already have prebuilt binaries), then the build cache. A directory only counts for the binaries it has.
 */
export function findBinary(name: Binary | RegistryBinary): string | undefined {
  for (const dir of [process.env.KD_BIN_DIR, process.env.KUBEBUILDER_ASSETS, binCacheDir()]) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** Runs a build script for `missing` (its progress on stderr). */
async function build(scriptPath: string | undefined, scriptName: string, missing: string[]): Promise<void> {
  if (!scriptPath) throw new Error(`${scriptName} not found; set KD_BIN_DIR to a folder with ${missing.join(', ')}`);
  process.stderr.write(`[controlplane] building ${missing.join(', ')} into ${binCacheDir()}\n`);
  await new Promise<void>((ok, fail) => {
    const child = spawn('bash', [scriptPath, ...missing], { stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', fail);
    child.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`${scriptName} exited with ${code}`))));
  });
}

function paths<B extends Binary | RegistryBinary>(names: B[]): Record<B, string> {
  const out = {} as Record<B, string>;
  for (const n of names) {
    const p = findBinary(n);
    if (!p) throw new Error(`${n} is still missing after the build`);
    out[n] = p;
  }
  return out;
}

/**
 * Paths of the requested binaries, building the missing ones from the Go module proxy first.
 * The build prints progress to stderr; the first kube-apiserver build takes minutes.
 */
export async function ensureBinaries<B extends Binary = (typeof ALL_BINARIES)[number]>(
  names: B[] = ALL_BINARIES as B[],
): Promise<Record<B, string>> {
  const missing = names.filter((n) => !findBinary(n));
  if (missing.length > 0) await build(buildScript, 'build-bins.sh', missing);
  return paths(names);
}

/**
 * Paths of the registry and crane (build-registry-bins.sh), building the missing ones first: from KD_BIN_DIR,
 * KUBEBUILDER_ASSETS or the build cache like the others. A cold build takes about two minutes on 2 cores.
 */
export async function ensureRegistryBinaries<B extends RegistryBinary = RegistryBinary>(
  names: B[] = REGISTRY_BINARIES as B[],
): Promise<Record<B, string>> {
  const missing = names.filter((n) => !findBinary(n));
  if (missing.length > 0) await build(registryBuildScript, 'build-registry-bins.sh', missing);
  return paths(names);
}
