/**
 * Which installed packages a workspace needs at run time, read from package-lock.json alone: its
 * dependencies (and optional and peer dependencies that the lock holds), resolved the way Node resolves
 * them (the nearest node_modules up the tree), transitively, through workspace links. Dev dependencies
 * never enter: only `dependencies` edges are followed from the workspace.
 */

export interface LockPackage {
  name?: string;
  version?: string;
  link?: boolean;
  resolved?: string;
  integrity?: string;
  license?: string;
  dev?: boolean;
  optional?: boolean;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

export interface Lockfile {
  lockfileVersion: number;
  packages: Record<string, LockPackage>;
}

export interface Closure {
  /** Lock locations of installed packages to copy whole (e.g. node_modules/express), sorted. */
  packages: string[];
  /** Workspace links: node_modules/@scope/name → the workspace folder, sorted by path. */
  links: { path: string; target: string }[];
  /** Workspace folders whose package.json and compiled output run (the starting one included), sorted. */
  workspaces: string[];
}

/** Where `name` resolves from the package at `from`: from/node_modules/name, then each parent's. */
function resolveFrom(lock: Lockfile, from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!dir) return undefined;
    const cut = dir.lastIndexOf('/node_modules/');
    dir = cut >= 0 ? dir.slice(0, cut) : '';
  }
}

export function productionClosure(lock: Lockfile, workspace: string): Closure {
  if (lock.lockfileVersion < 2)
    throw new Error(
      `package-lock.json: lockfileVersion ${lock.lockfileVersion} has no "packages" map (npm 7 or newer writes it)`,
    );
  if (!lock.packages[workspace]) throw new Error(`package-lock.json has no workspace "${workspace}"`);
  const packages = new Set<string>();
  const links = new Map<string, string>();
  const workspaces = new Set<string>();
  const queue = [workspace];
  const seen = new Set<string>();
  while (queue.length) {
    const at = queue.shift()!;
    if (seen.has(at)) continue;
    seen.add(at);
    const pkg = lock.packages[at]!;
    if (at.includes('node_modules/')) packages.add(at);
    else workspaces.add(at);
    const required = Object.keys(pkg.dependencies ?? {});
    const optional = [
      ...Object.keys(pkg.optionalDependencies ?? {}),
      ...Object.keys(pkg.peerDependencies ?? {}).filter((n) => pkg.peerDependenciesMeta?.[n]?.optional),
    ];
    const peers = Object.keys(pkg.peerDependencies ?? {}).filter((n) => !pkg.peerDependenciesMeta?.[n]?.optional);
    for (const [names, mustExist] of [
      [[...required, ...peers], true],
      [optional, false],
    ] as const) {
      for (const name of names) {
        const found = resolveFrom(lock, at, name);
        if (!found) {
          if (mustExist)
            throw new Error(`package-lock.json: "${name}", needed by "${at || '(root)'}", is not in the lock`);
          continue;
        }
        const entry = lock.packages[found]!;
        if (entry.link) {
          if (!entry.resolved) throw new Error(`package-lock.json: link "${found}" has no "resolved"`);
          links.set(found, entry.resolved);
          queue.push(entry.resolved);
        } else {
          queue.push(found);
        }
      }
    }
  }
  return {
    packages: [...packages].sort(),
    links: [...links].map(([path, target]) => ({ path, target })).sort((a, b) => a.path.localeCompare(b.path)),
    workspaces: [...workspaces].sort(),
  };
}
