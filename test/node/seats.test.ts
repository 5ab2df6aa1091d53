/**
 * Membership by seats in real containers, read with the real configcli: a kdcluster whose role has
 * `members: 2`, filled by a StatefulSet (podManagementPolicy Parallel, as KubeDirector makes them) of the
 * configcli image.
 *
 * - The first delivery waits for both seats: with one replica the pod gets no document (its app does not
 *   start: the sidecar's startupProbe waits for the file) and status names the vacant seat; scaled to two,
 *   both members' first documents list both.
 * - A member whose pod is deleted and recreated keeps its node id, and the other member's document is
 *   never rewritten for it.
 * - A labelled pod beyond the seats gets no document and is named in status and in a Warning.
 */
import { describe, expect, it } from '@jest/globals';
import { CONFIGCLI_IMAGE, catIn, configcliImage, configcliValue } from '../images/configcli-image.js';
import { useTestEnv } from '../support/cluster.js';
import { apply, getJson, kdApp, kdCluster, kubectlOk } from '../support/kd-objects.js';
import { eventually } from '../support/processes.js';
import { importImages, memberStatefulSet, nodeMemberPod, useDeliveryServices, waitPodReady } from './node-support.js';
import { ANNOTATION_CONFIGMETA } from '@kd-connections/shared/domain';

const env = useTestEnv();
const CLUSTER = 'seats';

// A wait long enough that only the second pod can end it.
useDeliveryServices(env, async (node) => importImages(node, [configcliImage()]), {
  reconcilerArgs: ['--first-delivery-wait=10m'],
});

// No command: the image's own (sleep infinity).
const statefulSet = (replicas: number) => memberStatefulSet(CLUSTER, replicas, CONFIGCLI_IMAGE);

const seated = async () =>
  ((await getJson(env, ['kdcluster', CLUSTER])).status?.conditions ?? []).find(
    (c: { type: string }) => c.type === 'MembersSeated',
  );
const annotation = async (pod: string): Promise<string | undefined> =>
  (await getJson(env, ['pod', pod])).metadata.annotations?.[ANNOTATION_CONFIGMETA];
const inPod = (pod: string, as?: 'app') => ({ pod, ...(as ? { as } : {}) });

describe('members fill the seats the spec declares (real StatefulSet, real configcli)', () => {
  it('the first delivery waits for every seat, then both members get a document listing both', async () => {
    await apply(env, [
      kdApp('seats-app', { roles: ['controller'] }),
      kdCluster(CLUSTER, 'seats-app', {}, ['controller'], 2),
    ]);
    await apply(env, [statefulSet(1)]);
    const waiting = await eventually('status names the vacant seat', async () => {
      const c = await seated();
      return c?.reason === 'WaitingForMembers' ? c : undefined;
    });
    expect(waiting.message).toContain('no pod yet for controller seat 1');
    // Held: the pod exists, has no document, and its app has not started.
    const pod0 = await getJson(env, ['pod', `${CLUSTER}-0`]);
    expect(pod0.metadata.annotations?.[ANNOTATION_CONFIGMETA]).toBeUndefined();
    expect(
      pod0.status.containerStatuses?.find((s: { name: string }) => s.name === 'app')?.state?.running,
    ).toBeUndefined();

    await kubectlOk(env, ['scale', 'statefulset', CLUSTER, '--replicas=2']);
    await waitPodReady(env, `${CLUSTER}-0`);
    await waitPodReady(env, `${CLUSTER}-1`);
    const fqdn = (i: number) => `${CLUSTER}-${i}.${CLUSTER}.${env.namespace}.svc.cluster.local`;
    for (const [i, as] of [
      [0, undefined],
      [1, 'app'],
    ] as const) {
      const doc = JSON.parse(await catIn(env, inPod(`${CLUSTER}-${i}`), '/etc/guestconfig/configmeta.json'));
      expect(doc.nodegroups['1'].roles.controller.node_ids).toEqual(['1', '2']);
      expect(doc.nodegroups['1'].roles.controller.fqdns).toEqual([fqdn(0), fqdn(1)]);
      expect(await configcliValue(env, inPod(`${CLUSTER}-${i}`, as), 'node.id')).toBe(String(i + 1));
      expect(await configcliValue(env, inPod(`${CLUSTER}-${i}`, as), 'node.fqdn')).toBe(fqdn(i));
    }
    expect(await seated()).toMatchObject({ status: 'True', reason: 'Seated' });
  });

  it('a member whose pod is recreated keeps its id; the other member is not rewritten for it', async () => {
    const before = await annotation(`${CLUSTER}-0`);
    const uid = (await getJson(env, ['pod', `${CLUSTER}-1`])).metadata.uid;
    await kubectlOk(env, ['delete', 'pod', `${CLUSTER}-1`, '--wait=true']);
    await eventually('the StatefulSet recreated seats-1', async () => {
      const p = await getJson(env, ['pod', `${CLUSTER}-1`]).catch(() => undefined);
      return p && p.metadata.uid !== uid;
    });
    await waitPodReady(env, `${CLUSTER}-1`);
    expect(await configcliValue(env, inPod(`${CLUSTER}-1`), 'node.id')).toBe('2');
    expect(await configcliValue(env, inPod(`${CLUSTER}-1`, 'app'), 'node.id')).toBe('2');
    expect(await annotation(`${CLUSTER}-0`)).toBe(before);
    const status = (await getJson(env, ['kdcluster', CLUSTER])).status;
    expect(status).toMatchObject({ lastNodeID: 2, nodeIDs: { [`${CLUSTER}-0`]: 1, [`${CLUSTER}-1`]: 2 } });
  });

  it('a labelled pod beyond the seats gets no document and is named in status and a Warning', async () => {
    await apply(env, [nodeMemberPod(`${CLUSTER}-extra`, CLUSTER)]);
    const c = await eventually('status names the extra pod', async () => {
      const s = await seated();
      return s?.reason === 'PodsBeyondSeats' ? s : undefined;
    });
    expect(c.message).toContain(`${CLUSTER}-extra: its name does not end in a StatefulSet ordinal`);
    const events = await getJson(env, ['events', '--field-selector', 'reason=PodsBeyondSeats']);
    expect(events.items.map((e: { message?: string; note?: string }) => e.message ?? e.note).join('\n')).toContain(
      `${CLUSTER}-extra`,
    );
    expect(await annotation(`${CLUSTER}-extra`)).toBeUndefined();
    // Every member's document still lists exactly the two seats.
    const doc = JSON.parse(await catIn(env, inPod(`${CLUSTER}-0`), '/etc/guestconfig/configmeta.json'));
    expect(doc.nodegroups['1'].roles.controller.node_ids).toEqual(['1', '2']);
    await kubectlOk(env, ['delete', 'pod', `${CLUSTER}-extra`, '--wait=false']);
  });
});
