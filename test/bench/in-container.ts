/**
 * ConfigMap edit → new content readable inside every member container, on a real node. N clusters × M
 * member pods run busybox on the bench's own node; each container polls its configmeta file every 0.1 s
 * without forking (shell builtins only) and, when the edit shows up, prints the kernel's uptime. The
 * bench reads the uptime just before it sends the ConfigMap PATCH; containers share the host's kernel
 * clock, so the difference is the latency as an app in the pod sees it (resolution 10 ms, +≤100 ms poll).
 *
 * No admission service runs here: the pods carry what the pod webhook would add (decidePodDelivery's
 * patch, the same function the webhook uses): the kd-guestconfig sidecar copies the kubelet's
 * downward-API file into the app's /etc/guestconfig, so the figure covers kubelet + sidecar swap.
 * "first document read" also covers the sidecar's gate: the app starts only once the file exists.
 */
import { readFileSync } from 'node:fs';
import { CONFIGMETA_DIR } from '@kd-connections/shared/delivery';
import { ANNOTATION_CONFIGMETA, CONFIGMETA_FILE, GUESTCONFIG_SIDECAR } from '@kd-connections/shared/domain';
import type { ControlPlane } from '../controlplane/controlplane.js';
import { startNode, TEST_NODE_TOLERATION, type NodeHandle } from '../controlplane/node.js';
import { BUSYBOX_IMAGE } from '../images/base-images.js';
import { apply, configMap, kdApp, kdCluster, withDelivery } from '../support/kd-objects.js';
import { sleep } from '../support/processes.js';
import { startReconciler, type ReconcilerProcess } from '../support/services.js';
import { benchEnv, mapLimit, say, timer } from './env.js';
import { watchPodAnnotation, type PodAnnotationWatch } from './pod-annotation-watch.js';
import type { Scale } from './scale.js';
import { percentile, round, summarize } from './stats.js';

const CM = 'in-container-config';
const BEFORE = 'mark-before';
const AFTER = 'mark-after';
/**
 * The edit is made this long after every pod is Ready: the figure is an edit on a running cluster. Made
 * 2 s after the first documents instead, it measured the node still starting 150 containers (load
 * average 12 on the 2 cores; 2026-12-03-final: max 19.8 s, the same section alone: max 2.26 s).
 */
export const SETTLE_MS = 10_000;

export interface InContainerResult {
  clusters: number;
  pods: number;
  nodeReadySeconds: number;
  /** Pods created → every container has read the first document. */
  podsReadySeconds: number;
  /** Pods created → every pod Ready; the edit is made SETTLE_MS after that (a running cluster, not one still starting pods). */
  allReadySeconds: number;
  edit: { seen: number; minMs: number; p50Ms: number; maxMs: number };
  /**
   * Edit → the kd-guestconfig sidecar logged its swap of the new document (container log timestamps
   * against the wall clock): the part of `edit` spent before the file changed in the container (reconciler,
   * API server, kubelet volume update, the sidecar's poll); the rest is the app's own 0.1 s poll.
   */
  swap: { seen: number; p50Ms: number; maxMs: number };
  /**
   * Edit → the pod object carries the new configmeta (a watch from the bench): the reconciler and the API
   * server's part. `kubelet` is, per pod, the sidecar's swap minus this: the kubelet's volume update and
   * the sidecar's poll.
   */
  patched: { seen: number; p50Ms: number; maxMs: number };
  kubelet: { p50Ms: number; maxMs: number };
  /** Edit → the kubelet's volume update the sidecar swapped in (its directory name: whole seconds, so ±1 s). */
  volume: { seen: number; p50Ms: number; maxMs: number };
}

const uptime = () => Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);

/** Count, p50 and max of the positive samples (ms); a pod without one (NaN) is left out. */
function spread(ms: number[]): { seen: number; p50Ms: number; maxMs: number } {
  const s = summarize(ms.filter((v) => v > 0));
  return { seen: s.count, p50Ms: s.p50, maxMs: s.max };
}

/**
 * A shell loop that reads the container's configmeta file every 0.1 s without forking (`read -t 0.1` on a
 * private FIFO is a sleep without a process) and matches its first line against `cases` (case branches).
 */
export function pollConfigmeta(init: string, cases: string): string {
  return `f=${CONFIGMETA_DIR}/${CONFIGMETA_FILE}
mkfifo /tmp/tick; exec 3<>/tmp/tick; rm /tmp/tick
${init}
while :; do
  c=""; [ -r "$f" ] && { IFS= read -r c < "$f" || true; }
  case "$c" in
${cases}
  esac
  read -t 0.1 -u 3 x
done`;
}

const WATCH = pollConfigmeta(
  'first=""',
  `    *${BEFORE}*) [ -z "$first" ] && { first=1; echo first; } ;;
    *${AFTER}*) read up _ < /proc/uptime; echo "seen $up"; exec sleep 2147483647 ;;`,
);

/** A member pod of `cluster` on the bench's node, with what the pod webhook would add; `app` runs `command`. */
export function benchMemberPod(
  name: string,
  cluster: string,
  app: { image: string; command: string[]; memory: string },
  /** Changes the pod before the webhook's part is added (the node-agent prototype opts out of it). */
  prepare: (pod: Record<string, any>) => Record<string, any> = (pod) => pod,
): Record<string, unknown> {
  return withDelivery(
    prepare({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, labels: { 'kubedirector.hpe.com/kdcluster': cluster, 'kubedirector.hpe.com/role': 'worker' } },
      spec: {
        hostNetwork: true,
        tolerations: [TEST_NODE_TOLERATION],
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'app',
            image: app.image,
            imagePullPolicy: 'Never',
            command: app.command,
            resources: { requests: { cpu: '1m', memory: app.memory } },
          },
        ],
      },
    }),
  );
}

export async function inContainer(cp: ControlPlane, scale: Scale): Promise<InContainerResult> {
  const s = scale.inContainer;
  const pods = s.clusters * s.podsPerCluster;
  let node: NodeHandle | undefined;
  let rec: ReconcilerProcess | undefined;
  let watch: PodAnnotationWatch | undefined;
  try {
    const tn = timer();
    // Tainted: the earlier sections' pods (1,000 fan-out pods, never meant to run) must not be
    // scheduled onto it; only this section's members tolerate the taint.
    node = await startNode(cp.info(), { taint: true, log: (m) => say(`in-container: ${m}`) });
    await node.ready;
    const nodeReadySeconds = round(tn() / 1000);
    const env = await benchEnv(cp, 'bench-in-container');
    await apply(env, [
      kdApp('ic-app', { category: 'worker', roles: ['worker'] }),
      configMap(CM, { v: BEFORE }, 'settings'),
    ]);
    const names = Array.from({ length: s.clusters }, (_, i) => `ic-${i}`);
    await apply(
      env,
      names.map((c) => kdCluster(c, 'ic-app', { configmaps: [CM] }, ['worker'], s.podsPerCluster)),
    );
    rec = await startReconciler(env, { identity: 'bench-in-container' });
    say(`in-container: ${s.clusters} clusters × ${s.podsPerCluster} running pods`);
    const tp = timer();
    await apply(
      env,
      names.flatMap((c) =>
        Array.from({ length: s.podsPerCluster }, (_, j) =>
          benchMemberPod(`${c}-${j}`, c, { image: BUSYBOX_IMAGE, command: ['sh', '-c', WATCH], memory: '4Mi' }),
        ),
      ),
    );
    const podNames = names.flatMap((c) => Array.from({ length: s.podsPerCluster }, (_, j) => `${c}-${j}`));
    /** Polls every pod's log until `pattern` matches, returning the first group of each (pods in order). */
    const untilLogged = async (pattern: RegExp, what: string) => {
      const found = new Map<string, string>();
      const end = Date.now() + s.deadlineSec * 1000;
      while (found.size < podNames.length && Date.now() < end) {
        await sleep(1000);
        const pending = podNames.filter((n) => !found.has(n));
        await mapLimit(pending, 4, async (name) => {
          const m = pattern.exec((await env.kubectl(['logs', name])).stdout);
          if (m) found.set(name, m[1] ?? '');
        });
      }
      if (found.size < podNames.length) say(`in-container: ${what} in ${found.size}/${podNames.length} pods only`);
      return [...found.values()];
    };
    const first = await untilLogged(/^(first)$/m, 'first document read');
    if (first.length < pods) throw new Error(`only ${first.length}/${pods} containers read their first document`);
    const podsReadySeconds = round(tp() / 1000);
    say(`in-container: ${pods} containers read their first document ${podsReadySeconds} s after creation`);
    const ready = await env.kubectl(['wait', '--for=condition=Ready', 'pod', '--all', `--timeout=${s.deadlineSec}s`]);
    if (ready.code !== 0) throw new Error(`pods not Ready: ${ready.stderr}`);
    const allReadySeconds = round(tp() / 1000);
    say(`in-container: every pod Ready ${allReadySeconds} s after creation; editing ${SETTLE_MS / 1000} s later`);
    await sleep(SETTLE_MS);

    watch = await watchPodAnnotation(env.kc, env.namespace, ANNOTATION_CONFIGMETA, pods, (v) => v.includes(AFTER));
    const t0 = uptime();
    const wall0 = Date.now();
    watch.start();
    const p = await env.kubectl([
      'patch',
      'configmap',
      CM,
      '--type=merge',
      '-p',
      JSON.stringify({ data: { v: AFTER } }),
    ]);
    if (p.code !== 0) throw new Error(`patch failed: ${p.stderr}`);
    const latencies = (await untilLogged(/^seen ([\d.]+)$/m, 'edit seen')).map((up) => (Number(up) - t0) * 1000);
    latencies.sort((a, b) => a - b);
    watch.stop();
    // The sidecar's last swap: its log timestamp, and the kubelet's update it took (the volume's
    // timestamped directory, named in UTC to the second).
    const sidecar = await mapLimit(podNames, 4, async (name) => {
      const r = await env.kubectl(['logs', name, '-c', GUESTCONFIG_SIDECAR, '--timestamps']);
      const last = r.stdout
        .split('\n')
        .filter((l) => l.includes('delivered generator'))
        .at(-1);
      const dir = /from \.\.(\d{4})_(\d\d)_(\d\d)_(\d\d)_(\d\d)_(\d\d)\./.exec(last ?? '');
      const [y, mo, d, h, mi, sec] = (dir?.slice(1) ?? []).map(Number);
      return {
        swapAt: last ? Date.parse(last.split(' ')[0]!) - wall0 : NaN,
        volumeAt: dir ? Date.UTC(y!, mo! - 1, d!, h!, mi!, sec!) - wall0 : NaN,
      };
    });
    const swapAt = sidecar.map((x) => x.swapAt);
    const patchedAt = watch.seen;
    const kubelet = spread(podNames.map((n, i) => swapAt[i]! - (patchedAt.get(n) ?? NaN)));
    const result: InContainerResult = {
      clusters: s.clusters,
      pods,
      nodeReadySeconds,
      podsReadySeconds,
      allReadySeconds,
      edit: {
        seen: latencies.length,
        minMs: round(latencies[0] ?? NaN),
        p50Ms: round(percentile(latencies, 50)),
        maxMs: round(latencies[latencies.length - 1] ?? NaN),
      },
      swap: spread(swapAt),
      patched: spread([...patchedAt.values()]),
      kubelet: { p50Ms: kubelet.p50Ms, maxMs: kubelet.maxMs },
      // Whole seconds, rounded down: an update in the edit's own second shows as ≤ 0 and is left out.
      volume: spread(sidecar.map((x) => x.volumeAt)),
    };
    say(
      `in-container: edit readable in ${latencies.length}/${pods} containers, p50 ${result.edit.p50Ms} ms, max ${result.edit.maxMs} ms; ` +
        `swapped in by the sidecar (${result.swap.seen} pods) p50 ${result.swap.p50Ms} ms, max ${result.swap.maxMs} ms; ` +
        `pod objects patched (${result.patched.seen}) p50 ${result.patched.p50Ms} ms, max ${result.patched.maxMs} ms; ` +
        `patched → swapped p50 ${result.kubelet.p50Ms} ms, max ${result.kubelet.maxMs} ms; ` +
        `kubelet volume update (whole seconds) p50 ${result.volume.p50Ms} ms, max ${result.volume.maxMs} ms`,
    );
    return result;
  } finally {
    watch?.stop();
    await rec?.stop();
    const traces = await node?.stop();
    if (traces?.length) say(`in-container: the node left traces: ${traces.join('; ')}`);
  }
}
