/**
 * runService, the one way both services run: exit codes and what is said, in a real child process (signals
 * and process.exit are the point). The child imports the built runtime (shared/dist), as the services do.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./fixtures/run-service-child.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kd-run-service-'));
const KUBECONFIG = join(dir, 'kubeconfig');
writeFileSync(
  KUBECONFIG,
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
    users: [{ name: 'u', user: { token: 't' } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'x',
  }),
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the child with CASE; `signal` is sent once it printed "started". */
function runChild(c: string, opts: { signal?: NodeJS.Signals; kubeconfig?: string } = {}): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD], {
      env: { ...process.env, CASE: c, KUBECONFIG_FILE: opts.kubeconfig ?? KUBECONFIG },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (opts.signal && stdout.includes('started\n')) child.kill(opts.signal);
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
const logLines = (o: Outcome) =>
  o.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; level: string; [k: string]: unknown });

describe('runService', () => {
  it('--help or --version answered: exit 0, nothing started', async () => {
    const o = await runChild('help');
    expect({ code: o.code, stdout: o.stdout }).toEqual({ code: 0, stdout: '' });
  });

  it('a flag error: exit 2, the program, the message and the usage on stderr', async () => {
    const o = await runChild('flag');
    expect(o.code).toBe(2);
    expect(o.stderr).toBe('kd-connections test: --x must be a number\n\nUsage: test [flags]\n');
  });

  it('an unusable kubeconfig: exit 2, saying what is wrong', async () => {
    const o = await runChild('run', { kubeconfig: join(dir, 'missing') });
    expect(o.code).toBe(2);
    expect(o.stderr).toMatch(/^kd-connections test: kubeconfig: cannot read .*missing/);
  });

  it('SIGTERM after start: stop runs, exit 0; deprecated flags were warned about', async () => {
    const o = await runChild('run', { signal: 'SIGTERM' });
    expect(o.code).toBe(0);
    expect(o.stdout).toContain('stopped\n');
    const lines = logLines(o);
    expect(lines.map((l) => l.msg)).toEqual(['--old is deprecated', 'signal received']);
    expect(lines[1]!.signal).toBe('SIGTERM');
  });

  it('the service asks to exit with a code (the reconciler when KubeDirector appears): stop runs, that code', async () => {
    const o = await runChild('exit3');
    expect(o.code).toBe(3);
    expect(o.stdout).toContain('stopped\n');
    expect(logLines(o).at(-1)).toMatchObject({ msg: 'signal received', signal: 'KubeDirectorFound' });
  });

  it.each(['start-fails', 'create-throws'])('%s: one log line saying why, exit 1', async (c) => {
    const o = await runChild(c);
    expect(o.code).toBe(1);
    const failed = logLines(o).find((l) => l.msg === 'start failed');
    expect(failed?.error).toBe(c === 'start-fails' ? 'listen EADDRINUSE 127.0.0.1:1' : 'bad --client-ca-file');
    expect(o.stderr).toBe('');
  });

  it("an unhandled rejection: 'exit' stops and exits 1; 'log' keeps serving until told to stop", async () => {
    const exited = await runChild('reject-exit');
    expect(exited.code).toBe(1);
    expect(exited.stdout).toContain('stopped\n');
    expect(logLines(exited).map((l) => l.msg)).toContain('unhandled rejection');
    const kept = await runChild('reject-log', { signal: 'SIGTERM' });
    expect(kept.code).toBe(0);
    expect(logLines(kept).find((l) => l.msg === 'unhandled rejection')?.error).toBe('a bug in one request');
  });
});
