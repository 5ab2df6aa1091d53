/**
 * One apply names every problem. The API server runs mutating webhooks, then the CRD's schema and CEL
 * rules, then validating webhooks: a repeated entry or a self-connection is refused by the schema, so
 * the validating webhook never names the rest and a manifest with five problems took two rounds. The
 * mutating webhook now answers with all of them when the schema would refuse some; with admission
 * stopped, nothing of the manifest gets in (the schema still refuses what it refuses, the validating
 * webhook at failurePolicy Fail the rest).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { useTestEnv } from '../support/cluster.js';
import { installCrds } from '../support/crds.js';
import { kdApp, kdCluster, configMap } from '../support/kd-objects.js';
import { ok } from '../support/processes.js';
import { reviewLogBarrier } from '../support/review-log-barrier.js';
import { startAdmission, type RunningAdmission } from '../support/services.js';
import {
  registerWebhooks,
  waitUntilLive,
  WEBHOOK_NAMES,
  type Registration,
} from '../support/webhook-configurations.js';

const env = useTestEnv();
let svc: RunningAdmission | undefined;
let registration: Registration | undefined;

const create = async (o: object) => {
  const r = await env.kubectl(['create', '-f', '-'], { input: JSON.stringify(o) });
  return { code: r.code, stderr: r.stderr };
};

beforeAll(async () => {
  await installCrds(env);
  for (const o of [
    kdApp('notebook', { category: 'notebook', connectable_to: [{ category: 'spark' }] }),
    kdApp('db', { category: 'database' }),
    kdCluster('db-a', 'db'),
    configMap('model-a', { k: 'v' }),
  ])
    ok(await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(o) }), 'apply');
  svc = await startAdmission(env, [`--system-namespace=${env.namespace}`]);
  registration = await registerWebhooks(env, svc);
  await waitUntilLive(env);
}, 90_000);

afterAll(async () => {
  await registration?.remove();
  await svc?.stop();
});

/** Five problems: a forbidden connection, a self-connection, a repeat, a missing cluster, a bad name. */
const fiveProblems = () =>
  kdCluster('nb', 'notebook', { clusters: ['db-a', 'nb', 'db-a', 'ghost', 'Bad_Name'], configmaps: ['model-a'] });

describe('a manifest with five problems', () => {
  it('is refused in one answer that names all five, from the mutating webhook', async () => {
    const before = svc!.logs().length;
    const r = await create(fiveProblems());
    expect(r.code).not.toBe(0);
    const ns = env.namespace;
    const marker = `admission webhook "${WEBHOOK_NAMES.mutateCluster}" denied the request: `;
    expect(r.stderr).toContain(marker);
    expect(
      r.stderr
        .slice(r.stderr.indexOf(marker) + marker.length)
        .trimEnd()
        .split('\n'),
    ).toEqual([
      `KubeDirectorCluster ${ns}/nb is not valid (5 problems):`,
      `- spec.connections.clusters[0]: cluster "db-a" uses app "db" (category "database", distroID "test/db", version "1.0"): connectable_to of app "notebook" does not allow it; allowed: {category: "spark"}`,
      '- spec.connections.clusters[1]: a cluster cannot connect to itself ("nb")',
      '- spec.connections.clusters[2]: duplicate entry "db-a" (also at index 0)',
      `- spec.connections.clusters[3]: cluster "ghost" not found in namespace "${ns}"`,
      `- spec.connections.clusters[4]: "Bad_Name" must be a lowercase RFC 1123 name: letters a-z, digits, '-' and '.', starting and ending with a letter or digit`,
    ]);
    // One review decided it; the validating webhook was never reached.
    await reviewLogBarrier(env, svc!, 'barrier', JSON.stringify(kdCluster('barrier', 'db')));
    const judged = svc!
      .logs()
      .slice(before)
      .filter((l) => l.msg === 'review' && l.name === 'nb')
      .map((l) => `${String(l.webhook)} ${String(l.decision)}`);
    expect(judged).toEqual(['mutate-kdcluster denied']);
  });

  it('a manifest the schema accepts is left to the validating webhook, as before (no lookups while mutating)', async () => {
    const r = await create(kdCluster('nb', 'notebook', { clusters: ['db-a', 'ghost'] }));
    expect(r.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);
    expect(r.stderr).toContain('(2 problems)');
  });

  it('with admission stopped nothing of it gets in: the schema refuses what it refuses, the validating webhook (Fail) the rest', async () => {
    await svc!.stop();
    svc = undefined;
    const r = await create(fiveProblems());
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('spec.connections.clusters[2]: Duplicate value: "db-a"');
    expect(r.stderr).toContain('a cluster cannot connect to itself ("nb")');
    // Problems the schema cannot see are still kept out: the validating webhook fails closed.
    const lookupOnly = await create(kdCluster('nb', 'notebook', { clusters: ['db-a'] }));
    expect(lookupOnly.code).not.toBe(0);
    expect(lookupOnly.stderr).toContain(`failed calling webhook "${WEBHOOK_NAMES.validateCluster}"`);
    expect((await env.kubectl(['get', 'kdcluster', 'nb'])).code).not.toBe(0);
  });
});
