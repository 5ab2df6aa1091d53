/** Stable node ids (KubeDirector's rule): kept for life, next unused for new members, never reused. */
import { describe, expect, it } from '@jest/globals';
import { membersOf, nodeIdStateOf } from '../src/members.js';
import {
  assignNodeIds,
  compareMemberNames,
  readNodeIdState,
  statefulSetRetention,
  type NodeIdState,
} from '../src/node-ids.js';
import type { KDCluster } from '../src/types.js';
import { app, cluster, pod } from './fixtures.js';

const EMPTY: NodeIdState = { lastNodeID: 0, nodeIDs: {} };
const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

describe('assignNodeIds', () => {
  it('numbers new members from lastNodeID + 1 in the given order', () => {
    expect(assignNodeIds(EMPTY, ['a-0', 'a-1', 'b-0'])).toEqual({
      lastNodeID: 3,
      nodeIDs: { 'a-0': 1, 'a-1': 2, 'b-0': 3 },
    });
  });

  it('scaling a role down and up again never renumbers anyone and never reuses an id', () => {
    let s = assignNodeIds(EMPTY, names('w', 12));
    expect(s.nodeIDs['w-11']).toBe(12);
    // w-3 and w-10 go away: nobody else moves.
    const rest = names('w', 12).filter((n) => n !== 'w-3' && n !== 'w-10');
    const after = assignNodeIds(s, rest);
    for (const n of rest) expect(after.nodeIDs[n]).toBe(s.nodeIDs[n]);
    expect(after.nodeIDs).not.toHaveProperty('w-3');
    expect(after.lastNodeID).toBe(12);
    s = after;
    // They come back (same names) and a new one joins: new ids, past every id ever given.
    const back = assignNodeIds(s, [...rest, 'w-3', 'w-10', 'w-12']);
    expect([back.nodeIDs['w-3'], back.nodeIDs['w-10'], back.nodeIDs['w-12']]).toEqual([13, 14, 15]);
    expect(back.lastNodeID).toBe(15);
  });

  it('a pod kept under its name keeps its id', () => {
    const s = assignNodeIds(EMPTY, ['x-0', 'x-1']);
    expect(assignNodeIds(s, ['x-1', 'x-0'])).toEqual(s);
  });
});

describe('readNodeIdState', () => {
  it('drops bad and repeated ids, and never lets lastNodeID fall below a kept id', () => {
    expect(
      readNodeIdState({
        lastNodeID: 2,
        nodeIDs: { a: 1, b: 7, c: 0, d: 1.5, e: 'x', f: 7 } as Record<string, unknown>,
      }),
    ).toEqual({ lastNodeID: 7, nodeIDs: { a: 1, b: 7 } });
    expect(readNodeIdState(undefined)).toEqual(EMPTY);
    expect(readNodeIdState({ lastNodeID: 'x', nodeIDs: [] })).toEqual(EMPTY);
  });
});

describe('compareMemberNames', () => {
  it('compares numeric runs as numbers: -2 before -10', () => {
    expect(['k-10', 'k-2', 'k-1', 'j-3'].sort(compareMemberNames)).toEqual(['j-3', 'k-1', 'k-2', 'k-10']);
  });
});

describe('membersOf with stored ids', () => {
  const kafka = app('kafka', { roles: [{ id: 'broker' }] });
  const brokers = (n: number) => names('kafka', n).map((p) => pod(p, 'kafka', 'broker'));

  it('a member -10 gets its id by creation order, not by name order', () => {
    const c = cluster('kafka', 'kafka', { roles: [{ id: 'broker', members: 11 }] });
    const members = membersOf(c, kafka, brokers(11));
    expect(members.map((m) => [m.pod, m.id]).slice(-2)).toEqual([
      ['kafka-9', '10'],
      ['kafka-10', '11'],
    ]);
  });

  it('reads status.lastNodeID / status.nodeIDs and keeps every id when a middle member leaves', () => {
    const c = cluster('kafka', 'kafka', { roles: [{ id: 'broker', members: 11 }] });
    const first = membersOf(c, kafka, brokers(11));
    const stored = nodeIdStateOf(c, first);
    expect(stored.lastNodeID).toBe(11);
    const scaled = cluster('kafka', 'kafka', { roles: [{ id: 'broker', members: 10 }], status: { ...stored } });
    const pods = brokers(11).filter((p) => p.metadata.name !== 'kafka-4');
    const second = membersOf(scaled, kafka, [...pods, pod('kafka-11', 'kafka', 'broker')]);
    const byPod = Object.fromEntries(second.map((m) => [m.pod, m.id]));
    for (const m of first) if (m.pod !== 'kafka-4') expect(byPod[m.pod]).toBe(m.id);
    expect(byPod['kafka-11']).toBe('12');
    expect(nodeIdStateOf(scaled, second).lastNodeID).toBe(12);
  });
});

describe('a departed member keeps its id while it may come back under its name', () => {
  const kafka = app('kafka', { roles: [{ id: 'broker' }] });
  const c = cluster('kafka', 'kafka', { roles: [{ id: 'broker', members: 3 }] });
  const brokers = (ns: number[]) => ns.map((i) => pod(`kafka-${i}`, 'kafka', 'broker'));

  it('a restarting StatefulSet pod (ordinal below the declared size) gets its id back', () => {
    const first = nodeIdStateOf(c, membersOf(c, kafka, brokers([0, 1, 2])));
    // kafka-1 is gone for a moment (deleted, not yet recreated): its id stays reserved.
    const during: KDCluster = { ...c, status: { ...first } };
    const gone = nodeIdStateOf(during, membersOf(during, kafka, brokers([0, 2])));
    expect(gone.nodeIDs).toEqual(first.nodeIDs);
    const back: KDCluster = { ...c, status: { ...gone } };
    expect(membersOf(back, kafka, brokers([0, 1, 2])).map((m) => m.id)).toEqual(['1', '2', '3']);
  });

  it('after a shrink the ordinal is past the declared size: the id is released and never reused', () => {
    const first = nodeIdStateOf(c, membersOf(c, kafka, brokers([0, 1, 2])));
    const shrunk = cluster('kafka', 'kafka', { roles: [{ id: 'broker', members: 2 }], status: { ...first } });
    const after = nodeIdStateOf(shrunk, membersOf(shrunk, kafka, brokers([0, 1])));
    expect(after).toEqual({ lastNodeID: 3, nodeIDs: { 'kafka-0': 1, 'kafka-1': 2 } });
    const grown = cluster('kafka', 'kafka', { roles: [{ id: 'broker', members: 3 }], status: { ...after } });
    expect(membersOf(grown, kafka, brokers([0, 1, 2])).map((m) => m.id)).toEqual(['1', '2', '4']);
  });

  it('statefulSetRetention keeps only ordinals below the largest declared size', () => {
    const keep = statefulSetRetention([2, 5]);
    expect(['a-0', 'a-4', 'a-5', 'random-abcde', 'x'].filter(keep)).toEqual(['a-0', 'a-4']);
  });
});
