/**
 * The harness leaves nothing behind: not when stopped politely, and not when the process that owns
 * the control plane is killed outright (its detached watchdog cleans up).
 */
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const serveJs = join(dirname(fileURLToPath(import.meta.url)), '../dist/controlplane/serve.js');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function eventually(what: string, ms: number, check: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`${what} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function startOwner(): Promise<{ child: ReturnType<typeof spawn>; pids: number[]; dir: string }> {
  const env = { ...process.env };
  delete env.KD_TEST_CONTROLPLANE;
  const child = spawn(process.execPath, [serveJs], { stdio: ['ignore', 'pipe', 'ignore'], env });
  let out = '';
  const line = await new Promise<string>((ok, fail) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = out.match(/^# pids .*$/m);
      if (m) ok(m[0]);
    });
    child.on('exit', (code) => fail(new Error(`serve.js exited early with ${code}: ${out}`)));
  });
  const m = line.match(/^# pids (\{.*\}) dir (.*)$/)!;
  const pids = Object.values(JSON.parse(m[1]!) as Record<string, number>);
  return { child, pids, dir: m[2]! };
}

describe('control plane teardown', () => {
  it('stops etcd and kube-apiserver and removes its folder on SIGINT', async () => {
    const { child, pids, dir } = await startOwner();
    expect(pids).toHaveLength(2);
    expect(pids.every(alive)).toBe(true);
    expect(existsSync(dir)).toBe(true);
    child.kill('SIGINT');
    await eventually('processes still running', 20_000, () => !pids.some(alive));
    await eventually('folder still there', 5_000, () => !existsSync(dir));
  }, 90_000);

  it('leaves no orphans when its owner is killed with SIGKILL', async () => {
    const { child, pids, dir } = await startOwner();
    expect(pids.every(alive)).toBe(true);
    child.kill('SIGKILL');
    // The watchdog polls every second, then gives the processes 3 s to exit before SIGKILL.
    await eventually('processes still running', 20_000, () => !pids.some(alive));
    await eventually('folder still there', 10_000, () => !existsSync(dir));
  }, 90_000);
});
