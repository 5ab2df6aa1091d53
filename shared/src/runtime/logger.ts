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
 * one such write per review. Here lines collect while one asynchronous write (libuv thread pool) is in
 * flight, and leave together in the next. Whatever is pending when the process exits is written
 * synchronously, so process.exit() loses nothing. Lines leave at the next event-loop turn, not after a
 * holding window, so a review's line reaches the log before the API server has its answer (the window's
 * A/B: docs/performance.md).
 */
const idleWaiters: (() => void)[] = [];
let stdoutBusy = () => false;

/** Resolves when every line logged so far has been written (call before process.exit). */
export function flushLogs(): Promise<void> {
  if (!stdoutBusy()) return Promise.resolve();
  return new Promise((r) => idleWaiters.push(r));
}

export function batchedStdout(fd = 1): (line: string) => void {
  let pending: string[] = [];
  let writing = false;
  stdoutBusy = () => writing || pending.length > 0;
  const flush = () => {
    if (!writing && pending.length === 0) for (const w of idleWaiters.splice(0)) w();
    if (writing || pending.length === 0) return;
    const chunk = Buffer.from(pending.join(''), 'utf8');
    pending = [];
    writing = true;
    const writeAll = (buf: Buffer) =>
      write(fd, buf, (err, n) => {
        if (!err && n < buf.length) return writeAll(buf.subarray(n));
        writing = false; // on error (stdout closed) the lines are dropped: nothing better to do with them
        flush();
      });
    writeAll(chunk);
  };
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
    if (!writing && pending.length === 1) setImmediate(flush);
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
  // An Error of another realm (a vm context, jest's sandbox) is not an instance of this one's.
  const message = (e as { message?: unknown } | null)?.message;
  if (typeof message === 'string') return message;
  return typeof e === 'string' ? e : JSON.stringify(e);
}
