/**
 * The event recorder's bookkeeping (admit): duplicates are suppressed within the window, each object
 * gets a burst, and what it remembers is bounded — old entries are forgotten after the window and, past
 * maxTracked, the oldest go first, so a long run over many objects does not grow memory.
 */
import { describe, expect, it } from '@jest/globals';
import { EventRecorder, type EventInput } from '../src/runtime/event-recorder.js';
import type { KubeClient } from '../src/runtime/kube-client.js';
import { silentLogger } from '../src/runtime/logger.js';

const recorder = (o: { windowMs?: number; burstPerObject?: number; maxTracked?: number } = {}) =>
  new EventRecorder({ client: {} as KubeClient, controller: 'test', instance: 'test', log: silentLogger, ...o });

const event = (name: string, note = 'changed'): EventInput => ({
  regarding: { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ml', name, uid: `uid-${name}` },
  type: 'Normal',
  reason: 'ConnectionUsed',
  action: 'Regenerate',
  note,
});

describe('EventRecorder.admit', () => {
  it('suppresses a repeat within the window and admits it again after', () => {
    const r = recorder({ windowMs: 1000 });
    expect(r.admit(event('a'), 0)).toBe(true);
    expect(r.admit(event('a'), 500)).toBe(false);
    expect(r.admit(event('a'), 1501)).toBe(true);
    expect(r.suppressed).toBe(1);
  });

  it('gives each object a burst of distinct notes per window', () => {
    const r = recorder({ windowMs: 1000, burstPerObject: 2 });
    expect([1, 2, 3].map((i) => r.admit(event('a', `note ${i}`), 10))).toEqual([true, true, false]);
    expect(r.admit(event('b'), 10)).toBe(true);
    expect(r.admit(event('a', 'note 4'), 1100)).toBe(true);
  });

  it("keeps a Warning's budget apart from Normal events: a run of deliveries cannot crowd out why one is stuck", () => {
    const r = recorder({ windowMs: 1000, burstPerObject: 2 });
    expect([1, 2, 3].map((i) => r.admit(event('a', `delivered ${i}`), 10))).toEqual([true, true, false]);
    expect(r.admit({ ...event('a', 'private Secret failed'), type: 'Warning' }, 20)).toBe(true);
  });

  it('forgets objects and notes once their window has passed', () => {
    const r = recorder({ windowMs: 1000 });
    for (let i = 0; i < 500; i++) r.admit(event(`cm-${i}`), i);
    expect(r.tracked).toEqual({ notes: 500, objects: 500 });
    r.admit(event('late'), 5000);
    expect(r.tracked).toEqual({ notes: 1, objects: 1 });
  });

  it('remembers at most maxTracked objects and notes, forgetting the oldest first', () => {
    const r = recorder({ windowMs: 60_000, maxTracked: 100 });
    for (let i = 0; i < 10_000; i++) expect(r.admit(event(`cm-${i}`), i)).toBe(true);
    expect(r.tracked.objects).toBeLessThanOrEqual(101);
    expect(r.tracked.notes).toBeLessThanOrEqual(101);
    // The newest are still remembered (a repeat is suppressed); the oldest were forgotten.
    expect(r.admit(event('cm-9999'), 10_000)).toBe(false);
    expect(r.admit(event('cm-0'), 10_001)).toBe(true);
  });
});

describe('EventRecorder.record', () => {
  it("posts with the client it is given (a leader's term-scoped one) instead of its own", async () => {
    const posted: string[] = [];
    const client = (name: string) =>
      ({
        request: async (method: string, path: string) => {
          posted.push(`${name} ${method} ${path}`);
          return {};
        },
      }) as unknown as KubeClient;
    const r = new EventRecorder({ client: client('own'), controller: 'test', instance: 'test', log: silentLogger });
    r.record(event('a', 'one'));
    r.record(event('a', 'two'), client('term'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(posted).toEqual([
      'own POST /apis/events.k8s.io/v1/namespaces/ml/events',
      'term POST /apis/events.k8s.io/v1/namespaces/ml/events',
    ]);
  });
});
