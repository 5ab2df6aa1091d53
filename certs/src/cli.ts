#!/usr/bin/env node
/**
 * kd-connections-certs: `generate` writes a CA and a serving pair as PEM files; `inject-ca` puts a CA
 * into the caBundle of webhook configurations. `main(argv, io)` does the work and returns the exit
 * code, so tests drive it in-process; the bin at the bottom only wires it to the real process.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCA, createServingCert, DAY_MS, servingDnsNames } from './generate.js';
import {
  describeRef,
  encodeCABundle,
  injectCABundle,
  webhookConfigurationClient,
  type WebhookConfigurationClient,
  type WebhookConfigurationRef,
} from './inject.js';
import { inspectCertificate } from './inspect.js';
import { DNS1123_LABEL_RE } from '@kd-connections/shared/domain';
import {
  FlagError,
  flagsHelp,
  KubeClient,
  loadKubeConnection,
  packageVersion,
  parseFlags,
  versionText,
  type FlagSpec,
  type FlagValues,
  type ProgramInfo,
} from '@kd-connections/shared/runtime';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export interface CliIO {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Base for relative paths (default: process.cwd()). */
  cwd?: string;
  /** The clock for certificate validity (default: the system clock). */
  now?: () => Date;
  /** The home directory whose .kube/config inject-ca falls back to (default: os.homedir()). */
  home?: string;
  /** The API client inject-ca uses (default: the project's client on the kubeconfig kubectl would use). */
  webhookClient?: (kubeconfigPath: string | undefined) => WebhookConfigurationClient;
}

const GENERATE_FLAGS = {
  'out-dir': { type: 'string', required: true, metavar: 'DIR', help: 'where ca.crt, ca.key, tls.crt and tls.key go' },
  service: { type: 'string', required: true, metavar: 'NAME', help: 'the Service the certificate is for' },
  namespace: { type: 'string', required: true, metavar: 'NS', help: "the Service's namespace" },
  dns: { type: 'list', metavar: 'NAME', help: 'another DNS name for the certificate (repeatable)' },
  ip: { type: 'list', metavar: 'IP', help: 'an IP address for the certificate (repeatable)' },
  'ca-lifetime-days': { type: 'string', default: '3650', metavar: 'N', help: 'CA lifetime in days' },
  'lifetime-days': { type: 'string', default: '365', metavar: 'N', help: 'serving certificate lifetime in days' },
  force: { type: 'bool', help: 'replace existing files' },
} satisfies Record<string, FlagSpec>;

const INJECT_FLAGS = {
  'ca-file': { type: 'string', required: true, metavar: 'FILE', help: 'the CA certificate(s), PEM' },
  validating: { type: 'list', metavar: 'NAME', help: 'a ValidatingWebhookConfiguration (repeatable)' },
  mutating: { type: 'list', metavar: 'NAME', help: 'a MutatingWebhookConfiguration (repeatable)' },
  kubeconfig: {
    type: 'string',
    metavar: 'PATH',
    help: 'kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the ServiceAccount in a pod, as kubectl)',
  },
} satisfies Record<string, FlagSpec>;

export const CERTS_PROGRAM: ProgramInfo = {
  name: 'kd-connections-certs',
  version: packageVersion(import.meta.url),
  summary: 'Certificates for the kd-connections admission webhook.',
};

export const USAGE = `Usage:
  kd-connections-certs generate --out-dir DIR --service NAME --namespace NS [flags]
    Writes ca.crt, ca.key, tls.crt and tls.key (keys mode 0600) into DIR: a new CA and a serving
    certificate for NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local and the extra names/IPs.
    Existing files are only replaced with --force.
${flagsHelp(GENERATE_FLAGS, 4)}

  kd-connections-certs inject-ca --ca-file FILE (--validating NAME | --mutating NAME)... [flags]
    Sets webhooks[*].clientConfig.caBundle of the named Validating/MutatingWebhookConfigurations to the
    CA certificate(s) in FILE, with a JSON Patch that changes nothing else.
${flagsHelp(INJECT_FLAGS, 4)}

  kd-connections-certs help | --help | --version
`;

/** Flags of one command; a one-shot command refuses a repeated flag rather than guess which was meant. */
function commandFlags<S extends Record<string, FlagSpec>>(spec: S, args: readonly string[]): FlagValues<S> {
  return parseFlags(spec, args, {}, { repeats: 'error' });
}

function positiveDays(flags: { [k: string]: unknown }, name: string): number {
  const v = String(flags[name]);
  const n = Number(v);
  if (!/^\d+(\.\d+)?$/.test(v) || !(n > 0)) {
    throw new FlagError(`--${name} must be a positive number of days, got ${JSON.stringify(v)}`);
  }
  return n;
}

const DNS1035_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_LABEL = /^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$/;

function validDnsName(name: string): boolean {
  const labels = (name.startsWith('*.') ? name.slice(2) : name).split('.');
  return name.length <= 253 && labels.every((l) => DNS_LABEL.test(l));
}

export const OUTPUT_FILES = { caCert: 'ca.crt', caKey: 'ca.key', cert: 'tls.crt', key: 'tls.key' } as const;

function generate(args: readonly string[], io: CliIO): number {
  const flags = commandFlags(GENERATE_FLAGS, args);
  const outDir = resolve(io.cwd ?? process.cwd(), flags['out-dir']);
  const { service, namespace } = flags;
  if (!DNS1035_LABEL.test(service)) throw new FlagError(`--service ${JSON.stringify(service)} is not a Service name`);
  if (!DNS1123_LABEL_RE.test(namespace)) {
    throw new FlagError(`--namespace ${JSON.stringify(namespace)} is not a namespace name`);
  }
  const dnsNames = flags.dns;
  for (const d of dnsNames) if (!validDnsName(d)) throw new FlagError(`--dns ${JSON.stringify(d)} is not a DNS name`);
  const ips = flags.ip;
  for (const ip of ips) if (isIP(ip) === 0) throw new FlagError(`--ip ${JSON.stringify(ip)} is not an IP address`);
  const caDays = positiveDays(flags, 'ca-lifetime-days');
  const days = positiveDays(flags, 'lifetime-days');
  if (days > caDays) {
    throw new FlagError(`--lifetime-days (${days}) must not exceed --ca-lifetime-days (${caDays})`);
  }
  const force = flags.force;

  const files = Object.values(OUTPUT_FILES);
  const existing = files.filter((f) => existsSync(join(outDir, f)));
  if (existing.length > 0 && !force) {
    io.stderr(
      `error: refusing to overwrite existing ${existing.map((f) => join(outDir, f)).join(', ')}; ` +
        `pass --force to replace ${existing.length === 1 ? 'it' : 'them'}\n`,
    );
    return EXIT_FAILURE;
  }

  const now = io.now?.() ?? new Date();
  const ca = createCA({ lifetimeMs: caDays * DAY_MS, now });
  const serving = createServingCert({
    ca,
    service: { name: service, namespace },
    dnsNames,
    ipAddresses: ips,
    lifetimeMs: days * DAY_MS,
    now,
  });
  mkdirSync(outDir, { recursive: true });
  const contents: [string, string, number][] = [
    [OUTPUT_FILES.caCert, ca.certPem, 0o644],
    [OUTPUT_FILES.caKey, ca.keyPem, 0o600],
    [OUTPUT_FILES.cert, serving.certPem, 0o644],
    [OUTPUT_FILES.key, serving.keyPem, 0o600],
  ];
  for (const [name, data, mode] of contents) writeNew(join(outDir, name), data, mode, force);

  const leaf = inspectCertificate(serving.certPem);
  io.stdout(
    `wrote ${contents.map(([n]) => join(outDir, n)).join(', ')}\n` +
      `serving certificate for ${[...servingDnsNames({ service: { name: service, namespace }, dnsNames }), ...ips].join(', ')}` +
      ` valid until ${leaf.notAfter.toISOString()}\n`,
  );
  return EXIT_OK;
}

/**
 * Without force: exclusive create, so a file appearing since the check is still never clobbered.
 * With force: a fresh file renamed over the old one, so the mode is ours (an existing key file's
 * looser mode would survive an in-place write) and readers never see half a file.
 */
function writeNew(path: string, data: string, mode: number, force: boolean): void {
  if (!force) {
    writeFileSync(path, data, { mode, flag: 'wx' });
    return;
  }
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    writeFileSync(tmp, data, { mode, flag: 'wx' });
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * The project's client on the kubeconfig kubectl would use: --kubeconfig, $KUBECONFIG, ~/.kube/config, then
 * the ServiceAccount in a pod (a toolbox pod that deploys elsewhere through its ~/.kube/config stays there).
 */
async function defaultWebhookClient(kubeconfig: string | undefined, io: CliIO): Promise<OwnedClient> {
  const home = join(io.home ?? homedir(), '.kube', 'config');
  const file = kubeconfig || process.env.KUBECONFIG || (existsSync(home) ? home : '');
  const connection = await loadKubeConnection({ kubeconfig: file });
  const kube = new KubeClient(connection, `kd-connections-certs/${CERTS_PROGRAM.version}`);
  return Object.assign(webhookConfigurationClient(kube), { close: () => kube.close() });
}

type OwnedClient = WebhookConfigurationClient & { close?: () => void };

async function injectCa(args: readonly string[], io: CliIO): Promise<number> {
  const flags = commandFlags(INJECT_FLAGS, args);
  const caFile = resolve(io.cwd ?? process.cwd(), flags['ca-file']);
  const refs: WebhookConfigurationRef[] = [];
  for (const kind of ['validating', 'mutating'] as const) {
    for (const name of flags[kind]) {
      if (!refs.some((r) => r.kind === kind && r.name === name)) refs.push({ kind, name });
    }
  }
  if (refs.length === 0) throw new FlagError('name at least one configuration with --validating or --mutating');
  const kubeconfig = flags.kubeconfig ? resolve(io.cwd ?? process.cwd(), flags.kubeconfig) : undefined;

  let caBundle: string;
  try {
    const encoded = encodeCABundle(readFileSync(caFile, 'utf8'), caFile);
    caBundle = encoded.caBundle;
    const now = io.now?.() ?? new Date();
    for (const ca of encoded.cas) {
      if (ca.notAfter.getTime() <= now.getTime()) {
        io.stderr(`warning: ${caFile}: CA ${JSON.stringify(ca.subjectCN)} expired at ${ca.notAfter.toISOString()}\n`);
      }
    }
  } catch (e) {
    io.stderr(`error: ${(e as Error).message}\n`);
    return EXIT_FAILURE;
  }

  let client: OwnedClient;
  try {
    client = io.webhookClient ? io.webhookClient(kubeconfig) : await defaultWebhookClient(kubeconfig, io);
  } catch (e) {
    io.stderr(`error: cannot load kubeconfig: ${(e as Error).message}\n`);
    return EXIT_FAILURE;
  }

  let failed = 0;
  try {
    // One configuration failing does not stop the others: they are independent objects.
    for (const ref of refs) {
      try {
        const r = await injectCABundle(client, ref, caBundle);
        const what = describeRef(ref);
        if (r.changed.length === 0 && r.unchanged.length === 0) io.stdout(`${what}: has no webhooks, nothing to set\n`);
        else if (r.changed.length === 0) io.stdout(`${what}: caBundle already up to date\n`);
        else io.stdout(`${what}: caBundle set on ${r.changed.join(', ')}\n`);
      } catch (e) {
        failed++;
        io.stderr(`error: ${(e as Error).message}\n`);
      }
    }
  } finally {
    client.close?.();
  }
  return failed > 0 ? EXIT_FAILURE : EXIT_OK;
}

/** Runs the CLI with `argv` (without node and script) and returns the exit code. */
export async function main(argv: readonly string[], io: CliIO): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined) throw new FlagError('no command given');
    if (command === '--version' || rest.includes('--version')) {
      io.stdout(`${versionText(CERTS_PROGRAM)}\n`);
      return EXIT_OK;
    }
    if (command === 'help' || command === '--help' || command === '-h' || rest.includes('--help')) {
      io.stdout(USAGE);
      return EXIT_OK;
    }
    if (command === 'generate') return generate(rest, io);
    if (command === 'inject-ca') return await injectCa(rest, io);
    throw new FlagError(`unknown command ${JSON.stringify(command)}`);
  } catch (e) {
    if (e instanceof FlagError) {
      io.stderr(`error: ${e.message}\n\n${USAGE}`);
      return EXIT_USAGE;
    }
    io.stderr(`error: ${(e as Error).message}\n`);
    return EXIT_FAILURE;
  }
}

/** True when this module is the process entry point (npm's bin link is a symlink, hence realpath). */
function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

// No top-level await: it would make this module (and the package index) impossible to require().
if (isEntryPoint()) {
  void main(process.argv.slice(2), {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
  }).then((code) => {
    process.exitCode = code;
  });
}
