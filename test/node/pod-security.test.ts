/**
 * Issue 26 item 3: member pods start and get their document in namespaces that enforce the `baseline`
 * and `restricted` Pod Security Standards (the harness API server's PodSecurity admission, checked here
 * by a pod it must refuse). Under `restricted` the injected containers run as the pod's runAsUser with
 * its fsGroup, so the delivered files are that user's — what configcli, running as that user, needs.
 */
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { APP_USER, CONFIGCLI_IMAGE, configcliImage, configcliValue, execIn } from '../images/configcli-image.js';
import { TEST_NODE_TOLERATION } from '../controlplane/node.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, kdApp, kdCluster, kubectlOk, secret } from '../support/kd-objects.js';
import { importImages, nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';

// Waits below are bounded at up to 120 s each (a loaded 2-core machine): the test's own limit is above them.
jest.setTimeout(300_000);

const env = useTestEnv();
const VALUE = 'pw-pss-3c9a';
const b64 = (s: string) => Buffer.from(s).toString('base64');
const TOKEN = 'connections.secrets.creds.data.token';

const enforce = (level: string) =>
  kubectlOk(env, ['label', 'namespace', env.namespace, `pod-security.kubernetes.io/enforce=${level}`, '--overwrite']);

useDeliveryServices(env, async (node) => {
  await importImages(node, [configcliImage()]);
  await apply(env, [
    kdApp('pss-app'),
    secret('pss-creds', { token: VALUE }, 'creds'),
    // Two seats: one member pod per level (ordinals 0 and 1).
    kdCluster('pss', 'pss-app', { secrets: ['pss-creds'] }, ['controller'], 2),
  ]);
});
afterAll(async () => {
  await env.kubectl(['label', 'namespace', env.namespace, 'pod-security.kubernetes.io/enforce-']);
});

/** A member pod off the host network (baseline forbids hostNetwork), running the configcli image. */
function pod(name: string, app: Record<string, unknown> = {}, podSecurity?: Record<string, unknown>) {
  const p = nodeMemberPod(name, 'pss', {
    containers: [{ name: 'app', image: CONFIGCLI_IMAGE, imagePullPolicy: 'Never', ...app }],
  }) as { spec: Record<string, unknown> };
  p.spec.hostNetwork = false;
  p.spec.tolerations = [TEST_NODE_TOLERATION];
  if (podSecurity) p.spec.securityContext = podSecurity;
  return p;
}
const statOf = async (name: string, file: string) =>
  (await execIn(env, { pod: name }, ['stat', '-c', '%u %g %a', file])).stdout.trim();

describe('Pod Security Standards', () => {
  it('baseline: a root member pod starts, its files are root 0644 in a root 0755 directory, configcli reads the value', async () => {
    await enforce('baseline');
    // The plugin is there: a privileged pod is refused.
    const bad = pod('pss-privileged');
    (bad.spec.containers as Record<string, unknown>[])[0]!.securityContext = { privileged: true };
    const refused = await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(bad) });
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringMatching(/violates PodSecurity "baseline/)]);

    await apply(env, [pod('pss-base-controller-0')]);
    await waitPodReady(env, 'pss-base-controller-0');
    const where = { pod: 'pss-base-controller-0' };
    expect(await configcliValue(env, where, TOKEN)).toBe(b64(VALUE));
    expect(await configcliValue(env, { ...where, as: 'app' }, TOKEN)).toBe(b64(VALUE));
    expect(await statOf(where.pod, '/etc/guestconfig')).toBe('0 0 755');
    expect(await statOf(where.pod, '/etc/guestconfig/configmeta.json')).toBe('0 0 644');
  });

  it("restricted: a non-root member pod starts; the injected containers run as its user, the files are that user's", async () => {
    await enforce('restricted');
    const restricted = {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    };
    const podSecurity = {
      runAsNonRoot: true,
      runAsUser: APP_USER.uid,
      runAsGroup: APP_USER.gid,
      fsGroup: APP_USER.gid,
      seccompProfile: { type: 'RuntimeDefault' },
    };
    // The plugin is there: the same pod with a root app is refused.
    const root = pod('pss-root', { securityContext: restricted });
    const refused = await env.kubectl(['apply', '-f', '-'], { input: JSON.stringify(root) });
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringMatching(/violates PodSecurity "restricted/)]);

    await apply(env, [pod('pss-r-controller-1', { securityContext: restricted }, podSecurity)]);
    await waitPodReady(env, 'pss-r-controller-1');
    const where = { pod: 'pss-r-controller-1' };
    expect((await execIn(env, where, ['id', '-u'])).stdout.trim()).toBe(String(APP_USER.uid));
    expect(await configcliValue(env, where, TOKEN)).toBe(b64(VALUE));
    expect(await configcliValue(env, where, 'node.role_id')).toBe('controller');
    expect(await statOf(where.pod, '/etc/guestconfig/configmeta.json')).toBe(`${APP_USER.uid} ${APP_USER.gid} 644`);
    expect(await statOf(where.pod, '/etc/guestconfig/.priv_configmeta.json')).toBe(
      `${APP_USER.uid} ${APP_USER.gid} 600`,
    );
    const dir = (await statOf(where.pod, '/etc/guestconfig')).split(' ');
    expect(dir[0]).toBe(String(APP_USER.uid));
    // Not writable by group or others.
    expect(Number.parseInt(dir[2]!, 8) & 0o022).toBe(0);
  });
});
