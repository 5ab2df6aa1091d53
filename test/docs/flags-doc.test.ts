/**
 * docs/flags.md is what `npm run docs:flags` generates from the services' flag specs, and every flag
 * their --help prints is in it.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { programHelp } from '@kd-connections/shared/runtime';
import { repoPath } from '../support/processes.js';
import { flagsDoc, PROGRAMS } from './flags-doc.js';

const committed = readFileSync(repoPath('docs/flags.md'), 'utf8');

describe('docs/flags.md', () => {
  it('is current (run `npm run docs:flags` after changing a flag)', () => {
    expect(committed).toBe(flagsDoc());
  });

  it.each(PROGRAMS.map((p) => [p.program.name, p] as const))(
    'lists every flag %s --help prints, under its name',
    (name, p) => {
      const help = programHelp(p.program, p.flags);
      const flags = [...help.matchAll(/^ {2}(--[a-z0-9-]+)/gm)].map((m) => m[1]!);
      expect(flags.length).toBeGreaterThan(10);
      const start = committed.indexOf(`## ${name}\n`);
      const next = committed.indexOf('\n## ', start + 1);
      const section = committed.slice(start, next === -1 ? undefined : next);
      expect(start).toBeGreaterThanOrEqual(0);
      expect(flags.filter((f) => !new RegExp(`^\\| \`${f}[ \`]`, 'm').test(section))).toEqual([]);
    },
  );
});
