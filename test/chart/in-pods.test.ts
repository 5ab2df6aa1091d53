/**
 * The chart with its services running IN PODS on the test node, installed the way a user installs a
 * release: `release()` (what `npm run release` runs) builds the three images, pushes them with crane to a
 * real registry on 127.0.0.1 (CNCF Distribution) and the chart as an OCI artifact with helm; `helm install
 * oci://…` by version, images by digest, and the node's containerd pulls them from that registry (no image
 * import on this path). `helm install` rolls out both Deployments, the
 * webhooks answer through the API server, a running member pod holds its configmeta file, the reconciler
 * leads with its projected ServiceAccount token, and `helm upgrade` to rebuilt images rolls both
 * Deployments while admissions keep flowing, without one failing.
 *
 * This node has no kube-proxy and no pod network the API server can reach. The chart's values put both
 * services on the host network on 127.0.0.1 (no declared ports then: they would be hostPorts, which the
 * scheduler refuses to place twice on one node; the new pod of a rolling update binds beside the old one,
 * SO_REUSEPORT) and give them KUBERNETES_SERVICE_HOST/PORT naming the API server's loopback address (what a
 * cluster without kube-proxy sets, as Cilium's k8sServiceHost does). A Helm post-renderer adds only what no
 * value can say: the webhooks' clientConfig as a url on 127.0.0.1 instead of the Service (the chart's url
 * mode renders no admission Deployment), and a startup probe that asks whether the container's own process
 * listens (an HTTP probe of 127.0.0.1 may reach the pod being replaced). net.ipv4.tcp_migrate_req=1 during
 * the upgrade moves connections queued on the closing listener to the new one. Everything else — RBAC,
 * readiness and liveness probes, security context, strategy, the images, the `helm test` pod — is the
 * chart's.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { trustLoopbackRegistry } from '../controlplane/containerd.js';
import { freePort } from '../controlplane/net.js';
import { TEST_NODE_TOLERATION } from '../controlplane/node.js';
import { buildServiceImage, type BuiltImage } from '../../images/src/service-images.js';
import { pushImages } from '../../images/src/push.js';
import { release as publishRelease, type Release } from '../../images/src/release.js';
import { helmEnv, useTestEnv } from '../support/cluster.js';
import { startRegistry, type LocalRegistry } from '../support/oci-registry.js';
import { installCrds } from '../support/crds.js';
import { createNamespace } from '../support/namespaces.js';
import { getJson, kubectlOk } from '../support/kd-objects.js';
import { eventually, ok, repoRoot } from '../support/processes.js';
import { WEBHOOK_NAMES } from '../support/webhook-configurations.js';
import { runningPod, waitForNode } from '../node/node-support.js';
import { EXAMPLES, TempDir, parseDocs, randomName, type Doc } from './chart-support.js';

const env = useTestEnv();
const ns = env.namespace;
const apps = `${ns}-apps`.slice(0, 63);
const release = randomName('kdp');
const fullname = `${release}-kd-connections`;
const TLS_SECRET = 'kd-in-pods-webhook-tls';
/** Where a member container reads its configmeta (the in-pod layout may change; this path stays). */
const CONFIGMETA_PATH = '/etc/guestconfig/configmeta.json';
const DENIED = join(EXAMPLES, 'denied', 'notebook-to-postgres.yaml');
const MIGRATE_REQ = '/proc/sys/net/ipv4/tcp_migrate_req';

const dir = new TempDir();
const images: Record<'v1' | 'v2', BuiltImage[]> = { v1: [], v2: [] };
let registry: LocalRegistry | undefined;
/** v1: the release (three images and the chart) as pushed. */
let v1: Release;
/** `--set` values that pin each version's images by digest. */
const pinned: Record<'v1' | 'v2', string[]> = { v1: [], v2: [] };
const figures: Record<string, unknown> = {};
let valuesFile: string;
let postRenderer: string;
let installed = false;

const digestOf = (v: 'v1' | 'v2', image: string) => images[v].find((i) => i.image === image)!.digest;
/** What a pod of `image` runs when the chart pins it by digest in this registry. */
const pulledRef = (v: 'v1' | 'v2', image: string) => `${registry!.host}/kd-connections/${image}@${digestOf(v, image)}`;

/**
 * `node -e` in the container: exits 0 once the container's own process (PID 1) has a socket listening on
 * port P. On the host network an HTTP probe of 127.0.0.1:P may be answered by the pod being replaced, so
 * the surge pod would count as started before it listens; this tells the two apart.
 */
const OWN_LISTENER_CHECK = `const fs = require('fs');
const own = new Set(fs.readdirSync('/proc/1/fd').map((f) => { try { return fs.readlinkSync('/proc/1/fd/' + f); } catch { return ''; } })
  .filter((l) => l.startsWith('socket:[')).map((l) => l.slice(8, -1)));
const rows = ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((f) => { try { return fs.readFileSync(f, 'utf8').split('\\n').slice(1); } catch { return []; } });
const listening = rows.map((r) => r.trim().split(/\\s+/)).some((c) => c[3] === '0A' && parseInt(c[1].split(':').pop(), 16) === P && own.has(c[9]));
process.exit(listening ? 0 : 1);`;

/**
 * Adapts the rendered manifests to this node where the chart's values cannot (see the file comment): a
 * startup probe that tells the container's own listener from the replaced pod's, and the webhooks called
 * at a url on 127.0.0.1 (the chart's url mode renders no admission Deployment). A post-renderer reads stdin.
 */
function postRendererScript(admissionPort: number, startupProbes = true): string {
  const yamlModule = join(repoRoot, 'node_modules', 'yaml', 'dist', 'index.js');
  return `#!/usr/bin/env node
import YAML from ${JSON.stringify(yamlModule)};
import { readFileSync } from 'node:fs';
const docs = YAML.parseAllDocuments(readFileSync(0, 'utf8')).map((d) => d.toJSON()).filter(Boolean);
for (const d of docs) {
  if (d.kind === 'Deployment' && ${startupProbes}) {
    for (const c of d.spec.template.spec.containers) {
      const port = Number((c.args.find((a) => /^--(port|metrics-bind-address)=/.test(a)) ?? '').split(/[=:]/).pop());
      c.startupProbe = {
        exec: { command: ['/usr/local/bin/node', '-e', 'const P = ' + port + ';\\n' + ${JSON.stringify(OWN_LISTENER_CHECK)}] },
        periodSeconds: 1, timeoutSeconds: 10, failureThreshold: 120,
      };
    }
  }
  if (d.kind === 'ValidatingWebhookConfiguration' || d.kind === 'MutatingWebhookConfiguration') {
    for (const w of d.webhooks) {
      const path = w.clientConfig.service.path ?? '';
      w.clientConfig = { url: 'https://127.0.0.1:${admissionPort}' + path, caBundle: w.clientConfig.caBundle };
    }
  }
}
process.stdout.write(docs.map((d) => '---\\n' + YAML.stringify(d)).join(''));
`;
}

/**
 * v2 for the rolling upgrade: the service images rebuilt (a label differs, so a new digest), pushed beside
 * v1's under their own tag.
 */
function buildAndPushV2(): BuiltImage[] {
  const t0 = Date.now();
  const tag = `${v1.chart.appVersion}-inpods-v2`;
  const opts = {
    repoRoot,
    outDir: join(dir.path, 'v2'),
    tag,
    registry: registry!.host,
    revision: 'in-pods-test',
    labels: { 'dev.kd-connections.test.rebuild': 'v2' },
  };
  const built = (['admission', 'reconciler'] as const).map((s) => buildServiceImage(s, opts));
  const pushed = pushImages(built, registry!.host, tag, { insecure: true });
  figures['build and push v2 (2 images), s'] = (Date.now() - t0) / 1000;
  figures['pushed v2'] = pushed.map((p) => `${p.reference} ${p.digest}`);
  return built;
}

/** What `kubectl rollout status` waits for, polled (one kubectl call may not outlive 60 s here). */
async function rolledOut(component: string): Promise<void> {
  const name = `${fullname}-${component}`;
  try {
    await eventually(
      `${name} rolled out`,
      async () => {
        const d = await getJson(env, ['deployment', name], ns);
        const s = d.status ?? {};
        const want = d.spec.replicas;
        return (
          s.observedGeneration >= d.metadata.generation &&
          s.updatedReplicas === want &&
          s.availableReplicas === want &&
          s.replicas === want
        );
      },
      180_000,
    );
  } catch (e) {
    const pods = await env.kubectl(['describe', 'pods', '-l', `app.kubernetes.io/instance=${release}`], {
      namespace: ns,
    });
    const logs = await env.kubectl(
      ['logs', '-l', `app.kubernetes.io/component=${component}`, '--all-containers', '--prefix', '--tail=30'],
      { namespace: ns },
    );
    throw new Error(`${(e as Error).message}\n${pods.stdout.slice(-6000)}\n${logs.stdout.slice(-4000)}`);
  }
}

const helm = async (verb: 'install' | 'upgrade', v: 'v1' | 'v2') => {
  const t0 = Date.now();
  const r = await env.helm([
    verb,
    release,
    v1.chart.reference,
    '--version',
    v1.chart.version,
    '--plain-http',
    '--namespace',
    ns,
    '-f',
    valuesFile,
    ...pinned[v].flatMap((value) => ['--set', value]),
    '--post-renderer',
    postRenderer,
  ]);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  for (const c of ['admission', 'reconciler']) await rolledOut(c);
  figures[`helm ${verb} → both rollouts complete, s`] = (Date.now() - t0) / 1000;
};

const podsOf = async (component: string): Promise<Doc[]> =>
  (
    await getJson(
      env,
      ['pods', '-l', `app.kubernetes.io/instance=${release},app.kubernetes.io/component=${component}`],
      ns,
    )
  ).items;

/** Every pod of the component: Running the given image, Ready (its probes pass), never restarted. */
async function expectHealthy(component: string, image: string, replicas: number): Promise<void> {
  const pods = (await podsOf(component)).filter((p) => !p.metadata.deletionTimestamp);
  expect(pods).toHaveLength(replicas);
  for (const p of pods) {
    const ready = p.status.conditions.find((c: Doc) => c.type === 'Ready');
    const cs = p.status.containerStatuses[0];
    expect({ pod: p.metadata.name, image: p.spec.containers[0].image, ready: ready?.status }).toEqual({
      pod: p.metadata.name,
      image,
      ready: 'True',
    });
    expect({ pod: p.metadata.name, restarts: cs.restartCount }).toEqual({ pod: p.metadata.name, restarts: 0 });
  }
}

beforeAll(async () => {
  const node = await waitForNode();
  await installCrds(env);
  await createNamespace(env.kc, apps);
  // The node pulls from this registry (plain HTTP on loopback), as a user's node pulls from theirs.
  registry = await startRegistry();
  trustLoopbackRegistry(node.registryHosts, registry.host);
  const t0 = Date.now();
  v1 = publishRelease({
    repoRoot,
    target: registry.host,
    plainHttp: true,
    helm: env.info.binDir.helm,
    helmEnv: { ...process.env, ...helmEnv(env.info) },
    build: { outDir: join(dir.path, 'v1'), revision: 'in-pods-test' },
  });
  figures['release v1 (build and push 3 images, package and push the chart), s'] = (Date.now() - t0) / 1000;
  figures['released'] = [
    ...v1.images.map((i) => `${i.reference} ${i.digest}`),
    `${v1.chart.reference}:${v1.chart.version} ${v1.chart.digest}`,
  ];
  images.v1 = v1.images.map((i) => i.built);
  images.v2 = buildAndPushV2();
  pinned.v1 = v1.values;
  // v2 moves the services to their rebuilt digests; the sidecar stays v1's.
  pinned.v2 = [
    ...v1.values,
    `admission.image.digest=${digestOf('v2', 'admission')}`,
    `reconciler.image.digest=${digestOf('v2', 'reconciler')}`,
  ];

  // The webhook serving pair the harness made for 127.0.0.1, as the chart's `secret` certificate mode wants.
  const tls = dir.file('tls.crt', env.info.webhookServing.certPem, 0o644);
  const key = dir.file('tls.key', env.info.webhookServing.keyPem);
  ok(
    await env.kubectl(['create', 'secret', 'tls', TLS_SECRET, `--cert=${tls}`, `--key=${key}`], { namespace: ns }),
    'create tls secret',
  );
  const admissionPort = await freePort();
  const apiPort = Number(new URL(env.info.server).port);
  postRenderer = dir.file('post-render.mjs', postRendererScript(admissionPort), 0o755);
  chmodSync(postRenderer, 0o755);
  // Host network on loopback; the API server's loopback address as the in-cluster one (what a cluster
  // without kube-proxy sets, as Cilium's k8sServiceHost does).
  const onThisNode = {
    hostNetwork: true,
    bindAddress: '127.0.0.1',
    tolerations: [TEST_NODE_TOLERATION],
    extraEnv: [
      { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
      { name: 'KUBERNETES_SERVICE_PORT', value: String(apiPort) },
    ],
  };
  valuesFile = dir.file(
    'values.json',
    JSON.stringify({
      // The harness applied the CRDs on the shared control plane; Helm refuses to adopt CRDs it did not install.
      crds: { install: false },
      certificates: { mode: 'secret', secret: { name: TLS_SECRET } },
      webhook: {
        caBundle: Buffer.from(env.info.webhookCaPem).toString('base64'),
        timeoutSeconds: 10,
      },
      watchNamespaces: [apps],
      // image.registry, the repositories and the digests come from the release's values (helm --set).
      admission: {
        replicas: 1,
        ...onThisNode,
        port: admissionPort,
        preStopSleepSeconds: 3,
        // After SIGTERM, answer for 2 s more with Connection: close, so the API server retires its kept-alive
        // connections to the old pod on a response instead of racing a request against their close.
        extraArgs: ['--shutdown-delay=2'],
      },
      reconciler: {
        replicas: 1,
        ...onThisNode,
        metricsPort: await freePort(),
      },
      // helm test's pod asks the admission pod on the node's loopback (hooks are not post-rendered).
      tests: { hostNetwork: true, admissionAddress: `127.0.0.1:${admissionPort}` },
    }),
  );
}, 900_000);

afterAll(async () => {
  if (installed) await env.helm(['uninstall', release, '--namespace', ns, '--wait']);
  await env.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: apps })
    .catch(() => undefined);
  await registry?.stop();
  dir.remove();
  console.log(
    `in-pods figures: ${JSON.stringify({ ...figures, images: images.v1.map(({ name, digest, bytes }) => ({ name, digest, bytes })) }, null, 1)}`,
  );
}, 120_000);

describe('the chart with both services in pods on the node', () => {
  it('installs; both Deployments roll out from the built images, probes green, no restarts', async () => {
    await helm('install', 'v1');
    installed = true;
    await expectHealthy('admission', pulledRef('v1', 'admission'), 1);
    await expectHealthy('reconciler', pulledRef('v1', 'reconciler'), 1);
  }, 300_000);

  it('came from the registry: the chart by version, every image by digest, pulled by the node', async () => {
    const log = registry!.log();
    // helm pulled the chart artifact by its version tag.
    expect(log).toMatch(
      new RegExp(`"(GET|HEAD) /v2/charts/kd-connections/manifests/${v1.chart.version} HTTP[^"]*" 200`),
    );
    for (const image of ['admission', 'reconciler'])
      expect({
        image,
        pulled: new RegExp(`"GET /v2/kd-connections/${image}/manifests/${digestOf('v1', image)} HTTP[^"]*" 200`).test(
          log,
        ),
      }).toEqual({ image, pulled: true });
    // The released chart defaults to its release's registry (the tag is its appVersion).
    const shown = await env.helm(['show', 'values', v1.chart.reference, '--version', v1.chart.version, '--plain-http']);
    expect({ code: shown.code, registry: parseDocs(shown.stdout)[0]?.image?.registry }).toEqual({
      code: 0,
      registry: registry!.host,
    });
    // The chart's own pods name the images exactly as the release's values pin them.
    const admissionPod = (await podsOf('admission'))[0]!;
    expect(admissionPod.spec.containers[0].image).toBe(pulledRef('v1', 'admission'));
  }, 60_000);

  it('the reconciler leads through the Lease with its projected ServiceAccount token', async () => {
    const [pod] = await podsOf('reconciler');
    expect(pod!.spec.serviceAccountName).toBe(`${fullname}-reconciler`);
    expect(pod!.spec.containers[0].args.join(' ')).not.toContain('--kubeconfig');
    const lease = await eventually('the reconciler pod holds the Lease', async () => {
      const l = await getJson(env, ['lease', `${fullname}-reconciler`], ns);
      return l.spec.holderIdentity === pod!.metadata.name ? l : undefined;
    });
    expect(lease.spec.holderIdentity).toBe(pod!.metadata.name);
  }, 120_000);

  it('enforces the examples through the API server; a running member pod holds its configmeta file', async () => {
    const applied = await env.kubectl(['apply', '-k', EXAMPLES], { namespace: apps });
    expect({ code: applied.code, stdout: applied.stdout }).toEqual({
      code: 0,
      stdout: expect.stringContaining('created'),
    });
    expect((await getJson(env, ['kdcluster', 'notebook'], apps)).spec.configMetaGenerator).toBe(1);
    const denied = await env.kubectl(['apply', '-f', DENIED], { namespace: apps });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`admission webhook "${WEBHOOK_NAMES.validateCluster}" denied the request`);

    const member = runningPod('notebook-controller-0', 'exec sleep 3600', {
      labels: { 'kubedirector.hpe.com/kdcluster': 'notebook', 'kubedirector.hpe.com/role': 'controller' },
    });
    await kubectlOk(env, ['apply', '-f', '-'], { namespace: apps, input: JSON.stringify(member) });
    const r = await env.kubectl(['wait', '--for=condition=Ready', '--timeout=120s', 'pod/notebook-controller-0'], {
      namespace: apps,
    });
    expect(r.code).toBe(0);
    const doc = await eventually(
      'configmeta in the member container',
      async () => {
        const c = await env.kubectl(['exec', 'notebook-controller-0', '--', 'cat', CONFIGMETA_PATH], {
          namespace: apps,
        });
        if (c.code !== 0 || !c.stdout.trim()) return undefined;
        const parsed = JSON.parse(c.stdout);
        return Object.keys(parsed.connections?.clusters ?? {}).length === 2 ? parsed : undefined;
      },
      90_000,
    );
    expect(Object.keys(doc.connections.clusters).sort()).toEqual(['spark-logs-nightly', 'training-cluster']);
  }, 300_000);

  it('helm upgrade to rebuilt images rolls both Deployments under continuous admissions, none failing', async () => {
    const api = env.kc.makeApiClient(CustomObjectsApi);
    const base = await getJson(env, ['kdcluster', 'notebook'], apps);
    const probe = {
      apiVersion: base.apiVersion,
      kind: base.kind,
      metadata: { name: 'notebook-probe' },
      spec: { ...base.spec, configMetaGenerator: undefined },
    };
    let stop = false;
    const outcome = { admitted: 0, failed: [] as string[] };
    const loop = (async () => {
      while (!stop) {
        try {
          // A server-side dry run passes both webhooks (mutating, then validating) and stores nothing.
          const created = (await api.createNamespacedCustomObject({
            group: 'kubedirector.hpe.com',
            version: 'v1beta1',
            namespace: apps,
            plural: 'kubedirectorclusters',
            body: probe,
            dryRun: 'All',
          })) as Doc;
          if (created.spec.configMetaGenerator !== 1) throw new Error(`not mutated: ${JSON.stringify(created.spec)}`);
          outcome.admitted++;
        } catch (e) {
          outcome.failed.push(String((e as { body?: string }).body ?? e).slice(0, 300));
        }
      }
    })();
    // With SO_REUSEPORT, connections still queued on the old pod's listener when it closes would be reset;
    // this makes the kernel hand them to the new pod's listener instead (Linux >= 5.14; restored below).
    const previousMigrate = readFileSync(MIGRATE_REQ, 'utf8').trim();
    writeFileSync(MIGRATE_REQ, '1');
    try {
      const v1Pods = [...(await podsOf('admission')), ...(await podsOf('reconciler'))].map((p) => p.metadata.name);
      await new Promise((r) => setTimeout(r, 2_000));
      await helm('upgrade', 'v2');
      // The old pods are gone for good before the count ends (the old admission pod's drain included).
      await eventually('old pods gone', async () => {
        const now = [...(await podsOf('admission')), ...(await podsOf('reconciler'))].map((p) => p.metadata.name);
        return v1Pods.every((n) => !now.includes(n)) || undefined;
      });
      await new Promise((r) => setTimeout(r, 2_000));
    } finally {
      stop = true;
      await loop;
      writeFileSync(MIGRATE_REQ, previousMigrate);
    }
    figures['admissions during upgrade'] = outcome.admitted;
    figures['failed admissions during upgrade'] = outcome.failed.length;
    expect(outcome.failed).toEqual([]);
    expect(outcome.admitted).toBeGreaterThan(20);
    await expectHealthy('admission', pulledRef('v2', 'admission'), 1);
    await expectHealthy('reconciler', pulledRef('v2', 'reconciler'), 1);
    const v2digest = images.v2.find((i) => i.image === 'admission')!.digest;
    expect(v2digest).not.toBe(images.v1.find((i) => i.image === 'admission')!.digest);
  }, 400_000);

  it('helm test: /readyz answers 200, and through the API server the webhooks refuse a forbidden connection and give an allowed one its generator', async () => {
    const t0 = Date.now();
    const pods = [`${fullname}-admission-test`, `${fullname}-test-connections`];
    // No --logs: Helm fetches them after the hook-succeeded policy deleted the pod and then fails
    // (helm/helm#9098). A pod exits 0 only when its checks pass; a failed one stays, and its log is shown here.
    const r = await env.helm(['test', release, '--namespace', ns, '--timeout', '120s']);
    figures['helm test, s'] = (Date.now() - t0) / 1000;
    const logs =
      r.code === 0
        ? ''
        : (await Promise.all(pods.map((p) => env.kubectl(['logs', p], { namespace: ns }))))
            .map((l) => l.stdout)
            .join('\n');
    expect({ code: r.code, stdout: r.stdout, logs }).toEqual({
      code: 0,
      stdout: expect.stringMatching(/TEST SUITE:\s+\S+-admission-test[\s\S]*Phase:\s+Succeeded/),
      logs: '',
    });
    expect(r.stdout).toMatch(/TEST SUITE:\s+\S+-test-connections[\s\S]*Phase:\s+Succeeded/);
    // hook-succeeded: the passed test pods and the test's ServiceAccount and RBAC are gone, and so is what it
    // created in the watched namespace, so `helm uninstall` has nothing of it to leave behind.
    for (const p of pods)
      expect((await env.kubectl(['get', 'pod', p], { namespace: ns })).stderr).toContain('NotFound');
    const sa = await env.kubectl(['get', 'serviceaccount', `${fullname}-test-connections`], { namespace: ns });
    expect(sa.stderr).toContain('NotFound');
    const rbac = await env.kubectl(['get', 'role,rolebinding', '-o', 'name'], { namespace: apps });
    expect(rbac.stdout).not.toContain('test-connections');
    const objects = await env.kubectl(['get', 'kubedirectorapps,kubedirectorclusters', '-o', 'name'], {
      namespace: apps,
    });
    expect(objects.stdout).not.toContain('test-connections');
  }, 180_000);

  it('helm uninstall leaves only the CRDs, the Secret we gave it and the digest key', async () => {
    const r = await env.helm(['uninstall', release, '--namespace', ns, '--wait']);
    expect(r.code).toBe(0);
    installed = false;
    await eventually(
      'release pods gone',
      async () => (await podsOf('admission')).length + (await podsOf('reconciler')).length === 0 || undefined,
      120_000,
    );
    const left = parseDocs(
      ok(
        await env.kubectl(['get', 'deploy,svc,sa,role,rolebinding,lease,pdb,secret,configmap,pod', '-o', 'yaml'], {
          namespace: ns,
        }),
        'get leftovers',
      ).stdout,
    )[0]!.items.map((o: Doc) => `${o.kind}/${o.metadata.name}`);
    expect(left.filter((n: string) => n.includes(release) || n.includes('kd-connections'))).toEqual([
      'Secret/kd-connections-digest-key',
    ]);
    expect(left).toContain(`Secret/${TLS_SECRET}`);
    for (const kind of [
      'validatingwebhookconfiguration',
      'mutatingwebhookconfiguration',
      'clusterrole',
      'clusterrolebinding',
      'validatingadmissionpolicy',
      'validatingadmissionpolicybinding',
    ]) {
      const names = ok(await env.kubectl(['get', kind, '-o', 'name'], { namespace: false }), kind).stdout;
      expect(names).not.toContain(fullname);
    }
  }, 180_000);

  it('installs into a namespace that enforces the restricted Pod Security Standard: every pod admitted and started', async () => {
    // The chart's defaults (pod network, no host network), from the release in the registry. This node's
    // pod network cannot reach the API server, so the pods start but do not become Ready here; what is
    // checked is that Pod Security admits every pod the chart makes and that each container runs.
    const restricted = `${ns}-rst`.slice(0, 63);
    const served = `${ns}-rst-apps`.slice(0, 63);
    const rel = `${release}-r`;
    const enforce = {
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/enforce-version': 'latest',
    };
    await createNamespace(env.kc, restricted, { 'kd-test': 'true', ...enforce });
    await createNamespace(env.kc, served);
    // Enforcement is on: a pod that loosens one setting is refused there.
    const loose = runningPod('loose', 'exec sleep 60', {});
    loose.spec.containers[0].securityContext = { privileged: true };
    const refused = await env.kubectl(['create', '-f', '-'], { namespace: restricted, input: JSON.stringify(loose) });
    expect({ code: refused.code, refused: /violates PodSecurity "restricted:latest"/.test(refused.stderr) }).toEqual({
      code: 1,
      refused: true,
    });
    // The webhooks only for the served namespace, by url on 127.0.0.1 where nothing answers (never a Service).
    const renderer = dir.file('post-render-restricted.mjs', postRendererScript(await freePort(), false), 0o755);
    chmodSync(renderer, 0o755);
    const r = await env.helm([
      'install',
      rel,
      v1.chart.reference,
      '--version',
      v1.chart.version,
      '--plain-http',
      '--namespace',
      restricted,
      ...v1.values.flatMap((value) => ['--set', value]),
      '--set',
      'crds.install=false',
      '--set',
      `watchNamespaces={${served}}`,
      '--set',
      'webhook.failurePolicy.validating=Ignore',
      // This node's taint (the harness's test node), tolerated as the pods above tolerate it.
      '--set-json',
      `admission.tolerations=${JSON.stringify([TEST_NODE_TOLERATION])}`,
      '--set-json',
      `reconciler.tolerations=${JSON.stringify([TEST_NODE_TOLERATION])}`,
      '--post-renderer',
      renderer,
    ]);
    try {
      // helm's stderr shown only when it failed (it warns on success).
      expect({ code: r.code, error: r.code === 0 ? '' : r.stderr }).toEqual({ code: 0, error: '' });
      const pods = await eventually(
        'every chart pod in the restricted namespace has its container running',
        async () => {
          const list = (await getJson(env, ['pods', '-l', `app.kubernetes.io/instance=${rel}`], restricted))
            .items as Doc[];
          const running = list.filter((p) => p.status?.containerStatuses?.[0]?.state?.running);
          return list.length === 4 && running.length === 4 ? list : undefined;
        },
        120_000,
      );
      expect(pods.map((p) => p.metadata.labels['app.kubernetes.io/component']).sort()).toEqual([
        'admission',
        'admission',
        'reconciler',
        'reconciler',
      ]);
      for (const p of pods) expect(p.spec.hostNetwork ?? false).toBe(false);
      const events = (await getJson(env, ['events'], restricted)).items as Doc[];
      expect(events.filter((e) => e.reason === 'FailedCreate').map((e) => e.message)).toEqual([]);
    } finally {
      await env.helm(['uninstall', rel, '--namespace', restricted, '--wait']);
      for (const n of [restricted, served])
        await env.kc
          .makeApiClient(CoreV1Api)
          .deleteNamespace({ name: n })
          .catch(() => undefined);
    }
  }, 300_000);
});
