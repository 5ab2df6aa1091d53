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

export function createLogger(opts: {
  level?: LogLevel;
  component: string;
  write?: (line: string) => void;
  base?: LogFields;
}): Logger {
  const level = opts.level ?? 'info';
  const write = opts.write ?? ((line: string) => process.stdout.write(line + '\n'));
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
