/** Stable node ids (KubeDirector's rule): kept for life, next unused for new members, never reused. */
import { describe, expect, it } from '@jest/globals';
import { assignNodeIds, readNodeIdState, type NodeIdState } from '../src/configmeta/node-ids.js';

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
