/**
 * A connection graph (connection-graph.ts) as text, Mermaid or Graphviz DOT. Pure text: the kubectl
 * plugin prints it, the tests compare it.
 */
import type { ConnectionGraph, EdgeState, GraphEdge, GraphNode } from './connection-graph.js';

export const GRAPH_FORMATS = ['text', 'mermaid', 'dot'] as const;
export type GraphFormat = (typeof GRAPH_FORMATS)[number];

const KIND_WORD = { Cluster: 'kdcluster', ConfigMap: 'configmap', Secret: 'secret' } as const;

const label = (n: GraphNode) =>
  `${KIND_WORD[n.kind]} ${n.name}${n.detail ? ` (${n.detail})` : ''}${n.absent ? ' (not found)' : ''}`;
const edgeText = (e: GraphEdge) => `${e.state}${e.reason ? `: ${e.reason}` : ''}${e.note ? ` (${e.note})` : ''}`;

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

/** Mermaid text: `"` cannot be escaped in a label, `#quot;` is Mermaid's entity for it. */
const mermaidText = (s: string) => s.replace(/"/g, '#quot;');

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
