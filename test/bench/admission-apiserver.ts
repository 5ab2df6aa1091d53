/**
 * Admission through the API server: kdcluster create and update (JSON Patch that adds connections) via
 * client-node, in a namespace the webhook configurations select ("on": the API server calls the
 * validating and the mutating webhook) and in an identically seeded one they do not ("off"). Blocks of
 * operations alternate between the two, so drift and background noise fall on both alike. The webhooks
 * are registered in url mode on 127.0.0.1 and proven live with the marker technique first.
 */
import { AdmissionregistrationV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { ControlPlane } from '../controlplane/controlplane.js';
import type { TestEnv } from '../support/cluster.js';
import { seedAdmissionNamespace } from './admission-direct.js';
import { benchEnv, mapLimit, say, timer } from './env.js';
import { metricSum } from '../support/prometheus-text.js';
import { notebookCluster } from './reviews.js';
import type { Scale } from './scale.js';
import { round, summarize, type Summary } from './stats.js';
import {
  registerWebhooks,
  waitUntilLive,
  WEBHOOK_NAMES,
  webhookConfigurations,
} from '../support/webhook-configurations.js';
import type { GoPeer } from './go-peer.js';
import { type RunningAdmission } from '../support/services.js';

/** on: the admission service; go: the Go peer (its own selected namespace); off: no webhook. */
type Mode = 'on' | 'off' | 'go';
type Op = 'create' | 'update';

export interface ApiServerResult {
  namespaces: Partial<Record<Mode, string>>;
  opsPerMode: number;
  concurrency: number;
  /** Per operation, and over all writes together. */
  latencyMs: Record<Op | 'all', Partial<Record<Mode, Summary>> & Record<'on' | 'off', Summary>>;
  /** (on - off) / off, in percent. */
  overheadPct: Record<Op | 'all', { p50: number; p99: number }>;
  /** (go - off) / off, in percent, when the Go peer ran. */
  goOverheadPct?: Record<Op | 'all', { p50: number; p99: number }>;
  /** Reviews the Go peer answered during the measured operations. */
  goReviewsServed?: number;
  mutatedGo?: number;
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
  peer?: GoPeer,
): Promise<ApiServerResult> {
  const s = scale.apiserver;
  const envOff = await benchEnv(cp, `${envOn.namespace}-off`);
  await seedAdmissionNamespace(envOff);
  const envGo = peer ? await benchEnv(cp, `${envOn.namespace}-go`) : undefined;
  if (envGo) await seedAdmissionNamespace(envGo);
  const reg = await registerWebhooks(envOn, svc);
  const regGo = envGo && peer ? await registerPeerWebhooks(envGo, peer) : undefined;
  try {
    await waitUntilLive(envOn);
    if (envGo) await waitUntilPeerLive(envGo);
    const custom = envOn.kc.makeApiClient(CustomObjectsApi);
    const ns: Partial<Record<Mode, string>> & Record<'on' | 'off', string> = {
      on: envOn.namespace,
      off: envOff.namespace,
      ...(envGo ? { go: envGo.namespace } : {}),
    };
    const modes = Object.keys(ns) as Mode[];
    const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    const create = (mode: Mode, name: string) =>
      custom.createNamespacedCustomObject({
        ...G,
        namespace: ns[mode]!,
        body: notebookCluster(name, { clusters: ['train-0', 'train-1'], configmaps: ['model-0'], secrets: ['creds'] }),
      });
    const update = (mode: Mode, name: string) =>
      custom.patchNamespacedCustomObject(
        {
          ...G,
          namespace: ns[mode]!,
          name,
          body: [
            { op: 'add', path: '/spec/connections/clusters/-', value: 'train-2' },
            { op: 'add', path: '/spec/connections/configmaps/-', value: 'model-1' },
          ],
        },
        jsonPatch,
      );

    const samples: Record<Op, Record<Mode, number[]>> = {
      create: { on: [], off: [], go: [] },
      update: { on: [], off: [], go: [] },
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
    for (const mode of modes)
      await block(
        mode,
        Array.from({ length: 20 }, (_, i) => `warm-${i}`),
        false,
      );
    const served = async () => metricSum(await svc.metrics(), 'kd_admission_requests_total');
    const servedGo = async () => (peer ? (await peer.stats()).served : 0);
    const servedBefore = await served();
    const servedGoBefore = await servedGo();
    const blocks = Math.ceil(s.opsPerMode / s.block);
    say(
      `admission via API server: ${s.opsPerMode} creates + updates per mode, ${blocks} blocks, ${s.concurrency} in flight`,
    );
    for (let b = 0; b < blocks; b++) {
      const order: Mode[] = b % 2 === 0 ? modes : [...modes].reverse();
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
    const goReviewsServed = (await servedGo()) - servedGoBefore;
    svc.clearLogs();

    const mutated = async (mode: Mode) => {
      const list = (await custom.listNamespacedCustomObject({ ...G, namespace: ns[mode]! })) as {
        items: { metadata: { name: string }; spec?: { configMetaGenerator?: number } }[];
      };
      return list.items.filter((i) => i.metadata.name.startsWith('nb-') && i.spec?.configMetaGenerator === 2).length;
    };
    const byMode = (pick: (m: Mode) => number[]) =>
      Object.fromEntries(modes.map((m) => [m, summarize(pick(m))])) as ApiServerResult['latencyMs']['all'];
    const latencyMs: ApiServerResult['latencyMs'] = {
      create: byMode((m) => samples.create[m]),
      update: byMode((m) => samples.update[m]),
      all: byMode((m) => [...samples.create[m], ...samples.update[m]]),
    };
    const pct = (on: number, off: number) => round(((on - off) / off) * 100, 1);
    const overhead = (op: Op | 'all', mode: 'on' | 'go' = 'on') => ({
      p50: pct(latencyMs[op][mode]!.p50, latencyMs[op].off.p50),
      p99: pct(latencyMs[op][mode]!.p99, latencyMs[op].off.p99),
    });
    return {
      namespaces: ns,
      opsPerMode: s.opsPerMode,
      concurrency: s.concurrency,
      latencyMs,
      overheadPct: { create: overhead('create'), update: overhead('update'), all: overhead('all') },
      ...(envGo
        ? {
            goOverheadPct: {
              create: overhead('create', 'go'),
              update: overhead('update', 'go'),
              all: overhead('all', 'go'),
            },
            goReviewsServed,
            mutatedGo: await mutated('go'),
          }
        : {}),
      reviewsServed,
      mutatedOn: await mutated('on'),
      mutatedOff: await mutated('off'),
      failures,
    };
  } finally {
    await reg.remove();
    await regGo?.remove();
  }
}

/** The kdcluster validating and mutating webhooks only (the peer does no kdapps or pods), on the peer's url. */
async function registerPeerWebhooks(env: TestEnv, peer: GoPeer): Promise<{ remove(): Promise<void> }> {
  const api = env.kc.makeApiClient(AdmissionregistrationV1Api);
  const name = `kd-go-peer-${env.namespace}`;
  const { validating, mutating } = webhookConfigurations({
    baseUrl: peer.url(''),
    caBundle: Buffer.from(env.info.webhookCaPem).toString('base64'),
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': env.namespace } },
  });
  const kdcluster = [WEBHOOK_NAMES.validateCluster, WEBHOOK_NAMES.mutateCluster];
  await api.createValidatingWebhookConfiguration({
    body: { metadata: { name }, webhooks: validating.filter((w) => kdcluster.includes(w.name)) },
  });
  await api.createMutatingWebhookConfiguration({
    body: { metadata: { name }, webhooks: mutating.filter((w) => kdcluster.includes(w.name)) },
  });
  return {
    async remove() {
      await api.deleteValidatingWebhookConfiguration({ name }).catch(() => undefined);
      await api.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
    },
  };
}

/** Until the API server calls the peer: a dry-run create is denied by it, then one gets its generator. */
async function waitUntilPeerLive(env: TestEnv, timeoutMs = 30_000): Promise<void> {
  const custom = env.kc.makeApiClient(CustomObjectsApi);
  const end = Date.now() + timeoutMs;
  const dryRun = (body: Record<string, unknown>) =>
    custom.createNamespacedCustomObject({ ...G, namespace: env.namespace, dryRun: 'All', body }) as Promise<{
      spec?: { configMetaGenerator?: number };
    }>;
  for (;;) {
    if (Date.now() > end) throw new Error(`the Go peer's webhook configurations are not live after ${timeoutMs} ms`);
    try {
      await dryRun({
        ...notebookCluster('peer-marker', { clusters: [], configmaps: [], secrets: [] }),
        spec: { app: 'peer-marker-missing-app' },
      });
    } catch (e) {
      const body = String((e as { body?: unknown }).body ?? '');
      if ((e as { code?: number }).code === 403 && body.includes(WEBHOOK_NAMES.validateCluster)) {
        const ok = await dryRun(notebookCluster('peer-marker', { clusters: ['train-0'], configmaps: [], secrets: [] }));
        if (ok.spec?.configMetaGenerator === 1) return;
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
