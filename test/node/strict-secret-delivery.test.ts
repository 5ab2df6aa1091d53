/**
 * Issue 26 item 1, the opt-in strict mode (`--secret-delivery=private-file`): configmeta.json keeps the
 * Secret entries redacted and the values are only in the root-only .priv_configmeta.json. The stock
 * configcli never merges that file (configcli/namespace/__init__.py calls os.getuid() without importing
 * os; the NameError is swallowed), so neither root nor a non-root user gets the value from configcli —
 * what the docs say of this mode — and a non-root user cannot read the private file at all.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { CONFIGCLI_IMAGE, catIn, configcliGet, configcliImage, execIn } from '../images/configcli-image.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, kdApp, kdCluster, secret } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { importImages, nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';

// Waits below are bounded at up to 120 s each (a loaded 2-core machine): the test's own limit is above them.
jest.setTimeout(300_000);

const env = useTestEnv();
const POD = 'strict-controller-0';
const VALUE = 'pw-strict-9e2b';
const b64 = (s: string) => Buffer.from(s).toString('base64');
const TOKEN = 'connections.secrets.creds.data.token';

useDeliveryServices(
  env,
  async (node) => {
    await importImages(node, [configcliImage()]);
    await apply(env, [
      kdApp('strict-app'),
      secret('strict-creds', { token: VALUE }, 'creds'),
      kdCluster('strict', 'strict-app', { secrets: ['strict-creds'] }),
      nodeMemberPod(POD, 'strict', { containers: [{ name: 'app', image: CONFIGCLI_IMAGE, imagePullPolicy: 'Never' }] }),
    ]);
    await waitPodReady(env, POD);
  },
  { admissionArgs: ['--secret-delivery=private-file'] },
);

describe('strict mode (private-file)', () => {
  it('the value is only in the root-only private file; configcli gives it to nobody', async () => {
    const priv = await eventually(
      'private file',
      async () => {
        const r = await execIn(env, { pod: POD }, ['cat', '/etc/guestconfig/.priv_configmeta.json']);
        return r.code === 0 && r.stdout.includes(b64(VALUE)) ? r.stdout : undefined;
      },
      120_000,
      300,
    );
    expect(priv).toContain(b64(VALUE));
    const pub = await catIn(env, { pod: POD }, '/etc/guestconfig/configmeta.json');
    expect(pub.includes(b64(VALUE)) || pub.includes(VALUE)).toBe(false);
    expect(JSON.parse(pub).connections.secrets.creds[0].redacted).toBe(true);
    for (const where of [{ pod: POD }, { pod: POD, as: 'app' as const }]) {
      const r = await configcliGet(env, where, TOKEN);
      expect([where.as ?? 'root', r.stdout.includes(b64(VALUE))]).toEqual([where.as ?? 'root', false]);
    }
    expect(
      (await execIn(env, { pod: POD, as: 'app' }, ['cat', '/etc/guestconfig/.priv_configmeta.json'])).code,
    ).not.toBe(0);
  });
});
