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
import { sidecarProgram } from '../src/delivery/guestconfig-sidecar-program.js';
import { seedScript } from '../src/delivery/pod-delivery.js';
import { renderSpliced } from '../src/configmeta/configmeta-splice.js';

let root: string;
let proc: ChildProcess | undefined;
// `gc` is the emptyDir the sidecar mounts; `out` the subdirectory it creates and the app mounts (subPath).
const dirs = () => ({
  src: join(root, 'source'),
  priv: join(root, 'private'),
  gc: join(root, 'gc'),
  out: join(root, 'gc', 'guestconfig'),
});

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
  const { src, priv, gc } = dirs();
  for (const d of [src, priv, gc]) mkdirSync(d);
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

function start(extra: Record<string, string> = {}): void {
  const { src, priv, gc } = dirs();
  proc = spawn('/bin/sh', [join(root, 'program')], {
    env: {
      PATH: process.env.PATH,
      KD_SOURCE_DIR: src,
      KD_PRIVATE_DIR: priv,
      KD_GUESTCONFIG_DIR: gc,
      KD_TOOLS_DIR: '',
      KD_POLL_SECONDS: '0.05',
      ...extra,
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

  const V = 'c'.repeat(32);
  const hasPrivate = () => existsSync(join(dirs().out, '.priv_configmeta.json'));

  it('installs the private files root-only when the Secret has both keys of the version the document names', async () => {
    const { src, priv, out } = dirs();
    publish(src, { 'configmeta.json': '{}', generator: '1', splice: `1 ${V}` });
    start({ KD_SECRET_DELIVERY: 'private-file' });
    await until('document', () => read(join(out, 'configmeta.json')));
    publish(priv, { 'priv_configmeta.json': '{"connections":{}}', version: V });
    await new Promise((r) => setTimeout(r, 300));
    expect(hasPrivate()).toBe(false);

    publish(priv, { 'priv_configmeta.json': '{"connections":{}}', 'platform.json': '{}', version: V });
    await until('private file', () => read(join(out, '.priv_configmeta.json')));
    expect(read(join(out, '.platform.json'))).toBe('{}');
    expect(mode(join(out, '.priv_configmeta.json'))).toBe(0o600);
    expect(mode(join(out, '.platform.json'))).toBe(0o600);

    // The document no longer names a private half (the cluster lost its Secret connection): removed.
    publish(src, { 'configmeta.json': '{"v":2}', generator: '2' });
    await until('private files removed', () =>
      hasPrivate() || existsSync(join(out, '.platform.json')) ? undefined : true,
    );
    await until('document 2', () => (read(join(out, 'configmeta.json')) === '{"v":2}' ? true : undefined));
  });

  it('in private-file mode the generator files wait for the private files of the version the document names', async () => {
    const { src, priv, gc, out } = dirs();
    const W = 'd'.repeat(32);
    const privOf = (v: string, tag: string) => ({
      'priv_configmeta.json': `{"t":"${tag}"}`,
      'platform.json': '{}',
      version: v,
    });
    // The root copies the reconnect hook reads: the generator, and the roster digest of the document in place.
    const generators = () => [
      read(join(out, '.configmeta-generator')),
      read(join(gc, '.configmeta-generator')),
      read(join(gc, '.configmeta-roster')),
    ];
    publish(priv, privOf(V, 'one'));
    publish(src, { 'configmeta.json': '{"v":1}', generator: '1', splice: `1 ${V}`, roster: 'r1' });
    start({ KD_SECRET_DELIVERY: 'private-file' });
    await until('generator 1', () => (generators().join() === '1,1,r1' ? true : undefined));
    // The app's directory gets no roster file: it is the reconciler's business.
    expect(existsSync(join(out, '.configmeta-roster'))).toBe(false);
    expect(read(join(out, '.priv_configmeta.json'))).toBe('{"t":"one"}');
    // The document of version W arrives before its private half: the public text is delivered, the
    // generators (what the reconnect hook reads) stay until the private files follow.
    publish(src, { 'configmeta.json': '{"v":2}', generator: '2', splice: `1 ${W}`, roster: 'r2' });
    await until('document 2', () => (read(join(out, 'configmeta.json')) === '{"v":2}' ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    expect(generators()).toEqual(['1', '1', 'r1']);
    expect(read(join(out, '.priv_configmeta.json'))).toBe('{"t":"one"}');
    publish(priv, privOf(W, 'two'));
    await until('generator 2', () => (generators().join() === '2,2,r2' ? true : undefined));
    expect(read(join(out, '.priv_configmeta.json'))).toBe('{"t":"two"}');
  });

  it("never installs a Secret of another version, or one the document does not name (someone else's of that name)", async () => {
    const { src, priv, out } = dirs();
    const forged = { 'priv_configmeta.json': '{"forged":1}', 'platform.json': '{}' };
    // A document without a private half, and a Secret of the private Secret's name with both keys.
    publish(src, { 'configmeta.json': '{}', generator: '1' });
    publish(priv, { ...forged, version: V });
    start({ KD_SECRET_DELIVERY: 'private-file' });
    await until('document', () => read(join(out, 'configmeta.json')));
    await new Promise((r) => setTimeout(r, 300));
    expect(hasPrivate()).toBe(false);

    // The document names a version the Secret does not carry: still nothing.
    publish(src, { 'configmeta.json': '{"g":2}', generator: '2', splice: `1 ${'d'.repeat(32)}` });
    await until('document 2', () => (read(join(out, 'configmeta.json')) === '{"g":2}' ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    expect(hasPrivate()).toBe(false);
    // Its generator waits for its private half.
    expect(read(join(out, '.configmeta-generator'))).toBe('1');

    // Ours arrives with that version: installed, and a later Secret of another version does not replace it.
    publish(priv, { 'priv_configmeta.json': '{"ours":1}', 'platform.json': '{}', version: 'd'.repeat(32) });
    await until('private file', () => (read(join(out, '.priv_configmeta.json')) === '{"ours":1}' ? true : undefined));
    await until('generator 2', () => (read(join(out, '.configmeta-generator')) === '2' ? true : undefined));
    publish(priv, { ...forged, version: V });
    await new Promise((r) => setTimeout(r, 300));
    expect(read(join(out, '.priv_configmeta.json'))).toBe('{"ours":1}');
  });
});

describe("the sidecar assembles KubeDirector's document (document mode)", () => {
  const V1 = 'a'.repeat(32);
  const V2 = 'b'.repeat(32);
  // The public half of the document whose private half is privFiles(tag, version).
  const pub = (tag: string, version: string) =>
    renderSpliced(
      {
        version: '7',
        nodegroups: { '1': { redacted: true } },
        node: { id: 'é' },
        connections: { secrets: { tok: [{ data: { k: '' } }] } },
      },
      {
        nodegroups: Buffer.byteLength(privFiles(tag, version)['nodegroups.json']),
        connections: Buffer.byteLength(privFiles(tag, version)['connections.json']),
      },
      version,
    );
  const privFiles = (tag: string, version: string) => ({
    'priv_configmeta.json': '{}',
    'platform.json': '{}',
    version,
    'nodegroups.json': `{"1":{"secret":"${tag}"}}`,
    'connections.json': `{"secrets":{"tok":[{"data":{"k":"${Buffer.from(tag).toString('base64')}"}}]}}`,
  });
  const expected = (tag: string) =>
    `{"version":"7","nodegroups":{"1":{"secret":"${tag}"}},"node":{"id":"é"},"connections":{"secrets":{"tok":[{"data":{"k":"${Buffer.from(tag).toString('base64')}"}}]}}}`;

  it('waits for the private half of the same version, never delivers a mix, and follows both halves', async () => {
    const { src, priv, out } = dirs();
    start();
    const p1 = pub('one', V1);
    publish(src, { 'configmeta.json': p1.text, generator: '1', splice: p1.splice });
    await new Promise((r) => setTimeout(r, 400));
    // No private half yet: nothing is delivered (the startupProbe keeps the app waiting).
    expect(existsSync(join(out, 'configmeta.json'))).toBe(false);
    publish(priv, privFiles('one', V2));
    await new Promise((r) => setTimeout(r, 400));
    expect(existsSync(join(out, 'configmeta.json'))).toBe(false);
    publish(priv, privFiles('one', V1));
    await until('assembled document', () => read(join(out, 'configmeta.json')));
    expect(read(join(out, 'configmeta.json'))).toBe(expected('one'));
    expect(JSON.parse(read(join(out, 'configmeta.json'))!)).toBeTruthy();
    expect(mode(join(out, 'configmeta.json'))).toBe(0o644);

    // The public half moves to version 2 first: the version 1 document stays until the private half follows.
    const p2 = pub('two', V2);
    publish(src, { 'configmeta.json': p2.text, generator: '2', splice: p2.splice });
    await new Promise((r) => setTimeout(r, 400));
    expect(read(join(out, 'configmeta.json'))).toBe(expected('one'));
    publish(priv, privFiles('two', V2));
    await until('second document', () => (read(join(out, 'configmeta.json')) === expected('two') ? true : undefined));
    // The generator follows the document.
    await until('second generator', () => (read(join(out, '.configmeta-generator')) === '2' ? true : undefined));
  });

  it('refuses a private section of another size than the annotation names (edited by hand)', async () => {
    const { src, priv, out } = dirs();
    start();
    const p1 = pub('one', V1);
    publish(priv, privFiles('one', V1));
    publish(src, { 'configmeta.json': p1.text, generator: '1', splice: p1.splice });
    await until('document', () => read(join(out, 'configmeta.json')));
    publish(priv, { ...privFiles('one', V1), 'connections.json': '{"secrets":{"tok":[{"data":{"k":"Zm9yZ2Vk"}}]}}' });
    await new Promise((r) => setTimeout(r, 400));
    expect(read(join(out, 'configmeta.json'))).toBe(expected('one'));
  });

  it('in private-file mode, keeps the public text as it is', async () => {
    const { src, priv, out } = dirs();
    start({ KD_SECRET_DELIVERY: 'private-file' });
    const p1 = pub('one', V1);
    publish(priv, privFiles('one', V1));
    publish(src, { 'configmeta.json': p1.text, generator: '1', splice: p1.splice });
    await until('document', () => read(join(out, 'configmeta.json')));
    expect(read(join(out, 'configmeta.json'))).toBe(p1.text);
    await until('private file', () => read(join(out, '.priv_configmeta.json')));
  });
});

describe('the delivered directory', () => {
  it('is created 0755 by the sidecar; a planted symlink or file of another name is never followed or replaced', async () => {
    const { src, gc, out } = dirs();
    const target = join(root, 'victim');
    writeFileSync(target, 'untouched');
    // Planted before the sidecar starts: a symlink where the directory goes.
    symlinkSync(root, out);
    publish(src, { 'configmeta.json': '{"v":1}', generator: '1' });
    start();
    await until('document', () => read(join(out, 'configmeta.json')));
    expect(statSync(out).isDirectory()).toBe(true);
    expect(mode(out)).toBe(0o755);
    expect(existsSync(join(root, 'configmeta.json'))).toBe(false);
    // The generator is written just after the document: wait for it (a loaded machine can be between the two).
    await until('generator', () => (existsSync(join(out, '.configmeta-generator')) ? true : undefined));
    // A symlink planted at a name the sidecar writes is left alone and not written through.
    rmSync(join(out, '.configmeta-generator'));
    symlinkSync(target, join(out, '.configmeta-generator'));
    publish(src, { 'configmeta.json': '{"v":2}', generator: '2' });
    await until('second document', () => (read(join(out, 'configmeta.json')) === '{"v":2}' ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    expect(read(target)).toBe('untouched');
    expect(readdirSync(gc)).toContain('guestconfig');
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
    mkdirSync(into);
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
