/**
 * Strict mode (`--secret-delivery=private-file`): Secret values reach only root in a running container,
 * end to end, judged by the REAL configcli (test/images/configcli-image.ts, pinned bluek8s/configcli) in
 * the member's `app` container: a kdcluster connects a labelled Secret, the reconciler writes the
 * cluster's private Secret, the pod webhook's kd-guestconfig sidecar installs it as
 * /etc/guestconfig/.priv_configmeta.json and .platform.json (root only). configcli, as root and as a
 * non-root user, answers every namespace a KubeDirector app reads from the public document, before and
 * after an edit; the value itself is only in the private file, which the stock configcli never merges
 * (configcli/namespace/__init__.py calls os.getuid() without importing os — docs say so of this mode).
 * A non-root user is refused the private files; a rotated value reaches them; the public file, the pod and
 * everything else a user reads through the API (pods, kdclusters, events, ConfigMaps) never hold the
 * value, plain or base64.
 */
import { describe, expect, it, jest } from '@jest/globals';
import {
  CONFIGMETA_FILE,
  GUESTCONFIG_DIR,
  PLATFORM_FILE,
  PRIVATE_CONFIGMETA_FILE,
  privateConfigMetaSecretName,
} from '@kd-connections/shared/domain';
import {
  CONFIGCLI_IMAGE,
  catIn,
  configcliGet,
  configcliImage,
  configcliValue,
  execIn,
  type InContainer,
} from '../images/configcli-image.js';
import { useTestEnv } from '../support/cluster.js';
import {
  apply,
  configMap,
  getJson,
  kdApp,
  kdCluster,
  kubectlOk,
  podConfigMeta,
  secret,
} from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { importImages, nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';

// Waits below are bounded at up to 120 s each (a loaded 2-core machine): the test's own limit is above them.
jest.setTimeout(300_000);

const env = useTestEnv();
const POD = 'nb-controller-0';
const VALUE_1 = 'pw-node-first-4b8e21';
const VALUE_2 = 'pw-node-second-c07d95';
const b64 = (s: string) => Buffer.from(s).toString('base64');
const PRIV = `${GUESTCONFIG_DIR}/${PRIVATE_CONFIGMETA_FILE}`;
const PLATFORM = `${GUESTCONFIG_DIR}/${PLATFORM_FILE}`;
const PUBLIC = `${GUESTCONFIG_DIR}/${CONFIGMETA_FILE}`;
const ROOT: InContainer = { pod: POD };
const APP: InContainer = { pod: POD, as: 'app' };

useDeliveryServices(
  env,
  async (node) => {
    await importImages(node, [configcliImage()]);
    await apply(env, [
      kdApp('nb', { category: 'notebook', connectable_to: [{ category: 'training' }] }),
      kdApp('trainer', { category: 'training' }),
      configMap('model', { path: '/models/v1' }),
      secret('db-creds', { token: VALUE_1 }, 'creds'),
      kdCluster('t', 'trainer'),
      kdCluster('nb', 'nb', { clusters: ['t'], configmaps: ['model'], secrets: ['db-creds'] }),
      nodeMemberPod(POD, 'nb', { containers: [{ name: 'app', image: CONFIGCLI_IMAGE, imagePullPolicy: 'Never' }] }),
    ]);
    await waitPodReady(env, POD);
    // The strict mode: in the default mode configmeta.json in the container carries the values
    // (secret-values.test.ts); this file holds the root-only contract of --secret-delivery=private-file.
  },
  { admissionArgs: ['--secret-delivery=private-file'] },
);

/** The Secret entry's token as the private file holds it (read as root with cat, parsed whole). */
const privateToken = async (): Promise<unknown> =>
  JSON.parse(await catIn(env, ROOT, PRIV)).connections?.secrets?.creds?.[0]?.data?.token;

/** Everything a user lists through the API, apart from Secrets, as one text. */
async function apiText(): Promise<string> {
  const r = await kubectlOk(env, ['get', 'pods,kubedirectorclusters,events,configmaps', '-o', 'json']);
  const events = await kubectlOk(env, ['get', 'events.events.k8s.io', '-o', 'json']);
  return r + events;
}

function expectNoValue(text: string, where: string, value: string): void {
  expect([where, text.includes(value)]).toEqual([where, false]);
  expect([where, text.includes(b64(value))]).toEqual([where, false]);
}

/**
 * The namespaces a KubeDirector app's scripts read, as configcli itself lists them: its top-level
 * namespaces that KubeDirector's document has (tenant, auth and platform it does not), each one's keys
 * (configcli prints a namespace's keys comma-separated), and each connected cluster, ConfigMap type and
 * Secret type.
 */
async function namespaces(): Promise<string[]> {
  const keysOf = async (ns: string) =>
    (await configcliValue(env, ROOT, ns))
      .split(',')
      .filter(Boolean)
      .map((k) => `${ns}.${k}`);
  const out: string[] = [];
  for (const ns of ['node', 'version', 'cluster', 'distros', 'services', 'connections']) {
    const keys = ns === 'version' ? [] : await keysOf(ns);
    out.push(ns, ...keys);
    if (ns === 'connections') for (const kind of keys) out.push(...(await keysOf(kind)));
  }
  return out;
}

/** configcli -g of every namespace, as root and as the app user: both must answer, and alike. */
async function answers(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const key of await namespaces()) {
    const [root, app] = await Promise.all([configcliGet(env, ROOT, key), configcliGet(env, APP, key)]);
    expect({ key, root: root.code, app: app.code, stderr: root.stderr + app.stderr }).toEqual({
      key,
      root: 0,
      app: 0,
      stderr: '',
    });
    expect({ key, same: root.stdout === app.stdout }).toEqual({ key, same: true });
    out[key] = root.stdout;
  }
  return out;
}

describe('a Secret connection delivered to root in a running member container', () => {
  it("the reconciler writes the cluster's private Secret", async () => {
    const s = await eventually(
      'the private Secret',
      async () => {
        const r = await env.kubectl(['get', 'secret', privateConfigMetaSecretName('nb'), '-o', 'json']);
        return r.code === 0 ? JSON.parse(r.stdout) : undefined;
      },
      60_000,
    );
    // The reconciler writes one Secret for both modes (the mode is the pod webhook's): the private file's
    // keys, and the sections plus version the sidecar splices in `document` mode (unused in this mode).
    expect(Object.keys(s.data).sort()).toEqual([
      'connections.json',
      'platform.json',
      'priv_configmeta.json',
      'version',
    ]);
  });

  it('root reads the value (base64, as KubeDirector renders it) in .priv_configmeta.json; .platform.json is {}', async () => {
    await eventually(
      'the private files in the container',
      async () => (await privateToken()) === b64(VALUE_1),
      120_000,
      500,
    );
    expect(JSON.parse(await catIn(env, ROOT, PLATFORM))).toEqual({});
    const modes = await execIn(env, ROOT, ['stat', '-c', '%a %u %g %n', PRIV, PLATFORM]);
    expect(modes.stdout).toBe(`600 0 0 ${PRIV}\n600 0 0 ${PLATFORM}\n`);
  });

  it('the real configcli, as root and as the app user, answers every namespace alike; the value is not in its answer', async () => {
    const got = await answers();
    expect(Object.keys(got)).toEqual(
      expect.arrayContaining([
        'node',
        'version',
        'cluster',
        'distros',
        'services',
        'connections',
        'node.role_id',
        'node.fqdn',
        'cluster.name',
        'connections.clusters.t',
        'connections.configmaps.model',
        'connections.secrets.creds',
      ]),
    );
    for (const [key, answer] of Object.entries(got)) expectNoValue(answer, `configcli -g ${key}`, VALUE_1);
    for (const where of [ROOT, APP]) {
      const who = where.as ?? 'root';
      expect([who, await configcliValue(env, where, 'node.role_id')]).toEqual([who, 'controller']);
      expect([who, await configcliValue(env, where, 'cluster.name')]).toEqual([who, 'nb']);
      expect([who, await configcliValue(env, where, 'connections.clusters')]).toEqual([who, 't']);
      expect([who, await configcliValue(env, where, 'connections.configmaps')]).toEqual([who, 'model']);
      expect([who, await configcliValue(env, where, 'connections.secrets')]).toEqual([who, 'creds']);
      expect([who, await configcliValue(env, where, 'connections.configmaps.model.data.path')]).toEqual([
        who,
        '/models/v1',
      ]);
      // The stock configcli never merges the private file (see the header): root gets the redacted value.
      expect([who, await configcliValue(env, where, 'connections.secrets.creds.data.token')]).toEqual([who, '']);
    }
  });

  it('a ConfigMap edit: configcli gives both users the new content, every other namespace unchanged', async () => {
    const before = await answers();
    await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/models/v2"}}']);
    const key = 'connections.configmaps.model.data.path';
    await eventually(
      'the edit visible to configcli for both users',
      async () =>
        (await configcliValue(env, ROOT, key)) === '/models/v2' &&
        (await configcliValue(env, APP, key)) === '/models/v2',
      120_000,
      500,
    );
    const after = await answers();
    const changed = Object.keys(after).filter((k) => after[k] !== before[k]);
    // configcli answers a namespace with its keys, not their content: an edit of a value changes none of
    // them (the value itself is checked above), and every namespace still answers for both users.
    expect(changed).toEqual([]);
    expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
  });

  it('a non-root user in the container gets "Permission denied" for both private files', async () => {
    for (const file of [PRIV, PLATFORM]) {
      const r = await execIn(env, APP, ['cat', file]);
      expect([file, r.code === 0]).toEqual([file, false]);
      expect(r.stderr).toContain('Permission denied');
    }
    // The same user reads the public document.
    expect((await execIn(env, APP, ['cat', PUBLIC])).code).toBe(0);
  });

  it('the public file, the pod annotation and what a user lists never hold the value', async () => {
    const publicText = await catIn(env, ROOT, PUBLIC);
    expectNoValue(publicText, 'configmeta.json in the container', VALUE_1);
    const pod = await getJson(env, ['pod', POD]);
    expectNoValue(JSON.stringify(pod.metadata.annotations), 'pod annotations', VALUE_1);
    expect((await podConfigMeta(env, POD))!.doc.connections.secrets.creds[0]).toMatchObject({ data: { token: '' } });
    expectNoValue(await apiText(), 'pods, kdclusters, events, ConfigMaps', VALUE_1);
  });

  it('a rotated value reaches the file; the old one leaves it; the API still holds neither', async () => {
    const before = await catIn(env, ROOT, PRIV);
    await kubectlOk(env, [
      'patch',
      'secret',
      'db-creds',
      '--type=merge',
      '-p',
      JSON.stringify({ stringData: { token: VALUE_2 } }),
    ]);
    await eventually(
      'the new value in the container',
      async () => (await privateToken()) === b64(VALUE_2),
      120_000,
      500,
    );
    const after = await catIn(env, ROOT, PRIV);
    expect(after).not.toBe(before);
    expect(after).not.toContain(b64(VALUE_1));
    const publicText = await catIn(env, ROOT, PUBLIC);
    const api = await apiText();
    for (const v of [VALUE_1, VALUE_2]) {
      expectNoValue(publicText, 'configmeta.json in the container', v);
      expectNoValue(api, 'pods, kdclusters, events, ConfigMaps', v);
    }
  }, 180_000);
});
