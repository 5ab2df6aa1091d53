/**
 * Secret values never leak: both services run (admission at debug log level, webhooks registered; the
 * reconciler at debug log level), a kdcluster connects a Secret holding unique random values (applied
 * with kubectl, so its last-applied annotation carries them in plain text too), a second cluster
 * connects to the first, member pods get configmeta, and the Secret's value is changed once (a
 * regeneration). Then every place the system writes to is scanned for each value, in plain text and
 * base64 (all three alignments, so a value inside a larger base64 blob is found as well): both services'
 * logs and metrics, every pod (annotations included: the configmeta), every kdcluster (spec and status)
 * and every event of the namespace. The scanner is checked against the Secret itself, which does hold
 * the values.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { useTestEnv } from '../support/cluster.js';
import {
  apply,
  configMap,
  kdApp,
  kdCluster,
  kubectlOk,
  memberPod,
  podConfigMeta,
  secret,
} from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { installCrds } from '../support/crds.js';
import {
  httpsGet,
  type ReconcilerProcess,
  type RunningAdmission,
  startAdmission,
  startReconciler,
} from '../support/services.js';
import { registerWebhooks, type Registration, waitUntilLive } from '../support/webhook-configurations.js';

const env = useTestEnv();
let admission: RunningAdmission;
let reconciler: ReconcilerProcess;
let hooks: Registration | undefined;

const value = () => `kd-leak-canary-${randomBytes(18).toString('hex')}`;
const FIRST = value();
const SECOND = value();
const OTHER_KEY = value();

/** The value itself and its base64 forms at every offset (a value inside a larger base64 text). */
function needles(secretValue: string): string[] {
  const bytes = Buffer.from(secretValue, 'utf8');
  const out = [secretValue];
  for (let offset = 0; offset < 3; offset++) {
    const b64 = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    // Only the characters that depend on nothing but the value's own bytes.
    const from = Math.ceil(offset / 3) * 4;
    const to = Math.floor((offset + bytes.length) / 3) * 4;
    out.push(b64.slice(from, to));
  }
  return out;
}

/** Which of the values (by label) appear in `text`, in any of their forms. */
function leaks(text: string): string[] {
  const found: string[] = [];
  for (const [label, v] of Object.entries({ FIRST, SECOND, OTHER_KEY })) {
    if (needles(v).some((n) => text.includes(n))) found.push(label);
  }
  return found;
}

const secretObject = (password: string) =>
  secret('db-creds', { password, 'api-token': OTHER_KEY, username: 'app' }, 'database');

beforeAll(async () => {
  await installCrds(env);
  admission = await startAdmission(env, ['--log-level=debug', `--system-namespace=${env.namespace}`]);
  hooks = await registerWebhooks(env, admission);
  await waitUntilLive(env);
  reconciler = await startReconciler(env, { args: ['--log-level=debug'] });
  await apply(env, [
    kdApp('db-client', { category: 'client', connectable_to: [{ category: 'client' }] }),
    secretObject(FIRST),
    configMap('settings', { region: 'eu' }),
    kdCluster('app', 'db-client', { secrets: ['db-creds'], configmaps: ['settings'] }),
    kdCluster('peer', 'db-client', { clusters: ['app'] }),
    memberPod('app-0', 'app'),
    memberPod('peer-0', 'peer'),
  ]);
}, 120_000);

afterAll(async () => {
  await hooks?.remove();
  await reconciler?.stop();
  await admission?.stop();
});

describe('Secret values stay out of logs, configmeta, status and events', () => {
  it('configmeta lists the Secret with its keys and no values (redacted), also after the value changes', async () => {
    const delivered = await eventually('app-0 holds configmeta with the Secret', async () => {
      const cm = await podConfigMeta(env, 'app-0');
      return cm?.doc?.connections?.secrets ? cm : undefined;
    });
    const entries = Object.values(delivered.doc.connections.secrets).flat() as any[];
    expect(entries).toEqual([
      expect.objectContaining({
        // The name is base64, as KubeDirector renders a Secret's name (Go []byte).
        metadata: { name: Buffer.from('db-creds').toString('base64') },
        data: { 'api-token': '', password: '', username: '' },
        redacted: true,
      }),
    ]);
    await eventually('peer-0 holds configmeta with the connected cluster', async () => {
      const cm = await podConfigMeta(env, 'peer-0');
      return cm?.doc?.connections?.clusters ? cm : undefined;
    });

    // A new value: the reconciler hashes Secret data, so configmeta is regenerated (without the value).
    await apply(env, [secretObject(SECOND)]);
    const regenerated = await eventually(
      'app-0 gets regenerated configmeta after the Secret changed',
      async () => {
        const cm = await podConfigMeta(env, 'app-0');
        return cm && Number(cm.generator) > Number(delivered.generator) ? cm : undefined;
      },
      60_000,
    );
    expect(Object.values(regenerated.doc.connections.secrets).flat()).toEqual([
      expect.objectContaining({ data: { 'api-token': '', password: '', username: '' }, redacted: true }),
    ]);
  }, 90_000);

  it('no value, plain or base64, in any log, metric, pod, kdcluster (spec, status) or event', async () => {
    // The scanner finds the values where they are: in the Secret (base64 in data, plain in the
    // last-applied annotation kubectl apply wrote).
    const stored = await kubectlOk(env, ['get', 'secret', 'db-creds', '-o', 'json']);
    expect(leaks(stored).sort()).toEqual(['OTHER_KEY', 'SECOND']);
    expect(leaks(JSON.stringify(JSON.parse(stored).metadata.annotations)).sort()).toEqual(['OTHER_KEY', 'SECOND']);

    const haystacks: Record<string, string> = {
      'admission log': admission
        .logs()
        .map((l) => JSON.stringify(l))
        .join('\n'),
      'admission metrics': await admission.metrics(),
      'reconciler log': reconciler.output(),
      'reconciler metrics': await (await fetch(`http://127.0.0.1:${reconciler.port}/metrics`)).text(),
      pods: await kubectlOk(env, ['get', 'pods', '-o', 'json']),
      kdclusters: await kubectlOk(env, ['get', 'kubedirectorclusters.kubedirector.hpe.com', '-o', 'json']),
      'events (core/v1)': await kubectlOk(env, ['get', 'events', '-o', 'json']),
      'events (events.k8s.io/v1)': await kubectlOk(env, ['get', 'events.v1.events.k8s.io', '-o', 'json']),
      configmaps: await kubectlOk(env, ['get', 'configmaps', '-o', 'json']),
    };
    const sizes = Object.fromEntries(Object.entries(haystacks).map(([k, v]) => [k, v.length]));
    console.log(`scanned for 3 Secret values × 4 forms: ${JSON.stringify(sizes)}`);
    // Each haystack is real: the logs are at debug level and name the Secret, the events exist.
    expect(haystacks['reconciler log']).toContain('db-creds');
    expect(haystacks.pods).toContain('kubedirector.hpe.com/configmeta');
    expect(haystacks['events (events.k8s.io/v1)']).toContain('ConfigMetaDelivered');
    expect(JSON.parse(haystacks.kdclusters!).items.every((c: any) => c.status?.connectionsHash)).toBe(true);
    expect(Object.fromEntries(Object.entries(haystacks).map(([k, v]) => [k, leaks(v)]))).toEqual(
      Object.fromEntries(Object.keys(haystacks).map((k) => [k, []])),
    );
    expect((await httpsGet(admission.url('/healthz'), env.info.webhookCaPem)).status).toBe(200);
  });
});
