/**
 * What a kubelet and containerd leave on the host, and how to take it back. The kubelet writes some
 * things outside its --root-dir: sysctls (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops),
 * iptables chains (KUBE-*), cgroups (/sys/fs/cgroup/<controller>/kubepods), a few fixed folders, and
 * tmpfs/overlay mounts under the run's folder. Before the node starts, a state file at a fixed path
 * records the sysctl values, which of those folders and chains already existed, and later the pids; it
 * doubles as the machine-wide lock (the kubelet's device-plugin socket and the kubepods cgroup are shared
 * by every kubelet on a host, so only one node runs at a time).
 *
 * cleanupNodeHost() puts everything back. It runs on stop, from a detached watchdog when the owning
 * process dies (Ctrl-C, SIGKILL), and at the next start when a previous run left its state file behind.
 * Everything here is synchronous so the watchdog and exit paths can use it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { POD_BRIDGE } from './containerd.js';
import { join } from 'node:path';

export const KUBELET_SYSCTLS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];
/** Fixed paths the kubelet and runtime create regardless of their root folders. */
export const FIXED_PATHS = [
  '/var/lib/kubelet',
  '/var/lib/kubelet/device-plugins',
  '/usr/libexec/kubernetes',
  '/var/log/containers',
  '/var/log/pods',
  '/var/lib/cni',
  '/etc/cni',
  '/opt/containerd',
  '/run/containerd',
  '/run/netns',
];
/** containerd pins each pod's network namespace here (a bind mount per sandbox). */
const NETNS_DIR = '/run/netns';
const IPTABLES_TABLES = ['filter', 'nat', 'mangle'];
const CGROUP_ROOT = '/sys/fs/cgroup';

export interface NodeHostState {
  ownerPid: number;
  dir: string;
  startedAt: string;
  sysctls: Record<string, string>;
  /** FIXED_PATHS that existed before the node started (left alone on cleanup). */
  existingPaths: string[];
  /** iptables/ip6tables "<cmd> <table> <chain>" entries that existed before. */
  existingChains: string[];
  existingCgroups: string[];
  /** Entries of /run/netns that existed before. */
  existingNetns?: string[];
  /**
   * Another node shares the host (only in the start-up guard's own test): leave the host-wide things —
   * kubepods cgroups, pod network namespaces, the bridge, the fixed folders — to their owner.
   */
  hostShared?: boolean;
  pids: Record<string, number>;
}

export function nodeStatePath(): string {
  return process.env.KD_NODE_STATE ?? join(tmpdir(), 'kd-connections-node.json');
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function readNodeState(path = nodeStatePath()): NodeHostState | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as NodeHostState;
  } catch {
    return undefined;
  }
}

export function writeNodeState(s: NodeHostState, path = nodeStatePath()): void {
  writeFileSync(`${path}.tmp`, JSON.stringify(s, null, 2), { mode: 0o600 });
  execFileSync('mv', ['-f', `${path}.tmp`, path]);
}

function iptablesCommands(): string[] {
  return ['iptables', 'ip6tables'].filter((c) => {
    try {
      execFileSync(c, ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  });
}

/** Chains named KUBE-* in every table, as "<cmd> <table> <chain>". */
export function kubeChains(): string[] {
  const out: string[] = [];
  for (const cmd of iptablesCommands()) {
    for (const table of IPTABLES_TABLES) {
      let rules = '';
      try {
        rules = execFileSync(cmd, ['-w', '5', '-t', table, '-S'], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        });
      } catch {
        continue;
      }
      for (const m of rules.matchAll(/^-N (KUBE-\S+)$/gm)) out.push(`${cmd} ${table} ${m[1]}`);
    }
  }
  return out;
}

/** kubepods cgroups, one per hierarchy (cgroup v1 has one per controller; v2 has one). */
export function kubepodsCgroups(): string[] {
  const out: string[] = [];
  if (existsSync(join(CGROUP_ROOT, 'kubepods'))) out.push(join(CGROUP_ROOT, 'kubepods'));
  let entries: string[] = [];
  try {
    entries = readdirSync(CGROUP_ROOT);
  } catch {
    return out;
  }
  for (const c of entries) {
    const p = join(CGROUP_ROOT, c, 'kubepods');
    if (existsSync(p)) out.push(p);
  }
  return out;
}

/** The state to record before a node starts: what to restore, and what was there already. */
export function snapshotHost(dir: string): NodeHostState {
  const sysctls: Record<string, string> = {};
  for (const k of KUBELET_SYSCTLS) sysctls[k] = readFileSync(join('/proc/sys', k), 'utf8').trim();
  return {
    ownerPid: process.pid,
    dir,
    startedAt: new Date().toISOString(),
    sysctls,
    existingPaths: FIXED_PATHS.filter((p) => existsSync(p)),
    existingChains: kubeChains(),
    existingCgroups: kubepodsCgroups(),
    existingNetns: netnsEntries(),
    pids: {},
  };
}

function netnsEntries(): string[] {
  try {
    return readdirSync(NETNS_DIR);
  } catch {
    return [];
  }
}

/** Pod network namespaces pinned since the node started. */
function addedNetns(s: NodeHostState): string[] {
  return netnsEntries()
    .filter((n) => !(s.existingNetns ?? []).includes(n))
    .map((n) => join(NETNS_DIR, n));
}

/**
 * Takes the machine-wide lock. A live owner means another node runs: refuse, naming it. A dead owner
 * means a crashed run: clean up after it first.
 */
export function acquireNodeLock(state: NodeHostState, log: (m: string) => void, path = nodeStatePath()): void {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      closeSync(fd);
      writeNodeState(state, path);
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const prev = readNodeState(path);
    if (prev && prev.ownerPid !== process.pid && pidAlive(prev.ownerPid)) {
      throw new NodeBusyError(
        `another kd-connections node is running on this machine (owner pid ${prev.ownerPid}, folder ${prev.dir}, ` +
          `since ${prev.startedAt}); a host holds one kubelet at a time (shared kubepods cgroup, device-plugin ` +
          `socket). Stop that run first (Ctrl-C on it), or remove ${path} if that pid is not a kd-connections run.`,
      );
    }
    if (prev) {
      log(`cleaning up after a previous node run that did not stop (owner pid ${prev.ownerPid}, folder ${prev.dir})`);
      // Its snapshot holds the host's values from before that run, which are the ones to restore.
      cleanupNodeHost(prev, log);
      state.sysctls = prev.sysctls;
      state.existingPaths = prev.existingPaths;
      state.existingChains = prev.existingChains;
      state.existingCgroups = prev.existingCgroups;
      state.existingNetns = prev.existingNetns;
    }
    rmSync(path, { force: true });
  }
  throw new Error(`could not take the node lock ${path}`);
}

export class NodeBusyError extends Error {}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Processes whose command line mentions the node's folder (kubelet, containerd, its shims, scheduler...). */
function processesOf(dir: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    if (cmdline(Number(e)).includes(dir)) out.push(Number(e));
  }
  return out;
}

/** Every process in a cgroup tree (the containers: their pids are in kubepods/<qos>/pod<uid>/<id>). */
function processesInCgroups(roots: string[]): number[] {
  const out = new Set<number>();
  const walk = (d: string) => {
    let entries: string[] = [];
    try {
      entries = readdirSync(d);
    } catch {
      return;
    }
    try {
      for (const l of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n')) if (l) out.add(Number(l));
    } catch {
      /* not a cgroup folder */
    }
    for (const e of entries) {
      const p = join(d, e);
      try {
        if (statSync(p).isDirectory()) walk(p);
      } catch {
        /* vanished */
      }
    }
  };
  roots.forEach(walk);
  return [...out];
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function killAll(pids: number[], signal: NodeJS.Signals): void {
  for (const p of pids) {
    try {
      process.kill(p, signal);
    } catch {
      /* gone */
    }
  }
}

/** Removes a cgroup tree: only empty folders can go, deepest first (rm -r cannot delete cgroup files). */
function removeCgroupTree(d: string): void {
  let entries: string[] = [];
  try {
    entries = readdirSync(d);
  } catch {
    return;
  }
  for (const e of entries) {
    const p = join(d, e);
    try {
      if (statSync(p).isDirectory()) removeCgroupTree(p);
    } catch {
      /* vanished */
    }
  }
  for (let i = 0; i < 20; i++) {
    try {
      rmdirSync(d);
      return;
    } catch {
      if (!existsSync(d)) return;
      sleepSync(100);
    }
  }
}

/** Mount points at or under dir, deepest first. */
export function mountsUnder(dir: string): string[] {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((m): m is string => !!m)
    .map((m) => m.replace(/\\040/g, ' '))
    .filter((m) => m === dir || m.startsWith(`${dir}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Everything this node did to the host, undone. Safe to run twice. */
export function cleanupNodeHost(s: NodeHostState, log: (m: string) => void = () => {}): string[] {
  const problems: string[] = [];
  const note = (m: string) => {
    problems.push(m);
    log(m);
  };
  // 1. Processes: node components and runtime first (no restarts), then containers, then shims.
  // Recorded pids count while their command line is still the recorded program (pids get reused).
  const recorded = () =>
    Object.entries(s.pids)
      .filter(([name, pid]) => cmdline(pid).includes(name))
      .map(([, pid]) => pid);
  const ours = () => [...new Set([...processesOf(s.dir), ...recorded()])];
  const cgroups = () => (s.hostShared ? [] : kubepodsCgroups().filter((c) => !s.existingCgroups.includes(c)));
  killAll(ours(), 'SIGTERM');
  for (let i = 0; i < 30 && ours().length; i++) sleepSync(100);
  killAll(ours(), 'SIGKILL');
  killAll(processesInCgroups(cgroups()), 'SIGKILL');
  for (let i = 0; i < 50 && (ours().length || processesInCgroups(cgroups()).length); i++) {
    killAll([...ours(), ...processesInCgroups(cgroups())], 'SIGKILL');
    sleepSync(100);
  }
  const left = [...ours(), ...processesInCgroups(cgroups())];
  if (left.length) note(`processes still running: ${left.join(', ')}`);

  // 2. Mounts (projected-volume tmpfs, container rootfs overlays, sandbox shm), deepest first.
  // One umount for all of them (a process per mount is slow with a hundred pods), then lazily any left.
  const mounts = mountsUnder(s.dir);
  if (mounts.length) spawnSync('umount', mounts, { stdio: 'ignore' });
  for (const m of mountsUnder(s.dir)) {
    if (spawnSync('umount', ['-l', m], { stdio: 'ignore' }).status !== 0) note(`cannot unmount ${m}`);
  }
  if (mountsUnder(s.dir).length === 0) rmSync(s.dir, { recursive: true, force: true });
  else note(`left ${s.dir}: still mounted`);

  // 3. cgroups.
  for (const c of cgroups()) removeCgroupTree(c);
  for (const c of cgroups()) note(`cgroup ${c} could not be removed`);

  // 4. sysctls.
  for (const [k, v] of Object.entries(s.sysctls)) {
    try {
      if (readFileSync(join('/proc/sys', k), 'utf8').trim() !== v) writeFileSync(join('/proc/sys', k), v);
    } catch (e) {
      note(`cannot restore ${k.replace('/', '.')}=${v}: ${(e as Error).message}`);
    }
  }

  // 5. iptables chains: unhook the rules that jump to them, then flush and delete.
  const added = kubeChains().filter((c) => !s.existingChains.includes(c));
  for (const entry of added) {
    const [cmd, table, chain] = entry.split(' ') as [string, string, string];
    const rules = execFileSync(cmd, ['-w', '5', '-t', table, '-S'], { encoding: 'utf8' }).split('\n');
    for (const r of rules) {
      if (!r.startsWith('-A ') || !new RegExp(`-j ${chain}( |$)`).test(r)) continue;
      try {
        execFileSync(cmd, ['-w', '5', '-t', table, ...r.replace(/^-A /, '-D ').split(' ')], { stdio: 'ignore' });
      } catch {
        /* a rule with quoting we cannot replay; the flush below still empties the chain */
      }
    }
  }
  for (const entry of added) {
    const [cmd, table, chain] = entry.split(' ') as [string, string, string];
    try {
      execFileSync(cmd, ['-w', '5', '-t', table, '-F', chain], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  }
  for (const entry of added) {
    const [cmd, table, chain] = entry.split(' ') as [string, string, string];
    try {
      execFileSync(cmd, ['-w', '5', '-t', table, '-X', chain], { stdio: 'ignore' });
    } catch {
      note(`cannot delete ${cmd} -t ${table} chain ${chain}`);
    }
  }

  // 6. Pinned pod network namespaces (their veths go with them), then the pod bridge.
  if (s.hostShared) return problems;
  for (const ns of addedNetns(s)) {
    spawnSync('umount', ['-l', ns], { stdio: 'ignore' });
    rmSync(ns, { force: true });
  }
  if (bridgeExists()) spawnSync('ip', ['link', 'delete', POD_BRIDGE], { stdio: 'ignore' });
  if (bridgeExists()) note(`cannot delete the bridge ${POD_BRIDGE}`);

  // 7. Fixed folders the node created (outermost first, so one rm covers its children).
  for (const p of FIXED_PATHS) {
    if (s.existingPaths.includes(p) || !existsSync(p)) continue;
    try {
      for (const m of mountsUnder(p)) execFileSync('umount', ['-l', m], { stdio: 'ignore' });
      rmSync(p, { recursive: true, force: true });
    } catch (e) {
      note(`cannot remove ${p}: ${(e as Error).message}`);
    }
  }
  return problems;
}

function bridgeExists(): boolean {
  return existsSync(`/sys/class/net/${POD_BRIDGE}`);
}

/** Traces of a node left on the host (for the cleanup test and for diagnostics). */
export function nodeTraces(s: NodeHostState): string[] {
  const out: string[] = [];
  for (const p of processesOf(s.dir)) out.push(`process ${p}: ${cmdline(p)}`);
  if (existsSync(s.dir)) out.push(`folder ${s.dir}`);
  for (const m of mountsUnder(s.dir)) out.push(`mount ${m}`);
  for (const c of kubepodsCgroups()) if (!s.existingCgroups.includes(c)) out.push(`cgroup ${c}`);
  for (const [k, v] of Object.entries(s.sysctls)) {
    const now = readFileSync(join('/proc/sys', k), 'utf8').trim();
    if (now !== v) out.push(`sysctl ${k.replace('/', '.')}=${now} (was ${v})`);
  }
  for (const c of kubeChains()) if (!s.existingChains.includes(c)) out.push(`chain ${c}`);
  for (const p of FIXED_PATHS) if (!s.existingPaths.includes(p) && existsSync(p)) out.push(`path ${p}`);
  if (bridgeExists()) out.push(`bridge ${POD_BRIDGE}`);
  for (const ns of addedNetns(s)) out.push(`network namespace ${ns}`);
  return out;
}
