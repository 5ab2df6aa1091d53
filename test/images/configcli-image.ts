/**
 * A KubeDirector-style app image with the REAL configcli (github.com/bluek8s/configcli at CONFIGCLI_COMMIT),
 * the judge of what an app sees in /etc/guestconfig. Built like the other test images (cachedImage):
 * - Debian's python3 (+ setuptools, python-is-python3 for configcli's `python setup.py`), bash,
 *   coreutils and busybox-static, with every dependency apt resolves for them against an empty package
 *   database, each at the version apt offers (apt-get download, dpkg -x; nothing installed on this
 *   machine). The archive is rebuilt when a version, configcli's tree or the recipe changes.
 * - configcli installed by its own `install` script, run unchanged in a chroot of the image (root is
 *   needed for that, as for the node): `python setup.py install --install-scripts=/usr/bin`. Its code is
 *   not patched — its private-file bug (it never merges .priv_configmeta.json) is part of what tests hold
 *   the delivery against.
 * - A non-root user APP_USER (uid/gid 1000). configcli logs to /var/log/guestconfig/configcli/ and fails
 *   when it cannot write there, so, as an app image whose non-root users run configcli would, that
 *   directory is writable by every user (0777) and its log file exists, 0666.
 * - /etc/guestconfig as an app image keeps it: root 0755 (or the owner/mode the options give) holding
 *   base_img_version (`configcli --baseimg_version`), owned like the directory.
 * - Root is the image's user; the command sleeps until SIGTERM and then exits, so a pod or a KubeDirector
 *   role that gives no command keeps running and stops at once when deleted (a bare `sleep infinity` as
 *   PID 1 ignores SIGTERM: every KubeDirector member took its 30 s grace period to go).
 *
 * configcli's tree comes from ../shared/third_party/configcli beside the checkout (or $KD_CONFIGCLI_SRC);
 * when that is absent it is fetched with git at the pinned commit into the cache; when that fails the build
 * fails saying what it needs. It never falls back to anything else.
 *
 * The helpers at the end run configcli (and cat) in a container of a running pod through kubectl exec,
 * as the container's own user or as APP_USER (`su` from a root container).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { repoRoot, type RunResult } from '../support/processes.js';
import { cachedImage, imageCacheDir, type BuiltImage } from './base-images.js';

export const CONFIGCLI_IMAGE = 'kd.invalid/configcli:local';
export const CONFIGCLI_REPO = 'https://github.com/bluek8s/configcli';
export const CONFIGCLI_COMMIT = '266626c4baa85b2d6706dfa36ca3b93acab42137';
/** The image's non-root user. */
export const APP_USER = { name: 'app', uid: 1000, gid: 1000 } as const;
/** What the image keeps in /etc/guestconfig. */
export const CONFIGCLI_IMAGE_FILES: Record<string, string> = { base_img_version: '5.1.0\n' };
/** Debian packages asked for; apt adds their dependencies. */
const PACKAGES = ['python3', 'python3-setuptools', 'python-is-python3', 'bash', 'coreutils', 'busybox-static'];
/** Bump when the recipe below changes without its inputs changing. */
const RECIPE = '1';
/** The image's command: sleeps until SIGTERM, then exits (see the file comment). Part of the cache key. */
const COMMAND = ['sh', '-c', 'trap "exit 0" TERM; sleep infinity & wait'];
const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface ConfigcliSourceOptions {
  /** The tree beside the checkout; default ../shared/third_party/configcli. */
  beside?: string;
  /** Where a fetched tree is kept; default ~/.cache/kd-connections/third_party/configcli-<commit>. */
  cache?: string;
  repo?: string;
  commit?: string;
}

/** configcli's tree: $KD_CONFIGCLI_SRC, ../shared/third_party/configcli, else a git fetch into the cache. */
export function configcliSource(o: ConfigcliSourceOptions = {}): string {
  const given = process.env.KD_CONFIGCLI_SRC;
  if (given) {
    if (!existsSync(join(given, 'setup.py'))) throw new Error(`KD_CONFIGCLI_SRC=${given} holds no setup.py`);
    return given;
  }
  const repo = o.repo ?? CONFIGCLI_REPO;
  const commit = o.commit ?? CONFIGCLI_COMMIT;
  const beside = o.beside ?? join(repoRoot, '..', 'shared', 'third_party', 'configcli');
  if (existsSync(join(beside, 'setup.py'))) return beside;
  const cache =
    o.cache ??
    join(
      process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'),
      'kd-connections',
      'third_party',
      `configcli-${commit}`,
    );
  if (existsSync(join(cache, 'setup.py'))) return cache;
  const work = `${cache}.${process.pid}.tmp`;
  try {
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    const git = (...args: string[]) => execFileSync('git', ['-C', work, ...args], { stdio: 'pipe', encoding: 'utf8' });
    git('init', '-q');
    git('fetch', '-q', '--depth', '1', repo, commit);
    git('checkout', '-q', 'FETCH_HEAD');
    const head = git('rev-parse', 'HEAD').trim();
    if (head !== commit) throw new Error(`fetched ${head}, not ${commit}`);
    rmSync(join(work, '.git'), { recursive: true, force: true });
    execFileSync('mv', ['-T', work, cache]);
    return cache;
  } catch (e) {
    rmSync(work, { recursive: true, force: true });
    const why = ((e as { stderr?: string }).stderr || (e as Error).message).trim().split('\n')[0];
    throw new Error(
      `the configcli test image needs configcli's source: ${beside} does not exist and ` +
        `git could not fetch ${repo} at ${commit} (${why}). ` +
        `Put that tree at ${beside} or ${cache}, or set KD_CONFIGCLI_SRC to it.`,
    );
  }
}

/** A stable digest of a directory tree (paths, modes' executable bit, contents), for the cache key. */
function treeDigest(dir: string): string {
  const h = createHash('sha256');
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      if (name === '.git' || name === 'build' || name === 'dist' || name.endsWith('.egg-info')) continue;
      const f = join(d, name);
      const st = statSync(f);
      if (st.isDirectory()) walk(f);
      else h.update(`${relative(dir, f)}\0${st.mode & 0o111 ? 'x' : '-'}\0`).update(readFileSync(f));
    }
  };
  walk(dir);
  return h.digest('hex');
}

/** Every package `packages` needs, as name=version, from apt against an empty package database. */
export function debianClosure(packages: readonly string[] = PACKAGES): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'kd-apt-'));
  try {
    writeFileSync(join(dir, 'status'), '');
    const out = execFileSync(
      'apt-get',
      [
        'install',
        '--simulate',
        '--no-install-recommends',
        '-o',
        `Dir::State::status=${join(dir, 'status')}`,
        '-o',
        'Debug::NoLocking=1',
        ...packages,
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const list = [...out.matchAll(/^Inst (\S+) \((\S+) /gm)].map((m) => `${m[1]}=${m[2]}`);
    for (const p of packages)
      if (!list.some((x) => x.startsWith(`${p}=`)))
        throw new Error(`apt does not offer ${p} (run apt-get update; Debian bookworm's lists are needed)`);
    return list.sort();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * debianClosure, remembered beside the image archives for as long as apt's package lists are the same
 * files (names, sizes, times): apt's resolution takes seconds, every test file that uses the image asks.
 */
function cachedClosure(): string[] {
  const lists = '/var/lib/apt/lists';
  const stamp = existsSync(lists)
    ? readdirSync(lists)
        .filter((f) => /_(Packages(\.\w+)?|InRelease|Release)$/.test(f))
        .sort()
        .map((f) => {
          const st = statSync(join(lists, f));
          return `${f}:${st.size}:${st.mtimeMs}`;
        })
        .join('\n')
    : '';
  const file = join(imageCacheDir(), 'configcli-packages.json');
  const key = `${PACKAGES.join(' ')}\n${stamp}`;
  try {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { key: string; packages: string[] };
    if (saved.key === key) return saved.packages;
  } catch {
    // not resolved yet
  }
  const packages = debianClosure();
  mkdirSync(imageCacheDir(), { recursive: true });
  writeFileSync(`${file}.${process.pid}`, JSON.stringify({ key, packages }));
  execFileSync('mv', ['-f', `${file}.${process.pid}`, file]);
  return packages;
}

export interface ConfigcliImageOptions {
  /** Image name; default CONFIGCLI_IMAGE. */
  name?: string;
  /** Owner and mode of /etc/guestconfig and its files in the image; default root, 0755. */
  guestconfig?: { uid: number; gid: number; mode: number };
}

function chroot(rootfs: string, argv: string[]): void {
  try {
    execFileSync('chroot', [rootfs, ...argv], {
      env: { PATH, HOME: '/root', LANG: 'C.UTF-8' },
      stdio: 'pipe',
    });
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    throw new Error(
      `chroot ${argv.join(' ')} failed (building the configcli image needs root): ${err.stderr?.toString().slice(-2000) ?? err.message}`,
    );
  }
}

/** Builds (or finds cached) the configcli image archive. */
export function configcliImage(o: ConfigcliImageOptions = {}): BuiltImage {
  const name = o.name ?? CONFIGCLI_IMAGE;
  const gc = o.guestconfig ?? { uid: 0, gid: 0, mode: 0o755 };
  const src = configcliSource();
  const debs = cachedClosure();
  const key = [
    RECIPE,
    ...debs,
    `configcli ${treeDigest(src)}`,
    JSON.stringify(gc),
    JSON.stringify(CONFIGCLI_IMAGE_FILES),
    JSON.stringify(COMMAND),
  ];
  const archive = cachedImage(name, key.join('\n'), (rootfs) => {
    const dl = mkdtempSync(join(tmpdir(), 'kd-debs-'));
    try {
      try {
        execFileSync('apt-get', ['download', '-q', ...debs], { cwd: dl, stdio: 'pipe' });
      } catch (e) {
        throw new Error(`apt-get download of the configcli image's packages failed: ${(e as Error).message}`);
      }
      for (const deb of readdirSync(dl)
        .filter((f) => f.endsWith('.deb'))
        .sort())
        execFileSync('dpkg', ['-x', join(dl, deb), rootfs]);
    } finally {
      rmSync(dl, { recursive: true, force: true });
    }
    // What the packages' maintainer scripts would have set up, as far as configcli needs it.
    symlinkSync('bash', join(rootfs, 'bin/sh'));
    for (const d of ['tmp', 'proc', 'sys', 'dev', 'root', 'etc/guestconfig', `home/${APP_USER.name}`])
      mkdirSync(join(rootfs, d), { recursive: true });
    chmodSync(join(rootfs, 'tmp'), 0o1777);
    chownSync(join(rootfs, 'home', APP_USER.name), APP_USER.uid, APP_USER.gid);
    writeFileSync(
      join(rootfs, 'etc/passwd'),
      'root:x:0:0:root:/root:/bin/bash\n' +
        `${APP_USER.name}:x:${APP_USER.uid}:${APP_USER.gid}:app:/home/${APP_USER.name}:/bin/bash\n` +
        'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
    );
    writeFileSync(join(rootfs, 'etc/group'), `root:x:0:\n${APP_USER.name}:x:${APP_USER.gid}:\nnogroup:x:65534:\n`);
    // busybox for what the packages do not bring (su, grep, sed, ps, …): a link per missing applet.
    const has = (a: string) => ['bin', 'sbin', 'usr/bin', 'usr/sbin'].some((d) => existsSync(join(rootfs, d, a)));
    const applets = execFileSync(join(rootfs, 'bin/busybox'), ['--list'], { encoding: 'utf8' }).split('\n');
    for (const a of applets) if (a && !has(a)) symlinkSync('/bin/busybox', join(rootfs, 'bin', a));
    // Python byte code, as Debian's postinst compiles it (every configcli run would otherwise compile).
    chroot(rootfs, ['python3', '-m', 'compileall', '-q', '/usr/lib/python3.11', '/usr/lib/python3']);
    // configcli, by its own install script, unchanged.
    cpSync(src, join(rootfs, 'tmp/configcli'), {
      recursive: true,
      filter: (f) => !/(^|\/)(\.git|build|dist|[^/]*\.egg-info)$/.test(relative(src, f)),
    });
    chroot(rootfs, ['/bin/bash', '/tmp/configcli/install']);
    rmSync(join(rootfs, 'tmp/configcli'), { recursive: true, force: true });
    if (!existsSync(join(rootfs, 'usr/bin/configcli'))) throw new Error('configcli install left no /usr/bin/configcli');
    // configcli's log, writable by every user of the container.
    const logDir = join(rootfs, 'var/log/guestconfig/configcli');
    rmSync(logDir, { recursive: true, force: true });
    mkdirSync(logDir, { recursive: true });
    chmodSync(logDir, 0o777);
    writeFileSync(join(logDir, 'configcli.log'), '');
    chmodSync(join(logDir, 'configcli.log'), 0o666);
    const etc = join(rootfs, 'etc/guestconfig');
    for (const [f, text] of Object.entries(CONFIGCLI_IMAGE_FILES)) {
      writeFileSync(join(etc, f), text, { mode: 0o644 });
      chownSync(join(etc, f), gc.uid, gc.gid);
    }
    chownSync(etc, gc.uid, gc.gid);
    chmodSync(etc, gc.mode);
    return { cmd: COMMAND, keepOwners: true };
  });
  return { name, archive };
}

// ---- running configcli in a container ----

/** What the helpers need of a test environment (TestEnv has it). */
export interface Kubectl {
  kubectl(args: string[], opts?: { input?: string; namespace?: string | false }): Promise<RunResult>;
}

export interface InContainer {
  pod: string;
  /** Default `app`. */
  container?: string;
  /** 'app': as APP_USER (the container must run as root to switch); default: the container's own user. */
  as?: 'app';
  namespace?: string;
}

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Runs argv in the container through kubectl exec; never rejects (the exit code says how it went). */
export function execIn(k: Kubectl, where: InContainer, argv: string[]): Promise<RunResult> {
  const cmd =
    where.as === 'app' ? ['su', '-s', '/bin/sh', '-c', `exec ${argv.map(shellQuote).join(' ')}`, APP_USER.name] : argv;
  return k.kubectl(['exec', where.pod, '-c', where.container ?? 'app', '--', ...cmd], {
    ...(where.namespace ? { namespace: where.namespace } : {}),
  });
}

/** `configcli -g <key>` in the container: its exit code, output and errors as they are. */
export function configcliGet(k: Kubectl, where: InContainer, key: string): Promise<RunResult> {
  return execIn(k, where, ['configcli', '-g', key]);
}

/** `configcli -g <key>`'s answer without the trailing newline; throws with configcli's stderr when it fails. */
export async function configcliValue(k: Kubectl, where: InContainer, key: string): Promise<string> {
  const r = await configcliGet(k, where, key);
  if (r.code !== 0)
    throw new Error(
      `configcli -g ${key} in ${where.pod} (${where.as ?? 'container user'}) exited ${r.code}: ${r.stderr.slice(-1500)}`,
    );
  return r.stdout.replace(/\n$/, '');
}

/** `cat <file>` in the container (throws when it fails). */
export async function catIn(k: Kubectl, where: InContainer, file: string): Promise<string> {
  const r = await execIn(k, where, ['cat', file]);
  if (r.code !== 0)
    throw new Error(`cat ${file} in ${where.pod} (${where.as ?? 'container user'}) failed: ${r.stderr}`);
  return r.stdout;
}
