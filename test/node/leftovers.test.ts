/**
 * The node's start-up guard, on real host state: a live owner makes a second start refuse with a clear
 * message; a dead owner's leftovers (a process of its folder, a tmpfs mount under it, an iptables chain,
 * a changed sysctl) are removed before the new run takes the lock. Uses its own state file and marks the
 * host as shared, so the running test node's cgroups, pod network namespaces and bridge are left alone
 * (the teardown's trace check covers those for a real node).
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  acquireNodeLock,
  FIXED_PATHS,
  kubeChains,
  kubepodsCgroups,
  mountsUnder,
  NodeBusyError,
  readNodeState,
  snapshotHost,
  writeNodeState,
  type NodeHostState,
} from '../controlplane/node-host.js';

const work = mkdtempSync(join(tmpdir(), 'kd-leftovers-test-'));
const statePath = join(work, 'state.json');
const SYSCTL = 'kernel/printk_ratelimit';
const CHAIN = 'KUBE-KD-LEFTOVER-TEST';
const sysctl = () => readFileSync(join('/proc/sys', SYSCTL), 'utf8').trim();
const original = sysctl();
afterAll(() => {
  writeFileSync(join('/proc/sys', SYSCTL), original);
  spawnSync('iptables', ['-w', '5', '-F', CHAIN]);
  spawnSync('iptables', ['-w', '5', '-X', CHAIN]);
  for (const m of mountsUnder(work)) spawnSync('umount', ['-l', m]);
  rmSync(work, { recursive: true, force: true });
});

function previousRun(ownerPid: number, dir: string): NodeHostState {
  return {
    ownerPid,
    dir,
    startedAt: new Date().toISOString(),
    sysctls: { [SYSCTL]: original },
    existingPaths: FIXED_PATHS,
    existingChains: kubeChains(),
    existingCgroups: kubepodsCgroups(),
    // The test node runs beside this fake crashed run: its cgroups, netns and bridge are not the crash's.
    hostShared: true,
    pids: {},
  };
}

describe('node start-up guard', () => {
  it('refuses while another run owns the node, naming its pid and folder', () => {
    writeNodeState(previousRun(process.ppid, '/tmp/kd-node-other'), statePath);
    expect(() => acquireNodeLock(snapshotHost(join(work, 'new')), () => {}, statePath)).toThrow(NodeBusyError);
    expect(() => acquireNodeLock(snapshotHost(join(work, 'new')), () => {}, statePath)).toThrow(
      new RegExp(
        `another kd-connections node is running on this machine \\(owner pid ${process.ppid}, folder /tmp/kd-node-other`,
      ),
    );
    rmSync(statePath);
  });

  it("cleans up a crashed run's processes, mounts, folder, iptables chain and sysctl before taking the lock", async () => {
    const dir = join(work, 'kd-node-crashed');
    // What that run recorded when it started, before it changed anything.
    const crashed = previousRun(spawnSync('true').pid!, dir);
    const vol = join(dir, 'kubelet/pods/uid/volumes/kubernetes.io~downward-api/kd-configmeta');
    mkdirSync(vol, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', vol]);
    writeFileSync(join(vol, 'configmeta.json'), '{}');
    const orphan = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)', dir], {
      detached: true,
      stdio: 'ignore',
    });
    const orphanExit = new Promise<NodeJS.Signals | null>((r) => orphan.once('exit', (_code, sig) => r(sig)));
    execFileSync('iptables', ['-w', '5', '-N', CHAIN]);
    execFileSync('iptables', ['-w', '5', '-A', CHAIN, '-s', '127.0.0.2', '-j', 'RETURN']);
    writeFileSync(join('/proc/sys', SYSCTL), String(Number(original) + 2));
    writeNodeState(crashed, statePath);

    const logs: string[] = [];
    const next = snapshotHost(join(work, 'next'));
    acquireNodeLock(next, (m) => logs.push(m), statePath);

    expect(logs.join('\n')).toContain(
      `cleaning up after a previous node run that did not stop (owner pid ${crashed.ownerPid}`,
    );
    // Our own child, so it is reaped here; a stranger's would be gone from /proc.
    expect(await orphanExit).toMatch(/^SIG(TERM|KILL)$/);
    expect(mountsUnder(dir)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
    expect(kubeChains()).not.toContain(`iptables filter ${CHAIN}`);
    expect(sysctl()).toBe(original);
    // The new run holds the lock, and restores what the crashed run found (not what it left).
    expect(readNodeState(statePath)).toMatchObject({ ownerPid: process.pid, sysctls: { [SYSCTL]: original } });
  });
});
