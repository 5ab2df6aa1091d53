/**
 * What of a workspace's dist/ goes into an image or a package: only the JavaScript compiled from a source
 * that still exists. `tsc -b` never deletes the output of a removed or moved source, so a checkout that
 * built before such a change still holds it; copying it would ship dead code and make the digest depend
 * on the checkout's history.
 */
import { existsSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** A cpSync filter over `<wsDir>/dist`: directories, and each .js whose `<wsDir>/src/<same path>.ts` exists. */
export function currentOutputFilter(wsDir: string): (path: string) => boolean {
  const dist = join(wsDir, 'dist');
  return (path) => {
    if (statSync(path).isDirectory()) return true;
    if (!path.endsWith('.js')) return false;
    return existsSync(join(wsDir, 'src', relative(dist, path).replace(/\.js$/, '.ts')));
  };
}
