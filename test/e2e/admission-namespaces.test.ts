/**
 * The built service, told the namespaces its webhooks select (`--watch-namespaces`, as the chart renders it
 * from watchNamespaces), on the real control plane. Anyone who can reach the port can POST a review;
 * one crafted for a namespace outside that set must learn nothing there — not whether an app, a
 * ConfigMap or a Secret of some name exists, nor what an app is — and cause no lookup at all. The same
 * probes in a served namespace do tell existing from missing objects (the oracle being closed).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { useTestEnv } from '../support/cluster.js';
import { createNamespace } from '../support/namespaces.js';
import { metricSum } from '../support/prometheus-text.js';
import { send } from '../reliability/admission-support.js';
import { installCrds } from '../support/crds.js';
import { EXISTENCE_PROBES, kdclusterReview } from '../support/kdcluster-review.js';
import { eventually, ok, repoPath } from '../support/processes.js';
import { startAdmission, type RunningAdmission } from '../support/services.js';

const env = useTestEnv();
const other = () => `${env.namespace}-o`;
let svc: RunningAdmission;

beforeAll(async () => {
  await installCrds(env);
  await createNamespace(env.kc, other());
  // The same apps, ConfigMaps and Secrets in both namespaces (no webhook is registered: nothing gates this).
  for (const namespace of [env.namespace, other()]) {
    for (const f of ['10-apps.yaml', '20-configmaps.yaml', '30-secrets.yaml']) {
      ok(await env.kubectl(['apply', '-f', repoPath(`examples/${f}`)], { namespace }), `apply ${f} in ${namespace}`);
    }
  }
  svc = await startAdmission(env, [`--watch-namespaces=${env.namespace}`]);
}, 90_000);

afterAll(async () => {
  await svc?.stop();
  await env.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: other() })
    .catch(() => undefined);
});

async function post(path: string, review: unknown): Promise<{ status: number; body: string }> {
  const body = Buffer.from(JSON.stringify(review));
  const headers = { 'Content-Type': 'application/json', 'Content-Length': body.length };
  const r = await send(svc.port, { method: 'POST', path, headers, body }, { ca: env.info.webhookCaPem });
  return { status: r.status, body: r.body.toString('utf8') };
}

const UID = '5c0be000-0000-4000-8000-00000000000b';
const clusterReview = (namespace: string, spec: Record<string, unknown>, objectNamespace = namespace) =>
  kdclusterReview(namespace, spec, { uid: UID, objectNamespace });
const PROBES = EXISTENCE_PROBES;

const lookups = async () => metricSum(await svc.metrics(), 'kd_admission_lookups_total');

describe('reviews for namespaces the webhooks do not select', () => {
  it('in a served namespace, the answers tell existing objects from missing ones (the oracle)', async () => {
    for (const [what, exists, missing] of PROBES) {
      const [a, b] = await Promise.all(
        [exists, missing].map((spec) => post('/validate-kdcluster', clusterReview(env.namespace, spec))),
      );
      expect({ what, same: a!.body === b!.body }).toEqual({ what, same: false });
    }
  });

  it('a crafted review for another namespace gets one fixed refusal and causes no lookup', async () => {
    const before = await lookups();
    const answers = new Set<string>();
    for (const [, exists, missing] of PROBES) {
      for (const spec of [exists, missing]) {
        for (const path of ['/validate-kdcluster', '/mutate-kdcluster']) {
          const r = await post(path, clusterReview(other(), spec));
          expect(r.status).toBe(200);
          answers.add(r.body);
        }
      }
    }
    // kube-system (excluded by default), and a review whose object names the other namespace.
    answers.add((await post('/validate-kdcluster', clusterReview('kube-system', { app: 'postgres' }))).body);
    const sneaky = await post('/validate-kdcluster', clusterReview(env.namespace, { app: 'postgres' }, other()));
    expect(JSON.parse(sneaky.body).response.status.message).toBe(
      `namespace "${other()}" is not served by this admission service; review refused without looking anything up`,
    );

    const bodies = [...answers].map((b) => JSON.parse(b));
    // Two distinct answers only: one per namespace name, whatever the probe asked about.
    expect(bodies.map((b) => b.response.status.message).sort()).toEqual(
      [
        'namespace "kube-system" is not served by this admission service; review refused without looking anything up',
        `namespace "${other()}" is not served by this admission service; review refused without looking anything up`,
      ].sort(),
    );
    for (const b of bodies) {
      expect(b).toEqual({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        response: { uid: UID, allowed: false, status: { code: 403, reason: 'Forbidden', message: expect.any(String) } },
      });
    }
    expect(await lookups()).toBe(before);
    // Log lines leave asynchronously, possibly after the answers arrived.
    await eventually('refusals logged', () =>
      svc.logs().filter((l) => l.msg === 'review' && l.note === 'namespace not served').length >= PROBES.length * 4 + 2
        ? true
        : undefined,
    );
  });
});
