/**
 * ConfigMap edit → the new value readable in the member containers, edit after edit, on a kubelet with its
 * default settings (syncFrequency unset: 1 minute) and on the harness's (10 s). One cluster's member pods
 * run the real configcli image; each app container polls its configmeta file every 0.1 s (bash builtins, no
 * fork) and prints the kernel's uptime when the edit's value shows up; the bench reads the uptime just before
 * each PATCH (containers share the host's kernel clock). The next edit waits until every pod saw this one
 * (or the deadline). After the last edit, the real configcli (`configcli -g`) in every container must read
 * the last value: the file the containers poll is the one configcli reads.
 *
 * As in-container.ts, no admission service runs: the pods carry what the pod webhook would add.
 */
import { readFileSync } from 'node:fs';
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
import { benchMemberPod, pollConfigmeta } from './in-container.js';
import type { Scale } from './scale.js';
import { percentile, round } from './stats.js';

const CM = 'kubelet-config';
const value = (n: number) => `edit-${n}-end`;

export interface KubeletRun {
  /** The kubelet's syncFrequency ('default': unset, 1 minute). */
  syncFrequency: string;
  edits: number;
  pods: number;
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

export interface KubeletDefaultsResult {
  runs: KubeletRun[];
}

// Waits for edit-1, edit-2, … in turn.
const WATCH = pollConfigmeta(
  'next=1',
  `    *"edit-$next-end"*) read up _ < /proc/uptime; echo "seen $next $up"; next=$((next+1)); continue ;;`,
);

const uptime = () => Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);

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
      kdCluster('kd', 'kd-app', { configmaps: [CM] }, ['worker'], s.pods),
    ]);
    rec = await startReconciler(env, { identity: `bench-kubelet-${label}` });
    const pods = Array.from({ length: s.pods }, (_, j) => `kd-${j}`);
    await apply(
      env,
      pods.map((p) =>
        benchMemberPod(p, 'kd', { image: CONFIGCLI_IMAGE, command: ['bash', '-c', WATCH], memory: '8Mi' }),
      ),
    );
    const ready = await env.kubectl(['wait', '--for=condition=Ready', 'pod', '--all', `--timeout=${s.deadlineSec}s`]);
    if (ready.code !== 0) throw new Error(`pods not Ready: ${ready.stderr}`);
    await sleep(5_000);
    const core = env.kc.makeApiClient(CoreV1Api);
    const seen = new Map<string, Map<number, number>>(pods.map((p) => [p, new Map()]));
    const readLogs = () =>
      mapLimit(pods, 4, async (p) => {
        const log = await core.readNamespacedPodLog({ name: p, namespace: env.namespace, container: 'app' });
        for (const m of String(log).matchAll(/^seen (\d+) ([\d.]+)$/gm)) seen.get(p)!.set(Number(m[1]), Number(m[2]));
      });
    const latencies: number[] = [];
    const patchedAll: number[] = [];
    const slow: KubeletRun['slow'] = [];
    let missing = 0;
    for (let n = 1; n <= s.edits; n++) {
      const watch = await watchPodAnnotation(env.kc, env.namespace, ANNOTATION_CONFIGMETA, pods.length, (v) =>
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
        if (pods.every((p) => seen.get(p)!.has(n))) break;
      }
      watch.stop();
      for (const p of pods) {
        const at = seen.get(p)!.get(n);
        const patchedMs = watch.seen.get(p) ?? NaN;
        if (!Number.isNaN(patchedMs)) patchedAll.push(patchedMs);
        if (at === undefined) {
          missing++;
          continue;
        }
        const ms = Math.max(0, (at - t0) * 1000);
        latencies.push(ms);
        if (ms > 5_000) slow.push({ edit: n, pod: p, ms: round(ms), patchedMs: round(patchedMs) });
      }
    }
    const configcli = await mapLimit(pods, 2, (p) =>
      configcliValue(env, { pod: p, container: 'app' }, 'connections.configmaps.settings.data.v'),
    );
    latencies.sort((a, b) => a - b);
    patchedAll.sort((a, b) => a - b);
    const run: KubeletRun = {
      syncFrequency: label,
      edits: s.edits,
      pods: s.pods,
      deliveries: latencies.length,
      missing,
      p50Ms: round(percentile(latencies, 50)),
      p90Ms: round(percentile(latencies, 90)),
      maxMs: round(latencies.at(-1) ?? NaN),
      slow,
      patched: { p50Ms: round(percentile(patchedAll, 50)), maxMs: round(patchedAll.at(-1) ?? NaN) },
      configcli,
    };
    say(
      `kubelet-defaults (${label}): ${run.deliveries}/${s.edits * s.pods} deliveries, p50 ${run.p50Ms} ms, p90 ${run.p90Ms} ms, ` +
        `max ${run.maxMs} ms, ${slow.length} over 5 s; configcli read ${new Set(configcli).size === 1 ? configcli[0] : configcli.join(',')}`,
    );
    return run;
  } finally {
    await rec?.stop();
    const traces = await node?.stop();
    if (traces?.length) say(`kubelet-defaults: the node left traces: ${traces.join('; ')}`);
  }
}

/** The kubelet's defaults first, then the harness's 10 s; `edits` overrides the scale's count. */
export async function kubeletDefaults(cp: ControlPlane, scale: Scale, edits?: number): Promise<KubeletDefaultsResult> {
  return { runs: [await oneRun(cp, scale, undefined, edits), await oneRun(cp, scale, '10s', edits)] };
}
