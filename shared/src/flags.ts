/**
 * Command-line flags with environment fallbacks, for both services: `--name=value` or `--name value`,
 * `--flag` / `--no-flag` for booleans. Unknown flags and bad values are errors that say what is wrong
 * and what is allowed.
 */

export type FlagType = 'string' | 'int' | 'bool' | 'list';

export interface FlagSpec {
  type: FlagType;
  env?: string;
  default?: string | number | boolean | string[];
  help: string;
}

export type FlagValues<S extends Record<string, FlagSpec>> = {
  [K in keyof S]: S[K]['type'] extends 'int'
    ? number
    : S[K]['type'] extends 'bool'
      ? boolean
      : S[K]['type'] extends 'list'
        ? string[]
        : string;
};

export class FlagError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FlagError';
  }
}

function convert(name: string, spec: FlagSpec, raw: string, from: string): string | number | boolean | string[] {
  switch (spec.type) {
    case 'int': {
      if (!/^-?\d+$/.test(raw.trim())) throw new FlagError(`${from} ${name}: "${raw}" is not an integer`);
      return Number(raw);
    }
    case 'bool': {
      const v = raw.trim().toLowerCase();
      if (['true', '1', 'yes'].includes(v)) return true;
      if (['false', '0', 'no'].includes(v)) return false;
      throw new FlagError(`${from} ${name}: "${raw}" is not a boolean (true or false)`);
    }
    case 'list':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    default:
      return raw;
  }
}

export function parseFlags<S extends Record<string, FlagSpec>>(
  spec: S,
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): FlagValues<S> {
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(spec)) {
    const e = s.env ? env[s.env] : undefined;
    if (e !== undefined && e !== '') out[name] = convert(name, s, e, `environment variable ${s.env} for`);
    else if (s.default !== undefined) out[name] = s.default;
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new FlagError(`unexpected argument "${arg}"; flags look like --name=value`);
    let [name, value] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    let s = spec[name];
    if (!s && name.startsWith('no-') && spec[name.slice(3)]?.type === 'bool' && value === undefined) {
      name = name.slice(3);
      s = spec[name];
      value = 'false';
    }
    if (!s)
      throw new FlagError(
        `unknown flag --${name}; known flags: ${Object.keys(spec)
          .map((k) => `--${k}`)
          .join(', ')}`,
      );
    if (value === undefined) {
      if (s.type === 'bool') value = 'true';
      else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) value = argv[++i]!;
      else throw new FlagError(`flag --${name} needs a value`);
    }
    out[name] = convert(`--${name}`, s, value, 'flag');
  }
  for (const [name, s] of Object.entries(spec)) {
    if (out[name] === undefined && s.type !== 'string') throw new FlagError(`flag --${name} is required`);
  }
  return out as FlagValues<S>;
}

export function flagsHelp(spec: Record<string, FlagSpec>): string {
  return Object.entries(spec)
    .map(
      ([n, s]) =>
        `  --${n} (${s.type}${s.env ? `, env ${s.env}` : ''}${s.default !== undefined ? `, default ${JSON.stringify(s.default)}` : ''})\n      ${s.help}`,
    )
    .join('\n');
}
