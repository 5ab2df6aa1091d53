import { describe, expect, it } from '@jest/globals';
import jsonpatch, { type Operation } from 'fast-json-patch';
import type { AdmissionReview } from '../src/admission-review.js';
import { runWebhook, type Webhook } from '../src/webhook.js';
import { mutateKdCluster, mutatePod, validateKdApp, validateKdCluster } from '../src/webhooks/index.js';
import { decodePatch, exampleWorld, fixture, NS } from './support.js';

const NOTEBOOK_ALLOWED = '{category: "training"}, {category: "streaming", version: ">=2.4 <3"}';
const PG_NOT_ALLOWED = `cluster "pg-main" uses app "postgres" (category "database", distroID "bitnami/postgresql", version "12.4.0"): connectable_to of app "jupyter-notebook" does not allow it; allowed: ${NOTEBOOK_ALLOWED}`;

async function run(webhook: Webhook, review: AdmissionReview, world = exampleWorld(), rules = {}) {
  const out = await runWebhook(webhook, review, world.deps(rules));
  return { ...out, world, response: out.review.response };
}

function applyPatch(doc: unknown, patch: string | undefined): unknown {
  return jsonpatch.applyPatch(structuredClone(doc), decodePatch(patch) as Operation[]).newDocument;
}

describe('validate-kdcluster', () => {
  it('denies a connection connectable_to forbids, naming the cluster, its app, category and the allowed entries', async () => {
    const review = fixture('validate-kdcluster-create-denied');
    const { review: out, response } = await run(validateKdCluster, review);
    expect(out.apiVersion).toBe('admission.k8s.io/v1');
    expect(out.kind).toBe('AdmissionReview');
    expect(response).toEqual({
      uid: review.request.uid,
      allowed: false,
      status: {
        code: 403,
        reason: 'Forbidden',
        message: `KubeDirectorCluster ${NS}/notebook-sql is not valid (1 problem):\n- spec.connections.clusters[0]: ${PG_NOT_ALLOWED}`,
      },
    });
  });

  it('names every violation at once, one line each with its field path', async () => {
    const { response, world, decision } = await run(
      validateKdCluster,
      fixture('validate-kdcluster-create-many-problems'),
    );
    expect(response.allowed).toBe(false);
    expect(response.status?.message.split('\n')).toEqual([
      `KubeDirectorCluster ${NS}/multi is not valid (8 problems):`,
      `- spec.connections.clusters[0]: cluster "ghost" not found in namespace "${NS}"`,
      `- spec.connections.clusters[1]: ${PG_NOT_ALLOWED}`,
      '- spec.connections.clusters[2]: a cluster cannot connect to itself ("multi")',
      '- spec.connections.clusters[3]: duplicate entry "ghost" (also at index 0)',
      `- spec.connections.configmaps[0]: configmap "no-such-cm" not found in namespace "${NS}"`,
      '- spec.connections.configmaps[1]: configmap "plain-cm" lacks label kubedirector.hpe.com/cmType; add it (its value groups the ConfigMap in configmeta) to make it connectable',
      `- spec.connections.secrets[0]: secret "no-such-secret" not found in namespace "${NS}"`,
      '- spec.connections.secrets[1]: secret "plain-secret" lacks label kubedirector.hpe.com/secretType; add it (its value groups the Secret in configmeta) to make it connectable',
    ]);
    expect(decision.fields).toHaveLength(8);
    // Cache misses were read live, ConfigMaps and Secrets as metadata only; each object once per review.
    expect(world.liveCalls).toEqual([
      {
        path: `/apis/kubedirector.hpe.com/v1beta1/namespaces/${NS}/kubedirectorclusters/ghost`,
        accept: 'application/json',
      },
      {
        path: `/api/v1/namespaces/${NS}/configmaps/no-such-cm`,
        accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      },
      {
        path: `/api/v1/namespaces/${NS}/configmaps/plain-cm`,
        accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      },
      {
        path: `/api/v1/namespaces/${NS}/secrets/no-such-secret`,
        accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      },
      {
        path: `/api/v1/namespaces/${NS}/secrets/plain-secret`,
        accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
      },
    ]);
  });

  it('admits allowed connections from the caches alone, and a dry run gets exactly the same answer', async () => {
    const dry = fixture('validate-kdcluster-create-allowed');
    expect(dry.request.dryRun).toBe(true);
    const real = structuredClone(dry);
    real.request.dryRun = false;
    const a = await run(validateKdCluster, dry);
    const b = await run(validateKdCluster, real);
    expect(a.response).toEqual({ uid: dry.request.uid, allowed: true });
    expect(b.review).toEqual(a.review);
    expect(a.world.liveCalls).toEqual([]);
    expect(a.world.lookups.every((l) => l.endsWith(':cache'))).toBe(true);
  });

  it('finds an object created a moment ago (not yet in the cache) with a live read', async () => {
    const world = exampleWorld();
    world.configmaps.items.delete(`${NS}/model-prediction`);
    world.server.set(`/api/v1/namespaces/${NS}/configmaps/model-prediction`, {
      kind: 'PartialObjectMetadata',
      metadata: { name: 'model-prediction', namespace: NS, labels: { 'kubedirector.hpe.com/cmType': 'model' } },
    });
    const { response } = await run(validateKdCluster, fixture('validate-kdcluster-create-allowed'), world);
    expect(response.allowed).toBe(true);
    expect(world.lookups).toContain('configmap:live');
  });

  it('lets an unrelated update through when an existing connection dangles, with a warning', async () => {
    const review = fixture('validate-kdcluster-update-dangling');
    const { response } = await run(validateKdCluster, review);
    expect(response).toEqual({
      uid: review.request.uid,
      allowed: true,
      warnings: [
        `spec.connections.clusters[0]: cluster "retired" not found in namespace "${NS}"; kept because it was connected before this change`,
      ],
    });
  });

  it("refuses a cluster connection added while the cluster's own app is missing, naming the app", async () => {
    const review = fixture('mutate-kdcluster-update-connection-added');
    const world = exampleWorld();
    world.apps.items.delete(`${NS}/jupyter-notebook`);
    const object = review.request.object as { spec: { connections: { clusters: string[] } } };
    object.spec.connections.clusters = ['kafka-events'];
    const { response } = await run(validateKdCluster, review, world);
    expect(response.allowed).toBe(false);
    expect(response.status?.message).toContain(
      `- spec.connections.clusters[0]: this cluster's app "jupyter-notebook" was not found in namespace "${NS}" or in the system catalog (namespace "kd-system"), so connectable_to cannot be checked`,
    );
  });

  it('denies lowering spec.configMetaGenerator', async () => {
    const { response } = await run(validateKdCluster, fixture('validate-kdcluster-update-lowered'));
    expect(response.allowed).toBe(false);
    expect(response.status?.message).toBe(
      `KubeDirectorCluster ${NS}/analyst is not valid (1 problem):\n- spec.configMetaGenerator: may not be lowered (from 5 to 2); it counts configmeta regenerations and only goes up`,
    );
  });

  it('refuses Secret connections without reading Secrets when they are disabled', async () => {
    const { response, world } = await run(
      validateKdCluster,
      fixture('validate-kdcluster-create-allowed'),
      exampleWorld(),
      { secretConnections: false },
    );
    expect(response.status?.message).toBe(
      `KubeDirectorCluster ${NS}/notebook is not valid (1 problem):\n- spec.connections.secrets[0]: secret connections are disabled in this installation (chart value secretConnections.enabled)`,
    );
    expect(world.lookups.filter((l) => l.startsWith('secret'))).toEqual([]);
  });

  it('warns (allowed) when a newly connected cluster has no ready members', async () => {
    const review = fixture('validate-kdcluster-create-allowed');
    const world = exampleWorld();
    const training = world.clusters.get(NS, 'training-cluster')!;
    world.clusters.put({ ...training, status: {} });
    const { response } = await run(validateKdCluster, review, world);
    expect(response.allowed).toBe(true);
    expect(response.warnings).toEqual([
      'spec.connections.clusters[0]: cluster "training-cluster" has no ready members yet; its section of configmeta fills in as they come up',
    ]);
  });
});

describe('mutate-kdcluster', () => {
  it('sets the generator to 1 when a cluster is created with connections', async () => {
    const review = fixture('mutate-kdcluster-create-with-connections');
    const { response } = await run(mutateKdCluster, review);
    expect(response.uid).toBe(review.request.uid);
    expect(response.allowed).toBe(true);
    expect(response.patchType).toBe('JSONPatch');
    expect(decodePatch(response.patch)).toEqual([{ op: 'add', path: '/spec/configMetaGenerator', value: 1 }]);
    const patched = applyPatch(review.request.object, response.patch) as { spec: { configMetaGenerator: number } };
    expect(patched.spec.configMetaGenerator).toBe(1);
  });

  it('refuses a generator that is not a whole number (the string "5") instead of replacing it', async () => {
    const review = fixture('mutate-kdcluster-create-with-connections');
    (review.request.object as { spec: Record<string, unknown> }).spec.configMetaGenerator = '5';
    const { response } = await run(mutateKdCluster, review);
    expect(response).toEqual({
      uid: review.request.uid,
      allowed: false,
      status: {
        code: 403,
        reason: 'Forbidden',
        message: `KubeDirectorCluster ${NS}/${review.request.name} is not valid (1 problem):\n- spec.configMetaGenerator: must be a whole number (0 or more), not the string "5"; leave it out of manifests and the webhook sets it`,
      },
    });
  });

  it('sends no patch and no patchType when nothing changes', async () => {
    for (const name of ['mutate-kdcluster-create-without-connections', 'mutate-kdcluster-update-reordered']) {
      const review = fixture(name);
      const { response } = await run(mutateKdCluster, review);
      expect(response).toEqual({ uid: review.request.uid, allowed: true });
    }
  });

  it('restores the stored generator when the request leaves it out', async () => {
    const { response } = await run(mutateKdCluster, fixture('mutate-kdcluster-update-generator-absent'));
    expect(decodePatch(response.patch)).toEqual([{ op: 'add', path: '/spec/configMetaGenerator', value: 4 }]);
  });

  it('raises the stored generator by exactly one when a connection is added (also on a dry run)', async () => {
    const review = fixture('mutate-kdcluster-update-connection-added');
    expect(review.request.dryRun).toBe(true);
    const { response } = await run(mutateKdCluster, review);
    expect(decodePatch(response.patch)).toEqual([{ op: 'add', path: '/spec/configMetaGenerator', value: 5 }]);
  });

  it('makes no lookups (deterministic from the request alone)', async () => {
    const { world } = await run(mutateKdCluster, fixture('mutate-kdcluster-update-connection-added'));
    expect(world.lookups).toEqual([]);
  });
});

describe('validate-kdapp', () => {
  it('denies a malformed connectable_to with every field path', async () => {
    const review = fixture('validate-kdapp-create-invalid');
    const { response } = await run(validateKdApp, review);
    expect(response.allowed).toBe(false);
    expect(response.status?.code).toBe(403);
    expect(response.status?.message.split('\n')).toEqual([
      `KubeDirectorApp ${NS}/broken-app is not valid (2 problems):`,
      '- spec.connectable_to[0]: empty entry matches no cluster; give at least one of category, distroID, version',
      '- spec.connectable_to[1].version: ">>=2 <" is neither a version (e.g. "2.4.5") nor a valid semver range (e.g. ">=2.4 <3")',
    ]);
  });

  it('warns, naming the clusters, when an update tightens connectable_to', async () => {
    const { response } = await run(validateKdApp, fixture('validate-kdapp-update-tightened'));
    expect(response.allowed).toBe(true);
    expect(response.warnings).toEqual([
      `connectable_to of app "jupyter-notebook" now forbids 1 existing connection(s): ${NS}/notebook → cluster "spark-logs-nightly" (app "spark-streaming" (category "streaming", distroID "bluedata/spark", version "2.4.7")). They stay in the clusters' specs but are left out of configmeta (status NotConnectable) until allowed again`,
    ]);
  });

  it('warns when an app deleted and re-created forbids connections its clusters still list', async () => {
    const review = fixture('validate-kdapp-update-tightened');
    review.request.operation = 'CREATE';
    delete review.request.oldObject;
    const world = exampleWorld();
    world.apps.items.delete(`${NS}/jupyter-notebook`);
    const { response } = await run(validateKdApp, review, world);
    expect(response.allowed).toBe(true);
    expect(response.warnings).toEqual([
      `connectable_to of app "jupyter-notebook" now forbids 1 existing connection(s): ${NS}/notebook → cluster "spark-logs-nightly" (app "spark-streaming" (category "streaming", distroID "bluedata/spark", version "2.4.7")). They stay in the clusters' specs but are left out of configmeta (status NotConnectable) until allowed again`,
    ]);
  });
});

describe('mutate-pod', () => {
  it('injects the guestconfig sidecar with the configured image and mounts the emptyDir in the app container', async () => {
    const review = fixture('mutate-pod-member');
    const world = exampleWorld();
    const deps = { ...world.deps(), delivery: { image: 'registry.invalid/kd-guestconfig:7' } };
    const { review: out, decision } = await runWebhook(mutatePod, review, deps);
    expect(out.response.patchType).toBe('JSONPatch');
    const pod = applyPatch(review.request.object, out.response.patch) as {
      spec: {
        volumes: { name: string }[];
        initContainers: { name: string; image: string; restartPolicy?: string }[];
        containers: { volumeMounts: unknown[] }[];
      };
    };
    expect(pod.spec.volumes.map((v) => v.name)).toEqual([
      'scratch',
      'kd-configmeta',
      'kd-configmeta-private',
      'kd-guestconfig',
      'kd-guestconfig-tools',
    ]);
    expect(pod.spec.initContainers.map((c) => [c.name, c.image, c.restartPolicy])).toEqual([
      ['kd-guestconfig', 'registry.invalid/kd-guestconfig:7', 'Always'],
      ['kd-guestconfig-seed-0', 'bluedata/kd-notebook:1.3', undefined],
    ]);
    // Only the sidecar's subdirectory of the emptyDir (never its world-writable root).
    const mount = { name: 'kd-guestconfig', mountPath: '/etc/guestconfig', subPath: 'guestconfig' };
    expect(pod.spec.containers[0]!.volumeMounts).toEqual([mount]);
    // KubeDirector delivers to the container named app only; the pod's other container is unchanged.
    expect(pod.spec.containers[1]!.volumeMounts).toEqual([{ name: 'scratch', mountPath: '/scratch' }]);
    expect(decision.note).toBe('sidecar kd-guestconfig delivers /etc/guestconfig to app (seeded from 1 image(s))');
    // Without a configured image: the default one.
    const { response } = await run(mutatePod, fixture('mutate-pod-member'));
    const dflt = applyPatch(review.request.object, response.patch) as { spec: { initContainers: { image: string }[] } };
    expect(dflt.spec.initContainers[0]!.image).toBe('kd.invalid/kd-guestconfig:local');
  });

  it('leaves an opted-out pod and a pod without the kdcluster label alone', async () => {
    const optedOut = fixture('mutate-pod-opted-out');
    expect((await run(mutatePod, optedOut)).response).toEqual({ uid: optedOut.request.uid, allowed: true });
    const plain = fixture('mutate-pod-member');
    (plain.request.object as { metadata: { labels: object } }).metadata.labels = { app: 'web' };
    const { response, decision } = await run(mutatePod, plain);
    expect(response).toEqual({ uid: plain.request.uid, allowed: true });
    expect(decision.note).toBe('not a member pod (no kubedirector.hpe.com/kdcluster label)');
  });
});

describe('the envelope', () => {
  it('answers a v1beta1 review in v1beta1, echoing the uid', async () => {
    const review = fixture('review-v1beta1');
    const { review: out } = await run(validateKdCluster, review);
    expect(out.apiVersion).toBe('admission.k8s.io/v1beta1');
    expect(out.response.uid).toBe('4d5e6f70-0000-4000-8000-00000000d001');
    expect(out.response.allowed).toBe(true);
  });

  it('does not judge other operations, subresources or kinds, and makes no lookups for them', async () => {
    const del = fixture('validate-kdcluster-create-denied');
    del.request.operation = 'DELETE';
    const status = fixture('validate-kdcluster-create-denied');
    status.request.subResource = 'status';
    const pod = fixture('mutate-pod-member');
    for (const review of [del, status, pod]) {
      const { response, world } = await run(validateKdCluster, review);
      expect(response).toEqual({ uid: review.request.uid, allowed: true });
      expect(world.lookups).toEqual([]);
    }
  });

  it('answers 400 inside the review when the object or an UPDATE oldObject is missing', async () => {
    const noObject = fixture('validate-kdcluster-create-denied');
    delete noObject.request.object;
    expect((await run(validateKdCluster, noObject)).response.status).toEqual({
      code: 400,
      reason: 'BadRequest',
      message: 'request.object is missing or not an object',
    });
    const noOld = fixture('mutate-kdcluster-update-reordered');
    noOld.request.oldObject = null;
    expect((await run(mutateKdCluster, noOld)).response.status?.message).toBe(
      'request.oldObject is missing or not an object on an UPDATE',
    );
  });

  it('fills namespace and name from the request when the object lacks them', async () => {
    const review = fixture('validate-kdcluster-create-denied');
    const obj = review.request.object as { metadata: Record<string, unknown> };
    obj.metadata = {};
    const { response } = await run(validateKdCluster, review);
    expect(response.status?.message).toMatch(new RegExp(`^KubeDirectorCluster ${NS}/notebook-sql is not valid`));
  });

  it('propagates a lookup failure (the HTTP layer turns it into a 500)', async () => {
    const world = exampleWorld();
    const deps = world.deps();
    deps.lookup.getCluster = async () => {
      throw new Error('GET …/kubedirectorclusters/pg-main: timed out after 3000 ms');
    };
    await expect(runWebhook(validateKdCluster, fixture('validate-kdcluster-create-denied'), deps)).rejects.toThrow(
      'timed out',
    );
  });
});

describe('one apply names every problem (the mutating webhook answers before the schema)', () => {
  it('mutate-kdcluster denies with every problem when the schema would refuse some of them first', async () => {
    const review = fixture('validate-kdcluster-create-many-problems');
    const mutated = await run(mutateKdCluster, review);
    const validated = await run(validateKdCluster, fixture('validate-kdcluster-create-many-problems'));
    expect(mutated.response.allowed).toBe(false);
    // The same answer, every line, as the validating webhook would give if the schema let it speak.
    expect(mutated.response.status).toEqual(validated.response.status);
    expect(mutated.response.status?.message).toContain('(8 problems)');
    expect(mutated.response.patch).toBeUndefined();
  });

  it('mutate-kdcluster leaves it to the schema when the schema names every problem itself', async () => {
    const review = fixture('mutate-kdcluster-create-with-connections');
    const spec = (review.request.object as { spec: { connections: { clusters: string[] } } }).spec;
    const name = review.request.name as string;
    spec.connections.clusters = [...spec.connections.clusters, ...spec.connections.clusters, name];
    const { response } = await run(mutateKdCluster, review);
    // A repeat and a self-connection and nothing else: the API server's schema answer is complete.
    expect(response.allowed).toBe(true);
  });

  it('mutate-kdcluster looks nothing up and patches as before when the schema has nothing to refuse', async () => {
    const review = fixture('validate-kdcluster-create-denied');
    const { response, world } = await run(mutateKdCluster, review);
    // Only lookup-based problems: left to the validating webhook, which runs after the schema.
    expect(response.allowed).toBe(true);
    expect(world.liveCalls).toEqual([]);
  });
});

describe('kubedirector mode and the KubeDirector guard', () => {
  it('kubedirector mode: validating answers are the default mode answers, word for word', async () => {
    for (const name of ['validate-kdcluster-create-denied', 'validate-kdcluster-create-many-problems']) {
      const plain = await run(validateKdCluster, fixture(name));
      const kd = await run(validateKdCluster, fixture(name), exampleWorld(), { kubedirector: true });
      expect(kd.response).toEqual(plain.response);
    }
  });

  it('kubedirector mode: the mutating webhooks change nothing', async () => {
    const { response } = await run(
      mutateKdCluster,
      fixture('mutate-kdcluster-create-with-connections'),
      exampleWorld(),
      { kubedirector: true },
    );
    expect(response).toEqual({ uid: expect.any(String), allowed: true });
  });

  it('while the guard refuses: validating webhooks deny with its sentence, mutation stops, deletions and unchanged specs pass', async () => {
    const refusal = 'kd-connections admission is not acting: … set kubedirector.enabled=true …';
    const world = exampleWorld();
    const deps = { ...world.deps({}), refusal: () => refusal };
    const denied = await runWebhook(validateKdCluster, fixture('mutate-kdcluster-create-with-connections'), deps);
    expect(denied.review.response.allowed).toBe(false);
    expect(denied.review.response.status?.message).toBe(refusal);
    const app = fixture('validate-kdcluster-create-denied');
    expect(
      (
        await runWebhook(
          validateKdApp,
          {
            ...app,
            request: {
              ...app.request,
              kind: { group: 'kubedirector.hpe.com', version: 'v1beta1', kind: 'KubeDirectorApp' },
            },
          },
          deps,
        )
      ).review.response.allowed,
    ).toBe(false);
    const mutated = await runWebhook(mutateKdCluster, fixture('mutate-kdcluster-create-with-connections'), deps);
    expect(mutated.review.response).toEqual({ uid: expect.any(String), allowed: true });
    const update = fixture('mutate-kdcluster-update-reordered');
    const unchanged = structuredClone(update);
    (unchanged.request as { object: unknown }).object = structuredClone(unchanged.request.oldObject);
    expect((await runWebhook(validateKdCluster, unchanged, deps)).review.response.allowed).toBe(true);
    const deleting = structuredClone(update);
    (deleting.request.object as { metadata: Record<string, unknown> }).metadata.deletionTimestamp =
      '2026-01-01T00:00:00Z';
    expect((await runWebhook(validateKdCluster, deleting, deps)).review.response.allowed).toBe(true);
  });
});
