/**
 * The services' kubeconfig loader (src/runtime/kubeconfig.ts): what each kubeconfig field becomes in a
 * request's TLS options and headers, relative paths, credential files read again after a minute, the
 * ServiceAccount, clear errors, and the hand-over to client-node for exec users and $KUBECONFIG lists.
 * (Against a real API server: every cluster test's services, the chart tests' ServiceAccount
 * kubeconfigs, and test/node/service-account.test.ts for the in-cluster path with a pod's own token.)
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type https from 'node:https';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { stringify } from 'yaml';
import {
  CREDENTIAL_FILE_TTL_MS,
  KubeconfigError,
  loadKubeConnection,
  type LoadedKubeConnection,
} from '../src/runtime/kubeconfig.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kd-kubeconfig-test-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const b64 = (s: string) => Buffer.from(s).toString('base64');

function kubeconfig(cluster: object, user: object, name = 'config', context = 'ctx'): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': context,
      contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
      clusters: [{ name: 'c', cluster }],
      users: [{ name: 'u', user }],
    }),
  );
  return path;
}

async function applied(kc: LoadedKubeConnection): Promise<https.RequestOptions> {
  const opts: https.RequestOptions = { headers: {} };
  await kc.applyToHTTPSOptions(opts);
  return opts;
}

describe('a kubeconfig file', () => {
  it('inline data: CA, client certificate and key decoded; token; impersonation; TLS name', async () => {
    const path = kubeconfig(
      {
        server: 'https://127.0.0.1:6443/',
        'certificate-authority-data': b64('CA PEM'),
        'tls-server-name': 'kubernetes.default',
      },
      {
        'client-certificate-data': b64('CERT PEM'),
        'client-key-data': b64('KEY PEM'),
        token: 'tok-1\n',
        as: 'someone',
      },
    );
    const kc = await loadKubeConnection({ kubeconfig: path });
    expect(kc.getCurrentCluster()).toEqual({ server: 'https://127.0.0.1:6443' });
    expect(kc.source).toBe(path);
    expect(await applied(kc)).toEqual({
      ca: 'CA PEM',
      cert: 'CERT PEM',
      key: 'KEY PEM',
      servername: 'kubernetes.default',
      headers: { Authorization: 'Bearer tok-1', 'Impersonate-User': 'someone' },
    });
  });

  it('files relative to the kubeconfig directory, read again once a minute old', async () => {
    writeFileSync(join(dir, 'ca.crt'), 'CA 1');
    writeFileSync(join(dir, 'token'), 'tok-1');
    let t = 1_000_000;
    const kc = await loadKubeConnection({
      kubeconfig: kubeconfig({ server: 'https://h:1', 'certificate-authority': 'ca.crt' }, { tokenFile: 'token' }),
      now: () => t,
    });
    expect(await applied(kc)).toMatchObject({ ca: 'CA 1', headers: { Authorization: 'Bearer tok-1' } });
    writeFileSync(join(dir, 'ca.crt'), 'CA 2');
    writeFileSync(join(dir, 'token'), 'tok-2');
    t += CREDENTIAL_FILE_TTL_MS - 1;
    expect(await applied(kc)).toMatchObject({ ca: 'CA 1', headers: { Authorization: 'Bearer tok-1' } });
    t += 1;
    expect(await applied(kc)).toMatchObject({ ca: 'CA 2', headers: { Authorization: 'Bearer tok-2' } });
    // A file gone for a moment (a projected volume's swap) keeps the last value rather than failing.
    rmSync(join(dir, 'token'));
    t += CREDENTIAL_FILE_TTL_MS;
    expect(await applied(kc)).toMatchObject({ headers: { Authorization: 'Bearer tok-2' } });
  });

  it('basic auth; insecure-skip-tls-verify', async () => {
    const kc = await loadKubeConnection({
      kubeconfig: kubeconfig(
        { server: 'https://h:1', 'insecure-skip-tls-verify': true },
        { username: 'admin', password: 'p:w' },
      ),
    });
    expect(await applied(kc)).toEqual({
      rejectUnauthorized: false,
      headers: { Authorization: `Basic ${b64('admin:p:w')}` },
    });
  });

  it('errors name the file and what is missing', async () => {
    await expect(loadKubeConnection({ kubeconfig: join(dir, 'nope') })).rejects.toThrow(
      new KubeconfigError(
        `kubeconfig: cannot read ${join(dir, 'nope')}: ENOENT: no such file or directory, open '${join(dir, 'nope')}'`,
      ),
    );
    const noContext = kubeconfig({ server: 'https://h:1' }, {}, 'a', '');
    await expect(loadKubeConnection({ kubeconfig: noContext })).rejects.toThrow(
      `kubeconfig ${noContext}: current-context is not set`,
    );
    const wrongContext = kubeconfig({ server: 'https://h:1' }, {}, 'b', 'other');
    await expect(loadKubeConnection({ kubeconfig: wrongContext })).rejects.toThrow(
      `kubeconfig ${wrongContext}: no contexts entry named "other" (from current-context)`,
    );
    const noServer = kubeconfig({}, {}, 'c');
    await expect(loadKubeConnection({ kubeconfig: noServer })).rejects.toThrow(
      `kubeconfig ${noServer}: cluster "c" has no server`,
    );
    const missingCa = kubeconfig({ server: 'https://h:1', 'certificate-authority': 'gone.crt' }, {}, 'd');
    await expect(loadKubeConnection({ kubeconfig: missingCa })).rejects.toThrow(
      `kubeconfig ${missingCa}: certificate-authority: cannot read ${join(dir, 'gone.crt')}`,
    );
    writeFileSync(join(dir, 'bad'), 'clusters: [');
    await expect(loadKubeConnection({ kubeconfig: join(dir, 'bad') })).rejects.toThrow(
      `kubeconfig ${join(dir, 'bad')}: not YAML`,
    );
  });

  it('clientNodeConfig loads the same file into client-node (for the websocket exec)', async () => {
    const path = kubeconfig({ server: 'https://h:1' }, { token: 't' });
    const kc = await loadKubeConnection({ kubeconfig: path });
    const cn = await kc.clientNodeConfig();
    expect(cn.getCurrentCluster()?.server).toBe('https://h:1');
    expect(cn.getCurrentUser()?.token).toBe('t');
    expect(await kc.clientNodeConfig()).toBe(cn);
  });
});

describe('handed to client-node', () => {
  it('an exec credential plugin runs as client-node runs it', async () => {
    const credential = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token: 'from-exec' },
    });
    const path = kubeconfig(
      { server: 'https://h:1' },
      {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: 'sh',
          args: ['-c', `echo '${credential}'`],
          interactiveMode: 'Never',
        },
      },
    );
    const kc = await loadKubeConnection({ kubeconfig: path });
    expect(kc.getCurrentCluster()?.server).toBe('https://h:1');
    expect((await applied(kc)).headers).toMatchObject({ Authorization: 'Bearer from-exec' });
  });

  it('a $KUBECONFIG list is merged, the first file winning', async () => {
    const first = kubeconfig({ server: 'https://first:1' }, { token: 'one' }, 'first');
    const second = join(dir, 'second');
    writeFileSync(
      second,
      stringify({
        'current-context': 'other',
        contexts: [{ name: 'other', context: { cluster: 'o', user: 'ou' } }],
        clusters: [{ name: 'o', cluster: { server: 'https://second:2' } }],
        users: [{ name: 'ou', user: { token: 'two' } }],
      }),
    );
    const kc = await loadKubeConnection({ kubeconfig: [first, second].join(delimiter) });
    expect(kc.getCurrentCluster()?.server).toBe('https://first:1');
    expect((await applied(kc)).headers).toMatchObject({ Authorization: 'Bearer one' });
    await expect(loadKubeConnection({ kubeconfig: delimiter })).rejects.toThrow(
      new KubeconfigError(`kubeconfig ${JSON.stringify(delimiter)}: names no file`),
    );
  });
});

describe('without a kubeconfig', () => {
  it("in a pod: the ServiceAccount's CA and token, the token read again once a minute old", async () => {
    writeFileSync(join(dir, 'ca.crt'), 'SA CA');
    writeFileSync(join(dir, 'token'), 'sa-token-1\n');
    let t = 0;
    const kc = await loadKubeConnection({
      env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
      serviceAccountDir: dir,
      now: () => t,
    });
    expect(kc.getCurrentCluster()).toEqual({ server: 'https://[fd00::1]:443' });
    expect(await applied(kc)).toEqual({ ca: 'SA CA', headers: { Authorization: 'Bearer sa-token-1' } });
    writeFileSync(join(dir, 'token'), 'sa-token-2\n');
    t += CREDENTIAL_FILE_TTL_MS;
    expect((await applied(kc)).headers).toEqual({ Authorization: 'Bearer sa-token-2' });
  });

  it('~/.kube/config outside a pod; nothing at all is an error saying what was looked for', async () => {
    const home = join(dir, 'home');
    await expect(loadKubeConnection({ env: {}, home })).rejects.toThrow(
      `no kubeconfig: --kubeconfig and $KUBECONFIG are unset, $KUBERNETES_SERVICE_HOST is unset (not in a pod) and ${join(home, '.kube', 'config')} does not exist`,
    );
    mkdirSync(join(home, '.kube'), { recursive: true });
    renameSync(kubeconfig({ server: 'https://home:1' }, {}), join(home, '.kube', 'config'));
    const kc = await loadKubeConnection({ env: {}, home });
    expect(kc.getCurrentCluster()?.server).toBe('https://home:1');
  });
});
