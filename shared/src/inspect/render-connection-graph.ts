/**
 * A connection graph (connection-graph.ts) as text, Mermaid or Graphviz DOT. Pure text: the kubectl
 * plugin prints it, the tests compare it.
 */
import type { ConnectionGraph, EdgeState, GraphEdge, GraphNode } from './connection-graph.js';

export const GRAPH_FORMATS = ['text', 'mermaid', 'dot'] as const;
export type GraphFormat = (typeof GRAPH_FORMATS)[number];

const KIND_WORD = { Cluster: 'kdcluster', ConfigMap: 'configmap', Secret: 'secret' } as const;

/** One line, no control character: names and reasons come from objects anyone may have written. */
// eslint-disable-next-line no-control-regex -- replacing control characters is the point
export const oneLine = (s: string) => s.replace(/[\u0000-\u001f\u007f]+/g, ' ');

const label = (n: GraphNode) =>
  oneLine(`${KIND_WORD[n.kind]} ${n.name}${n.detail ? ` (${n.detail})` : ''}${n.absent ? ' (not found)' : ''}`);
const edgeText = (e: GraphEdge) => {
  const recorded = e.recorded
    ? `; reconciler: ${e.recorded.state}${e.recorded.message ? ` (${e.recorded.message})` : ''}`
    : '';
  return oneLine(`${e.state}${e.reason ? `: ${e.reason}` : ''}${e.note ? ` (${e.note})` : ''}${recorded}`);
};

/** One block per cluster: its connections, one line each with the state and why. */
export function renderGraphText(g: ConnectionGraph): string {
  const lines = [`namespace ${g.namespace}`];
  const clusters = g.nodes.filter((n) => n.kind === 'Cluster' && !n.absent);
  for (const c of clusters) {
    lines.push('', label(c));
    const out = g.edges.filter((e) => e.from === c.id);
    if (out.length === 0) lines.push('  (no connections)');
    for (const e of out) lines.push(`  -> ${KIND_WORD[e.kind]} ${e.name}: ${edgeText(e)}`);
  }
  const named = new Set(g.edges.map((e) => e.to));
  const loose = g.nodes.filter((n) => n.kind !== 'Cluster' && !named.has(n.id));
  if (loose.length > 0) {
    lines.push('', 'connectable, connected by no cluster:');
    for (const n of loose) lines.push(`  ${label(n)}`);
  }
  if (clusters.length === 0) lines.push('', '(no kdclusters)');
  for (const u of g.unreadable) lines.push('', `note: ${u}`);
  return `${lines.join('\n')}\n`;
}

/** Node ids safe in Mermaid and DOT: the kind and an index (names may hold any DNS character). */
function ids(g: ConnectionGraph): Map<string, string> {
  const prefix = { Cluster: 'c', ConfigMap: 'm', Secret: 's' } as const;
  return new Map(g.nodes.map((n, i) => [n.id, `${prefix[n.kind]}${i}`]));
}

const MERMAID_ARROW: Record<EdgeState, string> = {
  Connected: '-->',
  Missing: '-.->',
  NotConnectable: '-.->',
  Unlabeled: '-.->',
  Unknown: '-.->',
};

/**
 * Mermaid label text: Mermaid's entity codes for every character that could end the label, start a
 * directive (`%%`) or be read as HTML (`#` first, since the entities start with it).
 */
export const mermaidText = (s: string) =>
  s
    .replace(/#/g, '#35;')
    .replace(/"/g, '#quot;')
    .replace(/</g, '#lt;')
    .replace(/>/g, '#gt;')
    .replace(/&/g, '#amp;')
    .replace(/%/g, '#37;')
    .replace(/\|/g, '#124;');

/** A Mermaid flowchart: solid arrows for Connected, dotted ones labelled with the state and reason otherwise. */
export function renderGraphMermaid(g: ConnectionGraph): string {
  const id = ids(g);
  const lines = ['flowchart LR'];
  for (const n of g.nodes) {
    const [open, close] = n.kind === 'Cluster' ? ['[', ']'] : ['([', '])'];
    lines.push(`  ${id.get(n.id)}${open}"${mermaidText(label(n))}"${close}`);
  }
  for (const e of g.edges) {
    lines.push(`  ${id.get(e.from)} ${MERMAID_ARROW[e.state]}|"${mermaidText(edgeText(e))}"| ${id.get(e.to)}`);
  }
  return `${lines.join('\n')}\n`;
}

const dotText = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

/** Graphviz DOT: clusters as boxes, ConfigMaps and Secrets as notes, non-Connected edges dashed. */
export function renderGraphDot(g: ConnectionGraph): string {
  const id = ids(g);
  const lines = [`digraph ${dotText(`kd-connections ${g.namespace}`)} {`, '  rankdir=LR;'];
  for (const n of g.nodes) {
    const shape = n.kind === 'Cluster' ? 'box' : 'note';
    lines.push(`  ${id.get(n.id)} [shape=${shape}, label=${dotText(label(n))}${n.absent ? ', style=dashed' : ''}];`);
  }
  for (const e of g.edges) {
    const style = e.state === 'Connected' ? '' : ', style=dashed';
    lines.push(`  ${id.get(e.from)} -> ${id.get(e.to)} [label=${dotText(edgeText(e))}${style}];`);
  }
  lines.push('}');
  return `${lines.join('\n')}\n`;
}

export function renderGraph(g: ConnectionGraph, format: GraphFormat): string {
  if (format === 'mermaid') return renderGraphMermaid(g);
  if (format === 'dot') return renderGraphDot(g);
  return renderGraphText(g);
}
