/**
 * Where the configcli test image gets configcli's source: the tree beside the checkout, else a git fetch
 * of the pinned commit (here from a local repository standing in for GitHub), else a failure that says
 * what is needed — never a skip. The image itself is exercised on the node (test/node/configcli-image.test.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configcliSource } from './configcli-image.js';

let dir: string;
const saved = process.env.KD_CONFIGCLI_SRC;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kd-configcli-src-'));
  delete process.env.KD_CONFIGCLI_SRC;
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  if (saved === undefined) delete process.env.KD_CONFIGCLI_SRC;
  else process.env.KD_CONFIGCLI_SRC = saved;
});

/** A repository with two commits; returns the first (not the tip: the fetch must name the commit). */
function upstream(): { url: string; commit: string } {
  const repo = join(dir, 'upstream');
  mkdirSync(repo);
  const git = (...a: string[]) =>
    execFileSync('git', ['-C', repo, '-c', 'user.email=t@example.invalid', '-c', 'user.name=t', ...a], {
      encoding: 'utf8',
    });
  git('init', '-q');
  writeFileSync(join(repo, 'setup.py'), '# pinned\n');
  git('add', '.');
  git('commit', '-qm', 'pinned');
  const commit = git('rev-parse', 'HEAD').trim();
  writeFileSync(join(repo, 'setup.py'), '# later\n');
  git('commit', '-qam', 'later');
  return { url: `file://${repo}`, commit };
}

describe('configcli source for the test image', () => {
  it('uses the tree beside the checkout when it is there', () => {
    const beside = join(dir, 'beside');
    mkdirSync(beside);
    writeFileSync(join(beside, 'setup.py'), '');
    expect(
      configcliSource({ beside, cache: join(dir, 'cache'), repo: 'file:///nonexistent', commit: 'a'.repeat(40) }),
    ).toBe(beside);
  });

  it('fetches the pinned commit with git when the tree is absent, then reuses the fetched copy', () => {
    const { url, commit } = upstream();
    const cache = join(dir, 'cache');
    const got = configcliSource({ beside: join(dir, 'absent'), cache, repo: url, commit });
    expect(got).toBe(cache);
    expect(readFileSync(join(cache, 'setup.py'), 'utf8')).toBe('# pinned\n');
    expect(existsSync(join(cache, '.git'))).toBe(false);
    rmSync(join(dir, 'upstream'), { recursive: true });
    expect(configcliSource({ beside: join(dir, 'absent'), cache, repo: url, commit })).toBe(cache);
  });

  it('fails saying what it needs when neither the tree nor the fetch is there', () => {
    const beside = join(dir, 'absent');
    const run = () =>
      configcliSource({
        beside,
        cache: join(dir, 'cache'),
        repo: `file://${join(dir, 'nowhere')}`,
        commit: 'b'.repeat(40),
      });
    expect(run).toThrow(/needs configcli's source/);
    expect(run).toThrow(beside);
    expect(run).toThrow('b'.repeat(40));
    expect(existsSync(join(dir, 'cache'))).toBe(false);
  });

  it('refuses a KD_CONFIGCLI_SRC without setup.py', () => {
    process.env.KD_CONFIGCLI_SRC = join(dir, 'empty');
    expect(() => configcliSource()).toThrow(/KD_CONFIGCLI_SRC=.*holds no setup\.py/);
  });
});
