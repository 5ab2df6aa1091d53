/**
 * The V8 heap of a service process, measured through its inspector (started with
 * `--inspect=127.0.0.1:0`, loopback only): a full garbage collection, then the bytes still in use.
 * RSS is a poor leak signal for a V8 process — the heap grows lazily, returns little and, on a loaded
 * machine, collects later — while the heap in use right after a full collection holds only what the
 * process still references.
 */
import type { ServiceProcess } from './processes.js';
import { eventually } from './processes.js';

/** NODE_OPTIONS for a service whose heap a test measures: `base` (its usual NODE_OPTIONS) and the inspector. */
export const inspectorNodeOptions = (base: string): string => `${base} --inspect=127.0.0.1:0`.trim();

/** The inspector's WebSocket URL, from the line Node prints to stderr. */
export async function inspectorUrl(p: ServiceProcess): Promise<string> {
  return eventually('the inspector to listen', () => {
    const m = /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/[\w-]+)/.exec(p.output());
    return m?.[1];
  });
}

export interface HeapUsage {
  /** Bytes of the V8 heap in use after a full collection. */
  usedBytes: number;
  /** Bytes V8 has reserved for the heap. */
  totalBytes: number;
}

/** Collects garbage in the process behind `url` (twice: weak callbacks free more on the second) and reads its heap. */
export async function heapAfterGc(url: string): Promise<HeapUsage> {
  const ws = new WebSocket(url);
  await new Promise<void>((ok, fail) => {
    ws.addEventListener('open', () => ok(), { once: true });
    ws.addEventListener('error', () => fail(new Error(`inspector ${url}: connection failed`)), { once: true });
  });
  let nextId = 1;
  const pending = new Map<number, { ok: (r: unknown) => void; fail: (e: Error) => void }>();
  ws.addEventListener('message', (ev) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string } };
    const waiter = msg.id === undefined ? undefined : pending.get(msg.id);
    if (!waiter) return;
    pending.delete(msg.id!);
    if (msg.error) waiter.fail(new Error(`inspector: ${msg.error.message}`));
    else waiter.ok(msg.result);
  });
  const call = <T>(method: string): Promise<T> =>
    new Promise<T>((ok, fail) => {
      const id = nextId++;
      pending.set(id, { ok: ok as (r: unknown) => void, fail });
      ws.send(JSON.stringify({ id, method }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage');
    const u = await call<{ usedSize: number; totalSize: number }>('Runtime.getHeapUsage');
    return { usedBytes: u.usedSize, totalBytes: u.totalSize };
  } finally {
    ws.close();
  }
}
