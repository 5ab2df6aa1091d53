/**
 * Reads the API server's audit log (Metadata level for every write, see the harness's policy) to
 * count writes — the independent witness for "no object change means no write".
 */
import { readFileSync } from 'node:fs';

export interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  requestURI: string;
  userAgent?: string;
  user?: { username?: string };
  objectRef?: { resource?: string; namespace?: string; name?: string; subresource?: string; apiGroup?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
  /** When the stage was reached: for ResponseComplete, when the answer was complete. */
  stageTimestamp?: string;
}

export function readAudit(path: string): AuditEvent[] {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter((e) => e.stage === 'ResponseComplete');
}

export interface WriteFilter {
  namespace: string;
  /** Substring of the user agent, e.g. "kd-connections-reconciler". */
  userAgent?: string;
  since?: Date;
  /** Only successful writes (2xx). Default false: count attempts. */
  succeeded?: boolean;
}

export function writes(path: string, f: WriteFilter): AuditEvent[] {
  return readAudit(path).filter(
    (e) =>
      e.objectRef?.namespace === f.namespace &&
      ['create', 'update', 'patch', 'delete'].includes(e.verb) &&
      // A dry run persists nothing (the reconciler's probe after a refused JSON Patch asks whether its
      // `test` ops alone still fail): not a write.
      !/[?&]dryRun=/.test(e.requestURI ?? '') &&
      (!f.userAgent || (e.userAgent ?? '').includes(f.userAgent)) &&
      (!f.since || new Date(e.requestReceivedTimestamp) >= f.since) &&
      (!f.succeeded || ((e.responseStatus?.code ?? 0) >= 200 && (e.responseStatus?.code ?? 0) < 300)),
  );
}

/** "pods", "kubedirectorclusters", "kubedirectorclusters/status", "events" ... → count */
export function countByResource(events: AuditEvent[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of events) {
    const r = `${e.objectRef?.resource ?? '?'}${e.objectRef?.subresource ? '/' + e.objectRef.subresource : ''}`;
    out[r] = (out[r] ?? 0) + 1;
  }
  return out;
}
