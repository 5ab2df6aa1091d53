/** The one flag layer: sources and precedence, booleans, Go durations, lists, errors, help. */
import { describe, expect, it } from '@jest/globals';
import {
  durationMs,
  FlagError,
  flagsHelp,
  formatDuration,
  parseBool,
  parseDuration,
  parseFlags,
  programHelp,
  readCommandLine,
  type FlagSpec,
} from '../src/runtime/flags.js';

const SPEC = {
  name: { type: 'string', env: 'T_NAME', default: 'dflt', help: 'a name' },
  count: { type: 'int', env: 'T_COUNT', default: 3, min: 1, max: 9, help: 'a count' },
  on: { type: 'bool', env: 'T_ON', default: true, help: 'a switch' },
  off: { type: 'bool', help: 'another switch' },
  items: { type: 'list', env: 'T_ITEMS', help: 'some items' },
  wait: { type: 'duration', env: 'T_WAIT', default: '15s', min: 1000, help: 'a duration' },
  grace: { type: 'duration', bareSeconds: true, default: '0s', help: 'seconds or a duration' },
  path: { type: 'string', help: 'optional' },
} satisfies Record<string, FlagSpec>;

describe('parseFlags', () => {
  it('takes defaults, then the environment, then flags', () => {
    expect(parseFlags(SPEC, [], {})).toEqual({
      name: 'dflt',
      count: 3,
      on: true,
      off: false,
      items: [],
      wait: 15_000,
      grace: 0,
    });
    const env = { T_NAME: 'env', T_COUNT: '5', T_ON: 'no', T_ITEMS: 'a, b,,a', T_WAIT: '1m' };
    expect(parseFlags(SPEC, [], env)).toMatchObject({
      name: 'env',
      count: 5,
      on: false,
      items: ['a', 'b'],
      wait: 60_000,
    });
    expect(
      parseFlags(SPEC, ['--name=flag', '--count', '7', '--on', '--items=c', '--wait=1h30m', '--path', '/x'], env),
    ).toMatchObject({ name: 'flag', count: 7, on: true, items: ['c'], wait: 5_400_000, path: '/x' });
    expect(parseFlags(SPEC, [], { T_NAME: '' }).name).toBe('dflt');
  });

  it('reads booleans the same way from flags and the environment', () => {
    for (const t of ['true', 'TRUE', '1', 'yes', 'Yes']) {
      expect(parseFlags(SPEC, [`--off=${t}`], {}).off).toBe(true);
      expect(parseFlags(SPEC, [], { T_ON: t }).on).toBe(true);
    }
    for (const f of ['false', 'False', '0', 'no']) {
      expect(parseFlags(SPEC, [`--on=${f}`], {}).on).toBe(false);
      expect(parseFlags(SPEC, [], { T_ON: f }).on).toBe(false);
    }
    expect(parseFlags(SPEC, ['--no-on'], {}).on).toBe(false);
    expect(parseFlags(SPEC, ['--off'], {}).off).toBe(true);
    expect(() => parseFlags(SPEC, ['--on=on'], {})).toThrow('--on must be true or false, got "on"');
    expect(() => parseFlags(SPEC, [], { T_ON: 'off' })).toThrow('--on (from $T_ON) must be true or false, got "off"');
    expect(parseBool(' no ')).toBe(false);
    expect(parseBool('maybe')).toBeUndefined();
  });

  it('adds up repeated list flags; a repeated single flag takes the last value, or is refused when asked', () => {
    expect(parseFlags(SPEC, ['--items=a,b', '--items', 'c', '--items=a'], {}).items).toEqual(['a', 'b', 'c']);
    expect(parseFlags(SPEC, ['--name=a', '--name=b'], {}).name).toBe('b');
    expect(() => parseFlags(SPEC, ['--name=a', '--name=b'], {}, { repeats: 'error' })).toThrow(
      '--name given more than once',
    );
    expect(parseFlags(SPEC, ['--items=a', '--items=b'], {}, { repeats: 'error' }).items).toEqual(['a', 'b']);
  });

  it.each([
    [['--nope'], 'unknown flag --nope; known flags: --name, --count'],
    [['stray'], 'unexpected argument "stray"'],
    [['--name'], '--name needs a value'],
    [['--name', '--on'], '--name needs a value'],
    [['--count=x'], '--count must be an integer 1-9, got "x"'],
    [['--count=10'], '--count must be an integer 1-9, got "10"'],
    [['--wait=10d'], '--wait must be a duration of at least 1s such as 8760h, 90s or 1h30m, got "10d"'],
    [['--wait=500ms'], '--wait must be a duration of at least 1s'],
    [['--wait=15'], '--wait must be a duration'],
    [['--grace=-1'], '--grace must be a number ≥ 0, got "-1" (seconds, or a duration such as 90s or 1m30s)'],
  ])('refuses %j', (argv, message) => {
    expect(() => parseFlags(SPEC, argv, {})).toThrow(FlagError);
    expect(() => parseFlags(SPEC, argv, {})).toThrow(message);
  });

  it('names the variable when a bad value came from the environment', () => {
    expect(() => parseFlags(SPEC, [], { T_COUNT: 'many' })).toThrow(
      '--count (from $T_COUNT) must be an integer 1-9, got "many"',
    );
  });

  it('requires required flags, with a non-empty value', () => {
    const spec = { out: { type: 'string', required: true, help: 'x' } } satisfies Record<string, FlagSpec>;
    expect(() => parseFlags(spec, [], {})).toThrow('--out is required');
    expect(() => parseFlags(spec, ['--out='], {})).toThrow('--out needs a non-empty value');
    expect(parseFlags(spec, ['--out', 'd'], {}).out).toBe('d');
  });
});

describe('readCommandLine', () => {
  it('answers --help, -h and --version before judging the other flags', () => {
    expect(readCommandLine(SPEC, ['--help'], {})).toEqual({ kind: 'help' });
    expect(readCommandLine(SPEC, ['--count=x', '-h'], {})).toEqual({ kind: 'help' });
    expect(readCommandLine(SPEC, ['--version'], {})).toEqual({ kind: 'version' });
    expect(() => parseFlags(SPEC, ['--version'], {})).toThrow(FlagError);
  });

  it('keeps the text each value came from, for messages that quote it', () => {
    const line = readCommandLine(SPEC, ['--wait=2h'], { T_COUNT: '4' });
    expect(line.kind === 'run' && line.raw).toMatchObject({ wait: '2h', count: '4', grace: '0s' });
  });
});

describe('Go-style durations', () => {
  it.each([
    ['8760h', 31_536_000_000],
    ['1h30m15s', 5_415_000],
    ['1500ms', 1500],
    ['2.5s', 2500],
    ['.5s', 500],
    ['0', 0],
    ['250000us', 250],
    ['1000000ns', 1],
  ])('%s is %d ms', (text, ms) => expect(durationMs(text)).toBe(ms));

  it.each(['', 'h', '10', '1d', '-1s', '1h 30m', '1.2.3s'])('%j is not a duration', (text) =>
    expect(durationMs(text)).toBeUndefined(),
  );

  it('accepts a plain number of seconds only where the flag says so, and checks bounds', () => {
    expect(parseDuration('d', '0.5', { bareSeconds: true })).toBe(500);
    expect(parseDuration('d', '90s', { bareSeconds: true })).toBe(90_000);
    expect(() => parseDuration('d', '0.5')).toThrow('--d must be a duration');
    expect(() => parseDuration('d', '2h', { max: 3_600_000 })).toThrow('at most 1h');
  });

  it('formats durations for help texts', () => {
    expect([0, 1500, 90_000, 5_400_000, 31_536_000_000].map(formatDuration)).toEqual([
      '0s',
      '1500ms',
      '1m30s',
      '1h30m',
      '8760h',
    ]);
  });
});

describe('help', () => {
  it('lists every flag with its type, default and variable, aligned, plus --help and --version', () => {
    const text = programHelp({ name: 'prog', version: '1.2.3', summary: 'Does things.' }, SPEC);
    expect(text.split('\n').slice(0, 5)).toEqual(['Usage: prog [flags]', '', 'Does things.', '', 'Flags:']);
    expect(text).toContain('  --count int       a count [default 3, $T_COUNT]');
    expect(text).toContain('  --wait duration   a duration [default 15s, $T_WAIT]');
    expect(text).toContain('  --on              a switch [default true, $T_ON]');
    expect(text).toContain('  --help            print this help and exit');
    expect(text).toContain('  --version         print the version and exit');
    expect(flagsHelp({ out: { type: 'string', required: true, metavar: 'DIR', help: 'x' } }, 4)).toBe(
      '    --out DIR  x [required]',
    );
  });
});
