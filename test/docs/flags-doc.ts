/**
 * docs/flags.md: every flag of both services, their environment variables and defaults, generated from
 * the same specs as their --help (shared/src/runtime/flags.ts). `npm run docs:flags` writes it; a unit test
 * (flags-doc.test.ts) fails when the committed file differs or a --help flag is missing from it.
 */
import { flagsMarkdown, type FlagSpec, type ProgramInfo } from '@kd-connections/shared/runtime';
import { ADMISSION_FLAGS, ADMISSION_PROGRAM } from '../../admission/src/config.js';
import { RECONCILER_FLAGS, RECONCILER_PROGRAM } from '../../reconciler/src/config.js';

export const PROGRAMS: { program: ProgramInfo; flags: Record<string, FlagSpec>; about: string }[] = [
  {
    program: ADMISSION_PROGRAM,
    flags: ADMISSION_FLAGS,
    about:
      'The admission service (`admission/dist/main.js`; the chart sets these through `admission.*` values and `admission.extraArgs`).',
  },
  {
    program: RECONCILER_PROGRAM,
    flags: RECONCILER_FLAGS,
    about:
      'The reconciler (`reconciler/dist/main.js`; the chart sets these through `reconciler.*` values and `reconciler.extraArgs`).',
  },
];

export function flagsDoc(): string {
  return [
    '# Flags and environment variables',
    '',
    "Generated from the services' own flag definitions by `npm run docs:flags` (a test keeps this file equal",
    'to them): the same flags, in the same order, as `--help` prints. A flag wins over its environment',
    'variable, which wins over the default; an empty variable counts as unset. Durations are Go-style',
    '(`90s`, `1h30m`); booleans take true/false, 1/0, yes/no; lists are comma-separated and the flag may',
    'repeat.',
    '',
    ...PROGRAMS.flatMap(({ program, flags, about }) => [
      `## ${program.name}`,
      '',
      `${program.summary} ${about}`,
      '',
      flagsMarkdown(flags),
      '',
    ]),
  ].join('\n');
}
