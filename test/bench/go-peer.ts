/**
 * The Go peer of the admission service: a controller-runtime webhook (test/controlplane/bins/kd-go-peer,
 * built into the binary cache by build-bins.sh on first use) doing the same kdcluster work — the same
 * rules against an informer cache, the same denial message, the same generator patch — with the same
 * serving pair and TLS settings. Measured from outside like the baselines: CPU from /proc (every thread),
 * RSS from /proc, reviews served from its /served counter.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { binCacheDir } from '../controlplane/binaries.js';
import { freePort } from '../controlplane/net.js';
import type { TestEnv } from '../support/cluster.js';
import type { ServerStats } from './baseline-server.js';
import { say } from './env.js';

export interface GoPeer {
  pid: number;
  port: number;
  url(path: string): string;
  stats(): Promise<ServerStats>;
  stop(): Promise<void>;
}

/** Builds the peer if its module changed (stamp-cached), and returns the binary's path. */
export function buildGoPeer(): string {
  const script = fileURLToPath(new URL('../controlplane/build-bins.sh', import.meta.url));
  say('go peer: build-bins.sh kd-go-peer (cached after the first build)');
  const r = spawnSync('bash', [script, 'kd-go-peer'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, PATH: `${process.env.PATH ?? ''}:/usr/local/go/bin` },
  });
  if (r.status !== 0) throw new Error(`build-bins.sh kd-go-peer exited with ${r.status}`);
  return join(binCacheDir(), 'kd-go-peer');
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on every Linux this runs on). */
const HZ = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim()) || 100;

function procCpuMicros(pid: number): number {
  // Fields after the ")" of the command name: utime and stime are the 12th and 13th.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) / HZ) * 1e6;
}

function procRssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

function getText(port: number, path: string): Promise<string> {
  return new Promise((ok, fail) =>
    http
      .get({ host: '127.0.0.1', port, path }, (res) => {
        let t = '';
        res.on('data', (c: Buffer) => (t += c.toString()));
        res.on('end', () => ok(t));
      })
      .on('error', fail),
  );
}

/**
 * Starts the peer on 127.0.0.1 with the control plane's webhook serving pair; with `cpu` it starts
 * under taskset, so the Go runtime sizes itself (GOMAXPROCS) for that one CPU as Node's server is pinned.
 */
export async function startGoPeer(
  env: TestEnv,
  opts: { cpu?: number; systemNamespace?: string } = {},
): Promise<GoPeer> {
  const bin = buildGoPeer();
  const dir = mkdtempSync(join(tmpdir(), 'kd-go-peer-'));
  writeFileSync(join(dir, 'tls.crt'), env.info.webhookServing.certPem);
  writeFileSync(join(dir, 'tls.key'), env.info.webhookServing.keyPem, { mode: 0o600 });
  const port = await freePort();
  const metricsPort = await freePort();
  const args = [
    `--kubeconfig=${env.info.kubeconfigPath}`,
    `--cert-dir=${dir}`,
    `--port=${port}`,
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
    `--system-namespace=${opts.systemNamespace ?? env.namespace}`,
  ];
  const [cmd, argv] = opts.cpu === undefined ? [bin, args] : ['taskset', ['-c', String(opts.cpu), bin, ...args]];
  const child: ChildProcess = spawn(cmd, argv, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KUBECONFIG: '' },
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  await new Promise<void>((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`go peer not ready within 60 s; stderr: ${stderr}`)), 60_000);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('kd-go-peer: ready')) {
        clearTimeout(t);
        ok();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      fail(new Error(`go peer exited (${code}) before it was ready; stderr: ${stderr}`));
    });
  });
  const pid = child.pid!;
  return {
    pid,
    port,
    url: (path) => `https://127.0.0.1:${port}${path}`,
    async stats() {
      return {
        cpuMicros: procCpuMicros(pid),
        rssBytes: procRssBytes(pid),
        served: Number((await getText(metricsPort, '/served')).trim()),
      };
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise<void>((r) => child.once('exit', () => r()));
        child.kill('SIGTERM');
        const k = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(k);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
