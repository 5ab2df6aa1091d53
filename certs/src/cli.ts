#!/usr/bin/env node
/**
 * kd-connections-certs: `generate` writes a CA and a serving pair as PEM files; `inject-ca` puts a CA
 * into the caBundle of webhook configurations. `main(argv, io)` does the work and returns the exit
 * code, so tests drive it in-process; the bin at the bottom only wires it to the real process.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
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
  /** The API client inject-ca uses (default: client-node on --kubeconfig or the default kubeconfig). */
  webhookClient?: (kubeconfigPath: string | undefined) => WebhookConfigurationClient;
}

export const USAGE = `Usage:
  kd-connections-certs generate --out-dir DIR --service NAME --namespace NS
      [--dns NAME]... [--ip IP]... [--ca-lifetime-days N] [--lifetime-days N] [--force]
    Writes ca.crt, ca.key, tls.crt and tls.key (keys mode 0600) into DIR: a new CA and a serving
    certificate for NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local and the extra names/IPs.
    Defaults: CA 3650 days, serving certificate 365 days. Existing files are only replaced with --force.

  kd-connections-certs inject-ca --ca-file FILE (--validating NAME | --mutating NAME)... [--kubeconfig PATH]
    Sets webhooks[*].clientConfig.caBundle of the named Validating/MutatingWebhookConfigurations to the
    CA certificate(s) in FILE, with a JSON Patch that changes nothing else.

  kd-connections-certs help
`;

class UsageError extends Error {}

type FlagKind = 'value' | 'list' | 'switch';
type Flags = Record<string, string | string[] | boolean | undefined>;

/** `--flag value`, `--flag=value`; list flags may repeat, the others may not. */
function parseFlags(args: readonly string[], spec: Record<string, FlagKind>): Flags {
  const out: Flags = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    const kind = spec[name];
    if (!kind) throw new UsageError(`unknown flag --${name}`);
    if (kind === 'switch') {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      out[name] = true;
      continue;
    }
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      value = args[i + 1];
      if (value === undefined || value.startsWith('--')) throw new UsageError(`--${name} needs a value`);
      i++;
    }
    if (value === '') throw new UsageError(`--${name} needs a non-empty value`);
    if (kind === 'list') out[name] = [...((out[name] as string[] | undefined) ?? []), value];
    else if (out[name] !== undefined) throw new UsageError(`--${name} given more than once`);
    else out[name] = value;
  }
  return out;
}

function required(flags: Flags, name: string): string {
  const v = flags[name];
  if (typeof v !== 'string') throw new UsageError(`--${name} is required`);
  return v;
}

function positiveDays(flags: Flags, name: string, fallback: number): number {
  const v = flags[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (typeof v !== 'string' || !/^\d+(\.\d+)?$/.test(v) || !(n > 0)) {
    throw new UsageError(`--${name} must be a positive number of days, got ${JSON.stringify(v)}`);
  }
  return n;
}

const DNS1035_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_LABEL = /^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$/;

function validDnsName(name: string): boolean {
  const labels = (name.startsWith('*.') ? name.slice(2) : name).split('.');
  return name.length <= 253 && labels.every((l) => DNS_LABEL.test(l));
}

export const OUTPUT_FILES = { caCert: 'ca.crt', caKey: 'ca.key', cert: 'tls.crt', key: 'tls.key' } as const;

function generate(args: readonly string[], io: CliIO): number {
  const flags = parseFlags(args, {
    'out-dir': 'value',
    service: 'value',
    namespace: 'value',
    dns: 'list',
    ip: 'list',
    'ca-lifetime-days': 'value',
    'lifetime-days': 'value',
    force: 'switch',
  });
  const outDir = resolve(io.cwd ?? process.cwd(), required(flags, 'out-dir'));
  const service = required(flags, 'service');
  const namespace = required(flags, 'namespace');
  if (!DNS1035_LABEL.test(service)) throw new UsageError(`--service ${JSON.stringify(service)} is not a Service name`);
  if (!DNS1123_LABEL.test(namespace)) {
    throw new UsageError(`--namespace ${JSON.stringify(namespace)} is not a namespace name`);
  }
  const dnsNames = (flags.dns as string[] | undefined) ?? [];
  for (const d of dnsNames) if (!validDnsName(d)) throw new UsageError(`--dns ${JSON.stringify(d)} is not a DNS name`);
  const ips = (flags.ip as string[] | undefined) ?? [];
  for (const ip of ips) if (isIP(ip) === 0) throw new UsageError(`--ip ${JSON.stringify(ip)} is not an IP address`);
  const caDays = positiveDays(flags, 'ca-lifetime-days', 3650);
  const days = positiveDays(flags, 'lifetime-days', 365);
  if (days > caDays) {
    throw new UsageError(`--lifetime-days (${days}) must not exceed --ca-lifetime-days (${caDays})`);
  }
  const force = flags.force === true;

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

async function defaultWebhookClient(kubeconfigPath: string | undefined): Promise<WebhookConfigurationClient> {
  // Loaded here, not at the top: generate does not need client-node (about a second to import).
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromDefault();
  if (!kc.getCurrentCluster()) {
    throw new Error(`no cluster in ${kubeconfigPath ?? 'the default kubeconfig (KUBECONFIG, ~/.kube/config)'}`);
  }
  return webhookConfigurationClient(kc);
}

async function injectCa(args: readonly string[], io: CliIO): Promise<number> {
  const flags = parseFlags(args, { 'ca-file': 'value', validating: 'list', mutating: 'list', kubeconfig: 'value' });
  const caFile = resolve(io.cwd ?? process.cwd(), required(flags, 'ca-file'));
  const refs: WebhookConfigurationRef[] = [];
  for (const kind of ['validating', 'mutating'] as const) {
    for (const name of (flags[kind] as string[] | undefined) ?? []) {
      if (!refs.some((r) => r.kind === kind && r.name === name)) refs.push({ kind, name });
    }
  }
  if (refs.length === 0) throw new UsageError('name at least one configuration with --validating or --mutating');
  const kubeconfig =
    flags.kubeconfig === undefined ? undefined : resolve(io.cwd ?? process.cwd(), required(flags, 'kubeconfig'));

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

  let client: WebhookConfigurationClient;
  try {
    client = io.webhookClient ? io.webhookClient(kubeconfig) : await defaultWebhookClient(kubeconfig);
  } catch (e) {
    io.stderr(`error: cannot load kubeconfig: ${(e as Error).message}\n`);
    return EXIT_FAILURE;
  }

  let failed = 0;
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
  return failed > 0 ? EXIT_FAILURE : EXIT_OK;
}

/** Runs the CLI with `argv` (without node and script) and returns the exit code. */
export async function main(argv: readonly string[], io: CliIO): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined) throw new UsageError('no command given');
    if (command === 'help' || command === '--help' || command === '-h' || rest.includes('--help')) {
      io.stdout(USAGE);
      return EXIT_OK;
    }
    if (command === 'generate') return generate(rest, io);
    if (command === 'inject-ca') return await injectCa(rest, io);
    throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  } catch (e) {
    if (e instanceof UsageError) {
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
