/**
 * Strict mode (`--secret-delivery=private-file`): Secret values reach only root in a running container,
 * end to end: a kdcluster connects a labelled
 * Secret, the reconciler writes the cluster's private Secret, the pod webhook's kd-guestconfig sidecar
 * installs it as /etc/guestconfig/.priv_configmeta.json and .platform.json (root only) in the member's
 * `app` container, and configcli's root view (public document, then both files merged over it) gives the
 * value while every connected cluster and ConfigMap still answers. A non-root user is refused; a rotated
 * value reaches the file; the public file, the pod and everything else a user reads through the API
 * (pods, kdclusters, events, ConfigMaps) never hold the value, plain or base64.
 */
import { describe, expect, it } from '@jest/globals';
import {
  CONFIGMETA_FILE,
  GUESTCONFIG_DIR,
  PLATFORM_FILE,
  PRIVATE_CONFIGMETA_FILE,
  privateConfigMetaSecretName,
} from '@kd-connections/shared';
import { configcliGet, configcliRootView, type Json } from '../../shared/test/configcli-reader.js';
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
import { nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';

const env = useTestEnv();
const POD = 'nb-controller-0';
const VALUE_1 = 'pw-node-first-4b8e21';
const VALUE_2 = 'pw-node-second-c07d95';
const b64 = (s: string) => Buffer.from(s).toString('base64');
const PRIV = `${GUESTCONFIG_DIR}/${PRIVATE_CONFIGMETA_FILE}`;
const PLATFORM = `${GUESTCONFIG_DIR}/${PLATFORM_FILE}`;
const PUBLIC = `${GUESTCONFIG_DIR}/${CONFIGMETA_FILE}`;

useDeliveryServices(
  env,
  async () => {
    await apply(env, [
      kdApp('nb', { category: 'notebook', connectable_to: [{ category: 'training' }] }),
      kdApp('trainer', { category: 'training' }),
      configMap('model', { path: '/models/v1' }),
      secret('db-creds', { token: VALUE_1 }, 'creds'),
      kdCluster('t', 'trainer'),
      kdCluster('nb', 'nb', { clusters: ['t'], configmaps: ['model'], secrets: ['db-creds'] }),
      nodeMemberPod(POD, 'nb'),
    ]);
    await waitPodReady(env, POD);
    // The strict mode: in the default mode configmeta.json in the container carries the values
    // (secret-values.test.ts); this file holds the root-only contract of --secret-delivery=private-file.
  },
  { admissionArgs: ['--secret-delivery=private-file'] },
);

/** A file of the app container, read as root (the container's user). */
const asRoot = (file: string) => kubectlOk(env, ['exec', POD, '-c', 'app', '--', 'cat', file]);
const asNobody = (file: string) =>
  env.kubectl(['exec', POD, '-c', 'app', '--', 'su', 'nobody', '-s', '/bin/sh', '-c', `cat ${file}`]);

const TOKEN_KEY = 'connections.secrets.creds.data.token';

/** What configcli gives root in the container, from the three files read out of it. */
async function rootView(): Promise<{ root: Json; pub: Json; publicText: string }> {
  const [publicText, platformText, privateText] = await Promise.all([asRoot(PUBLIC), asRoot(PLATFORM), asRoot(PRIV)]);
  return { root: configcliRootView(publicText, platformText, privateText), pub: JSON.parse(publicText), publicText };
}
const rootToken = async () => configcliGet((await rootView()).root, TOKEN_KEY);

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
      async () => (await rootToken()) === b64(VALUE_1),
      120_000,
      500,
    );
    expect(JSON.parse(await asRoot(PLATFORM))).toEqual({});
    const modes = await kubectlOk(env, ['exec', POD, '-c', 'app', '--', 'stat', '-c', '%a %u %g %n', PRIV, PLATFORM]);
    expect(modes).toBe(`600 0 0 ${PRIV}\n600 0 0 ${PLATFORM}\n`);
  });

  it('configcli as root: the Secret value merged in, every connected cluster and ConfigMap still there', async () => {
    const { root, pub } = await rootView();
    expect(configcliGet(root, TOKEN_KEY)).toBe(b64(VALUE_1));
    expect(configcliGet(pub, TOKEN_KEY)).toBe('');
    const clusters = configcliGet(pub, 'connections.clusters') as string[];
    const types = configcliGet(pub, 'connections.configmaps') as string[];
    expect(clusters).toEqual(['t']);
    expect(types.length).toBeGreaterThan(0);
    // Each connected cluster's sections (whatever its document holds), one level down.
    const sections = (key: string) => [key, ...(configcliGet(pub, key) as string[]).map((k) => `${key}.${k}`)];
    const keys = [
      'connections.clusters',
      ...clusters.flatMap((c) => sections(`connections.clusters.${c}`)),
      'connections.configmaps',
      ...types.map((t) => `connections.configmaps.${t}`),
      'cluster.name',
      'node.id',
      'nodegroups',
    ];
    for (const key of keys) expect([key, configcliGet(root, key)]).toEqual([key, configcliGet(pub, key)]);
    expect(configcliGet(root, `connections.configmaps.${types[0]}.data.path`)).toBe('/models/v1');
  });

  it('a non-root user in the container gets "Permission denied" for both private files', async () => {
    for (const file of [PRIV, PLATFORM]) {
      const r = await asNobody(file);
      expect([file, r.code === 0]).toEqual([file, false]);
      expect(r.stderr).toContain('Permission denied');
    }
    // The same user reads the public document.
    const pub = await asNobody(PUBLIC);
    expect(pub.code).toBe(0);
  });

  it('the public file, the pod annotation and what a user lists never hold the value', async () => {
    const { publicText } = await rootView();
    expectNoValue(publicText, 'configmeta.json in the container', VALUE_1);
    const pod = await getJson(env, ['pod', POD]);
    expectNoValue(JSON.stringify(pod.metadata.annotations), 'pod annotations', VALUE_1);
    expect((await podConfigMeta(env, POD))!.doc.connections.secrets.creds[0]).toMatchObject({ data: { token: '' } });
    expectNoValue(await apiText(), 'pods, kdclusters, events, ConfigMaps', VALUE_1);
  });

  it('a rotated value reaches the file; the old one leaves it; the API still holds neither', async () => {
    const before = await asRoot(PRIV);
    await kubectlOk(env, [
      'patch',
      'secret',
      'db-creds',
      '--type=merge',
      '-p',
      JSON.stringify({ stringData: { token: VALUE_2 } }),
    ]);
    await eventually('the new value in the container', async () => (await rootToken()) === b64(VALUE_2), 120_000, 500);
    const after = await asRoot(PRIV);
    expect(after).not.toBe(before);
    expect(after).not.toContain(b64(VALUE_1));
    const { publicText } = await rootView();
    const api = await apiText();
    for (const v of [VALUE_1, VALUE_2]) {
      expectNoValue(publicText, 'configmeta.json in the container', v);
      expectNoValue(api, 'pods, kdclusters, events, ConfigMaps', v);
    }
  }, 180_000);
});
