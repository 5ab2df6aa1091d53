/**
 * Services under test run as real processes (node <service>/dist/main.js), the way they run in a pod:
 * their own event loop, their own signals. Output is kept for assertions and for failure messages.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ServiceProcess {
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** JSON log lines parsed (non-JSON lines skipped). */
  logs(): Record<string, unknown>[];
  waitForLog(pred: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Sends a signal and waits for the exit code (SIGKILL after graceMs). */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
  readonly exited: boolean;
}

export interface StartServiceOptions {
  /** A command the node process runs under, e.g. ['setpriv', '--reuid', '65534', ..., '--']. */
  prefix?: string[];
  /** Working directory (default: the test's). */
  cwd?: string;
  /** The directory `script` is relative to (default: the repository). */
  root?: string;
}

export function startService(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  opts: StartServiceOptions = {},
): ServiceProcess {
  const [bin, ...pre] = [...(opts.prefix ?? []), process.execPath];
  const child = spawn(bin!, [...pre, join(opts.root ?? repoRoot, script), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: opts.cwd,
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r((exitCode = code))));
  const logs = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
  return {
    child,
    output: () => out,
    logs,
    get exited() {
      return exitCode !== undefined;
    },
    async waitForLog(pred, timeoutMs = 30_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const hit = logs().find(pred);
        if (hit) return hit;
        if (exitCode !== undefined)
          throw new Error(`${script} exited (${exitCode}) before the expected log line:\n${out.slice(-3000)}`);
        if (Date.now() > end)
          throw new Error(`${script}: expected log line not seen in ${timeoutMs} ms:\n${out.slice(-3000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop(signal = 'SIGTERM', graceMs = 15_000) {
      if (exitCode !== undefined) return exitCode;
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const code = await exited;
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
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
