import { describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '@kd-connections/shared/runtime';
import type { AdmissionReview } from '../src/admission-review.js';
import { createApp } from '../src/app.js';
import { AdmissionMetrics } from '../src/metrics.js';
import { inScope, outOfScope, type NamespaceScope } from '../src/namespace-scope.js';
import { runWebhook } from '../src/webhook.js';
import { WEBHOOKS } from '../src/webhooks/index.js';
import { exampleWorld, fixture, NS } from './support.js';

/** What the chart renders for watchNamespaces [ml] in release namespace kd. */
const SCOPE: NamespaceScope = { only: [NS], excluded: ['kube-system', 'kd'] };
const FIXTURES = [
  'validate-kdcluster-create-denied',
  'validate-kdcluster-update-dangling',
  'validate-kdapp-create-invalid',
  'mutate-kdcluster-create-with-connections',
  'mutate-pod-member',
];
const webhookFor = (name: string) => WEBHOOKS.find((w) => name.startsWith(w.name))!;

/** The fixture moved to `namespace`, request and objects alike (as the API server would send it). */
function movedTo(name: string, namespace: string): AdmissionReview {
  const review = fixture(name);
  review.request.namespace = namespace;
  for (const o of [review.request.object, review.request.oldObject] as { metadata?: { namespace?: string } }[]) {
    if (o?.metadata) o.metadata.namespace = namespace;
  }
  return review;
}

/** The world with every example object also present in `namespace`. */
function worldAlsoIn(namespace: string) {
  const world = exampleWorld();
  for (const store of [world.apps, world.clusters, world.configmaps, world.secrets] as {
    list(): { metadata: { namespace?: string } }[];
    put(o: unknown): void;
  }[]) {
    for (const o of store.list()) store.put({ ...o, metadata: { ...o.metadata, namespace } });
  }
  return world;
}

describe('namespace scope', () => {
  it('serves the selected namespaces minus the excluded ones', () => {
    expect(inScope(NS, SCOPE)).toBe(true);
    expect(inScope('team-b', SCOPE)).toBe(false);
    expect(inScope('kube-system', SCOPE)).toBe(false);
    expect(inScope('team-b', { only: [], excluded: ['kube-system'] })).toBe(true);
    expect(inScope('kube-system', { only: [], excluded: ['kube-system'] })).toBe(false);
  });

  it.each(FIXTURES)(
    '%s: a review for a namespace the webhooks do not select is refused with no lookup',
    async (name) => {
      for (const namespace of ['kube-system', 'team-b']) {
        // The objects the review names exist there, or not: the answer must not tell.
        const answers = [];
        for (const world of [worldAlsoIn(namespace), exampleWorld()]) {
          const review = movedTo(name, namespace);
          const { review: out } = await runWebhook(webhookFor(name), review, world.deps(), SCOPE);
          expect(out.response).toEqual({
            uid: review.request.uid,
            allowed: false,
            status: {
              code: 403,
              reason: 'Forbidden',
              message: `namespace "${namespace}" is not served by this admission service; review refused without looking anything up`,
            },
          });
          expect(world.lookups).toEqual([]);
          expect(world.liveCalls).toEqual([]);
          answers.push(JSON.stringify(out));
        }
        expect(answers[0]).toBe(answers[1]);
      }
    },
  );

  it.each(FIXTURES)('%s: the same review in a selected namespace is judged', async (name) => {
    const world = exampleWorld();
    const { review: out } = await runWebhook(webhookFor(name), movedTo(name, NS), world.deps(), SCOPE);
    expect(out.response.status?.message ?? '').not.toMatch(/not served/);
    // The validating webhooks look the connected objects up (the mutating ones decide from the object).
    if (name.startsWith('validate-kdcluster')) expect(world.lookups.length).toBeGreaterThan(0);
  });

  it('the system catalog (an excluded namespace) is served for kdapp reviews only', async () => {
    const scope: NamespaceScope = { ...SCOPE, apps: ['kd'] };
    const app = await runWebhook(
      webhookFor('validate-kdapp-create-invalid'),
      movedTo('validate-kdapp-create-invalid', 'kd'),
      exampleWorld().deps(),
      scope,
    );
    expect(app.review.response.status?.message ?? '').not.toMatch(/not served/);
    expect(app.review.response.allowed).toBe(false);
    const cluster = await runWebhook(
      webhookFor('validate-kdcluster-create-denied'),
      movedTo('validate-kdcluster-create-denied', 'kd'),
      exampleWorld().deps(),
      scope,
    );
    expect(cluster.review.response.status?.message).toMatch(/namespace "kd" is not served/);
  });

  it('refuses a review whose object names another namespace than the request, or that names none', async () => {
    const world = worldAlsoIn('team-b');
    const review = fixture('validate-kdcluster-create-denied');
    (review.request.object as { metadata: { namespace: string } }).metadata.namespace = 'team-b';
    const { review: out } = await runWebhook(webhookFor('validate-kdcluster'), review, world.deps(), SCOPE);
    expect(out.response.status?.message).toBe(
      'namespace "team-b" is not served by this admission service; review refused without looking anything up',
    );

    const update = fixture('validate-kdcluster-update-dangling');
    (update.request.oldObject as { metadata: { namespace: string } }).metadata.namespace = 'kube-system';
    const refusedOld = await runWebhook(webhookFor('validate-kdcluster'), update, world.deps(), SCOPE);
    expect(refusedOld.review.response.status?.message).toMatch(/^namespace "kube-system" is not served/);

    const bare = fixture('validate-kdcluster-create-denied');
    delete bare.request.namespace;
    delete (bare.request.object as { metadata: { namespace?: string } }).metadata.namespace;
    expect(outOfScope(bare.request, SCOPE)?.message).toBe(
      'request.namespace is missing: these webhooks judge namespaced objects only; review refused without looking anything up',
    );
    expect(world.lookups).toEqual([]);
  });

  it('with no scope configured (every namespace), nothing is refused for its namespace', () => {
    expect(
      outOfScope(movedTo('validate-kdcluster-create-denied', 'kube-system').request, { only: [], excluded: [] }),
    ).toBe(undefined);
  });

  it('the HTTP app applies the scope it is given before any lookup', async () => {
    const world = worldAlsoIn('team-b');
    const app = createApp({
      webhooks: WEBHOOKS,
      deps: world.deps(),
      namespaces: SCOPE,
      metrics: new AdmissionMetrics(),
      log: createLogger({ component: 'test', level: 'error', write: () => {} }),
      readiness: () => ({ ready: true, reasons: [] }),
    });
    const server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const body = JSON.stringify(movedTo('validate-kdcluster-create-denied', 'team-b'));
      const answer = await new Promise<{ status: number; body: string }>((ok, fail) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: (server.address() as AddressInfo).port,
            path: '/validate-kdcluster',
            method: 'POST',
            agent: false,
            headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => ok({ status: res.statusCode ?? 0, body: text }));
          },
        );
        req.on('error', fail);
        req.end(body);
      });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body).response).toMatchObject({ allowed: false, status: { code: 403 } });
      expect(JSON.parse(answer.body).response.status.message).toMatch(/^namespace "team-b" is not served/);
      expect(world.lookups).toEqual([]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
