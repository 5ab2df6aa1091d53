/**
 * ConfigMap edit → the new value readable in the member containers, edit after edit, on a kubelet with its
 * default settings (syncFrequency unset: 1 minute) and on the harness's (10 s). One cluster's member pods
 * run the real configcli image; each app container polls its configmeta file every 0.1 s (bash builtins, no
 * fork) and prints the kernel's uptime when the edit's value shows up; the bench reads the uptime just before
 * each PATCH (containers share the host's kernel clock). The next edit waits until every pod saw this one
 * (or the deadline). After the last edit, the real configcli (`configcli -g`) in every container must read
 * the last value: the file the containers poll is the one configcli reads.
 *
 * As in-container.ts, no admission service runs: the pods carry what the pod webhook would add. More member
 * pods of the same cluster, on the same edits, are served by the node-agent prototype (node-agent.ts)
 * instead of the sidecar: the alternative path measured beside the product's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import type { ControlPlane } from '../controlplane/controlplane.js';
import { startNode, type NodeHandle } from '../controlplane/node.js';
import { CONFIGCLI_IMAGE, configcliImage, configcliValue } from '../images/configcli-image.js';
import { importImage } from '../controlplane/containerd.js';
import { apply, configMap, kdApp, kdCluster } from '../support/kd-objects.js';
import { sleep } from '../support/processes.js';
import { startReconciler, type ReconcilerProcess } from '../support/services.js';
import { ANNOTATION_CONFIGMETA } from '@kd-connections/shared/domain';
import { benchEnv, mapLimit, say } from './env.js';
import { watchPodAnnotation } from './pod-annotation-watch.js';
import { onAgentPath, startNodeAgent, type NodeAgent } from './node-agent.js';
import { benchMemberPod, pollConfigmeta } from './in-container.js';
import type { TestEnv } from '../support/cluster.js';
import type { Scale } from './scale.js';
import { percentile, round } from './stats.js';

const CM = 'kubelet-config';
const value = (n: number) => `edit-${n}-end`;

/** One delivery path's figures over every (edit, pod) of a run. */
export interface PathFigures {
  /** Every (edit, pod) latency seen, ms; a delivery not seen by the deadline counts as missing. */
  deliveries: number;
  missing: number;
  p50Ms: number;
  p90Ms: number;
  maxMs: number;
  /**
   * Deliveries slower than the 5 s target: their edit and pod, the latency, and when the pod object carried
   * the edit (a watch from the bench: reconciler + API server; the rest is the kubelet and the sidecar).
   */
  slow: { edit: number; pod: string; ms: number; patchedMs: number }[];
  /** Edit → pod object patched, over every delivery: p50 and max. */
  patched: { p50Ms: number; maxMs: number };
  /** The last value as `configcli -g` read it in each container. */
  configcli: string[];
}

/** The product's path (kubelet downward-API volume, then the sidecar), and beside it the node-agent prototype's. */
export interface KubeletRun extends PathFigures {
  /** The kubelet's syncFrequency ('default': unset, 1 minute). */
  syncFrequency: string;
  edits: number;
  pods: number;
  /** The same edits, to more member pods of the cluster served by node-agent.ts (absent in runs before it). */
  agent?: PathFigures & { pods: number; writes: number; errors: string[] };
}

export interface KubeletDefaultsResult {
  runs: KubeletRun[];
}

// Waits for edit-1, edit-2, … in turn.
const WATCH = pollConfigmeta(
  'next=1',
  `    *"edit-$next-end"*) read up _ < /proc/uptime; echo "seen $next $up"; next=$((next+1)); continue ;;`,
);

const uptime = () => Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);

interface Delivery {
  edit: number;
  pod: string;
  /** Edit → the value in the container, ms; undefined when not seen by the deadline. */
  ms?: number;
  /** Edit → the pod object carried it, ms (NaN when the watch did not see it). */
  patchedMs: number;
}

async function figures(env: TestEnv, pods: string[], deliveries: Delivery[]): Promise<PathFigures> {
  const mine = deliveries.filter((d) => pods.includes(d.pod));
  const latencies = mine.flatMap((d) => (d.ms === undefined ? [] : [d.ms])).sort((a, b) => a - b);
  const patched = mine
    .map((d) => d.patchedMs)
    .filter((v) => !Number.isNaN(v))
    .sort((a, b) => a - b);
  const configcli = await mapLimit(pods, 2, (p) =>
    configcliValue(env, { pod: p, container: 'app' }, 'connections.configmaps.settings.data.v'),
  );
  return {
    deliveries: latencies.length,
    missing: mine.length - latencies.length,
    p50Ms: round(percentile(latencies, 50)),
    p90Ms: round(percentile(latencies, 90)),
    maxMs: round(latencies.at(-1) ?? NaN),
    slow: mine
      .filter((d) => d.ms !== undefined && d.ms > 5_000)
      .map((d) => ({ edit: d.edit, pod: d.pod, ms: round(d.ms!), patchedMs: round(d.patchedMs) })),
    patched: { p50Ms: round(percentile(patched, 50)), maxMs: round(patched.at(-1) ?? NaN) },
    configcli,
  };
}

const describe = (x: PathFigures, total: number) =>
  `${x.deliveries}/${total} deliveries, p50 ${x.p50Ms} ms, p90 ${x.p90Ms} ms, max ${x.maxMs} ms, ${x.slow.length} over 5 s; ` +
  `configcli read ${new Set(x.configcli).size === 1 ? x.configcli[0] : x.configcli.join(',')}`;

async function oneRun(
  cp: ControlPlane,
  scale: Scale,
  syncFrequency: string | undefined,
  edits: number | undefined,
): Promise<KubeletRun> {
  const s = { ...scale.kubeletDefaults, ...(edits ? { edits } : {}) };
  const label = syncFrequency ?? 'default';
  let node: NodeHandle | undefined;
  let rec: ReconcilerProcess | undefined;
  let agent: NodeAgent | undefined;
  try {
    node = await startNode(cp.info(), {
      taint: true,
      syncFrequency: syncFrequency ?? null,
      log: (m) => say(`kubelet-defaults (${label}): ${m}`),
    });
    await node.ready;
    // containerd's client comes with Debian's containerd package, as the node itself needs it.
    await importImage('/usr/bin/ctr', node.containerdSocket, configcliImage().archive);
    const env = await benchEnv(cp, `bench-kubelet-${label.replace(/[^a-z0-9]/g, '')}`);
    await apply(env, [
      kdApp('kd-app', { category: 'worker', roles: ['worker'] }),
      configMap(CM, { v: value(0) }, 'settings'),
      kdCluster('kd', 'kd-app', { configmaps: [CM] }, ['worker'], s.pods + s.agentPods),
    ]);
    agent = await startNodeAgent(env.kc, {
      namespace: env.namespace,
      nodeName: node.name,
      kubeletRoot: join(node.dir, 'kubelet'),
    });
    rec = await startReconciler(env, { identity: `bench-kubelet-${label}` });
    const pods = Array.from({ length: s.pods }, (_, j) => `kd-${j}`);
    // Seat k is the pod whose name ends in -k (seats.ts): the agent's pods take the ordinals after the sidecar's.
    const agentPods = Array.from({ length: s.agentPods }, (_, j) => `kd-agent-${s.pods + j}`);
    const all = [...pods, ...agentPods];
    const app = { image: CONFIGCLI_IMAGE, command: ['bash', '-c', WATCH], memory: '8Mi' };
    await apply(env, [
      ...pods.map((p) => benchMemberPod(p, 'kd', app)),
      ...agentPods.map((p) => benchMemberPod(p, 'kd', app, onAgentPath)),
    ]);
    const ready = await env.kubectl(['wait', '--for=condition=Ready', 'pod', '--all', `--timeout=${s.deadlineSec}s`]);
    if (ready.code !== 0) throw new Error(`pods not Ready: ${ready.stderr}`);
    await sleep(5_000);
    const core = env.kc.makeApiClient(CoreV1Api);
    const seen = new Map<string, Map<number, number>>(all.map((p) => [p, new Map()]));
    const readLogs = () =>
      mapLimit(all, 4, async (p) => {
        const log = await core.readNamespacedPodLog({ name: p, namespace: env.namespace, container: 'app' });
        for (const m of String(log).matchAll(/^seen (\d+) ([\d.]+)$/gm)) seen.get(p)!.set(Number(m[1]), Number(m[2]));
      });
    const deliveries: Delivery[] = [];
    for (let n = 1; n <= s.edits; n++) {
      const watch = await watchPodAnnotation(env.kc, env.namespace, ANNOTATION_CONFIGMETA, all.length, (v) =>
        v.includes(value(n)),
      );
      watch.start();
      const t0 = uptime();
      const r = await env.kubectl([
        'patch',
        'configmap',
        CM,
        '--type=merge',
        '-p',
        JSON.stringify({ data: { v: value(n) } }),
      ]);
      if (r.code !== 0) throw new Error(`patch ${n} failed: ${r.stderr}`);
      const end = Date.now() + s.deadlineSec * 1000;
      while (Date.now() < end) {
        await sleep(250);
        await readLogs();
        if (all.every((p) => seen.get(p)!.has(n))) break;
      }
      watch.stop();
      for (const p of all) {
        const at = seen.get(p)!.get(n);
        deliveries.push({
          edit: n,
          pod: p,
          ...(at === undefined ? {} : { ms: Math.max(0, (at - t0) * 1000) }),
          patchedMs: watch.seen.get(p) ?? NaN,
        });
      }
    }
    const run: KubeletRun = {
      syncFrequency: label,
      edits: s.edits,
      pods: s.pods,
      ...(await figures(env, pods, deliveries)),
      agent: {
        pods: s.agentPods,
        ...(await figures(env, agentPods, deliveries)),
        writes: agent.writes(),
        errors: agent.errors,
      },
    };
    say(`kubelet-defaults (${label}), sidecar: ${describe(run, s.edits * s.pods)}`);
    say(
      `kubelet-defaults (${label}), node agent: ${describe(run.agent!, s.edits * s.agentPods)}; ` +
        `${run.agent!.writes} writes, ${run.agent!.errors.length} errors`,
    );
    return run;
  } finally {
    agent?.stop();
    await rec?.stop();
    const traces = await node?.stop();
    if (traces?.length) say(`kubelet-defaults: the node left traces: ${traces.join('; ')}`);
  }
}

/** The kubelet's defaults first, then the harness's 10 s; `edits` overrides the scale's count. */
export async function kubeletDefaults(cp: ControlPlane, scale: Scale, edits?: number): Promise<KubeletDefaultsResult> {
  return { runs: [await oneRun(cp, scale, undefined, edits), await oneRun(cp, scale, '10s', edits)] };
}
