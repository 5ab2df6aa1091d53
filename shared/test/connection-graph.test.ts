/** The plugin's graph and explain, from a snapshot: the webhook's verdicts, Unknown where nothing could be read. */
import { describe, expect, it } from '@jest/globals';
import { connectionEdges, connectionGraph, type NamespaceSnapshot } from '../src/inspect/connection-graph.js';
import { explainCluster, memberLag } from '../src/inspect/explain-cluster.js';
import {
  renderGraph,
  renderGraphDot,
  renderGraphMermaid,
  renderGraphText,
} from '../src/inspect/render-connection-graph.js';
import { ANNOTATION_CONFIGMETA_GENERATOR } from '../src/domain/types.js';
import { app, cluster, configMap, NS, pod, secret, SYSTEM_NS } from './fixtures.js';

const OPTS = { systemNamespace: SYSTEM_NS };

/** notebook → training (allowed), model (labelled), scm (Secret, unlabelled), gone (missing); training → notebook (refused). */
function snapshot(unreadable: NamespaceSnapshot['unreadable'] = {}): NamespaceSnapshot {
  return {
    namespace: NS,
    clusters: [
      cluster('notebook', 'jupyter', {
        connections: { clusters: ['training'], configmaps: ['model', 'gone'], secrets: ['scm'] },
      }),
      cluster('training', 'trainer', { connections: { clusters: ['notebook'] }, ready: 1 }),
    ],
    apps: [
      app('jupyter', { distroID: 'x/jupyter', connectable_to: [{ category: 'training' }] }),
      app('trainer', { distroID: 'x/trainer', category: 'training', connectable_to: [] }, SYSTEM_NS),
    ],
    configMaps: [
      configMap('model', 'model', undefined),
      configMap('kube-root-ca.crt', undefined, undefined),
      configMap('spare', 'model', undefined),
    ],
    secrets: [secret('scm', undefined, {})],
    unreadable,
  };
}

describe('connectionGraph', () => {
  it('judges every connection as the webhook does and lists the connectable objects nobody connects', async () => {
    const g = await connectionGraph(snapshot(), OPTS);
    expect(g.edges.map((e) => [e.from, e.to, e.state])).toEqual([
      ['Cluster/notebook', 'Cluster/training', 'Connected'],
      ['Cluster/notebook', 'ConfigMap/gone', 'Missing'],
      ['Cluster/notebook', 'ConfigMap/model', 'Connected'],
      ['Cluster/notebook', 'Secret/scm', 'Unlabeled'],
      ['Cluster/training', 'Cluster/notebook', 'NotConnectable'],
    ]);
    expect(g.edges[4]!.reason).toContain('allows no cluster connections');
    // The unlabelled kube-root-ca.crt is no node; the labelled, unconnected `spare` is one.
    expect(g.nodes.map((n) => n.id)).toEqual([
      'Cluster/notebook',
      'Cluster/training',
      'ConfigMap/model',
      'ConfigMap/spare',
      'ConfigMap/gone',
      'Secret/scm',
    ]);
    expect(g.nodes.find((n) => n.id === 'ConfigMap/gone')).toMatchObject({ absent: true });
    expect(g.unreadable).toEqual([]);
  });

  it('a kind the user may not list makes its edges Unknown, saying why, never Missing', async () => {
    const g = await connectionGraph(snapshot({ secrets: 'secrets is forbidden: User "viewer" cannot list' }), OPTS);
    const scm = g.edges.find((e) => e.name === 'scm')!;
    expect(scm).toMatchObject({ state: 'Unknown' });
    expect(scm.reason).toBe(
      'cannot list secrets with your credentials: secrets is forbidden: User "viewer" cannot list',
    );
    expect(g.unreadable).toEqual([scm.reason]);
    // Apps unreadable: a verdict that may come from the missing app is Unknown, with what could be judged.
    const noApps = await connectionGraph({ ...snapshot({ apps: 'forbidden' }), apps: [] }, OPTS);
    const toTraining = noApps.edges.find((e) => e.name === 'training')!;
    expect(toTraining.state).toBe('Unknown');
    expect(toTraining.reason).toMatch(
      /^cannot list kubedirectorapps with your credentials: forbidden; from what could be read: /,
    );
  });
});

describe('rendering', () => {
  it('text: one block per cluster, each connection with its state and why', async () => {
    const text = renderGraphText(await connectionGraph(snapshot(), OPTS));
    expect(text).toContain('kdcluster notebook (app jupyter)\n  -> kdcluster training: Connected\n');
    expect(text).toContain(`  -> configmap gone: Missing: configmap "gone" not found in namespace "${NS}"\n`);
    expect(text).toContain('connectable, connected by no cluster:\n  configmap spare (type model)\n');
  });

  it('mermaid and dot: every node and edge, solid only for Connected, quotes escaped', async () => {
    const g = await connectionGraph(snapshot(), OPTS);
    const m = renderGraphMermaid(g);
    expect(m.split('\n')[0]).toBe('flowchart LR');
    expect(m).toContain('c0["kdcluster notebook (app jupyter)"]');
    expect(m).toContain('c0 -->|"Connected"| c1');
    expect(m).toMatch(/c0 -\.->\|"Missing: configmap #quot;gone#quot; not found in namespace #quot;ml#quot;"\| m\d/);
    expect(m).not.toMatch(/\|"[^|]*"[^|]*"\|/);
    const d = renderGraphDot(g);
    expect(d.startsWith('digraph "kd-connections ml" {')).toBe(true);
    expect(d).toMatch(
      /c0 -> m\d \[label="Missing: configmap \\"gone\\" not found in namespace \\"ml\\"", style=dashed\];/,
    );
    expect(d.trimEnd().endsWith('}')).toBe(true);
    expect(renderGraph(g, 'dot')).toBe(d);
    expect(renderGraph(g, 'text')).toBe(renderGraphText(g));
  });
});

describe('explain', () => {
  /** notebook with two controller seats; nb-0 and nb-1 recorded holders (ids 1, 2), nb-1's pod away. */
  async function explained(pods: ReturnType<typeof pod>[], generator = 3) {
    const s = snapshot();
    const base = s.clusters[0]!;
    const c = {
      ...base,
      spec: { ...base.spec, configMetaGenerator: generator, roles: [{ id: 'controller', members: 3 }] },
      status: {
        lastConfigMetaGenerator: 2,
        lastNodeID: 2,
        nodeIDs: { 'nb-0': 1, 'nb-1': 2 },
        seatHolders: {
          'nb-0': { role: 'controller', fqdn: 'nb-0.notebook.ml.svc.cluster.local' },
          'nb-1': { role: 'controller', fqdn: 'nb-1.notebook.ml.svc.cluster.local' },
        },
        connections: [{ kind: 'Cluster' as const, name: 'training', state: 'Missing' as const, message: 'not yet' }],
        conditions: [
          {
            type: 'Ready',
            status: 'False' as const,
            reason: 'Reconciling',
            message: 'one\npod lags',
            lastTransitionTime: 't',
          },
        ],
      },
    };
    const withRoles = {
      ...s,
      apps: s.apps.map((a) =>
        a.metadata.name === 'jupyter'
          ? { ...a, spec: { ...a.spec, roles: [{ id: 'controller', cardinality: '1+' }] } }
          : a,
      ),
    };
    const { own, edges } = await connectionEdges(c, withRoles, OPTS);
    return explainCluster({ cluster: c, own, systemNamespace: SYSTEM_NS, edges, pods });
  }
  const gen = (g: string) => ({ annotations: { [ANNOTATION_CONFIGMETA_GENERATOR]: g } });

  it('each connection with why, beside what the reconciler recorded; members as the reconciler seats them; conditions', async () => {
    const text = await explained([
      pod('nb-0', 'notebook', 'controller', gen('2')),
      pod('nb-1', 'notebook', 'controller', { ...gen('3'), deleting: true }),
      pod('nb-9', 'notebook', 'controller', gen('3')),
      pod('stray', 'notebook', 'controller'),
    ]);
    expect(text).toContain(`  app: jupyter, found in namespace ${NS}\n`);
    expect(text).toContain('configmeta generator: 3 (spec.configMetaGenerator); last delivered to every member: 2');
    expect(text).toContain('  cluster training: Connected; reconciler: Missing (not yet)\n');
    expect(text).toContain('  configmap model: Connected; reconciler: not recorded yet\n');
    expect(text).toContain('  secret scm: Unlabeled — secret "scm" lacks label');
    expect(text).toContain('  nb-0 (role controller, node id 1): generator 2, LAGS (the cluster is at 3)\n');
    // Terminating: away, keeps its seat (the reconciler's rule), not "current".
    expect(text).toContain(
      '  nb-1 (role controller, node id 2): away (its pod is gone or terminating): keeps its seat and id\n',
    );
    expect(text).toMatch(/ {2}nb-9 \(role controller\): not a member, gets no document: .*seat/);
    expect(text).toMatch(/ {2}stray \(role controller\): not a member, gets no document: /);
    expect(text).toContain('  role controller seat 2: vacant (no pod fills it yet)\n');
    expect(text).toContain('  behind: nb-0\n');
    // A message with a line break stays on its line.
    expect(text).toContain('  Ready=False Reconciling: one pod lags\n');
  });

  it('every present member current: said so; no document yet is behind', async () => {
    const current = await explained([
      pod('nb-0', 'notebook', 'controller', gen('3')),
      pod('nb-1', 'notebook', 'controller', gen('3')),
    ]);
    expect(current).toContain('  every member present holds the current generator\n');
    const fresh = await explained([
      pod('nb-0', 'notebook', 'controller', gen('3')),
      pod('nb-1', 'notebook', 'controller'),
    ]);
    expect(fresh).toContain('  nb-1 (role controller, node id 2): no document yet\n');
    expect(fresh).toContain('  behind: nb-1\n');
    expect(memberLag(pod('x', 'c', 'r', gen('5')), 3)).toBe('generator 5, current');
  });

  it('says where the app was looked for when it is not found, and when pods cannot be listed', async () => {
    const c = cluster('orphan', 'nowhere');
    const { own, edges } = await connectionEdges(c, snapshot(), OPTS);
    const text = explainCluster({
      cluster: c,
      own,
      systemNamespace: SYSTEM_NS,
      edges,
      podsUnreadable: 'pods is forbidden',
    });
    expect(text).toContain(
      `app: nowhere, NOT FOUND in namespace "${NS}" or in the system catalog (namespace "${SYSTEM_NS}")`,
    );
    expect(text).toContain('configmeta generator: 0 (spec.configMetaGenerator unset)');
    expect(text).toContain('  (none)\n');
    expect(text).toContain('  cannot list pods with your credentials: pods is forbidden\n');
    expect(text).toContain('(none yet: the reconciler has not written status)');
  });
});

describe('hostile names and partial reads', () => {
  it('Mermaid labels cannot end early, start a directive or carry HTML; text stays one line per edge', async () => {
    const s = snapshot();
    s.clusters[1] = {
      ...s.clusters[1]!,
      spec: { ...s.clusters[1]!.spec, app: 'x"]\n%%{init: {}}%%\n<img src=x onerror=alert(1)>|#&' },
    };
    const g = await connectionGraph(s, OPTS);
    const m = renderGraphMermaid(g);
    const node = m.split('\n').find((l) => l.includes('kdcluster training'))!;
    expect(node).toBe(
      '  c1["kdcluster training (app x#quot;] #37;#37;{init: {}}#37;#37; #lt;img src=x onerror=alert(1)#gt;#124;#35;#amp;)"]',
    );
    expect(m.split('\n').filter((l) => l.startsWith('%%'))).toEqual([]);
    const text = renderGraphText(g);
    expect(text).toContain('kdcluster training (app x"] %%{init: {}}%% <img src=x onerror=alert(1)>|#&)\n');
  });

  it('apps unreadable: only verdicts that come from the apps become Unknown; Missing and self stay', async () => {
    const s = { ...snapshot({ apps: 'forbidden' }), apps: [] };
    s.clusters[0] = {
      ...s.clusters[0]!,
      spec: { ...s.clusters[0]!.spec, connections: { clusters: ['ghost', 'notebook', 'training'] } },
    };
    const g = await connectionGraph(s, OPTS);
    const from = g.edges.filter((e) => e.from === 'Cluster/notebook').map((e) => [e.name, e.state]);
    expect(from).toEqual([
      ['ghost', 'Missing'],
      ['notebook', 'NotConnectable'],
      ['training', 'Unknown'],
    ]);
  });

  it('graph shows what the reconciler recorded when it differs (it also checks sizes and settings)', async () => {
    const s = snapshot();
    s.clusters[0] = {
      ...s.clusters[0]!,
      status: { connections: [{ kind: 'ConfigMap', name: 'model', state: 'NotConnectable', message: 'too large' }] },
    };
    const text = renderGraphText(await connectionGraph(s, OPTS));
    expect(text).toContain('  -> configmap model: Connected; reconciler: NotConnectable (too large)\n');
  });
});
