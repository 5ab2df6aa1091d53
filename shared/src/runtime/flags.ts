/**
 * The one command-line layer of every program here (admission, reconciler, kd-connections-certs):
 * flags with environment fallbacks, one help format, Go-style durations and one boolean vocabulary.
 *
 * - `--name=value` or `--name value`; booleans also as `--name` and `--no-name`.
 * - A flag wins over its environment variable, which wins over the default; an empty variable is unset.
 * - Booleans: true/false, 1/0, yes/no, any case. (on/off were accepted by one service only; refused
 *   now so that the same value means the same thing everywhere.)
 * - Durations as Go's time.ParseDuration reads them ("90s", "1h30m", "1500ms"); flags that used to take
 *   plain seconds still do (`bareSeconds`).
 * - Lists are comma-separated and the flag may repeat (values add up, as pflag's string slices do).
 * - A repeated single-value flag: the last wins (so a harness can append overrides), unless the
 *   program asks for `repeats: 'error'`.
 * - `--help`/`-h` and `--version` are answered by every program.
 * - A renamed flag or variable keeps its old name (`formerly`) for one minor version: it still works, and
 *   the parse result says so in `deprecations` for the program to log.
 * Errors are FlagErrors naming the flag (and the variable, when the value came from there).
 */
import { readFileSync } from 'node:fs';

export type FlagType = 'string' | 'int' | 'bool' | 'list' | 'duration';

export interface FlagSpec {
  type: FlagType;
  env?: string;
  /** A duration's default is its text ("15s"); the parsed value is milliseconds. */
  default?: string | number | boolean | string[];
  help: string;
  required?: boolean;
  /** int: bounds. duration: bounds in milliseconds. */
  min?: number;
  max?: number;
  /** duration: a plain number counts as seconds (for flags that took seconds before durations). */
  bareSeconds?: boolean;
  /** Placeholder in the help (default: the type). */
  metavar?: string;
  /** Old names that still work until DEPRECATED_NAMES_REMOVED_IN, with a deprecation message. */
  formerly?: { flags?: string[]; env?: string[] };
}

/** The release that drops the names in `formerly` (they keep working for one minor version). */
export const DEPRECATED_NAMES_REMOVED_IN = '0.3.0';

type Value<T extends FlagType> = T extends 'int' | 'duration'
  ? number
  : T extends 'bool'
    ? boolean
    : T extends 'list'
      ? string[]
      : string;

/** Booleans and lists always have a value; the others only with a default or when required. */
export type FlagValues<S extends Record<string, FlagSpec>> = {
  [K in keyof S]: S[K]['type'] extends 'bool' | 'list'
    ? Value<S[K]['type']>
    : S[K] extends { default: unknown } | { required: true }
      ? Value<S[K]['type']>
      : Value<S[K]['type']> | undefined;
};

export class FlagError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FlagError';
  }
}

export interface ParseOptions {
  /** 'last' (default): a repeated single-value flag takes the last value. 'error': refuse the repeat. */
  repeats?: 'last' | 'error';
}

export type CommandLine<S extends Record<string, FlagSpec>> =
  | { kind: 'help' }
  | { kind: 'version' }
  | {
      kind: 'run';
      values: FlagValues<S>;
      /** The text each value came from (flag, variable or default), for messages that quote it. */
      raw: { [K in keyof S]?: string };
      /** One sentence per old name used (see FlagSpec.formerly), for the program to log as a warning. */
      deprecations: string[];
    };

const TRUE = ['true', '1', 'yes'];
const FALSE = ['false', '0', 'no'];

/** A boolean the one way every program reads it; undefined when the text is none of the accepted words. */
export function parseBool(text: string): boolean | undefined {
  const v = text.trim().toLowerCase();
  if (TRUE.includes(v)) return true;
  if (FALSE.includes(v)) return false;
  return undefined;
}

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DURATION_PART = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/;

/** Milliseconds of a Go-style duration ("8760h", "1h30m", "1500ms", "0"); undefined when it is not one. */
export function durationMs(text: string): number | undefined {
  let rest = text.trim();
  if (rest === '0') return 0;
  if (rest === '') return undefined;
  let ms = 0;
  while (rest.length > 0) {
    const m = DURATION_PART.exec(rest);
    if (!m) return undefined;
    ms += Number(m[1]) * UNIT_MS[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return Math.round(ms);
}

/** A duration the way help texts show it: "90s", "1h30m", "1500ms". */
export function formatDuration(ms: number): string {
  if (ms % 1000 !== 0) return `${ms}ms`;
  const s = ms / 1000;
  const parts = [
    [Math.floor(s / 3600), 'h'],
    [Math.floor((s % 3600) / 60), 'm'],
    [s % 60, 's'],
  ] as const;
  return parts.map(([n, unit]) => (n > 0 ? `${n}${unit}` : '')).join('') || '0s';
}

/**
 * One duration flag's value in milliseconds; `name` without dashes. Throws a FlagError that says what
 * was expected (the bounds, and whether a plain number of seconds is accepted).
 */
export function parseDuration(
  name: string,
  text: string,
  spec: Pick<FlagSpec, 'min' | 'max' | 'bareSeconds'> = {},
  label = `--${name}`,
): number {
  const t = text.trim();
  const plain = spec.bareSeconds && /^\d+(\.\d+)?$|^\.\d+$/.test(t) ? Math.round(Number(t) * 1000) : undefined;
  const ms = plain ?? durationMs(t);
  const min = spec.min ?? 0;
  const inRange = ms !== undefined && ms >= min && (spec.max === undefined || ms <= spec.max);
  if (inRange) return ms;
  const max = spec.max === undefined ? '' : ` and at most ${formatDuration(spec.max)}`;
  if (spec.bareSeconds) {
    throw new FlagError(
      `${label} must be a number ≥ ${min / 1000}${spec.max === undefined ? '' : ` and ≤ ${spec.max / 1000}`}, ` +
        `got ${JSON.stringify(text)} (seconds, or a duration such as 90s or 1m30s)`,
    );
  }
  throw new FlagError(
    `${label} must be a duration of at least ${formatDuration(min)}${max} such as 8760h, 90s or 1h30m, got ${JSON.stringify(text)}`,
  );
}

function intValue(text: string, spec: FlagSpec, label: string): number {
  const t = text.trim();
  const n = Number(t);
  const ok =
    /^-?\d+$/.test(t) && (spec.min === undefined || n >= spec.min) && (spec.max === undefined || n <= spec.max);
  if (ok) return n;
  const range =
    spec.min !== undefined && spec.max !== undefined
      ? ` ${spec.min}-${spec.max}`
      : spec.min !== undefined
        ? ` ≥ ${spec.min}`
        : spec.max !== undefined
          ? ` ≤ ${spec.max}`
          : '';
  throw new FlagError(`${label} must be an integer${range}, got ${JSON.stringify(text)}`);
}

function listValue(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function convert(spec: FlagSpec, text: string, label: string, name: string): unknown {
  switch (spec.type) {
    case 'int':
      return intValue(text, spec, label);
    case 'bool': {
      const b = parseBool(text);
      if (b === undefined) {
        throw new FlagError(`${label} must be true or false, got ${JSON.stringify(text)} (1/0 and yes/no work too)`);
      }
      return b;
    }
    case 'list':
      return listValue(text);
    case 'duration':
      return parseDuration(name, text, spec, label);
    default:
      return text;
  }
}

function defaultText(spec: FlagSpec): string | undefined {
  const d = spec.default;
  if (d === undefined) return undefined;
  return Array.isArray(d) ? d.join(',') : String(d);
}

function isInfoFlag(arg: string): 'help' | 'version' | undefined {
  if (arg === '--help' || arg === '-h') return 'help';
  if (arg === '--version') return 'version';
  return undefined;
}

/** Reads argv (without node and script) and env against `spec`; --help and --version come back as such. */
export function readCommandLine<S extends Record<string, FlagSpec>>(
  spec: S,
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  options: ParseOptions = {},
): CommandLine<S> {
  const given = new Map<string, { texts: string[]; label: string }>();
  const oldFlags = new Map<string, string>();
  for (const [name, s] of Object.entries(spec)) for (const old of s.formerly?.flags ?? []) oldFlags.set(old, name);
  const deprecations = new Set<string>();
  const renamed = (old: string, now: string) =>
    deprecations.add(`${old} is deprecated and goes in ${DEPRECATED_NAMES_REMOVED_IN}: use ${now}`);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const info = isInfoFlag(arg);
    if (info && !(arg.slice(2) in spec)) return { kind: info };
    if (!arg.startsWith('--') || arg === '--') {
      throw new FlagError(`unexpected argument ${JSON.stringify(arg)}; flags look like --name=value`);
    }
    const eq = arg.indexOf('=');
    let name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    let text: string | undefined = eq < 0 ? undefined : arg.slice(eq + 1);
    const current = oldFlags.get(name);
    if (!spec[name] && current) {
      renamed(`--${name}`, `--${current}`);
      name = current;
    }
    if (!spec[name] && name.startsWith('no-') && spec[name.slice(3)]?.type === 'bool' && text === undefined) {
      name = name.slice(3);
      text = 'false';
    }
    const s = spec[name];
    if (!s)
      throw new FlagError(
        `unknown flag --${name}; known flags: ${Object.keys(spec)
          .map((k) => `--${k}`)
          .join(', ')}`,
      );
    if (text === undefined) {
      const next = argv[i + 1];
      if (s.type === 'bool') text = 'true';
      else if (next !== undefined && !next.startsWith('--')) text = argv[++i]!;
      else throw new FlagError(`--${name} needs a value`);
    }
    if (s.required && text.trim() === '') throw new FlagError(`--${name} needs a non-empty value`);
    const seen = given.get(name);
    if (seen && s.type !== 'list' && options.repeats === 'error') {
      throw new FlagError(`--${name} given more than once`);
    }
    if (seen && s.type === 'list') seen.texts.push(text);
    else given.set(name, { texts: [text], label: `--${name}` });
  }
  const values: Record<string, unknown> = {};
  const raw: Record<string, string> = {};
  for (const [name, s] of Object.entries(spec)) {
    let source = given.get(name);
    for (const variable of [s.env, ...(s.formerly?.env ?? [])]) {
      const envText = variable ? env[variable] : undefined;
      if (source || envText === undefined || envText === '') continue;
      source = { texts: [envText], label: `--${name} (from $${variable})` };
      if (variable !== s.env) renamed(`$${variable}`, s.env ? `$${s.env}` : `--${name}`);
    }
    if (source) {
      raw[name] = source.texts.join(',');
      const converted = source.texts.map((t) => convert(s, t, source.label, name));
      values[name] = s.type === 'list' ? [...new Set(converted.flat() as string[])] : converted.at(-1);
      continue;
    }
    if (s.required) throw new FlagError(`--${name} is required`);
    const d = defaultText(s);
    if (d !== undefined) {
      raw[name] = d;
      values[name] = s.type === 'list' ? s.default : convert(s, d, `--${name} (default)`, name);
    } else if (s.type === 'bool') values[name] = false;
    else if (s.type === 'list') values[name] = [];
  }
  return {
    kind: 'run',
    values: values as FlagValues<S>,
    raw: raw as { [K in keyof S]?: string },
    deprecations: [...deprecations],
  };
}

/** The values of a command line that is not --help or --version (those are FlagErrors here). */
export function parseFlags<S extends Record<string, FlagSpec>>(
  spec: S,
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  options: ParseOptions = {},
): FlagValues<S> {
  const line = readCommandLine(spec, argv, env, options);
  if (line.kind !== 'run') throw new FlagError(`--${line.kind} cannot be combined with this command`);
  return line.values;
}

/** What help and the docs table show of a flag: its placeholder (" <type>", none for a boolean) and default. */
function flagParts(s: FlagSpec): { meta: string; d: string | undefined } {
  return {
    meta: s.type === 'bool' ? '' : ` ${s.metavar ?? s.type}`,
    d: s.type === 'duration' && typeof s.default === 'string' ? s.default : defaultText(s),
  };
}

/** The help text with the old names that still work, e.g. "… (formerly --lease-name, $KD_LEASE_NAME)". */
function helpText(s: FlagSpec): string {
  const old = [...(s.formerly?.flags ?? []).map((f) => `--${f}`), ...(s.formerly?.env ?? []).map((e) => `$${e}`)];
  return old.length ? `${s.help} (formerly ${old.join(', ')}; until ${DEPRECATED_NAMES_REMOVED_IN})` : s.help;
}

function flagLine(name: string, s: FlagSpec): [string, string] {
  const { meta, d } = flagParts(s);
  const extra = [
    s.required ? 'required' : undefined,
    d !== undefined && d !== '' ? `default ${d}` : undefined,
    s.env ? `$${s.env}` : undefined,
  ].filter(Boolean);
  return [`--${name}${meta}`, `${helpText(s)}${extra.length ? ` [${extra.join(', ')}]` : ''}`];
}

/** Aligned `--name type   help [default X, $ENV]` lines, `indent` spaces in; the same in every program. */
export function flagsHelp(spec: Record<string, FlagSpec>, indent = 2): string {
  const rows = Object.entries(spec).map(([n, s]) => flagLine(n, s));
  const width = Math.min(34, Math.max(...rows.map(([left]) => left.length)));
  const pad = ' '.repeat(indent);
  return rows
    .map(([left, right]) =>
      left.length > width
        ? `${pad}${left}\n${pad}${' '.repeat(width + 2)}${right}`
        : `${pad}${left.padEnd(width)}  ${right}`,
    )
    .join('\n');
}

/**
 * The flags as a Markdown table (flag, environment variable, default, what it does) — what docs/flags.md
 * holds for each program, generated from the same spec as --help.
 */
export function flagsMarkdown(spec: Record<string, FlagSpec>): string {
  const cell = (t: string) => t.replace(/\|/g, '\\|');
  const rows = Object.entries({ ...spec, ...STANDARD_FLAGS }).map(([name, s]: [string, FlagSpec]) => {
    const { meta, d } = flagParts(s);
    return `| \`--${name}${cell(meta)}\` | ${s.env ? `\`${s.env}\`` : ''} | ${s.required ? 'required' : d !== undefined && d !== '' ? `\`${cell(d)}\`` : ''} | ${cell(helpText(s))} |`;
  });
  return ['| flag | environment | default | what it does |', '|---|---|---|---|', ...rows].join('\n');
}

export interface ProgramInfo {
  /** As it is invoked, e.g. "kd-connections-reconciler". */
  name: string;
  version: string;
  /** What it does, one line. */
  summary: string;
  /** The usage line after the name; default "[flags]". */
  synopsis?: string;
}

/** The whole --help text of a single-command program. */
export function programHelp(program: ProgramInfo, spec: Record<string, FlagSpec>): string {
  return [
    `Usage: ${program.name} ${program.synopsis ?? '[flags]'}`,
    '',
    program.summary,
    '',
    'Flags:',
    flagsHelp({ ...spec, ...STANDARD_FLAGS }),
  ].join('\n');
}

/** Answered by every program (listed in help; not part of any program's spec). */
export const STANDARD_FLAGS = {
  help: { type: 'bool', help: 'print this help and exit' },
  version: { type: 'bool', help: 'print the version and exit' },
} satisfies Record<string, FlagSpec>;

export function versionText(program: ProgramInfo): string {
  return `${program.name} ${program.version}`;
}

/** The version in the package.json next to the module at `moduleUrl`'s parent (src/ or dist/). */
export function packageVersion(moduleUrl: string): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', moduleUrl), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : 'unknown';
}
