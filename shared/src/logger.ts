import { write, writeSync } from 'node:fs';

/**
 * Structured JSON logs, one object per line. Callers pass identifiers (uid, kind, namespace/name,
 * decision, latency) — never object bodies — so Secret data cannot end up in a log by accident.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type LogFields = Record<string, string | number | boolean | null | undefined | string[]>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
  readonly level: LogLevel;
}

export function parseLogLevel(v: string | undefined, fallback: LogLevel = 'info'): LogLevel {
  return v && v in ORDER ? (v as LogLevel) : fallback;
}

/**
 * Writes lines to stdout in batches and off the event loop. On Linux a write to a pipe (a container's
 * stdout) blocks the process until the reader takes it, and one log line per admission review would be
 * one such write per review. Here lines collect for up to FLUSH_INTERVAL_MS (or FLUSH_BYTES) and leave
 * together in one asynchronous write (libuv thread pool). Flushing at every event-loop turn instead made
 * one write (and one thread-pool hand-off) per two lines at 4,000 lines a second, against one per 32
 * lines this way; the flush's write was 23 % of the admission service's CPU-profile samples at full load,
 * 3 % this way (test/bench/results/2026-12-03-adm-prof-before.md, -after.md). Whatever is pending when
 * the process exits is written synchronously, so process.exit() loses nothing.
 */
const idleWaiters: (() => void)[] = [];
let stdoutBusy = () => false;
let flushNow = () => {};

/** How long a line may wait for others before it is written: far below what a reader of logs notices. */
export const FLUSH_INTERVAL_MS = 20;
/** A batch this large is written at once. */
export const FLUSH_BYTES = 64 * 1024;

/** Resolves when every line logged so far has been written (call before process.exit). */
export function flushLogs(): Promise<void> {
  if (!stdoutBusy()) return Promise.resolve();
  const idle = new Promise<void>((r) => idleWaiters.push(r));
  flushNow();
  return idle;
}

export function batchedStdout(fd = 1): (line: string) => void {
  let pending: string[] = [];
  let pendingBytes = 0;
  let writing = false;
  let timer: NodeJS.Timeout | undefined;
  stdoutBusy = () => writing || pending.length > 0;
  // Lines wait for the window to close (or the batch to fill, or a flushLogs caller).
  const schedule = (): void => {
    if (writing || pending.length === 0) {
      if (!writing) for (const w of idleWaiters.splice(0)) w();
      return;
    }
    if (pendingBytes >= FLUSH_BYTES || idleWaiters.length > 0) return flush();
    if (timer === undefined) {
      timer = setTimeout(flush, FLUSH_INTERVAL_MS);
      // Pending lines never keep the process alive: the exit handler writes them.
      timer.unref();
    }
  };
  const flush = (): void => {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (writing || pending.length === 0) return schedule();
    const chunk = Buffer.from(pending.join(''), 'utf8');
    pending = [];
    pendingBytes = 0;
    writing = true;
    const writeAll = (buf: Buffer) =>
      write(fd, buf, (err, n) => {
        if (!err && n < buf.length) return writeAll(buf.subarray(n));
        writing = false; // on error (stdout closed) the lines are dropped: nothing better to do with them
        schedule();
      });
    writeAll(chunk);
  };
  flushNow = flush;
  process.on('exit', () => {
    if (pending.length === 0) return;
    try {
      writeSync(fd, pending.join(''));
    } catch {
      // stdout is gone; nothing more to do
    }
    pending = [];
  });
  return (line) => {
    pending.push(line + '\n');
    pendingBytes += line.length + 1;
    schedule();
  };
}

let sharedStdout: ((line: string) => void) | undefined;

export function createLogger(opts: {
  level?: LogLevel;
  component: string;
  write?: (line: string) => void;
  base?: LogFields;
}): Logger {
  const level = opts.level ?? 'info';
  const write = opts.write ?? (sharedStdout ??= batchedStdout());
  const make = (base: LogFields): Logger => {
    const emit = (l: LogLevel, msg: string, fields?: LogFields) => {
      if (ORDER[l] < ORDER[level]) return;
      write(
        JSON.stringify({
          time: new Date().toISOString(),
          level: l,
          component: opts.component,
          msg,
          ...base,
          ...fields,
        }),
      );
    };
    return {
      level,
      debug: (m, f) => emit('debug', m, f),
      info: (m, f) => emit('info', m, f),
      warn: (m, f) => emit('warn', m, f),
      error: (m, f) => emit('error', m, f),
      child: (f) => make({ ...base, ...f }),
    };
  };
  return make(opts.base ?? {});
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = createLogger({ component: 'silent', level: 'error', write: () => {} });

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return typeof e === 'string' ? e : JSON.stringify(e);
}
