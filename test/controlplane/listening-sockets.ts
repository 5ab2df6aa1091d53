/**
 * The TCP addresses a process listens on, from /proc: its socket inodes (/proc/<pid>/fd links
 * `socket:[inode]`) matched against the LISTEN rows of /proc/<pid>/net/tcp and tcp6. Lets a test check
 * that a third-party binary keeps every listener on loopback.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

const LISTEN = '0A';

/** "0100007F:1F90" → "127.0.0.1:8080"; IPv6 rows as 32 hex digits (four little-endian words). */
export function decodeProcAddress(hex: string): string {
  const [ip, port] = hex.split(':') as [string, string];
  const p = parseInt(port, 16);
  if (ip.length === 8) return `${[3, 2, 1, 0].map((i) => parseInt(ip.slice(i * 2, i * 2 + 2), 16)).join('.')}:${p}`;
  const bytes: number[] = [];
  for (let w = 0; w < 4; w++)
    for (let b = 3; b >= 0; b--) bytes.push(parseInt(ip.slice(w * 8 + b * 2, w * 8 + b * 2 + 2), 16));
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return `[${groups.join(':')}]:${p}`;
}

export function listeningAddresses(pid: number): string[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed between the listing and the readlink
    }
  }
  const out: string[] = [];
  for (const table of ['tcp', 'tcp6']) {
    const rows = readFileSync(`/proc/${pid}/net/${table}`, 'utf8').trim().split('\n').slice(1);
    for (const row of rows) {
      const f = row.trim().split(/\s+/);
      if (f[3] === LISTEN && inodes.has(f[9]!)) out.push(decodeProcAddress(f[1]!));
    }
  }
  return out.sort();
}
