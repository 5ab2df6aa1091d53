/**
 * Summary of the V8 CPU profiles `--cpu-prof` wrote (the admission service under the benchmark's load):
 * self time by function and by origin (our code, each npm package, Node internals, GC), so a report
 * can say where the time per review goes without opening a profiler.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  files: string[];
  totalMs: number;
  byOrigin: { origin: string; ms: number; pct: number }[];
  topFunctions: { fn: string; where: string; ms: number; pct: number }[];
}

function origin(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 14).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const m = /\/(admission|shared|certs|reconciler)\/dist\//.exec(url);
  return m ? `kd-connections/${m[1]}` : url;
}

export function summarizeProfiles(dir: string, top = 20): ProfileSummary {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  const byFn = new Map<string, { fn: string; where: string; us: number }>();
  const byOrigin = new Map<string, number>();
  let total = 0;
  for (const f of files) {
    const p = JSON.parse(readFileSync(join(dir, f), 'utf8')) as CpuProfile;
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    for (let i = 0; i < p.samples.length; i++) {
      const n = nodes.get(p.samples[i]!);
      const dt = p.timeDeltas[i] ?? 0;
      if (!n) continue;
      const { functionName, url, lineNumber } = n.callFrame;
      if (functionName === '(idle)') continue;
      total += dt;
      const where = url
        ? `${url.replace(/^.*\/(node_modules|admission|shared|certs)\//, '$1/')}:${lineNumber + 1}`
        : '';
      const key = `${functionName}@${where}`;
      const e = byFn.get(key) ?? { fn: functionName || '(anonymous)', where, us: 0 };
      e.us += dt;
      byFn.set(key, e);
      const o = origin(url, functionName);
      byOrigin.set(o, (byOrigin.get(o) ?? 0) + dt);
    }
  }
  const pct = (us: number) => Math.round((us / (total || 1)) * 1000) / 10;
  return {
    files,
    totalMs: Math.round(total / 1000),
    byOrigin: [...byOrigin.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([o, us]) => ({ origin: o, ms: Math.round(us / 1000), pct: pct(us) })),
    topFunctions: [...byFn.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((e) => ({ fn: e.fn, where: e.where, ms: Math.round(e.us / 1000), pct: pct(e.us) })),
  };
}
