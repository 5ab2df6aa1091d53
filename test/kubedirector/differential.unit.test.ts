/**
 * The in-pod differential's comparison itself (no cluster): names are replaced only where whole, from the
 * API's names; a member either side lacks, a differing node id or configcli answer is unexplained; a
 * difference one of the allowed reasons names is explained; a pod the API does not list fails.
 */
import { describe, expect, it } from '@jest/globals';
import type { Json } from '../../shared/test/configcli-reader.js';
import {
  compareSnapshots,
  differencesTable,
  replaceNames,
  snapshotOf,
  type MemberViews,
  type SideNames,
} from './differential.js';

const side = (pod: string, uid: string, ns: string): SideNames => ({
  namespace: ns,
  clusters: { one: { uid, service: `svc-${pod}`, roles: { main: [pod] } } },
});

/** A member's document as a side renders it: its fqdn, node id, a connected cluster's refkey. */
function member(pod: string, uid: string, ns: string, o: { id?: string; refkey?: string[]; answer?: string } = {}) {
  const fqdn = `${pod}.svc-${pod}.${ns}.svc.cluster.local`;
  const doc: Json = {
    cluster: { name: 'one', id: uid },
    node: { role_id: 'main', id: o.id ?? '1', fqdn },
    connections: { clusters: { two: { cluster: { config_metadata: { bdvlibrefkey: o.refkey ?? ['x'] } } } } },
  };
  const views: MemberViews = { pod, cat: { root: doc, 'non-root': doc }, configcli: { 'node.fqdn': o.answer ?? fqdn } };
  return views;
}

describe('the in-pod differential comparison', () => {
  it('replaces whole names only', () => {
    const names = new Map([['kdss-a-0', '<one:main#0>']]);
    expect(replaceNames('kdss-a-0.s kdss-a-01 xkdss-a-0', names)).toBe('<one:main#0>.s kdss-a-01 xkdss-a-0');
  });

  it('two sides that differ only in names compare equal; a node id or a configcli answer does not', () => {
    const kd = snapshotOf([member('kdss-x-0', 'u1', 'ns1')], side('kdss-x-0', 'u1', 'ns1'));
    const same = snapshotOf([member('one-main-0', 'u2', 'ns2')], side('one-main-0', 'u2', 'ns2'));
    expect(compareSnapshots(kd, same)).toEqual({ unexplained: [], explained: [] });
    const otherId = snapshotOf([member('one-main-0', 'u2', 'ns2', { id: '2' })], side('one-main-0', 'u2', 'ns2'));
    expect(compareSnapshots(kd, otherId).unexplained).toEqual([
      '<one:main#0> cat as root node.id: KubeDirector "1", ours "2"',
      '<one:main#0> cat as app node.id: KubeDirector "1", ours "2"',
    ]);
    const otherAnswer = snapshotOf(
      [member('one-main-0', 'u2', 'ns2', { answer: 'x' })],
      side('one-main-0', 'u2', 'ns2'),
    );
    expect(compareSnapshots(kd, otherAnswer).unexplained).toHaveLength(1);
  });

  it('a name the API does not give is not normalized away (a wrong uid shows)', () => {
    const kd = snapshotOf([member('kdss-x-0', 'u1', 'ns1')], side('kdss-x-0', 'u1', 'ns1'));
    const wrongUid = snapshotOf([member('one-main-0', 'stale-uid', 'ns2')], side('one-main-0', 'u2', 'ns2'));
    expect(compareSnapshots(kd, wrongUid).unexplained[0]).toContain(
      'cluster.id: KubeDirector "<uid:one>", ours "stale-uid"',
    );
  });

  it('an allowed difference is explained with its reason and values; the table shows it', () => {
    const kd = snapshotOf([member('kdss-x-0', 'u1', 'ns1', { refkey: ['nodegroups'] })], side('kdss-x-0', 'u1', 'ns1'));
    const ours = snapshotOf(
      [member('one-main-0', 'u2', 'ns2', { refkey: ['connections', 'clusters', 'two', 'nodegroups'] })],
      side('one-main-0', 'u2', 'ns2'),
    );
    const r = compareSnapshots(kd, ours);
    expect(r.unexplained).toEqual([]);
    expect(r.explained.map((e) => [e.reason, e.field])).toEqual([
      ['connected-refkeys-prefixed', 'connections.clusters.two.cluster.config_metadata.bdvlibrefkey'],
      ['connected-refkeys-prefixed', 'connections.clusters.two.cluster.config_metadata.bdvlibrefkey'],
    ]);
    expect(differencesTable(r.explained)).toContain('| `connected-refkeys-prefixed` |');
  });

  it('a member only one side has, and a pod the API does not list, are named', () => {
    const kd = snapshotOf([member('kdss-x-0', 'u1', 'ns1')], side('kdss-x-0', 'u1', 'ns1'));
    expect(compareSnapshots(kd, new Map()).unexplained).toEqual(['<one:main#0>: a member only KubeDirector has']);
    expect(() => snapshotOf([member('a-0', 'u', 'n')], side('c-0', 'u', 'n'))).toThrow('pod a-0 is not a member');
  });
});
