/**
 * The webhook path token (bootstrap mode's default in the chart) on the real control plane: two
 * replicas derive one token from the key in the CA Secret and point every webhook at /t/<token>/<webhook>
 * (url mode on 127.0.0.1 here, clientConfig.service.path in a cluster); the API server's calls are
 * served there, while a review posted straight to the port without the token — the existence oracle of
 * issue 27 item 4 — gets one fixed 404 and causes no lookup, whether the objects it names exist or not.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { pathToken } from '../../admission/src/path-token/path-token-rules.js';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { EXISTENCE_PROBES, kdclusterReview } from '../support/kdcluster-review.js';
import { metricSum } from '../support/prometheus-text.js';
import { eventually, ok, repoPath, sleep } from '../support/processes.js';
import { type RunningAdmission } from '../support/services.js';
import {
  registerWebhooks,
  type Registration,
  waitUntilLive,
  WEBHOOK_NAMES,
} from '../support/webhook-configurations.js';
import { send } from '../reliability/admission-support.js';
import {
  readTlsSecret,
  startBalancer,
  startBootstrapReplicas,
  startLoad,
  type Balancer,
} from './admission-certs-support.js';

const env = useTestEnv();
const SECRET = 'admission-tls-token';
let balancer: Balancer;
let hooks: Registration | undefined;
let replicas: RunningAdmission[] = [];

beforeAll(async () => {
  await installCrds(env);
  for (const f of ['10-apps.yaml', '20-configmaps.yaml', '30-secrets.yaml']) {
    ok(await env.kubectl(['apply', '-f', repoPath(`examples/${f}`)]), `apply ${f}`);
  }
  balancer = await startBalancer();
  hooks = await registerWebhooks(env, { url: (p) => `https://127.0.0.1:${balancer.port}${p}` }, { caBundle: false });
  replicas = await startBootstrapReplicas(env, 2, {
    secretName: SECRET,
    configuration: hooks.name,
    extraArgs: ['--webhook-path-token'],
  });
  balancer.setBackends(replicas.map((r) => r.port));
}, 120_000);

afterAll(async () => {
  await hooks?.remove();
  await Promise.all(replicas.map((r) => r.stop()));
  await balancer?.close();
});

async function pathKey(): Promise<Buffer> {
  const s = await env.kc.makeApiClient(CoreV1Api).readNamespacedSecret({ name: SECRET, namespace: env.namespace });
  return Buffer.from(s.data?.['webhook-path-key'] ?? '', 'base64');
}

/** The tokens derivable now for a rotation period: the previous, current and next period's. */
async function derivedTokens(rotationMs = 3_600_000): Promise<string[]> {
  const key = await pathKey();
  const p = Math.floor(Date.now() / rotationMs);
  return [p - 1, p, p + 1].map((x) => pathToken(key, x));
}

/** The token every webhook's path carries (undefined while they differ or carry none). */
async function token(): Promise<string | undefined> {
  const found = new Set((await urls()).map((u) => /\/t\/([A-Za-z0-9_-]{43})\//.exec(u)?.[1]));
  return found.size === 1 ? [...found][0] : undefined;
}

async function urls(): Promise<string[]> {
  const api = env.kc.makeApiClient(AdmissionregistrationV1Api);
  const v = await api.readValidatingWebhookConfiguration({ name: hooks!.name });
  const m = await api.readMutatingWebhookConfiguration({ name: hooks!.name });
  return [...(v.webhooks ?? []), ...(m.webhooks ?? [])].map((w) => `${w.name} ${w.clientConfig.url}`);
}

const expectedUrls = (t: string) =>
  Object.values(WEBHOOK_NAMES)
    .map((name) => `${name} https://127.0.0.1:${balancer.port}/t/${t}/${name.split('.')[0]}`)
    .sort();

const review = (spec: Record<string, unknown>) =>
  kdclusterReview(env.namespace, spec, { uid: '5c0be000-0000-4000-8000-00000000000c' });
const PROBES = EXISTENCE_PROBES;

async function post(replica: RunningAdmission, path: string, body: unknown): Promise<{ status: number; body: string }> {
  const bytes = Buffer.from(JSON.stringify(body));
  const headers = { 'Content-Type': 'application/json', 'Content-Length': bytes.length };
  const ca = (await readTlsSecret(env, SECRET)).trustedPem;
  const r = await send(replica.port, { method: 'POST', path, headers, body: bytes }, { ca });
  return { status: r.status, body: r.body.toString('utf8') };
}

const lookups = async () => {
  let n = 0;
  for (const r of replicas) n += metricSum(await r.metrics(), 'kd_admission_lookups_total');
  return n;
};

describe('the webhook path token', () => {
  it('is derived from the key in the CA Secret, and every webhook of both configurations is pointed at it', async () => {
    const t = await eventually('every webhook behind one token', token);
    expect(await derivedTokens()).toContain(t);
    expect((await urls()).sort()).toEqual(expectedUrls(t));
    // Never logged: the logs are readable by more people than the configurations.
    for (const r of replicas) expect(r.logs().filter((l) => JSON.stringify(l).includes(t))).toEqual([]);
  });

  it('the API server calls the webhooks there: allowed, mutated and denied as before', async () => {
    await waitUntilLive(env);
    const cluster = (name: string, app: string) =>
      JSON.stringify({
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        metadata: { name },
        spec: { app, roles: [{ id: 'a', members: 1 }], connections: { configmaps: ['marker-cm'] } },
      });
    ok(await env.kubectl(['apply', '-f', '-'], { input: cluster('admitted', 'marker-app') }), 'apply');
    const got = JSON.parse(ok(await env.kubectl(['get', 'kdcluster', 'admitted', '-o', 'json']), 'get').stdout);
    expect(got.spec.configMetaGenerator).toBe(1);
    const denied = await env.kubectl(['apply', '-f', '-'], { input: cluster('denied', 'no-such-app') });
    expect(denied.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    expect(denied.stderr).toContain('app "no-such-app" not found');
  });

  it('a review posted straight to the port without the token learns nothing: one 404, no lookup', async () => {
    const t = (await token())!;
    const before = await lookups();
    const answers = new Set<string>();
    for (const replica of replicas) {
      for (const [, exists, missing] of PROBES) {
        for (const spec of [exists, missing]) {
          for (const path of ['/validate-kdcluster', '/mutate-kdcluster', `/t/${'A'.repeat(43)}/validate-kdcluster`]) {
            const r = await post(replica, path, review(spec));
            answers.add(`${r.status} ${r.body}`);
          }
        }
      }
    }
    expect([...answers]).toEqual(['404 no webhook at this path\n']);
    expect(await lookups()).toBe(before);
    // The same probes with the token do tell existing from missing objects: what the token keeps out.
    for (const [what, exists, missing] of PROBES) {
      const [a, b] = await Promise.all(
        [exists, missing].map((spec) => post(replicas[0]!, `/t/${t}/validate-kdcluster`, review(spec))),
      );
      expect({ what, status: [a!.status, b!.status], same: a!.body === b!.body }).toEqual({
        what,
        status: [200, 200],
        same: false,
      });
    }
  });

  it('a path reset by a re-apply (as a chart upgrade from a version without tokens does) is set again', async () => {
    const t = (await token())!;
    const api = env.kc.makeApiClient(AdmissionregistrationV1Api);
    const bare = `https://127.0.0.1:${balancer.port}/validate-kdcluster`;
    ok(
      await env.kubectl(
        [
          'patch',
          'validatingwebhookconfiguration',
          hooks!.name,
          '--type=json',
          '-p',
          JSON.stringify([{ op: 'replace', path: '/webhooks/0/clientConfig/url', value: bare }]),
        ],
        { namespace: false },
      ),
      'reset the path',
    );
    await eventually('the token path is back', async () => {
      const v = await api.readValidatingWebhookConfiguration({ name: hooks!.name });
      const back = /\/t\/([A-Za-z0-9_-]{43})\/validate-kdcluster$/.exec(v.webhooks![0]!.clientConfig.url ?? '')?.[1];
      // The same token, or (should the hour turn meanwhile) the next one derived from the same key.
      return back !== undefined && (back === t || (await derivedTokens()).includes(back));
    });
  });

  it('turned off (the replicas restarted without it): the bare paths come back and are served there', async () => {
    const t = (await token())!;
    await Promise.all(replicas.map((r) => r.stop()));
    replicas = await startBootstrapReplicas(env, 2, { secretName: SECRET, configuration: hooks!.name });
    balancer.setBackends(replicas.map((r) => r.port));
    const bare = Object.values(WEBHOOK_NAMES)
      .map((name) => `${name} https://127.0.0.1:${balancer.port}/${name.split('.')[0]}`)
      .sort();
    await eventually(
      'every webhook at its bare path',
      async () => JSON.stringify((await urls()).sort()) === JSON.stringify(bare),
    );
    const denied = await env.kubectl(['create', '--dry-run=server', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'kubedirector.hpe.com/v1beta1',
        kind: 'KubeDirectorCluster',
        metadata: { name: 'after' },
        spec: { app: 'no-such-app', roles: [{ id: 'a', members: 1 }] },
      }),
    });
    expect(denied.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    expect((await post(replicas[0]!, `/t/${t}/validate-kdcluster`, review(PROBES[0]![1]))).status).toBe(404);
  });

  it('rotated every 30 s under load through the API server: no call fails, the paths follow each new token, through the end of the overlap', async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    replicas = await startBootstrapReplicas(env, 2, {
      secretName: SECRET,
      configuration: hooks!.name,
      extraArgs: ['--webhook-path-token', '--webhook-path-token-rotation=30s'],
    });
    balancer.setBackends(replicas.map((r) => r.port));
    const derived = new Set<string>();
    const published = new Set<string>();
    const load = startLoad(env, { maxRequests: 100_000, maxMs: 100_000, pauseMs: 20 });
    // Until two rotations were published (each 30 s) and the second one's overlap (15 s) is over, the
    // load's own bound (100 s), or a failure.
    const end = Date.now() + 100_000;
    let thirdAt: number | undefined;
    while (
      Date.now() < end &&
      load.failures().length === 0 &&
      (thirdAt === undefined || Date.now() < thirdAt + 16_000)
    ) {
      for (const t of await derivedTokens(30_000)) derived.add(t);
      const m = /\/t\/([A-Za-z0-9_-]{43})\//.exec((await urls())[0]!);
      if (m) published.add(m[1]!);
      if (thirdAt === undefined && published.size >= 3) thirdAt = Date.now();
      await sleep(500);
    }
    const result = await load.stop();
    console.log(
      `path token rotation under load: ${result.sent} dry-run creates, ${published.size} tokens published, ended by ${result.endedBy}`,
    );
    expect(result.failures).toEqual([]);
    // Every published token is one derived from the Secret's key for a 30 s period of the run.
    expect([...published].every((t) => derived.has(t))).toBe(true);
    expect(published.size).toBeGreaterThanOrEqual(3);
    expect(thirdAt).toBeDefined();
  }, 180_000);
});
