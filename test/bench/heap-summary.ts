/**
 * `node --import ./test/bench/ts-loader.mjs test/bench/heap-summary.ts FILE.heapsnapshot [top]`
 *
 * What a V8 heap snapshot (`--heapsnapshot-signal`, v8.writeHeapSnapshot) holds, in text: self size by
 * node type and constructor, retained size (dominator tree) of the biggest retainers, and the strings
 * that take the most room — enough to find what a process keeps without opening DevTools.
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
    node_count: number;
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: heap-summary FILE.heapsnapshot [top]');
  process.exit(2);
}
const top = Number(topArg ?? 30);
const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
const nf = s.snapshot.meta.node_fields;
const ef = s.snapshot.meta.edge_fields;
const NF = nf.length;
const EF = ef.length;
const [tI, nI, sI, ecI] = ['type', 'name', 'self_size', 'edge_count'].map((k) => nf.indexOf(k)) as [
  number,
  number,
  number,
  number,
];
const [etI, enI, toI] = ['type', 'name_or_index', 'to_node'].map((k) => ef.indexOf(k)) as [number, number, number];
const nodeTypes = s.snapshot.meta.node_types[0];
const edgeTypes = s.snapshot.meta.edge_types[0];
const N = s.nodes.length / NF;
const firstEdge = new Uint32Array(N + 1);
for (let i = 0, e = 0; i < N; i++) {
  firstEdge[i] = e;
  e += s.nodes[i * NF + ecI]! * EF;
  firstEdge[i + 1] = e;
}
const type = (i: number) => nodeTypes[s.nodes[i * NF + tI]!]!;
const name = (i: number) => s.strings[s.nodes[i * NF + nI]!]!;
const self = (i: number) => s.nodes[i * NF + sI]!;
const WEAK = edgeTypes.indexOf('weak');
const SHORTCUT = edgeTypes.indexOf('shortcut');

/** What a node is, for grouping: its constructor for objects, its type otherwise. */
function label(i: number): string {
  const t = type(i);
  if (t === 'object' || t === 'closure' || t === 'native' || t === 'hidden') return `${t}:${name(i)}`;
  return t;
}

// --- self size by label -----------------------------------------------------------------------------
const byLabel = new Map<string, { n: number; self: number }>();
let total = 0;
for (let i = 0; i < N; i++) {
  const l = label(i);
  const x = byLabel.get(l) ?? { n: 0, self: 0 };
  x.n++;
  x.self += self(i);
  total += self(i);
  byLabel.set(l, x);
}
const mib = (b: number) => (b / 2 ** 20).toFixed(2);
console.log(`${file}: ${N} nodes, ${mib(total)} MiB self size in all`);
console.log(`\nSelf size by type/constructor (top ${top}):`);
for (const [l, x] of [...byLabel].sort((a, b) => b[1].self - a[1].self).slice(0, top))
  console.log(`  ${mib(x.self).padStart(8)} MiB  ${String(x.n).padStart(8)}×  ${l}`);

// --- dominator tree (Cooper, Harvey & Kennedy), over strong edges from the root (node 0) ---------------
const order = new Int32Array(N).fill(-1); // post-order number
const post: number[] = [];
{
  const stack: number[] = [0];
  const edgeAt = new Uint32Array(N);
  for (let i = 0; i < N; i++) edgeAt[i] = firstEdge[i]!;
  const seen = new Uint8Array(N);
  seen[0] = 1;
  while (stack.length) {
    const v = stack[stack.length - 1]!;
    let pushed = false;
    while (edgeAt[v]! < firstEdge[v + 1]!) {
      const e = edgeAt[v]!;
      edgeAt[v] = e + EF;
      const et = s.edges[e + etI]!;
      if (et === WEAK || et === SHORTCUT) continue;
      const w = s.edges[e + toI]! / NF;
      if (!seen[w]) {
        seen[w] = 1;
        stack.push(w);
        pushed = true;
        break;
      }
    }
    if (!pushed) {
      order[v] = post.length;
      post.push(v);
      stack.pop();
    }
  }
}
// Predecessors over the same edges.
const predCount = new Uint32Array(N + 1);
for (let v = 0; v < N; v++)
  for (let e = firstEdge[v]!; e < firstEdge[v + 1]!; e += EF) {
    const et = s.edges[e + etI]!;
    if (et === WEAK || et === SHORTCUT) continue;
    predCount[s.edges[e + toI]! / NF]!++;
  }
const predStart = new Uint32Array(N + 1);
for (let i = 0; i < N; i++) predStart[i + 1] = predStart[i]! + predCount[i]!;
const preds = new Uint32Array(predStart[N]!);
const fill = predStart.slice(0, N);
for (let v = 0; v < N; v++)
  for (let e = firstEdge[v]!; e < firstEdge[v + 1]!; e += EF) {
    const et = s.edges[e + etI]!;
    if (et === WEAK || et === SHORTCUT) continue;
    const w = s.edges[e + toI]! / NF;
    preds[fill[w]!++] = v;
  }
const idom = new Int32Array(N).fill(-1);
idom[0] = 0;
const intersect = (a: number, b: number) => {
  while (a !== b) {
    while (order[a]! < order[b]!) a = idom[a]!;
    while (order[b]! < order[a]!) b = idom[b]!;
  }
  return a;
};
for (let changed = true; changed;) {
  changed = false;
  for (let k = post.length - 2; k >= 0; k--) {
    const v = post[k]!;
    let d = -1;
    for (let p = predStart[v]!; p < predStart[v + 1]!; p++) {
      const u = preds[p]!;
      if (order[u] === -1 || idom[u] === -1) continue;
      d = d === -1 ? u : intersect(u, d);
    }
    if (d !== -1 && idom[v] !== d) {
      idom[v] = d;
      changed = true;
    }
  }
}
const retained = new Float64Array(N);
for (const v of post) retained[v]! += self(v);
for (const v of post) if (v !== 0 && idom[v]! >= 0) retained[idom[v]!]! += retained[v]!;

/** The edge name by which `parent` holds `child`, for a path to a retainer. */
function edgeName(parent: number, child: number): string {
  for (let e = firstEdge[parent]!; e < firstEdge[parent + 1]!; e += EF)
    if (s.edges[e + toI]! / NF === child) {
      const et = edgeTypes[s.edges[e + etI]!];
      const n = s.edges[e + enI]!;
      return et === 'element' || et === 'hidden' ? `[${n}]` : String(s.strings[n]);
    }
  return '?';
}
function path(v: number): string {
  const parts: string[] = [];
  for (let x = v, k = 0; x !== 0 && k < 24; x = idom[x]!, k++) parts.unshift(`${label(x)}.${edgeName(idom[x]!, x)}`);
  return parts.join(' ← ').slice(-2000);
}

console.log(`\nBiggest retainers (retained size ≥ 1 MiB, not counting those inside a bigger one listed; top ${top}):`);
const big = [...Array(N).keys()]
  .filter((i) => i !== 0 && retained[i]! >= 2 ** 20)
  .sort((a, b) => retained[b]! - retained[a]!);
const shown: number[] = [];
for (const v of big) {
  if (shown.length >= top) break;
  // Skip a node whose dominator chain has a shown one with nearly the same retained size (the same thing).
  let dup = false;
  for (let x = idom[v]!; x !== 0; x = idom[x]!) if (shown.includes(x) && retained[x]! < retained[v]! * 1.1) dup = true;
  if (dup) continue;
  shown.push(v);
  console.log(`  ${mib(retained[v]!).padStart(8)} MiB  ${label(v)}  (self ${self(v)} B) via ${path(v)}`);
}

// --- retained size by label, for objects immediately under a big collection ---------------------------
console.log(`\nRetained size by type/constructor of the children of the biggest retainers (top ${top}):`);
const childAgg = new Map<string, { n: number; r: number }>();
for (let v = 1; v < N; v++) {
  const d = idom[v]!;
  if (d <= 0 || retained[d]! < 4 * 2 ** 20) continue;
  const l = `${label(d)} → ${label(v)}`;
  const x = childAgg.get(l) ?? { n: 0, r: 0 };
  x.n++;
  x.r += retained[v]!;
  childAgg.set(l, x);
}
for (const [l, x] of [...childAgg].sort((a, b) => b[1].r - a[1].r).slice(0, top))
  console.log(`  ${mib(x.r).padStart(8)} MiB  ${String(x.n).padStart(8)}×  ${l}`);

// --- strings -----------------------------------------------------------------------------------------
console.log(`\nStrings by total self size (top ${top}; first 80 characters):`);
const strings = new Map<string, { n: number; self: number }>();
for (let i = 0; i < N; i++) {
  const t = type(i);
  if (t !== 'string' && t !== 'concatenated string' && t !== 'sliced string') continue;
  const k = `${t}: ${name(i).slice(0, 80)}`;
  const x = strings.get(k) ?? { n: 0, self: 0 };
  x.n++;
  x.self += self(i);
  strings.set(k, x);
}
for (const [k, x] of [...strings].sort((a, b) => b[1].self - a[1].self).slice(0, top))
  console.log(`  ${mib(x.self).padStart(8)} MiB  ${String(x.n).padStart(8)}×  ${JSON.stringify(k)}`);
