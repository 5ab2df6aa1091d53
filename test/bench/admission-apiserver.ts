/**
 * Admission through the API server: kdcluster create and update (JSON Patch that adds connections) via
 * client-node, in a namespace the webhook configurations select ("on": the API server calls the
 * validating and the mutating webhook) and in an identically seeded one they do not ("off"). Blocks of
 * operations alternate between the two, so drift and background noise fall on both alike. The webhooks
 * are registered in url mode on 127.0.0.1 and proven live with the marker technique first.
 */
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { ControlPlane } from '../controlplane/controlplane.js';
import type { TestEnv } from '../support/cluster.js';
import { seedAdmissionNamespace } from './admission-direct.js';
import { benchEnv, mapLimit, say, timer } from './env.js';
import { metricSum } from '../support/prometheus-text.js';
import { notebookCluster } from './reviews.js';
import type { Scale } from './scale.js';
import { round, summarize, type Summary } from './stats.js';
import { registerWebhooks, waitUntilLive } from '../support/webhook-configurations.js';
import { type RunningAdmission } from '../support/services.js';

type Mode = 'on' | 'off';
type Op = 'create' | 'update';

export interface ApiServerResult {
  namespaces: Record<Mode, string>;
  opsPerMode: number;
  concurrency: number;
  /** Per operation, and over all writes together. */
  latencyMs: Record<Op | 'all', Record<Mode, Summary>>;
  /** (on - off) / off, in percent. */
  overheadPct: Record<Op | 'all', { p50: number; p99: number }>;
  /** Reviews the admission service answered during the measured operations (expected: 2 per "on" op). */
  reviewsServed: number;
  /** Objects created in the "on" namespace that carry the generator the mutating webhook set. */
  mutatedOn: number;
  mutatedOff: number;
  failures: number;
}

const G = { group: 'kubedirector.hpe.com', version: 'v1beta1', plural: 'kubedirectorclusters' } as const;

export async function admissionApiServer(
  cp: ControlPlane,
  envOn: TestEnv,
  svc: RunningAdmission,
  scale: Scale,
): Promise<ApiServerResult> {
  const s = scale.apiserver;
  const envOff = await benchEnv(cp, `${envOn.namespace}-off`);
  await seedAdmissionNamespace(envOff);
  const reg = await registerWebhooks(envOn, svc);
  try {
    await waitUntilLive(envOn);
    const custom = envOn.kc.makeApiClient(CustomObjectsApi);
    const ns: Record<Mode, string> = { on: envOn.namespace, off: envOff.namespace };
    const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    const create = (mode: Mode, name: string) =>
      custom.createNamespacedCustomObject({
        ...G,
        namespace: ns[mode],
        body: notebookCluster(name, { clusters: ['train-0', 'train-1'], configmaps: ['model-0'], secrets: ['creds'] }),
      });
    const update = (mode: Mode, name: string) =>
      custom.patchNamespacedCustomObject(
        {
          ...G,
          namespace: ns[mode],
          name,
          body: [
            { op: 'add', path: '/spec/connections/clusters/-', value: 'train-2' },
            { op: 'add', path: '/spec/connections/configmaps/-', value: 'model-1' },
          ],
        },
        jsonPatch,
      );

    const samples: Record<Op, Record<Mode, number[]>> = {
      create: { on: [], off: [] },
      update: { on: [], off: [] },
    };
    let failures = 0;
    const block = async (mode: Mode, names: string[], record: boolean) => {
      for (const op of ['create', 'update'] as Op[]) {
        await mapLimit(names, s.concurrency, async (name) => {
          const t = timer();
          try {
            await (op === 'create' ? create(mode, name) : update(mode, name));
          } catch (e) {
            failures++;
            if (failures <= 3) say(`admission via API server: ${op} ${mode}/${name} failed: ${(e as Error).message}`);
            return;
          }
          if (record) samples[op][mode].push(t());
        });
      }
    };

    // Warm-up (connections, caches, JIT) on both sides; not recorded.
    say('admission via API server: warm-up');
    for (const mode of ['on', 'off'] as Mode[])
      await block(
        mode,
        Array.from({ length: 20 }, (_, i) => `warm-${i}`),
        false,
      );
    const served = async () => metricSum(await svc.metrics(), 'kd_admission_requests_total');
    const servedBefore = await served();
    const blocks = Math.ceil(s.opsPerMode / s.block);
    say(
      `admission via API server: ${s.opsPerMode} creates + updates per mode, ${blocks} blocks, ${s.concurrency} in flight`,
    );
    for (let b = 0; b < blocks; b++) {
      const order: Mode[] = b % 2 === 0 ? ['on', 'off'] : ['off', 'on'];
      for (const mode of order) {
        const n = Math.min(s.block, s.opsPerMode - b * s.block);
        await block(
          mode,
          Array.from({ length: n }, (_, i) => `nb-${b}-${i}`),
          true,
        );
      }
    }
    const reviewsServed = (await served()) - servedBefore;
    svc.clearLogs();

    const mutated = async (mode: Mode) => {
      const list = (await custom.listNamespacedCustomObject({ ...G, namespace: ns[mode] })) as {
        items: { metadata: { name: string }; spec?: { configMetaGenerator?: number } }[];
      };
      return list.items.filter((i) => i.metadata.name.startsWith('nb-') && i.spec?.configMetaGenerator === 2).length;
    };
    const latencyMs = {
      create: { on: summarize(samples.create.on), off: summarize(samples.create.off) },
      update: { on: summarize(samples.update.on), off: summarize(samples.update.off) },
      all: {
        on: summarize([...samples.create.on, ...samples.update.on]),
        off: summarize([...samples.create.off, ...samples.update.off]),
      },
    };
    const pct = (on: number, off: number) => round(((on - off) / off) * 100, 1);
    const overhead = (op: Op | 'all') => ({
      p50: pct(latencyMs[op].on.p50, latencyMs[op].off.p50),
      p99: pct(latencyMs[op].on.p99, latencyMs[op].off.p99),
    });
    return {
      namespaces: ns,
      opsPerMode: s.opsPerMode,
      concurrency: s.concurrency,
      latencyMs,
      overheadPct: { create: overhead('create'), update: overhead('update'), all: overhead('all') },
      reviewsServed,
      mutatedOn: await mutated('on'),
      mutatedOff: await mutated('off'),
      failures,
    };
  } finally {
    await reg.remove();
  }
}
