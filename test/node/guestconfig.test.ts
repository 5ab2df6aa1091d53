/**
 * /etc/guestconfig in real containers, through the pod webhook's kd-guestconfig sidecar: the image's own
 * files stay visible and the directory writable, the document is there before the app starts (also for a
 * pod created before its annotation exists, and for an image without a shell), ConfigMap edits and the
 * cluster's own private Secret reach the directory (never a Secret of that name someone else made), and
 * opt-out and an existing mount are respected.
 */
import { describe, expect, it } from '@jest/globals';
import { privateConfigMetaSecretName } from '@kd-connections/shared/domain';
import {
  APP_IMAGE_FILES,
  GUESTCONFIG_APP_IMAGE,
  guestconfigAppImage,
  NO_SHELL_IMAGE,
  noShellImage,
  PRINT_BEGIN,
  PRINT_END,
} from '../images/app-images.js';
import { BUSYBOX_IMAGE } from '../images/base-images.js';
import { useTestEnv } from '../support/cluster.js';
import {
  apply,
  configMap,
  getJson,
  kdApp,
  kdCluster,
  kubectlOk,
  podConfigMeta,
  secret as secretObject,
} from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import {
  importImages,
  nodeMemberPod,
  useDeliveryServices,
  waitPodReady,
  type NodeMemberPodOptions,
} from './node-support.js';

const env = useTestEnv();
const FILE = '/etc/guestconfig/configmeta.json';
const TOKEN = 'vault-token-5e1d';

useDeliveryServices(env, (node) => importImages(node, [guestconfigAppImage(), noShellImage()]));

type Obj = Record<string, any>;
/** A member pod on the test node; `containers` default to one `app` of the image with its own files. */
const pod = (name: string, cluster: string, o: NodeMemberPodOptions = {}) =>
  nodeMemberPod(name, cluster, { image: GUESTCONFIG_APP_IMAGE, ...o });

const exec = (p: string, script: string, container = 'app') =>
  kubectlOk(env, ['exec', p, '-c', container, '--', 'sh', '-c', script]);

async function delivered(p: string): Promise<{ doc: any; generator: string }> {
  return eventually('configmeta annotation on the pod', () => podConfigMeta(env, p), 60_000);
}

describe('the kd-guestconfig sidecar on a real node', () => {
  it("keeps the image's own /etc/guestconfig files, the directory writable, and the file current", async () => {
    await apply(env, [
      kdApp('nb'),
      configMap('model', { path: '/models/a/1' }),
      kdCluster('notebook', 'nb', { configmaps: ['model'] }),
      pod('notebook-controller-0', 'notebook'),
    ]);
    await waitPodReady(env, 'notebook-controller-0');
    const first = await delivered('notebook-controller-0');
    // The image's files, as the image has them.
    expect(await exec('notebook-controller-0', 'cat /etc/guestconfig/configcli.conf')).toBe(
      APP_IMAGE_FILES['configcli.conf'],
    );
    expect(await exec('notebook-controller-0', 'cat /etc/guestconfig/base_img_version')).toBe(
      APP_IMAGE_FILES.base_img_version,
    );
    // The delivered document, not the image's stale one; readable at once, since the app started after it.
    expect(JSON.parse(await exec('notebook-controller-0', `cat ${FILE}`))).toEqual(first.doc);
    // What configcli's install and an app's setup do there.
    expect(
      await exec(
        'notebook-controller-0',
        `touch /etc/guestconfig/app-setup && chmod 644 ${FILE} && echo ok > /etc/guestconfig/app-setup && stat -c %a ${FILE}`,
      ),
    ).toBe('644\n');

    const t0 = Date.now();
    await kubectlOk(env, ['patch', 'configmap', 'model', '--type=merge', '-p', '{"data":{"path":"/models/b/2"}}']);
    const after = await eventually(
      'the edited ConfigMap in the container',
      async () => {
        const text = await exec('notebook-controller-0', `cat ${FILE}`);
        return text.includes('/models/b/2') ? text : undefined;
      },
      90_000,
      100,
    );
    // Polled through kubectl exec (~100 ms per round): the bench measures it precisely.
    console.log(
      `ConfigMap edit → new document readable in the container: ${Date.now() - t0} ms (kubectl exec polling)`,
    );
    const now = (await podConfigMeta(env, 'notebook-controller-0'))!;
    expect(JSON.parse(after)).toEqual(now.doc);
    expect(now.generator).not.toBe(first.generator);
    // The sidecar records the generator the file holds, readable with cat in its own container.
    await eventually('the generator file', async () => {
      const g = await kubectlOk(env, [
        'exec',
        'notebook-controller-0',
        '-c',
        'kd-guestconfig',
        '--',
        'cat',
        '/etc/guestconfig/.configmeta-generator',
      ]);
      return g === now.generator ? g : undefined;
    });
    // The app's own file survived the swap; no temporary file is left; the image's other files are there.
    expect(await exec('notebook-controller-0', 'cat /etc/guestconfig/app-setup; ls -A /etc/guestconfig')).toBe(
      'ok\n.configmeta-generator\napp-setup\nbase_img_version\nconfigcli.conf\nconfigmeta.json\n',
    );
  });

  it("delivers the cluster's private files root-only, never those of a Secret of that name someone else made, and removes them with the connection", async () => {
    const secret = privateConfigMetaSecretName('vault');
    const listFiles = () =>
      exec(
        'vault-controller-0',
        'stat -c "%a %u %n" /etc/guestconfig/.priv_configmeta.json /etc/guestconfig/.platform.json 2>/dev/null || true',
      );
    // Made before the cluster, by someone else: it has both keys, and even a version.
    await apply(env, [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: secret },
        stringData: { 'priv_configmeta.json': '{"forged":1}', 'platform.json': '{}', version: 'forged' },
      },
      kdApp('vault-app'),
      secretObject('vault-creds', { token: TOKEN }),
      kdCluster('vault', 'vault-app', { secrets: ['vault-creds'] }),
      pod('vault-controller-0', 'vault'),
    ]);
    await waitPodReady(env, 'vault-controller-0');
    await eventually('status names the Secret someone else made', async () => {
      const c = await getJson(env, ['kdcluster', 'vault']);
      const synced = (c.status?.conditions ?? []).find((x: Obj) => x.type === 'ConfigMetaSynced');
      return synced?.reason === 'PrivateSecretNotOwned' ? true : undefined;
    });
    await eventually('the document without a private half', async () =>
      (await exec('vault-controller-0', `cat ${FILE} 2>/dev/null || true`)).includes('"redacted":true')
        ? true
        : undefined,
    );
    expect(await listFiles()).toBe('');

    // Gone: the reconciler makes its own, and its files arrive, root-only.
    await kubectlOk(env, ['delete', 'secret', secret]);
    const listing = await eventually(
      'the private files in the container',
      async () => {
        const out = await listFiles();
        return out.split('\n').filter(Boolean).length === 2 ? out : undefined;
      },
      90_000,
      500,
    );
    expect(listing).toBe('600 0 /etc/guestconfig/.priv_configmeta.json\n600 0 /etc/guestconfig/.platform.json\n');
    expect(await exec('vault-controller-0', 'cat /etc/guestconfig/.priv_configmeta.json')).toContain(
      Buffer.from(TOKEN).toString('base64'),
    );
    // A non-root process in the app container cannot read it.
    const asNobody = await env.kubectl([
      'exec',
      'vault-controller-0',
      '-c',
      'app',
      '--',
      'su',
      'nobody',
      '-s',
      '/bin/sh',
      '-c',
      'cat /etc/guestconfig/.priv_configmeta.json',
    ]);
    expect(asNobody.code).not.toBe(0);
    expect(asNobody.stderr).toContain('Permission denied');

    // The Secret connection removed: the document names no private half, and the files go.
    await kubectlOk(env, [
      'patch',
      'kdcluster',
      'vault',
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/spec/connections/secrets"}]',
    ]);
    await eventually(
      'the private files removed',
      async () => {
        const out = await exec('vault-controller-0', 'ls -A /etc/guestconfig');
        return !out.includes('.priv_configmeta.json') && !out.includes('.platform.json') ? true : undefined;
      },
      90_000,
      500,
    );
    expect(await exec('vault-controller-0', `test -s ${FILE} && echo present`)).toBe('present\n');
  }, 240_000);

  it('gives an image without a shell the file before its program starts', async () => {
    await apply(env, [
      kdApp('bare-app'),
      kdCluster('bare', 'bare-app'),
      pod('bare-controller-0', 'bare', {
        containers: [{ name: 'app', image: NO_SHELL_IMAGE, imagePullPolicy: 'Never' }],
      }),
    ]);
    const log = await eventually(
      'the program printed the file',
      async () => {
        const r = await env.kubectl(['logs', 'bare-controller-0', '-c', 'app']);
        return r.code === 0 && r.stdout.includes(PRINT_END) ? r.stdout : undefined;
      },
      120_000,
      500,
    );
    const printed = log.slice(log.indexOf(PRINT_BEGIN) + PRINT_BEGIN.length, log.indexOf(PRINT_END)).trim();
    expect(printed).not.toBe('');
    expect(JSON.parse(printed)).toEqual((await podConfigMeta(env, 'bare-controller-0'))!.doc);
    // It really has no shell: exec of sh fails.
    const sh = await env.kubectl(['exec', 'bare-controller-0', '-c', 'app', '--', 'sh', '-c', 'true']);
    expect(sh.code).not.toBe(0);
  });

  it('holds the app back while the annotation is not written, then starts it with a non-empty file', async () => {
    // The pod comes first: its kdcluster does not exist yet, so nothing writes its annotation.
    await apply(env, [
      pod('late-controller-0', 'late', {
        containers: [
          {
            name: 'app',
            image: BUSYBOX_IMAGE,
            imagePullPolicy: 'Never',
            command: ['sh', '-c', `echo "size at start: $(wc -c < ${FILE})"; exec sleep 3600`],
          },
        ],
      }),
    ]);
    const sidecarRunning = async () => {
      const p = await getJson(env, ['pod', 'late-controller-0']);
      const s = (p.status?.initContainerStatuses ?? []).find((c: Obj) => c.name === 'kd-guestconfig');
      return s?.state?.running ? p : undefined;
    };
    await eventually('the sidecar running, waiting for the document', sidecarRunning, 120_000, 500);
    // Long enough for the app to have started had nothing held it back.
    await new Promise((r) => setTimeout(r, 8000));
    const waiting = await getJson(env, ['pod', 'late-controller-0']);
    const sidecar = waiting.status.initContainerStatuses.find((c: Obj) => c.name === 'kd-guestconfig');
    expect(sidecar.started).toBe(false);
    const app = waiting.status.containerStatuses.find((c: Obj) => c.name === 'app');
    expect(app.state.running).toBeUndefined();
    expect(app.state.waiting?.reason).toBe('PodInitializing');

    await apply(env, [kdApp('late-app'), kdCluster('late', 'late-app')]);
    await waitPodReady(env, 'late-controller-0');
    const log = await kubectlOk(env, ['logs', 'late-controller-0', '-c', 'app']);
    const size = Number(/size at start: (\d+)/.exec(log)?.[1]);
    expect(size).toBeGreaterThan(2);
    expect(JSON.parse(await exec('late-controller-0', `cat ${FILE}`))).toEqual(
      (await podConfigMeta(env, 'late-controller-0'))!.doc,
    );
  });

  it("leaves an opted-out pod's /etc/guestconfig to its image", async () => {
    await apply(env, [
      kdApp('own-app'),
      kdCluster('own', 'own-app'),
      pod('own-controller-0', 'own', { annotations: { 'kubedirector.hpe.com/configmeta-volume': 'false' } }),
    ]);
    await waitPodReady(env, 'own-controller-0');
    const p = await getJson(env, ['pod', 'own-controller-0']);
    expect(p.spec.initContainers).toBeUndefined();
    expect(await exec('own-controller-0', `cat ${FILE}`)).toBe(APP_IMAGE_FILES['configmeta.json']);
  });

  it('keeps a mount a container already has at /etc/guestconfig and delivers to the others', async () => {
    const sleeper = (name: string, mounts?: Obj[]) => ({
      name,
      image: BUSYBOX_IMAGE,
      imagePullPolicy: 'Never',
      command: ['sleep', '3600'],
      ...(mounts ? { volumeMounts: mounts } : {}),
    });
    await apply(env, [
      kdApp('mix-app'),
      kdCluster('mix', 'mix-app'),
      // No container named app: every container receives the file, except one with its own mount there.
      pod('mix-controller-0', 'mix', {
        volumes: [{ name: 'mine', emptyDir: {} }],
        containers: [sleeper('web', [{ name: 'mine', mountPath: '/etc/guestconfig' }]), sleeper('worker')],
      }),
    ]);
    await waitPodReady(env, 'mix-controller-0');
    const p = await getJson(env, ['pod', 'mix-controller-0']);
    expect(p.spec.containers[0].volumeMounts.filter((m: Obj) => m.mountPath === '/etc/guestconfig')).toEqual([
      { name: 'mine', mountPath: '/etc/guestconfig' },
    ]);
    expect(await exec('mix-controller-0', 'ls -A /etc/guestconfig', 'web')).toBe('');
    expect(JSON.parse(await exec('mix-controller-0', `cat ${FILE}`, 'worker'))).toEqual(
      (await podConfigMeta(env, 'mix-controller-0'))!.doc,
    );
  });
});
