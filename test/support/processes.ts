/**
 * Child processes for the harness, without jest (the benchmark, the soak and `npm start` use it too):
 * commands run to completion (`run`), and services under test run as real long-lived processes (node
 * <service>/dist/main.js), the way they run in a pod: their own event loop, their own signals. Output is
 * kept for assertions and failure messages. test/support/services.ts starts the two services with it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root, from test/support (sources) or test/dist/support (compiled). */
export const repoRoot = [resolve(here, '../..'), resolve(here, '../../..')].find((d) => {
  try {
    return (JSON.parse(readFileSync(join(d, 'package.json'), 'utf8')) as { name?: string }).name === 'kd-connections';
  } catch {
    return false;
  }
})!;

export const repoPath = (rel: string): string => join(repoRoot, rel);

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; never rejects (the exit code says how it went). */
export function run(
  bin: string,
  args: string[],
  opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = execFile(
      bin,
      args,
      { env: { ...process.env, ...opts.env }, timeout: opts.timeoutMs ?? 60_000, maxBuffer: 256 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout: stdout.toString(), stderr: stderr.toString() });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

/** kubectl with a kubeconfig, in `namespace` unless the call names another or none (TestEnv.kubectl). */
export function runKubectl(
  cluster: { readonly binDir: { readonly kubectl: string }; readonly kubeconfigPath: string },
  namespace: string,
  args: string[],
  opts: { input?: string; namespace?: string | false; timeoutMs?: number } = {},
): Promise<RunResult> {
  const ns = opts.namespace === false ? [] : ['--namespace', opts.namespace ?? namespace];
  return run(cluster.binDir.kubectl, ['--kubeconfig', cluster.kubeconfigPath, ...ns, ...args], {
    input: opts.input,
    timeoutMs: opts.timeoutMs,
  });
}

/** Fails with the command's own output when it did not succeed. */
export function ok(r: RunResult, what: string): RunResult {
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}):\n${r.stderr}\n${r.stdout}`);
  return r;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One JSON log line of a service; a stdout line that is not JSON is kept as level 'invalid'. */
export interface LogLine {
  msg: string;
  level: string;
  [k: string]: unknown;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServiceProcess {
  child: ChildProcess;
  readonly pid: number;
  /** Everything written to stdout and stderr so far (the log file's content with `logFile`). */
  output(): string;
  /** The JSON log lines of stdout so far (one live array, appended to as lines arrive). */
  logs(): LogLine[];
  /** Forgets the output and log lines kept so far (long benchmark runs). */
  clearLogs(): void;
  waitForLog(pred: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  signal(sig: NodeJS.Signals): void;
  /** Sends a signal and waits for the exit code (SIGKILL after graceMs). */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
  readonly exited: boolean;
  /** Settles when the process has exited. */
  readonly exit: Promise<ProcessExit>;
}

export interface StartServiceOptions {
  /** A command the node process runs under, e.g. ['setpriv', '--reuid', '65534', ..., '--']. */
  prefix?: string[];
  /** Working directory (default: the caller's). */
  cwd?: string;
  /** The directory `script` is relative to (default: the repository). */
  root?: string;
  /**
   * Append stdout and stderr to this file instead of keeping them in memory (`npm start` runs for
   * hours). output() then reads the file and logs() stays empty.
   */
  logFile?: string;
}

export function startService(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  opts: StartServiceOptions = {},
): ServiceProcess {
  const [bin, ...pre] = [...(opts.prefix ?? []), process.execPath];
  const fd = opts.logFile === undefined ? undefined : openSync(opts.logFile, 'a');
  const child = spawn(bin!, [...pre, join(opts.root ?? repoRoot, script), ...args], {
    env: { ...process.env, ...env },
    stdio: fd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd],
    cwd: opts.cwd,
  });
  if (fd !== undefined) closeSync(fd);
  let out = '';
  const lines: LogLine[] = [];
  let partial = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    partial += chunk;
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try {
        lines.push(JSON.parse(line) as LogLine);
      } catch {
        lines.push({ msg: 'unstructured output', level: 'invalid', line });
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (c: string) => (out += c));
  let exitCode: number | null | undefined;
  const exit = new Promise<ProcessExit>((r) =>
    child.once('exit', (code, signal) => {
      exitCode = code;
      r({ code, signal });
    }),
  );
  const output = () => {
    if (opts.logFile === undefined) return out;
    try {
      return readFileSync(opts.logFile, 'utf8');
    } catch {
      return '';
    }
  };
  return {
    child,
    pid: child.pid!,
    output,
    logs: () => lines,
    clearLogs() {
      lines.length = 0;
      out = '';
    },
    get exited() {
      return exitCode !== undefined;
    },
    exit,
    async waitForLog(pred, timeoutMs = 30_000) {
      const end = Date.now() + timeoutMs;
      for (let seen = 0; ;) {
        // Only lines not looked at yet: a long-running service can have many.
        const hit = lines.slice(seen).find(pred);
        if (hit) return hit;
        seen = lines.length;
        if (exitCode !== undefined)
          throw new Error(`${script} exited (${exitCode}) before the expected log line:\n${output().slice(-3000)}`);
        if (Date.now() > end)
          throw new Error(`${script}: expected log line not seen in ${timeoutMs} ms:\n${output().slice(-3000)}`);
        await sleep(100);
      }
    },
    signal: (sig) => void child.kill(sig),
    async stop(signal = 'SIGTERM', graceMs = 15_000) {
      if (exitCode !== undefined) return exitCode;
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const { code } = await exit;
      clearTimeout(t);
      return code;
    },
  };
}

/** Polls `check` until it returns a value other than undefined/false, or fails with `what`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  intervalMs = 200,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v as T;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(
        `${what}: not true after ${timeoutMs} ms${last ? ` (last error: ${(last as Error).message})` : ''}`,
      );
    await sleep(intervalMs);
  }
}
