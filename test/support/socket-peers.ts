/**
 * The remote ends of a process's TCP sockets that are connecting or connected (SYN_SENT, ESTABLISHED,
 * ...: every state but LISTEN), from /proc like listening-sockets.ts. Sampled during a test, it shows
 * whether a process ever dialed an address off loopback: a dial to an unreachable ClusterIP sits in
 * SYN_SENT for seconds, long enough for a sampler polling every few hundred milliseconds.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { decodeProcAddress } from '../controlplane/listening-sockets.js';

const LISTEN = '0A';

export function peerAddresses(pid: number): string[] {
  return [...new Set(connections(pid).map((c) => c.remote))].sort();
}

/** How many of the process's connections (any state but LISTEN) have `port` as their local port: inbound ones. */
export function inboundConnections(pid: number, port: number): number {
  return connections(pid).filter((c) => c.local.endsWith(`:${port}`)).length;
}

/** The process's TCP sockets in any state but LISTEN, as local and remote address. */
function connections(pid: number): { local: string; remote: string }[] {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return []; // the process has exited
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed between the listing and the readlink
    }
  }
  const out: { local: string; remote: string }[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let rows: string[];
    try {
      rows = readFileSync(`/proc/${pid}/net/${table}`, 'utf8').trim().split('\n').slice(1);
    } catch {
      continue;
    }
    for (const row of rows) {
      const f = row.trim().split(/\s+/);
      if (f[3] !== LISTEN && inodes.has(f[9]!))
        out.push({ local: decodeProcAddress(f[1]!), remote: decodeProcAddress(f[2]!) });
    }
  }
  return out;
}

/** 127.0.0.0/8, ::1 and IPv4-mapped loopback. */
export function isLoopback(address: string): boolean {
  const host = address.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  return /^127\./.test(host) || host === '0:0:0:0:0:0:0:1' || /^0:0:0:0:0:ffff:7f/.test(host);
}

/** Samples the peers of some processes every intervalMs until stop(); returns every address seen. */
export function samplePeers(pids: () => number[], intervalMs = 200): { stop(): string[] } {
  const seen = new Set<string>();
  const tick = () => {
    for (const pid of pids()) for (const a of peerAddresses(pid)) seen.add(`${pid} ${a}`);
  };
  tick();
  const t = setInterval(tick, intervalMs);
  return {
    stop() {
      clearInterval(t);
      tick();
      return [...seen].sort();
    },
  };
}
