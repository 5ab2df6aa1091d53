/**
 * The configcli test image (test/images/configcli-image.ts) in a real member container: the real configcli
 * answers `-g` as root and as the image's non-root user (which needs configcli's log directory writable
 * for it) and reads the image's own base_img_version. The delivery tests judge with this image; this
 * file shows the judge works.
 */
import { describe, expect, it } from '@jest/globals';
import {
  APP_USER,
  CONFIGCLI_IMAGE,
  CONFIGCLI_IMAGE_FILES,
  configcliImage,
  configcliValue,
  execIn,
} from '../images/configcli-image.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, configMap, kdApp, kdCluster } from '../support/kd-objects.js';
import { importImages, nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';

const env = useTestEnv();
const POD = 'judge-controller-0';

useDeliveryServices(env, async (node) => {
  await importImages(node, [configcliImage()]);
  await apply(env, [
    kdApp('judge-app'),
    configMap('judge-model', { path: '/models/j' }),
    kdCluster('judge', 'judge-app', { configmaps: ['judge-model'] }),
    // No command: the image's own (sleep until SIGTERM) keeps it running.
    nodeMemberPod(POD, 'judge', { containers: [{ name: 'app', image: CONFIGCLI_IMAGE, imagePullPolicy: 'Never' }] }),
  ]);
  await waitPodReady(env, POD);
});

describe('the real configcli in a member container', () => {
  it('answers -g as root and as the non-root user alike', async () => {
    for (const as of [undefined, 'app'] as const) {
      const where = { pod: POD, ...(as ? { as } : {}) };
      expect([as, await configcliValue(env, where, 'node.role_id')]).toEqual([as, 'controller']);
      expect([as, await configcliValue(env, where, 'cluster.name')]).toEqual([as, 'judge']);
      expect([as, await configcliValue(env, where, 'connections.configmaps')]).not.toEqual([as, '']);
    }
    const id = await execIn(env, { pod: POD, as: 'app' }, ['id', '-u']);
    expect(id.stdout.trim()).toBe(String(APP_USER.uid));
  });

  it('fails with a KeyError for a key the document lacks (the exit code tells)', async () => {
    await expect(configcliValue(env, { pod: POD }, 'node.no_such_key')).rejects.toThrow(/KeyError/);
  });

  it("reads the image's own base_img_version", async () => {
    const r = await execIn(env, { pod: POD }, ['configcli', '--baseimg_version']);
    expect(r.stdout.trim()).toBe(CONFIGCLI_IMAGE_FILES.base_img_version!.trim());
  });
});
