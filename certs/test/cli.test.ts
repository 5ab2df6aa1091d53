/** kd-connections-certs driven in-process through main(argv, io). */
import { afterAll, describe, expect, it } from '@jest/globals';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main, USAGE, type CliIO } from '../src/cli.js';
import { createCA, createServingCert, DAY_MS } from '../src/generate.js';
import { inspectCertificate, keyMatchesCertificate } from '../src/inspect.js';
import { certificateFacts, isIssuedBy } from '../../test/support/certificate-facts.js';
import { fakeClient } from './fake-client.js';

const root = mkdtempSync(join(tmpdir(), 'kd-certs-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => join(root, `out-${++n}`);

function run(argv: string[], extra: Partial<CliIO> = {}) {
  const out = { stdout: '', stderr: '' };
  const io: CliIO = { stdout: (t) => (out.stdout += t), stderr: (t) => (out.stderr += t), ...extra };
  return main(argv, io).then((code) => ({ code, ...out }));
}

const NOW = new Date('2032-02-02T10:00:00Z');
const generateArgs = (dir: string, ...more: string[]) => [
  'generate',
  '--out-dir',
  dir,
  '--service',
  'kd-admission',
  '--namespace',
  'kd-system',
  ...more,
];
const FILES = ['ca.crt', 'ca.key', 'tls.crt', 'tls.key'];
const mode = (p: string) => statSync(p).mode & 0o777;
const read = (dir: string) => Object.fromEntries(FILES.map((f) => [f, readFileSync(join(dir, f), 'utf8')]));

describe('generate', () => {
  it('writes CA and serving pair, keys readable by the owner only', async () => {
    const dir = freshDir();
    const r = await run(
      generateArgs(
        dir,
        '--dns',
        'webhook.example.com',
        '--ip',
        '127.0.0.1',
        '--ip=::1',
        '--lifetime-days',
        '10',
        '--ca-lifetime-days=20',
      ),
      { now: () => NOW },
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(EXIT_OK);
    expect(readdirSync(dir).sort()).toEqual(FILES);
    expect(mode(join(dir, 'ca.key'))).toBe(0o600);
    expect(mode(join(dir, 'tls.key'))).toBe(0o600);
    const f = read(dir);
    const leaf = { ...inspectCertificate(f['tls.crt']!), ...certificateFacts(f['tls.crt']!) };
    const ca = inspectCertificate(f['ca.crt']!);
    expect(leaf.dnsNames).toEqual([
      'kd-admission',
      'kd-admission.kd-system',
      'kd-admission.kd-system.svc',
      'kd-admission.kd-system.svc.cluster.local',
      'webhook.example.com',
    ]);
    expect(leaf.ipAddresses).toEqual(['127.0.0.1', '::1']);
    expect(leaf.notAfter.getTime()).toBe(NOW.getTime() + 10 * DAY_MS);
    expect(ca.notAfter.getTime()).toBe(NOW.getTime() + 20 * DAY_MS);
    expect(isIssuedBy(leaf, ca)).toBe(true);
    expect(keyMatchesCertificate(f['tls.key']!, leaf)).toBe(true);
    expect(keyMatchesCertificate(f['ca.key']!, ca)).toBe(true);
    expect(r.stdout).toContain(`wrote ${join(dir, 'ca.crt')}`);
  });

  it('refuses to overwrite, naming the files, and changes nothing', async () => {
    const dir = freshDir();
    expect((await run(generateArgs(dir))).code).toBe(EXIT_OK);
    const before = read(dir);
    const r = await run(generateArgs(dir));
    expect(r.code).toBe(EXIT_FAILURE);
    for (const f of FILES) expect(r.stderr).toContain(join(dir, f));
    expect(r.stderr).toContain('--force');
    expect(read(dir)).toEqual(before);
  });

  it('refuses when even one of the files exists, and writes none of the others', async () => {
    const dir = freshDir();
    mkdirSync(dir);
    writeFileSync(join(dir, 'tls.key'), 'precious');
    const r = await run(generateArgs(dir));
    expect(r.code).toBe(EXIT_FAILURE);
    expect(r.stderr).toBe(
      `error: refusing to overwrite existing ${join(dir, 'tls.key')}; pass --force to replace it\n`,
    );
    expect(readdirSync(dir)).toEqual(['tls.key']);
    expect(readFileSync(join(dir, 'tls.key'), 'utf8')).toBe('precious');
  });

  it('replaces existing files with --force, tightening a loose key mode, leaving no temporary files', async () => {
    const dir = freshDir();
    expect((await run(generateArgs(dir))).code).toBe(EXIT_OK);
    const before = read(dir);
    chmodSync(join(dir, 'tls.key'), 0o644);
    const r = await run(generateArgs(dir, '--force'));
    expect(r.code).toBe(EXIT_OK);
    const after = read(dir);
    for (const f of FILES) expect(after[f]).not.toBe(before[f]);
    expect(mode(join(dir, 'tls.key'))).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual(FILES);
  });

  it('resolves a relative --out-dir against the working directory it is given', async () => {
    const r = await run(generateArgs('rel/out'), { cwd: root });
    expect(r.code).toBe(EXIT_OK);
    expect(existsSync(join(root, 'rel/out/tls.crt'))).toBe(true);
  });
});

describe('usage errors exit with 2, say what is wrong and show usage', () => {
  const dir = join(root, 'never-written');
  it.each([
    [[], 'no command given'],
    [['frobnicate'], 'unknown command "frobnicate"'],
    [generateArgs(dir, '--bogus'), 'unknown flag --bogus'],
    [generateArgs(dir, '--dns'), '--dns needs a value'],
    [generateArgs(dir, '--dns', '--force'), '--dns needs a value'],
    [generateArgs(dir, '--force=maybe'), '--force must be true or false, got "maybe"'],
    [generateArgs(dir, 'extra'), 'unexpected argument "extra"'],
    [['generate', '--out-dir', dir, '--namespace', 'ns'], '--service is required'],
    [['generate', '--service', 's', '--namespace', 'ns'], '--out-dir is required'],
    [generateArgs(dir, '--service', 'again'), '--service given more than once'],
    [['generate', '--out-dir=', '--service', 's', '--namespace', 'ns'], '--out-dir needs a non-empty value'],
    [
      ['generate', '--out-dir', dir, '--service', 'Bad_Name', '--namespace', 'ns'],
      '--service "Bad_Name" is not a Service name',
    ],
    [
      ['generate', '--out-dir', dir, '--service', 's', '--namespace', 'NS!'],
      '--namespace "NS!" is not a namespace name',
    ],
    [generateArgs(dir, '--ip', '300.1.1.1'), '--ip "300.1.1.1" is not an IP address'],
    [generateArgs(dir, '--dns', 'bad name'), '--dns "bad name" is not a DNS name'],
    [generateArgs(dir, '--lifetime-days', '0'), '--lifetime-days must be a positive number of days'],
    [generateArgs(dir, '--ca-lifetime-days', 'ten'), '--ca-lifetime-days must be a positive number of days'],
    [
      generateArgs(dir, '--lifetime-days', '400', '--ca-lifetime-days', '365'),
      '--lifetime-days (400) must not exceed --ca-lifetime-days (365)',
    ],
    [['inject-ca', '--ca-file', 'x'], 'name at least one configuration with --validating or --mutating'],
    [['inject-ca', '--validating', 'v'], '--ca-file is required'],
    [['inject-ca', '--ca-file', 'x', '--service', 'v'], 'unknown flag --service'],
  ])('%j', async (argv, message) => {
    const r = await run(argv);
    expect(r.code).toBe(EXIT_USAGE);
    expect(r.stderr).toContain(`error: ${message}`);
    expect(r.stderr).toContain(USAGE);
    expect(r.stdout).toBe('');
    expect(existsSync(dir)).toBe(false);
  });

  it('--version prints the version and succeeds', async () => {
    for (const argv of [['--version'], ['generate', '--version']]) {
      expect(await run(argv)).toEqual({ code: EXIT_OK, stdout: 'kd-connections-certs 0.1.0\n', stderr: '' });
    }
  });

  it('help prints usage and succeeds', async () => {
    for (const argv of [['help'], ['--help'], ['generate', '--help']]) {
      const r = await run(argv);
      expect(r).toEqual({ code: EXIT_OK, stdout: USAGE, stderr: '' });
    }
  });
});

describe('inject-ca', () => {
  const ca = createCA({ keyBits: 1024 });
  const caFile = join(root, 'inject-ca.crt');
  writeFileSync(caFile, ca.certPem);
  const config = (...names: string[]) => ({
    webhooks: names.map((name) => ({
      name,
      clientConfig: { url: `https://127.0.0.1:1/${name}` } as { caBundle?: string },
    })),
  });

  it('sets the caBundle of every named configuration, then finds them up to date', async () => {
    const client = fakeClient({ 'validating/v': config('a', 'b'), 'mutating/m': config('c') });
    const args = ['inject-ca', '--ca-file', caFile, '--validating', 'v', '--mutating', 'm', '--kubeconfig', 'kc.yaml'];
    let kubeconfig: string | undefined;
    const webhookClient = (path: string | undefined) => ((kubeconfig = path), client);
    const r = await run(args, { webhookClient, cwd: root });
    expect(r).toEqual({
      code: EXIT_OK,
      stdout:
        'ValidatingWebhookConfiguration v: caBundle set on a, b\nMutatingWebhookConfiguration m: caBundle set on c\n',
      stderr: '',
    });
    expect(kubeconfig).toBe(join(root, 'kc.yaml'));
    const bundle = Buffer.from(ca.certPem.replace(/\r\n/g, '\n')).toString('base64');
    expect(client.objects.get('mutating/m')!.webhooks![0]!.clientConfig!.caBundle).toBe(bundle);
    expect(client.patches.map((p) => p.ops.length)).toEqual([4, 2]);

    const again = await run(args, { webhookClient });
    expect(again.stdout).toBe(
      'ValidatingWebhookConfiguration v: caBundle already up to date\nMutatingWebhookConfiguration m: caBundle already up to date\n',
    );
    expect(client.patches).toHaveLength(2);
  });

  it("without --kubeconfig reads $KUBECONFIG, else ~/.kube/config before a pod's ServiceAccount, as kubectl", async () => {
    // A kubeconfig whose server nothing listens on: the error names the server that was dialled.
    const home = join(root, 'home');
    mkdirSync(join(home, '.kube'), { recursive: true });
    const kubeconfig = (port: number) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: `https://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      });
    writeFileSync(join(home, '.kube', 'config'), kubeconfig(9));
    writeFileSync(join(root, 'env-kubeconfig'), kubeconfig(7));
    const saved = { ...process.env };
    Object.assign(process.env, { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' });
    try {
      delete process.env.KUBECONFIG;
      const inPod = await run(['inject-ca', '--ca-file', caFile, '--validating', 'v'], { home });
      expect(inPod.code).toBe(EXIT_FAILURE);
      expect(inPod.stderr).toContain('127.0.0.1:9');
      process.env.KUBECONFIG = join(root, 'env-kubeconfig');
      const fromEnv = await run(['inject-ca', '--ca-file', caFile, '--validating', 'v'], { home });
      expect(fromEnv.stderr).toContain('127.0.0.1:7');
    } finally {
      for (const k of ['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT']) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  });

  it('carries on with the other configurations when one is missing, and fails', async () => {
    const client = fakeClient({ 'mutating/m': config('c') });
    const r = await run(['inject-ca', '--ca-file', caFile, '--validating', 'gone', '--mutating', 'm'], {
      webhookClient: () => client,
    });
    expect(r.code).toBe(EXIT_FAILURE);
    expect(r.stderr).toBe('error: ValidatingWebhookConfiguration gone not found\n');
    expect(r.stdout).toBe('MutatingWebhookConfiguration m: caBundle set on c\n');
  });

  it('refuses a CA file that holds a key, a serving certificate, or nothing readable', async () => {
    const client = fakeClient({ 'validating/v': config('a') });
    const leaf = createServingCert({ ca, dnsNames: ['x.example.com'], keyBits: 1024 });
    const cases: [string, string][] = [
      [ca.certPem + ca.keyPem, 'expected only CERTIFICATE blocks, found a RSA PRIVATE KEY block'],
      [leaf.certPem, 'is not a CA certificate'],
      ['', 'no PEM certificate found'],
    ];
    for (const [content, message] of cases) {
      const file = join(root, `bad-${++n}.crt`);
      writeFileSync(file, content);
      const r = await run(['inject-ca', '--ca-file', file, '--validating', 'v'], { webhookClient: () => client });
      expect(r.code).toBe(EXIT_FAILURE);
      expect(r.stderr).toContain(`error: ${file}`);
      expect(r.stderr).toContain(message);
    }
    const missing = await run(['inject-ca', '--ca-file', join(root, 'nope.crt'), '--validating', 'v'], {
      webhookClient: () => client,
    });
    expect(missing.code).toBe(EXIT_FAILURE);
    expect(missing.stderr).toContain('ENOENT');
    expect(client.patches).toHaveLength(0);
  });
});
