/**
 * KubeDirector's membership notifications in running containers, judged by the real configcli: with
 * --reconnect-hook, when a role grows or shrinks every other member runs
 * `/opt/guestconfig/<pkg>/startscript --addnodes|--delnodes --nodegroup 1 --role <role> --fqdns <…>` once,
 * and only once the configmeta in its container lists the change — the startscript asks configcli for the
 * role's fqdns when it runs and logs both. The member that joined hears nothing about itself. A failing
 * notification is named with its exit code in an event and the MembersNotified condition, and retried.
 *
 * The members are a StatefulSet (Parallel) of the configcli image; the running admission service's pod
 * webhook injects the kd-guestconfig sidecar, which writes the roster file the reconciler reads.
 */
import { describe, expect, it } from '@jest/globals';
import { CONFIGCLI_IMAGE, configcliImage } from '../images/configcli-image.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, getJson, kdApp, kdCluster, kubectlOk } from '../support/kd-objects.js';
import { eventually, sleep } from '../support/processes.js';
import { importImages, memberStatefulSet, useDeliveryServices, waitPodReady } from './node-support.js';

const env = useTestEnv();
const CLUSTER = 'notified';
const LOG = '/tmp/notify.log';

const services = useDeliveryServices(env, async (node) => importImages(node, [configcliImage()]), {
  // The first delivery waits for both seats (the harness's default is not to wait), so neither member hears of the other.
  reconcilerArgs: ['--reconnect-hook', '--reconnect-timeout=20s', '--first-delivery-wait=10m'],
});

type Obj = Record<string, any>;

/**
 * The startscript KubeDirector would have unpacked: it fails while /tmp/fail exists, and otherwise logs
 * its arguments and what the real configcli says the role's fqdns are at that moment.
 */
const STARTSCRIPT = [
  '#!/bin/sh',
  'if [ -e /tmp/fail ]; then echo "cannot reach the new peer" >&2; exit 4; fi',
  // configcli has no nodegroups namespace: the role's fqdns are reached through the distro's reference.
  `echo "$* | $(configcli -g distros.notified.1.roles.controller.fqdns 2>&1 | tr '\\n' ' ')" >> ${LOG}`,
].join('\n');

const statefulSet = (replicas: number) =>
  memberStatefulSet(CLUSTER, replicas, CONFIGCLI_IMAGE, [
    'sh',
    '-c',
    `mkdir -p /opt/guestconfig/appconfig && cat > /opt/guestconfig/appconfig/startscript <<'EOF'\n${STARTSCRIPT}\nEOF\n` +
      'chmod +x /opt/guestconfig/appconfig/startscript && exec sleep infinity',
  ]);

const fqdn = (i: number) => `${CLUSTER}-${i}.${CLUSTER}.${env.namespace}.svc.cluster.local`;
const inApp = (pod: string, script: string) => env.kubectl(['exec', pod, '-c', 'app', '--', 'sh', '-c', script]);
const logOf = async (pod: string) =>
  (await inApp(pod, `cat ${LOG} 2>/dev/null || true`)).stdout.split('\n').filter(Boolean);
const status = async (): Promise<Obj> => (await getJson(env, ['kdcluster', CLUSTER])).status ?? {};
const notified = async () => (await status()).conditions?.find((c: Obj) => c.type === 'MembersNotified');

/** Sets the role's seats and the StatefulSet's replicas together, as a user scaling the cluster would. */
async function scale(n: number): Promise<void> {
  await kubectlOk(env, [
    'patch',
    'kdcluster',
    CLUSTER,
    '--type=json',
    '-p',
    JSON.stringify([{ op: 'replace', path: '/spec/roles/0/members', value: n }]),
  ]);
  await kubectlOk(env, ['scale', 'statefulset', CLUSTER, `--replicas=${n}`]);
}

/** Waits until `pod`'s log has `n` lines, then a little longer to see that no further run comes. */
async function linesOf(pod: string, n: number): Promise<string[]> {
  await eventually(`${pod} logged ${n} notification(s)`, async () =>
    (await logOf(pod)).length >= n ? true : undefined,
  );
  await sleep(3000);
  return logOf(pod);
}

describe('--addnodes / --delnodes (real StatefulSet, real configcli)', () => {
  it('members set up together hear of nothing; a third member is announced once to each of them, with its fqdn in their configmeta', async () => {
    const app = kdApp('notified-app', { roles: ['controller'], distroID: 'notified' }) as Obj;
    app.spec.roles[0].configPackage = { packageURL: 'file:///opt/configs/appconfig.tgz' };
    await apply(env, [app, kdCluster(CLUSTER, 'notified-app', {}, ['controller'], 2)]);
    await apply(env, [statefulSet(2)]);
    await waitPodReady(env, `${CLUSTER}-0`);
    await waitPodReady(env, `${CLUSTER}-1`);
    // Both baselined at the journal's first roster.
    await eventually('both members are tracked at change 0', async () => {
      const s = await status();
      const r = s.memberReconnects ?? {};
      return s.rosterChanges?.seq === 0 && r[`${CLUSTER}-0`]?.rosterSeq === 0 && r[`${CLUSTER}-1`]?.rosterSeq === 0
        ? true
        : undefined;
    });
    expect(await logOf(`${CLUSTER}-0`)).toEqual([]);

    await scale(3);
    await waitPodReady(env, `${CLUSTER}-2`);
    for (const pod of [`${CLUSTER}-0`, `${CLUSTER}-1`]) {
      const lines = await linesOf(pod, 1);
      expect(lines).toHaveLength(1);
      const [args, seen] = lines[0]!.split(' | ');
      expect(args).toBe(`--addnodes --nodegroup 1 --role controller --fqdns ${fqdn(2)}`);
      // When the startscript ran, configcli already listed the new member.
      expect(seen).toContain(fqdn(2));
    }
    expect(await logOf(`${CLUSTER}-2`)).toEqual([]);
    const s = await status();
    expect(s.memberReconnects[`${CLUSTER}-2`]).toMatchObject({ rosterSeq: 1 });
    expect(s.rosterChanges).toMatchObject({ seq: 1, changes: [] });
    expect(await notified()).toMatchObject({ status: 'True' });
    expect(
      await services.reconciler.metric('kd_reconciler_reconnect_hooks_total', { hook: 'addnodes', result: 'ok' }),
    ).toBe(2);
  });

  it('a role that shrinks is announced once with --delnodes, after configcli stops listing the member', async () => {
    await scale(2);
    for (const pod of [`${CLUSTER}-0`, `${CLUSTER}-1`]) {
      const lines = await linesOf(pod, 2);
      expect(lines).toHaveLength(2);
      const [args, seen] = lines[1]!.split(' | ');
      expect(args).toBe(`--delnodes --nodegroup 1 --role controller --fqdns ${fqdn(2)}`);
      expect(seen).not.toContain(fqdn(2));
      expect(seen).toContain(fqdn(1));
    }
    expect((await status()).rosterChanges).toMatchObject({ seq: 2, changes: [] });
  });

  it('a failing notification names the member and exit code, and is run again until it succeeds', async () => {
    await inApp(`${CLUSTER}-0`, 'touch /tmp/fail');
    await scale(3);
    const c = await eventually('MembersNotified names the failing member', async () => {
      const cond = await notified();
      return cond?.status === 'False' ? cond : undefined;
    });
    expect(c.reason).toBe('NotifyFailed');
    expect(c.message).toContain(`${CLUSTER}-0 (change 3, --addnodes for role controller: exit code 4`);
    const events = await getJson(env, ['events', '--field-selector', 'reason=NotifyFailed']);
    const notes = events.items.map((e: Obj) => e.note ?? e.message).join('\n');
    expect(notes).toContain(`in pod ${CLUSTER}-0 (container app) for membership change 3 failed: exit code 4`);
    expect(notes).toContain('cannot reach the new peer');
    // The other member heard of it once, as before.
    expect(await linesOf(`${CLUSTER}-1`, 3)).toHaveLength(3);

    await inApp(`${CLUSTER}-0`, 'rm -f /tmp/fail');
    const lines = await linesOf(`${CLUSTER}-0`, 3);
    expect(lines).toHaveLength(3);
    expect(lines[2]!.split(' | ')[0]).toBe(`--addnodes --nodegroup 1 --role controller --fqdns ${fqdn(2)}`);
    await eventually('MembersNotified is True again', async () =>
      (await notified())?.status === 'True' ? true : undefined,
    );
  });
});
