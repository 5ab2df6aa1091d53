/**
 * Events through events.k8s.io/v1, deduplicated: the same note about the same object is posted once
 * per window (later repeats are only counted in memory), and each object gets at most a burst of
 * distinct notes per window and type (Normal events cannot crowd out a Warning), so a fan-out to hundreds of clusters cannot flood one ConfigMap's events.
 * Posting is fire-and-forget: an event that cannot be written is logged, never retried in a loop.
 */
import { randomBytes } from 'node:crypto';
import { errorMessage, type Logger } from './logger.js';
import type { KubeClient } from './kube-client.js';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

export interface EventInput {
  regarding: EventTarget;
  type: 'Normal' | 'Warning';
  reason: string;
  /** What happened, e.g. "Regenerate". */
  action: string;
  note: string;
  related?: EventTarget;
}

export interface EventRecorderOptions {
  client: KubeClient;
  /** The component posting, e.g. kd-connections-reconciler. */
  controller: string;
  instance: string;
  log: Logger;
  windowMs?: number;
  burstPerObject?: number;
  /** Notes and objects remembered at most (oldest forgotten first). Default 10,000. */
  maxTracked?: number;
  /** Called after each attempted write (for metrics). */
  onWrite?: (ok: boolean) => void;
}

/** events.k8s.io requires eventTime as a MicroTime: RFC 3339 with microseconds. */
export function microTime(d = new Date()): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

const NOTE_LIMIT = 1024;

export class EventRecorder {
  private readonly seen = new Map<string, number>();
  private readonly perObject = new Map<string, { count: number; since: number }>();
  private readonly window: number;
  private readonly burst: number;
  private readonly maxTracked: number;
  private lastPrune = 0;
  suppressed = 0;

  constructor(private readonly o: EventRecorderOptions) {
    this.window = o.windowMs ?? 10 * 60_000;
    this.burst = o.burstPerObject ?? 25;
    this.maxTracked = o.maxTracked ?? 10_000;
  }

  /** How many notes and objects are remembered (bounded by maxTracked each). */
  get tracked(): { notes: number; objects: number } {
    return { notes: this.seen.size, objects: this.perObject.size };
  }

  /**
   * Forgets what is older than the window (a full pass at most every tenth of a window) and, beyond
   * maxTracked, the oldest entries: both maps are in insertion order, which is time order.
   */
  private prune(now: number): void {
    if (now - this.lastPrune >= this.window / 10) {
      this.lastPrune = now;
      for (const [k, t] of this.seen) if (now - t > this.window) this.seen.delete(k);
      for (const [k, b] of this.perObject) if (now - b.since > this.window) this.perObject.delete(k);
    }
    for (const map of [this.seen, this.perObject] as Map<string, unknown>[]) {
      for (const k of map.keys()) {
        if (map.size <= this.maxTracked) break;
        map.delete(k);
      }
    }
  }

  /** Whether this event would be posted now (and records that it was). Pure bookkeeping, no I/O. */
  admit(e: EventInput, now = Date.now()): boolean {
    this.prune(now);
    const obj = `${e.regarding.kind}/${e.regarding.namespace ?? ''}/${e.regarding.name}/${e.regarding.uid ?? ''}`;
    const key = `${obj}|${e.type}|${e.reason}|${e.note}`;
    const at = this.seen.get(key);
    if (at !== undefined && now - at <= this.window) {
      this.suppressed++;
      return false;
    }
    // One budget per object and type: routine Normal events (a delivery per edit) never use up the
    // budget of the Warning that says why delivery is stuck.
    const budgetKey = `${obj}|${e.type}`;
    let budget = this.perObject.get(budgetKey);
    if (!budget || now - budget.since > this.window) {
      // Re-inserted so that insertion order stays time order.
      this.perObject.delete(budgetKey);
      this.perObject.set(budgetKey, (budget = { count: 0, since: now }));
    }
    if (budget.count >= this.burst) {
      this.suppressed++;
      return false;
    }
    budget.count++;
    this.seen.delete(key);
    this.seen.set(key, now);
    return true;
  }

  /**
   * Posts `e` unless the budget says no. `client` replaces the recorder's own for this post: a leader
   * passes its term-scoped client, so an event recorded just before its term ended is not sent after
   * (the scope's guard runs right before the request goes out, not when it is recorded).
   */
  record(e: EventInput, client: KubeClient = this.o.client): void {
    if (!this.admit(e)) return;
    const ns = e.regarding.namespace ?? 'default';
    const ref = (t: EventTarget) => ({
      apiVersion: t.apiVersion,
      kind: t.kind,
      namespace: t.namespace,
      name: t.name,
      uid: t.uid,
      resourceVersion: t.resourceVersion,
    });
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${e.regarding.name}.${randomBytes(8).toString('hex')}`.slice(0, 253), namespace: ns },
      eventTime: microTime(),
      reportingController: this.o.controller,
      reportingInstance: this.o.instance.slice(0, 128),
      action: e.action,
      reason: e.reason,
      type: e.type,
      note: e.note.length > NOTE_LIMIT ? e.note.slice(0, NOTE_LIMIT - 1) + '…' : e.note,
      regarding: ref(e.regarding),
      ...(e.related ? { related: ref(e.related) } : {}),
    };
    client
      .request('POST', `/apis/events.k8s.io/v1/namespaces/${ns}/events`, { body })
      .then(() => this.o.onWrite?.(true))
      .catch((err: unknown) => {
        this.o.onWrite?.(false);
        this.o.log.warn('could not post event', {
          reason: e.reason,
          object: `${ns}/${e.regarding.name}`,
          error: errorMessage(err),
        });
      });
  }
}
