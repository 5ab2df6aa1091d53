/**
 * The sidecar's program and the seed script, run by this machine's /bin/sh against directories laid out
 * as the kubelet lays out downward-API and Secret volumes (timestamped directories behind a `..data`
 * symlink that is swapped atomically). The node tests run the same bytes under busybox in a real pod.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sidecarProgram } from '../src/guestconfig-sidecar-program.js';
import { seedScript } from '../src/pod-delivery.js';

let root: string;
let proc: ChildProcess | undefined;
const dirs = () => ({ src: join(root, 'source'), priv: join(root, 'private'), out: join(root, 'guestconfig') });

/** What the kubelet's atomic writer does: a new timestamped directory, then `..data` renamed onto it. */
let serial = 0;
function publish(volume: string, files: Record<string, string>): void {
  const ts = `..2026_12_03_${String(++serial).padStart(4, '0')}`;
  mkdirSync(join(volume, ts), { recursive: true });
  for (const [k, v] of Object.entries(files)) writeFileSync(join(volume, ts, k), v, { mode: 0o444 });
  symlinkSync(ts, join(volume, '..data_tmp'));
  renameSync(join(volume, '..data_tmp'), join(volume, '..data'));
}

async function until<T>(what: string, probe: () => T | undefined, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
const read = (f: string) => (existsSync(f) ? readFileSync(f, 'utf8') : undefined);
const mode = (f: string) => statSync(f).mode & 0o777;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'kd-sidecar-'));
  const { src, priv, out } = dirs();
  for (const d of [src, priv, out]) mkdirSync(d);
  writeFileSync(join(root, 'program'), sidecarProgram(), { mode: 0o755 });
});
afterEach(async () => {
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc!.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }
  proc = undefined;
  rmSync(root, { recursive: true, force: true });
});

function start(): void {
  const { src, priv, out } = dirs();
  proc = spawn('/bin/sh', [join(root, 'program')], {
    env: {
      PATH: process.env.PATH,
      KD_SOURCE_DIR: src,
      KD_PRIVATE_DIR: priv,
      KD_GUESTCONFIG_DIR: out,
      KD_TOOLS_DIR: '',
      KD_POLL_SECONDS: '0.05',
    },
    stdio: 'ignore',
  });
}

describe('the sidecar program', () => {
  it('waits for a non-empty document, then keeps the file current by swap, generator after it', async () => {
    const { src, out } = dirs();
    start();
    publish(src, { 'configmeta.json': '', generator: '' });
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(join(out, 'configmeta.json'))).toBe(false);

    publish(src, { 'configmeta.json': '{"v":1}', generator: '1' });
    await until('first document', () => (read(join(out, '.configmeta-generator')) === '1' ? true : undefined));
    expect(read(join(out, 'configmeta.json'))).toBe('{"v":1}');
    expect(mode(join(out, 'configmeta.json'))).toBe(0o644);

    publish(src, { 'configmeta.json': '{"v":2}', generator: '2' });
    await until('second document', () => (read(join(out, 'configmeta.json')) === '{"v":2}' ? true : undefined));
    await until('second generator', () => (read(join(out, '.configmeta-generator')) === '2' ? true : undefined));

    // The annotation removed: the last document stays, never an empty file.
    publish(src, { 'configmeta.json': '', generator: '' });
    await new Promise((r) => setTimeout(r, 300));
    expect(read(join(out, 'configmeta.json'))).toBe('{"v":2}');
    // No temporary file is left behind, and the app's own files are untouched.
    expect(readdirSync(out).sort()).toEqual(['.configmeta-generator', 'configmeta.json']);
  });

  it('installs the private files root-only when the Secret has both keys, and removes them when it loses them', async () => {
    const { src, priv, out } = dirs();
    publish(src, { 'configmeta.json': '{}', generator: '1' });
    start();
    await until('document', () => read(join(out, 'configmeta.json')));
    publish(priv, { 'priv_configmeta.json': '{"connections":{}}' });
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(join(out, '.priv_configmeta.json'))).toBe(false);

    publish(priv, { 'priv_configmeta.json': '{"connections":{}}', 'platform.json': '{}' });
    await until('private file', () => read(join(out, '.priv_configmeta.json')));
    expect(read(join(out, '.platform.json'))).toBe('{}');
    expect(mode(join(out, '.priv_configmeta.json'))).toBe(0o600);
    expect(mode(join(out, '.platform.json'))).toBe(0o600);

    publish(priv, {});
    await until('private files removed', () =>
      existsSync(join(out, '.priv_configmeta.json')) || existsSync(join(out, '.platform.json')) ? undefined : true,
    );
    expect(read(join(out, 'configmeta.json'))).toBe('{}');
  });
});

describe('the seed script', () => {
  function seed(image: string, into: string): number {
    // The script's paths are fixed; run it with them rewritten into the test's directories.
    const script = seedScript().replaceAll('/etc/guestconfig', image).replaceAll('/kd-seed', into);
    return spawnSync('/bin/sh', ['-c', script]).status ?? -1;
  }

  it("copies the image's entries the emptyDir lacks, never the sidecar's names, and tolerates a missing directory", () => {
    const image = join(root, 'image-etc');
    const into = dirs().out;
    mkdirSync(join(image, 'sub'), { recursive: true });
    writeFileSync(join(image, 'configcli.conf'), '[configcli]\n');
    writeFileSync(join(image, 'base_img_version'), '7.1\n');
    writeFileSync(join(image, '.hidden'), 'h');
    writeFileSync(join(image, 'sub', 'x'), 'x');
    writeFileSync(join(image, 'configmeta.json'), '{"stale":true}');
    writeFileSync(join(image, '.platform.json'), '{"image":true}');
    writeFileSync(join(into, 'configmeta.json'), '{"delivered":true}');
    writeFileSync(join(into, 'base_img_version'), 'already here');

    expect(seed(image, into)).toBe(0);
    expect(readdirSync(into).sort()).toEqual([
      '.hidden',
      'base_img_version',
      'configcli.conf',
      'configmeta.json',
      'sub',
    ]);
    expect(read(join(into, 'configmeta.json'))).toBe('{"delivered":true}');
    expect(read(join(into, 'base_img_version'))).toBe('already here');
    expect(read(join(into, 'sub', 'x'))).toBe('x');
    expect(seed(join(root, 'absent'), into)).toBe(0);
  });
});
