/**
 * The chart's ValidatingWebhookConfiguration as `helm template` renders it, pointed at a local admission
 * process on 127.0.0.1 — for tests that run the services as processes but must register exactly what
 * the chart would (its rules, matchConditions and failure policy).
 */
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { apiServerVersion } from './cluster.js';
import type { ControlPlaneInfo } from '../controlplane/controlplane.js';
import { ok, repoRoot, run } from './processes.js';

type Doc = Record<string, any>;

/** Renders templates/webhooks.yaml for `port`, watching `namespace`, in the given mode; named `name`. */
export async function chartValidatingConfiguration(
  info: ControlPlaneInfo,
  o: { port: number; namespace: string; mode: 'kubedirector' | 'default'; name: string },
): Promise<Doc> {
  const r = await run(info.binDir.helm, [
    'template',
    'kd',
    join(repoRoot, 'charts', 'kd-connections'),
    '--namespace',
    'kd-system',
    '--kube-version',
    await apiServerVersion(info),
    '--set',
    `webhook.url=https://127.0.0.1:${o.port}`,
    '--set',
    `webhook.caBundle=${Buffer.from(info.webhookCaPem).toString('base64')}`,
    '--set',
    `watchNamespaces={${o.namespace}}`,
    '--set',
    `kubedirector.enabled=${o.mode === 'kubedirector'}`,
    '--show-only',
    'templates/webhooks.yaml',
  ]);
  ok(r, 'helm template webhooks.yaml');
  const docs = parseAllDocuments(r.stdout).map((d) => d.toJSON() as Doc);
  const v = docs.find((d) => d?.kind === 'ValidatingWebhookConfiguration');
  if (!v) throw new Error('templates/webhooks.yaml rendered no ValidatingWebhookConfiguration');
  v.metadata = { name: o.name };
  return v;
}
