/**
 * A real OCI registry for the tests: CNCF Distribution's `registry` (built by
 * test/controlplane/build-registry-bins.sh) on 127.0.0.1 with an ephemeral port and filesystem storage in
 * a temporary folder, plain HTTP (go-containerregistry and containerd speak HTTP to a loopback registry).
 * Its stdout and stderr go to a file (registry.log in that folder), never a pipe: a caller that blocks on a
 * synchronous crane call must not be able to stall the registry on a full pipe.
 *
 * Distribution's OpenTelemetry exporter would otherwise try to send traces to an OTLP collector; it is
 * turned off (OTEL_TRACES_EXPORTER=none), and REGISTRY_* variables (which override the configuration file)
 * are not passed on.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureRegistryBinaries } from '../controlplane/binaries.js';
import { freePort, waitFor } from '../controlplane/net.js';

export interface LocalRegistry {
  /** `127.0.0.1:<port>`: the registry part of a reference. */
  readonly host: string;
  readonly pid: number;
  /** Its folder: config.yml, storage/, registry.log. */
  readonly dir: string;
  /** What it has logged so far (access log and messages). */
  log(): string;
  /** Stops it (SIGTERM, then SIGKILL after 10 s) and removes its folder. */
  stop(): Promise<void>;
}

/** The configuration file: loopback address, filesystem storage, deletes allowed, no background purging. */
export function registryConfig(port: number, storage: string): string {
  return [
    'version: 0.1',
    'log:',
    '  level: info',
    '  formatter: text',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${storage}`,
    '  delete:',
    '    enabled: true',
    '  maintenance:',
    '    uploadpurging:',
    '      enabled: false',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    '',
  ].join('\n');
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((ok) => child.once('exit', () => ok()));
}

/** Starts a registry; retries on another port when the one picked was taken meanwhile. */
export async function startRegistry(opts: { binary?: string } = {}): Promise<LocalRegistry> {
  const binary = opts.binary ?? (await ensureRegistryBinaries(['registry'])).registry;
  const dir = mkdtempSync(join(tmpdir(), 'kd-registry-'));
  const storage = join(dir, 'storage');
  mkdirSync(storage);
  const logFile = join(dir, 'registry.log');
  const log = () => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REGISTRY_')));
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    writeFileSync(join(dir, 'config.yml'), registryConfig(port, storage));
    const fd = openSync(logFile, 'a');
    const child = spawn(binary, ['serve', join(dir, 'config.yml')], {
      stdio: ['ignore', fd, fd],
      env: { ...env, OTEL_TRACES_EXPORTER: 'none' },
    });
    closeSync(fd);
    const host = `127.0.0.1:${port}`;
    try {
      await waitFor(
        `registry on ${host}`,
        30_000,
        async () => (await fetch(`http://${host}/v2/`)).status === 200,
        child,
      );
    } catch (e) {
      child.kill('SIGKILL');
      await exited(child);
      if (attempt < 3 && /address already in use/.test(log())) continue;
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`${(e as Error).message}\n${log()}`);
    }
    return {
      host,
      pid: child.pid!,
      dir,
      log,
      async stop() {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited(child);
        clearTimeout(timer);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
}
