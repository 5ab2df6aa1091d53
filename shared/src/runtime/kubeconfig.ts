/**
 * Where the services find the API server and their credentials: a kubeconfig file or the pod's
 * ServiceAccount, read here rather than by client-node's KubeConfig. That class statically imports
 * client-node's whole generated API, which costs each process tens of MiB of RSS (docs/performance.md).
 * client-node is loaded, lazily, only for what this file does not do itself: exec
 * credential plugins and auth-provider users, a $KUBECONFIG list of files to merge, and the reconnect
 * hook's websocket exec (clientNodeConfig).
 *
 * What it does itself is what kubectl does for those fields: certificate-authority(-data),
 * insecure-skip-tls-verify, tls-server-name, client-certificate(-data) / client-key(-data), token,
 * tokenFile, username/password, `as` (impersonation); relative paths are relative to the kubeconfig's
 * directory. Files (CA, client certificate and key, token) are read again when a minute old, like
 * client-go's token file cache, so rotated credentials are picked up without a restart.
 */
import { existsSync, readFileSync } from 'node:fs';
import type https from 'node:https';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';

/** What KubeClient needs from a kubeconfig (client-node's KubeConfig has the same two methods). */
export interface KubeConnection {
  getCurrentCluster(): { server: string } | null;
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

/** A loaded connection that can also hand the same source to client-node (for its websocket exec). */
export interface LoadedKubeConnection extends KubeConnection {
  /** Where it came from, for the log: a file, a list of files, or the ServiceAccount. */
  readonly source: string;
  /** client-node's KubeConfig for the same source, imported and loaded on first use. */
  clientNodeConfig(): Promise<KubeConfig>;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** How long a file read for credentials is trusted before it is read again. */
export const CREDENTIAL_FILE_TTL_MS = 60_000;

export class KubeconfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeconfigError';
  }
}

export interface LoadOptions {
  /** --kubeconfig or $KUBECONFIG: one file, or a list joined by the path delimiter. */
  kubeconfig?: string;
  env?: NodeJS.ProcessEnv;
  /** The ServiceAccount mount (tests point it elsewhere). */
  serviceAccountDir?: string;
  home?: string;
  now?: () => number;
}

/**
 * The connection the services use: the kubeconfig given (file or list); else, in a pod
 * ($KUBERNETES_SERVICE_HOST set), its ServiceAccount; else ~/.kube/config. Nothing found is an error
 * that says what was looked for (client-node would silently fall back to http://localhost:8080).
 */
export async function loadKubeConnection(o: LoadOptions = {}): Promise<LoadedKubeConnection> {
  const env = o.env ?? process.env;
  const now = o.now ?? Date.now;
  const saDir = o.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (o.kubeconfig?.includes(delimiter)) return clientNodeConnection(o.kubeconfig);
  if (o.kubeconfig) return fileConnection(o.kubeconfig, now);
  if (env.KUBERNETES_SERVICE_HOST) return inClusterConnection(env, saDir, now);
  const home = join(o.home ?? homedir(), '.kube', 'config');
  if (existsSync(home)) return fileConnection(home, now);
  throw new KubeconfigError(
    `no kubeconfig: --kubeconfig and $KUBECONFIG are unset, $KUBERNETES_SERVICE_HOST is unset (not in a pod) and ${home} does not exist`,
  );
}

type Doc = Record<string, unknown>;

interface Resolved {
  server: string;
  ca?: Credential;
  cert?: Credential;
  key?: Credential;
  token?: Credential;
  basic?: string;
  impersonate?: string;
  insecure: boolean;
  servername?: string;
}

/** A credential from the kubeconfig itself, or from a file read again when CREDENTIAL_FILE_TTL_MS old. */
type Credential = () => string;

function fixed(value: string): Credential {
  return () => value;
}

function fromFile(path: string, what: string, now: () => number): Credential {
  let value = read(path, what);
  let readAt = now();
  return () => {
    if (now() - readAt >= CREDENTIAL_FILE_TTL_MS) {
      // A file that vanished for a moment (an atomic swap of a projected volume) keeps the last value.
      try {
        value = readFileSync(path, 'utf8');
        readAt = now();
      } catch {
        /* read again on the next request */
      }
    }
    return value;
  };
}

function read(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new KubeconfigError(`${what}: cannot read ${path}: ${(e as Error).message}`);
  }
}

function connection(r: Resolved, source: string, clientNode: () => Promise<KubeConfig>): LoadedKubeConnection {
  let loaded: Promise<KubeConfig> | undefined;
  return {
    source,
    getCurrentCluster: () => ({ server: r.server }),
    applyToHTTPSOptions(opts) {
      if (r.ca) opts.ca = r.ca();
      if (r.cert) opts.cert = r.cert();
      if (r.key) opts.key = r.key();
      if (r.insecure) opts.rejectUnauthorized = false;
      if (r.servername) opts.servername = r.servername;
      const headers = (opts.headers ??= {}) as Record<string, string>;
      if (r.impersonate) headers['Impersonate-User'] = r.impersonate;
      if (r.token) headers.Authorization = `Bearer ${r.token().trim()}`;
      else if (r.basic) headers.Authorization = `Basic ${r.basic}`;
      return Promise.resolve();
    },
    clientNodeConfig: () => (loaded ??= clientNode()),
  };
}

async function newClientNodeConfig(load: (kc: KubeConfig) => void): Promise<KubeConfig> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  load(kc);
  return kc;
}

/** A $KUBECONFIG list, or a user with an exec plugin or auth-provider: client-node does it all. */
async function clientNodeConnection(kubeconfig: string, file?: string): Promise<LoadedKubeConnection> {
  const files = file ? [file] : kubeconfig.split(delimiter).filter((f) => f !== '');
  if (files.length === 0) throw new KubeconfigError(`kubeconfig ${JSON.stringify(kubeconfig)}: names no file`);
  const kc = await newClientNodeConfig((k) => k.loadFromFile(files[0]!));
  // As kubectl merges a $KUBECONFIG list: the first file to set current-context wins (client-node's
  // loadFromDefault would take the last one's).
  for (const f of files.slice(1)) kc.mergeConfig(await newClientNodeConfig((k) => k.loadFromFile(f)), true);
  if (!kc.getCurrentCluster()) throw new KubeconfigError(`${kubeconfig}: no current cluster`);
  return Object.assign(kc, {
    source: kubeconfig,
    clientNodeConfig: () => Promise.resolve(kc),
  }) as unknown as LoadedKubeConnection;
}

function inClusterConnection(env: NodeJS.ProcessEnv, dir: string, now: () => number): LoadedKubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST!;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  const what = 'in-cluster ServiceAccount';
  return connection(
    {
      server,
      ca: fromFile(join(dir, 'ca.crt'), what, now),
      token: fromFile(join(dir, 'token'), what, now),
      insecure: false,
    },
    `ServiceAccount (${dir})`,
    () =>
      newClientNodeConfig((kc) => {
        // client-node takes a prefix of the standard path (its tests' way to point elsewhere).
        kc.loadFromCluster(
          dir.endsWith(SERVICE_ACCOUNT_DIR) ? dir.slice(0, dir.length - SERVICE_ACCOUNT_DIR.length) : '',
        );
      }),
  );
}

async function fileConnection(file: string, now: () => number): Promise<LoadedKubeConnection> {
  const path = resolve(file);
  let doc: Doc;
  try {
    doc = (parseYaml(read(path, 'kubeconfig')) ?? {}) as Doc;
  } catch (e) {
    if (e instanceof KubeconfigError) throw e;
    throw new KubeconfigError(`kubeconfig ${path}: not YAML: ${(e as Error).message}`);
  }
  const where = (s: string) => `kubeconfig ${path}: ${s}`;
  const named = (list: string, name: unknown): Doc => {
    const entries = Array.isArray(doc[list]) ? (doc[list] as Doc[]) : [];
    const hit = entries.find((e) => e?.name === name);
    const field = list.slice(0, -1);
    if (!hit || typeof hit[field] !== 'object' || hit[field] === null)
      throw new KubeconfigError(where(`no ${list} entry named ${JSON.stringify(name)} (from current-context)`));
    return hit[field] as Doc;
  };
  if (typeof doc['current-context'] !== 'string' || doc['current-context'] === '')
    throw new KubeconfigError(where('current-context is not set'));
  const context = named('contexts', doc['current-context']);
  const cluster = named('clusters', context.cluster);
  const user = context.user === undefined ? {} : named('users', context.user);
  if (user.exec !== undefined || user['auth-provider'] !== undefined) return clientNodeConnection(path, path);

  const str = (d: Doc, k: string): string | undefined => {
    const v = d[k];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new KubeconfigError(where(`${k} must be a string`));
    return v;
  };
  const server = str(cluster, 'server');
  if (!server) throw new KubeconfigError(where(`cluster ${JSON.stringify(context.cluster)} has no server`));
  const dir = dirname(path);
  const credential = (d: Doc, dataKey: string, fileKey: string): Credential | undefined => {
    const data = str(d, dataKey);
    if (data) return fixed(Buffer.from(data, 'base64').toString('utf8'));
    const f = str(d, fileKey);
    return f ? fromFile(resolve(dir, f), where(fileKey), now) : undefined;
  };
  const token = str(user, 'token');
  const tokenFile = str(user, 'tokenFile');
  const username = str(user, 'username');
  return connection(
    {
      server: server.replace(/\/+$/, ''),
      ca: credential(cluster, 'certificate-authority-data', 'certificate-authority'),
      cert: credential(user, 'client-certificate-data', 'client-certificate'),
      key: credential(user, 'client-key-data', 'client-key'),
      token: token ? fixed(token) : tokenFile ? fromFile(resolve(dir, tokenFile), where('tokenFile'), now) : undefined,
      basic: username ? Buffer.from(`${username}:${str(user, 'password') ?? ''}`).toString('base64') : undefined,
      impersonate: str(user, 'as'),
      insecure: cluster['insecure-skip-tls-verify'] === true,
      servername: str(cluster, 'tls-server-name'),
    },
    path,
    () => newClientNodeConfig((kc) => kc.loadFromFile(path)),
  );
}
