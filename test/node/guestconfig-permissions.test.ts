/**
 * Issue 26 item 2: nobody but root can create, replace or symlink a name in /etc/guestconfig of a member
 * container. The directory keeps the image's owner and mode (root 0755 when the image says nothing more);
 * the files the product writes are root's, 0644 public and 0600 private; root's configcli keeps reading the
 * delivered document whatever an unprivileged process tries.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { APP_USER, CONFIGCLI_IMAGE, configcliImage, configcliValue, execIn } from '../images/configcli-image.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, kdApp, kdCluster, secret } from '../support/kd-objects.js';
import { importImages, nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';

// Waits below are bounded at up to 120 s each (a loaded 2-core machine): the test's own limit is above them.
jest.setTimeout(300_000);

const env = useTestEnv();
const POD = 'perm-controller-0';
const OWNED_POD = 'permown-controller-0';
const OWNED_IMAGE = 'kd.invalid/configcli-owned:local';
const DIR = '/etc/guestconfig';

useDeliveryServices(env, async (node) => {
  await importImages(node, [
    configcliImage(),
    // An image whose /etc/guestconfig belongs to its app user, 0750: the pod keeps that.
    configcliImage({ name: OWNED_IMAGE, guestconfig: { uid: APP_USER.uid, gid: APP_USER.gid, mode: 0o750 } }),
  ]);
  await apply(env, [
    kdApp('perm-app'),
    secret('perm-creds', { token: 'pw-perm-1' }, 'creds'),
    kdCluster('perm', 'perm-app', { secrets: ['perm-creds'] }),
    kdCluster('permown', 'perm-app'),
    nodeMemberPod(POD, 'perm', { containers: [{ name: 'app', image: CONFIGCLI_IMAGE, imagePullPolicy: 'Never' }] }),
    nodeMemberPod(OWNED_POD, 'permown', {
      containers: [{ name: 'app', image: OWNED_IMAGE, imagePullPolicy: 'Never' }],
    }),
  ]);
  await waitPodReady(env, POD);
  await waitPodReady(env, OWNED_POD);
});

const stat = async (pod: string, file: string) =>
  (await execIn(env, { pod }, ['stat', '-c', '%u %g %a', file])).stdout.trim();
const as = (pod: string, user: string, script: string) =>
  execIn(env, { pod }, ['su', '-s', '/bin/sh', '-c', script, user]);

describe('/etc/guestconfig in a member container', () => {
  it("is root's 0755; the product's files are root's, 0644 public and 0600 private", async () => {
    expect(await stat(POD, DIR)).toBe('0 0 755');
    expect(await stat(POD, `${DIR}/configmeta.json`)).toBe('0 0 644');
    expect(await stat(POD, `${DIR}/.configmeta-generator`)).toBe('0 0 644');
    expect(await stat(POD, `${DIR}/.priv_configmeta.json`)).toBe('0 0 600');
    expect(await stat(POD, `${DIR}/.platform.json`)).toBe('0 0 600');
    // The image's own file is there, as the image has it.
    expect(await stat(POD, `${DIR}/base_img_version`)).toBe('0 0 644');
  });

  it('an unprivileged user can neither create, replace, remove nor symlink any name there', async () => {
    const names = [
      'configcli.conf',
      'configmeta.json',
      '.priv_configmeta.json',
      '.platform.json',
      '.configmeta-generator',
      'base_img_version',
      'new-file',
    ];
    for (const user of ['nobody', APP_USER.name]) {
      for (const n of names) {
        const f = `${DIR}/${n}`;
        for (const attempt of [
          `echo forged > ${f}`,
          `ln -s /tmp/forged ${f}`,
          `ln -sf /tmp/forged ${f}`,
          `echo '{}' > /tmp/x-$$ && mv -f /tmp/x-$$ ${f}`,
          `[ -e ${f} ] && rm -f ${f} && [ ! -e ${f} ]`,
        ]) {
          const r = await as(POD, user, attempt);
          expect([user, attempt, r.code === 0]).toEqual([user, attempt, false]);
        }
      }
    }
    // What root's configcli reads is still the delivered document.
    expect(await configcliValue(env, { pod: POD }, 'node.role_id')).toBe('controller');
    expect(await configcliValue(env, { pod: POD }, 'cluster.name')).toBe('perm');
  });

  it("keeps the image's own owner and mode for the directory, and still delivers", async () => {
    expect(await stat(OWNED_POD, DIR)).toBe(`${APP_USER.uid} ${APP_USER.gid} 750`);
    expect(await stat(OWNED_POD, `${DIR}/configmeta.json`)).toBe('0 0 644');
    expect(await configcliValue(env, { pod: OWNED_POD }, 'cluster.name')).toBe('permown');
    // nobody is neither owner nor group: nothing to create there.
    expect((await as(OWNED_POD, 'nobody', `echo x > ${DIR}/configcli.conf`)).code).not.toBe(0);
  });
});
