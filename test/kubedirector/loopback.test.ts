/**
 * The real KubeDirector operator, run against a control plane of this file's own (its CRDs are
 * cluster-scoped and share names with the project's), stays on loopback: checked FIRST, before it
 * ever starts, by a guard the API server enforces, then on the running operator — its webhook
 * configuration, its listeners, and every socket it or the API server opens while KubeDirector
 * registers and serves its webhook. Then kd-connections' services in their default mode, started next
 * to the running operator, refuse to act and say why.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHART } from '../chart/chart-support.js';
import { listeningAddresses } from '../controlplane/listening-sockets.js';
import { useDedicatedControlPlane } from '../support/dedicated-controlplane.js';
import {
  KD_NAMESPACE,
  KD_OPERATOR_NAME,
  KD_VALIDATOR_SERVICE,
  KD_WEBHOOK_NAME,
  installKubeDirector,
  installLoopbackGuard,
  kubedirectorBinary,
  startKubeDirector,
  type KubeDirectorProcess,
} from '../support/kubedirector-operator.js';
import { eventually, ok } from '../support/processes.js';
import { startAdmission, startReconciler } from '../support/services.js';
import { isLoopback, samplePeers } from '../support/socket-peers.js';

const env = useDedicatedControlPlane();
let kd: KubeDirectorProcess | undefined;
let deploy = '';
let sampler: { stop(): string[] } | undefined;

interface WebhookConfig {
  metadata: { name: string };
  webhooks?: { name: string; clientConfig: { url?: string; service?: unknown } }[];
}

async function webhookConfigs(): Promise<WebhookConfig[]> {
  const out: WebhookConfig[] = [];
  for (const kind of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) {
    const r = ok(await env.kubectl(['get', kind, '-o', 'json'], { namespace: false }), `list ${kind}`);
    out.push(...(JSON.parse(r.stdout) as { items: WebhookConfig[] }).items);
  }
  return out;
}

beforeAll(async () => {
  const built = await kubedirectorBinary();
  deploy = built.deploy;
  // Checked first: the guard is in place before any KubeDirector object exists.
  await installLoopbackGuard(env);
  await installKubeDirector(env, deploy);
  sampler = samplePeers(() => [env.cp.pids().apiserver, kd?.pid].filter((p): p is number => p !== undefined));
  kd = await startKubeDirector(env, built.bin);
}, 600_000);

afterAll(async () => {
  sampler?.stop();
  await kd?.stop();
});

describe('the loopback guard, in place before KubeDirector starts', () => {
  const probe = (clientConfig: object) =>
    JSON.stringify({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'kd-tests-probe' },
      webhooks: [
        {
          name: 'probe.kd-tests.invalid',
          clientConfig,
          rules: [{ operations: ['CREATE'], apiGroups: ['example.invalid'], apiVersions: ['v1'], resources: ['x'] }],
          sideEffects: 'None',
          admissionReviewVersions: ['v1'],
        },
      ],
    });

  test.each([
    ['clientConfig.service (what upstream KubeDirector registers)', { service: { namespace: 'default', name: 'x' } }],
    ['a private-range URL', { url: 'https://10.96.0.1:443/validate' }],
    ['a host name', { url: 'https://kubedirector-validator.default.svc:443/validate' }],
  ])('refuses a webhook configuration with %s', async (_what, clientConfig) => {
    // Dry run: even a broken guard never persists a service-mode configuration.
    const r = await env.kubectl(['create', '--dry-run=server', '-f', '-'], {
      input: probe(clientConfig),
      namespace: false,
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/webhooks must use clientConfig\.url on https:\/\/127\.0\.0\.1/);
  });

  test('lets a loopback URL through (the guard is not simply refusing everything)', async () => {
    const input = probe({ url: 'https://127.0.0.1:1/validate' });
    ok(await env.kubectl(['create', '--dry-run=server', '-f', '-'], { input, namespace: false }), 'dry-run create');
  });
});

describe('KubeDirector on loopback', () => {
  test('registers its webhook configuration by URL on 127.0.0.1, and no configuration names a Service', async () => {
    const all = await eventually(`${KD_WEBHOOK_NAME} registered`, async () => {
      const c = await webhookConfigs();
      return c.some((w) => w.metadata.name === KD_WEBHOOK_NAME) ? c : undefined;
    });
    const mine = all.find((w) => w.metadata.name === KD_WEBHOOK_NAME)!;
    expect(mine.webhooks?.map((w) => w.clientConfig.url)).toEqual([
      `https://127.0.0.1:${kd!.validatorPort}/validate`,
      `https://127.0.0.1:${kd!.validatorPort}/validate`,
    ]);
    expect(all.flatMap((c) => (c.webhooks ?? []).filter((w) => w.clientConfig.service !== undefined))).toEqual([]);
  });

  test('listens on 127.0.0.1 only: its validator and its metrics', () => {
    const addrs = listeningAddresses(kd!.pid);
    expect(addrs).toEqual(expect.arrayContaining([`127.0.0.1:${kd!.validatorPort}`, `127.0.0.1:${kd!.metricsPort}`]));
    expect(addrs.filter((a) => !a.startsWith('127.0.0.1:'))).toEqual([]);
  });

  test("its validator's Service has no ClusterIP to dial", async () => {
    const r = ok(
      await env.kubectl(
        ['get', 'service', KD_VALIDATOR_SERVICE, '-n', KD_NAMESPACE, '-o', 'jsonpath={.spec.clusterIP}'],
        {
          namespace: false,
        },
      ),
      'get the validator Service',
    );
    expect(r.stdout).toBe('None');
  });

  test("the API server calls KubeDirector's webhook over loopback: a catalog app is admitted, a bad one refused with KubeDirector's message", async () => {
    const app = JSON.parse(readFileSync(join(deploy, 'example_catalog', 'cr-app-centos7.json'), 'utf8')) as {
      metadata: { name: string };
      spec: { config: { roleServices: { roleID: string }[] } };
    };
    ok(
      await env.kubectl(['apply', '-n', KD_NAMESPACE, '-f', '-'], { input: JSON.stringify(app), namespace: false }),
      'apply the centos7 catalog app',
    );
    const bad = structuredClone(app);
    bad.metadata.name = 'centos7-bad-role';
    bad.spec.config.roleServices[0]!.roleID = 'no_such_role';
    const r = await env.kubectl(['apply', '-n', KD_NAMESPACE, '-f', '-'], {
      input: JSON.stringify(bad),
      namespace: false,
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/admission webhook "hard-.*" denied the request/);
    expect(r.stderr).toContain('Invalid roleID(no_such_role) in roleServices array');
  });

  test('neither KubeDirector nor the API server ever had a socket to an address off loopback', () => {
    const seen = sampler!.stop();
    sampler = undefined;
    // The sampler did see traffic (KubeDirector ↔ API server, API server → webhook): it is not blind.
    expect(seen.some((s) => s.startsWith(`${kd!.pid} `))).toBe(true);
    expect(seen.filter((s) => !isLoopback(s.split(' ')[1]!))).toEqual([]);
  });
});

describe("kd-connections' default mode next to the running operator", () => {
  test('admission and the reconciler both refuse to act, saying what they found and what to set', async () => {
    // Discovery lists the resources in no fixed order.
    const found =
      /is not acting: KubeDirector's operator is installed \(the API serves [^)]*kubedirectorconfigs\.kubedirector\.hpe\.com/;
    // The operator itself, by name: its Deployment (as deploy/ has it) and the configuration it registered.
    const byName = [
      `KubeDirector's operator Deployment exists (${KD_NAMESPACE}/${KD_OPERATOR_NAME})`,
      `KubeDirector's operator registered its webhook configuration ${KD_WEBHOOK_NAME}`,
    ];
    const admission = await startAdmission(env, [`--system-namespace=${env.namespace}`]);
    try {
      const line = admission.logs().find((l) => l.reason === 'KubeDirectorFound');
      expect(line?.msg).toMatch(found);
      for (const s of byName) expect(line?.msg).toContain(s);
      expect(line?.msg).toContain('set kubedirector.enabled=true');
    } finally {
      await admission.stop();
    }
    const reconciler = await startReconciler(env);
    try {
      const line = await reconciler.waitForLog((l) => l.reason === 'KubeDirectorFound', 30_000);
      expect(line.msg).toMatch(found);
      for (const s of byName) expect(line.msg).toContain(s);
      expect(reconciler.logs().some((l) => /leading|lease acquired|caches synced/i.test(String(l.msg)))).toBe(false);
    } finally {
      await reconciler.stop();
    }
  }, 120_000);

  test("helm refuses to install the default mode here, from discovery (no lookup): KubeDirector's CRD is served", async () => {
    // --dry-run=server: rendered against this API server's discovery; nothing is created.
    const r = await env.helm(['install', 'kd', CHART, '--namespace', env.namespace, '--dry-run=server']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      "kd-connections' default mode is not installed next to KubeDirector: KubeDirector's operator is installed (the API serves kubedirectorconfigs.kubedirector.hpe.com)",
    );
    expect(r.stderr).toContain('set kubedirector.enabled=true');
    // The same install in kubedirector mode is not refused by that check.
    const kd = await env.helm([
      'install',
      'kd',
      CHART,
      '--namespace',
      env.namespace,
      '--dry-run=server',
      '--set',
      'kubedirector.enabled=true',
      '--set',
      'webhook.url=https://127.0.0.1:9443',
    ]);
    expect(kd.stderr).not.toContain('not installed next to KubeDirector');
    expect(kd.code).toBe(0);
  }, 120_000);
});
