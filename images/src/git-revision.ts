import { execFileSync } from 'node:child_process';

/** The commit `root` is checked out at; `-dirty` when tracked files differ from it; undefined outside git. */
export function gitRevision(root: string): string | undefined {
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: root,
      encoding: 'utf8',
    });
    return dirty.trim() ? `${head}-dirty` : head;
  } catch {
    return undefined;
  }
}
