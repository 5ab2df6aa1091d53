import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import {
  FlagError,
  packageVersion,
  parseLogLevel,
  programHelp,
  readCommandLine,
  versionText,
  type FlagSpec,
  type LogLevel,
  type ProgramInfo,
} from '@kd-connections/shared/runtime';
import { DIGEST_KEY_SECRET } from './digest-key.js';

export const RECONCILER_FLAGS = {
  kubeconfig: {
    type: 'string',
    env: 'KUBECONFIG',
    help: 'kubeconfig file; in a pod the service account is used when unset',
  },
  'watch-namespaces': {
    type: 'list',
    env: 'KD_RECONCILER_WATCH_NAMESPACES',
    formerly: { flags: ['namespaces'], env: ['KD_WATCH_NAMESPACES'] },
    default: [],
    help: 'namespaces to watch, comma-separated; empty = all',
  },
  'system-namespace': {
    type: 'string',
    env: 'KD_RECONCILER_SYSTEM_NAMESPACE',
    formerly: { env: ['KD_SYSTEM_NAMESPACE'] },
    help: 'namespace of the system app catalog (appCatalog: system); default $POD_NAMESPACE, else kd-system',
  },
  concurrency: {
    type: 'int',
    env: 'KD_RECONCILER_CONCURRENCY',
    formerly: { env: ['KD_CONCURRENCY'] },
    default: 4,
    min: 1,
    help: 'clusters reconciled in parallel',
  },
  'pod-concurrency': {
    type: 'int',
    env: 'KD_RECONCILER_POD_CONCURRENCY',
    formerly: { env: ['KD_POD_CONCURRENCY'] },
    default: 8,
    min: 1,
    help: 'pod patches in flight per cluster',
  },
  'leader-elect': {
    type: 'bool',
    env: 'KD_RECONCILER_LEADER_ELECT',
    formerly: { env: ['KD_LEADER_ELECT'] },
    default: true,
    help: 'use a Lease so only one replica writes',
  },
  'leader-elect-resource-name': {
    type: 'string',
    env: 'KD_RECONCILER_LEADER_ELECT_RESOURCE_NAME',
    formerly: { flags: ['lease-name'], env: ['KD_LEASE_NAME'] },
    default: 'kd-connections-reconciler',
    help: 'name of the Lease',
  },
  'leader-elect-resource-namespace': {
    type: 'string',
    env: 'KD_RECONCILER_LEADER_ELECT_RESOURCE_NAMESPACE',
    formerly: { flags: ['lease-namespace'], env: ['KD_LEASE_NAMESPACE'] },
    help: 'namespace of the Lease; default $POD_NAMESPACE, else kd-system',
  },
  'digest-key-namespace': {
    type: 'string',
    env: 'KD_RECONCILER_DIGEST_KEY_NAMESPACE',
    formerly: { env: ['KD_DIGEST_KEY_NAMESPACE'] },
    help: `namespace of the Secret ${DIGEST_KEY_SECRET} (the key of the MAC over connected Secrets); default: the Lease namespace`,
  },
  'leader-elect-lease-duration': {
    type: 'duration',
    bareSeconds: true,
    min: 1,
    env: 'KD_RECONCILER_LEADER_ELECT_LEASE_DURATION',
    formerly: { flags: ['lease-duration'], env: ['KD_LEASE_DURATION'] },
    default: '15s',
    help: 'how long the Lease holds without renewal: a standby takes over this long after the leader stops renewing (whole seconds, e.g. 15s)',
  },
  'leader-elect-renew-deadline': {
    type: 'duration',
    bareSeconds: true,
    min: 1,
    env: 'KD_RECONCILER_LEADER_ELECT_RENEW_DEADLINE',
    formerly: { flags: ['renew-deadline'], env: ['KD_RENEW_DEADLINE'] },
    default: '10s',
    help: 'the leader steps down when it could not renew for this long; below --leader-elect-lease-duration',
  },
  'leader-elect-retry-period': {
    type: 'duration',
    bareSeconds: true,
    min: 1,
    env: 'KD_RECONCILER_LEADER_ELECT_RETRY_PERIOD',
    formerly: { flags: ['retry-period'], env: ['KD_RETRY_PERIOD'] },
    default: '2s',
    help: 'interval between acquire/renew attempts; below --leader-elect-renew-deadline / 1.2',
  },
  'leader-elect-identity': {
    type: 'string',
    env: 'KD_RECONCILER_LEADER_ELECT_IDENTITY',
    formerly: { flags: ['identity'], env: ['KD_IDENTITY'] },
    help: 'this replica in the Lease; default: hostname + random suffix',
  },
  'secret-connections': {
    type: 'bool',
    env: 'KD_RECONCILER_SECRET_CONNECTIONS',
    formerly: { env: ['KD_SECRET_CONNECTIONS'] },
    default: true,
    help: 'watch labelled Secrets and deliver Secret connections (values only to root in the pod, through a per-cluster private Secret)',
  },
  'reconnect-hook': {
    type: 'bool',
    env: 'KD_RECONCILER_RECONNECT_HOOK',
    formerly: { env: ['KD_RECONNECT_HOOK'] },
    default: false,
    help: "run the app's startscript (KubeDirector's hooks) in a member: --reconnect once its file holds a new generator, --addnodes/--delnodes once it lists a membership change; needs pods/exec",
  },
  'reconnect-timeout': {
    type: 'duration',
    env: 'KD_RECONCILER_RECONNECT_TIMEOUT',
    formerly: { env: ['KD_RECONNECT_TIMEOUT'] },
    default: '2m',
    min: 1000,
    max: 3_600_000,
    help: 'a reconnect hook still running after this long is abandoned and counts as failed',
  },
  'reconnect-concurrency': {
    type: 'int',
    env: 'KD_RECONCILER_RECONNECT_CONCURRENCY',
    formerly: { env: ['KD_RECONNECT_CONCURRENCY'] },
    default: 4,
    min: 1,
    max: 64,
    help: 'reconnect hooks (and the generator-file reads before them) in flight at once, across all clusters; they never hold a delivery worker',
  },
  'first-delivery-wait': {
    type: 'duration',
    env: 'KD_RECONCILER_FIRST_DELIVERY_WAIT',
    default: '60s',
    min: 0,
    help: "how long a new cluster's first delivery waits for a pod in every seat (spec.roles[].members), so its first document lists every member; then it is delivered to the pods there are and status names the missing seats (0 = no wait). Also how long, from its creation, a new member's pod waits for the empty seats below it in its role, so members added together are numbered by ordinal",
  },
  'cluster-domain': {
    type: 'string',
    env: 'KD_RECONCILER_CLUSTER_DOMAIN',
    formerly: { env: ['KD_CLUSTER_DOMAIN'] },
    default: 'cluster.local',
    help: 'cluster DNS domain used in member FQDNs',
  },
  'metrics-bind-address': {
    type: 'string',
    env: 'KD_RECONCILER_METRICS_BIND_ADDRESS',
    formerly: { env: ['KD_METRICS_BIND_ADDRESS'] },
    default: '0.0.0.0:8080',
    help: 'host:port of /healthz, /readyz and /metrics',
  },
  'relist-period-seconds': {
    type: 'int',
    env: 'KD_RECONCILER_RELIST_PERIOD_SECONDS',
    formerly: { env: ['KD_RELIST_PERIOD_SECONDS'] },
    default: 600,
    min: 0,
    help: 'full relist of every watch (0 = never)',
  },
  'watch-timeout-seconds': {
    type: 'int',
    env: 'KD_RECONCILER_WATCH_TIMEOUT_SECONDS',
    formerly: { env: ['KD_WATCH_TIMEOUT_SECONDS'] },
    default: 300,
    min: 0,
    help: 'server-side watch timeout (jittered ±20%)',
  },
  'heap-release-interval': {
    type: 'duration',
    env: 'KD_RECONCILER_HEAP_RELEASE_INTERVAL',
    formerly: { env: ['KD_HEAP_RELEASE_INTERVAL'] },
    default: '10s',
    min: 0,
    help: 'how often to look for the end of a burst: when the event loop was idle and the heap grew 16 MiB since the last collection, a full collection returns the memory (also once after the caches sync); 0 = never, V8 alone decides',
  },
  'content-cache-mib': {
    type: 'int',
    env: 'KD_RECONCILER_CONTENT_CACHE_MIB',
    formerly: { env: ['KD_CONTENT_CACHE_MIB'] },
    default: 64,
    min: 1,
    help: 'MiB of connected ConfigMap and Secret content kept between reconciles (each kind); past it the least recently used is fetched again when needed',
  },
  'log-level': {
    type: 'string',
    env: 'KD_RECONCILER_LOG_LEVEL',
    formerly: { env: ['KD_LOG_LEVEL'] },
    default: 'info',
    help: 'debug, info, warn or error',
  },
} satisfies Record<string, FlagSpec>;

export interface ReconcilerConfig {
  kubeconfig?: string;
  namespaces: string[];
  systemNamespace: string;
  concurrency: number;
  podConcurrency: number;
  leaderElect: boolean;
  leaseName: string;
  leaseNamespace: string;
  digestKeyNamespace: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  identity: string;
  secretConnections: boolean;
  reconnectHook: boolean;
  reconnectTimeoutMs: number;
  reconnectConcurrency: number;
  firstDeliveryWaitMs: number;
  clusterDomain: string;
  metricsHost: string;
  metricsPort: number;
  relistPeriodMs: number;
  watchTimeoutSeconds: number;
  heapReleaseIntervalMs: number;
  /** Bytes of connected content kept per kind (ConfigMaps, Secrets). */
  contentCacheBytes: number;
  logLevel: LogLevel;
  /** Old flag and variable names used (they still work): logged as warnings at start. */
  deprecations: string[];
}

export const RECONCILER_PROGRAM: ProgramInfo = {
  name: 'kd-connections-reconciler',
  version: packageVersion(import.meta.url),
  summary: 'The kd-connections reconciler: keeps configmeta current in every member pod.',
};

/** Where --help and --version are answered (a test passes its own). */
export interface InfoOutput {
  stdout(text: string): void;
  exit(code: number): never;
}

const processOutput: InfoOutput = {
  stdout: (text) => void process.stdout.write(text),
  exit: (code) => process.exit(code),
};

/**
 * The configuration from argv (without node and script) and env; throws FlagError naming what is
 * wrong. --help and --version are answered here (print, exit 0) so every entry point gets them.
 */
export function loadConfig(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  out: InfoOutput = processOutput,
): ReconcilerConfig {
  const line = readCommandLine(RECONCILER_FLAGS, argv, env);
  if (line.kind === 'help') return out.exit((out.stdout(`${programHelp(RECONCILER_PROGRAM, RECONCILER_FLAGS)}\n`), 0));
  if (line.kind === 'version') return out.exit((out.stdout(`${versionText(RECONCILER_PROGRAM)}\n`), 0));
  const { values: f, raw } = line;
  // Outside a pod: the admission service's default too, and the namespace docs/install.md installs into.
  const podNs = env.POD_NAMESPACE || 'kd-system';
  const [host, port] = splitHostPort(f['metrics-bind-address']);
  const leaseDurationMs = f['leader-elect-lease-duration'];
  const renewDeadlineMs = f['leader-elect-renew-deadline'];
  const retryPeriodMs = f['leader-elect-retry-period'];
  // A Lease counts whole seconds; client-go's rules keep a leader from outliving its lease.
  if (leaseDurationMs < 1000 || leaseDurationMs % 1000 !== 0)
    throw new FlagError(
      `--leader-elect-lease-duration: "${raw['leader-elect-lease-duration']}" must be a whole number of seconds, at least 1s`,
    );
  if (renewDeadlineMs >= leaseDurationMs)
    throw new FlagError('--leader-elect-renew-deadline must be less than --leader-elect-lease-duration');
  if (retryPeriodMs * 1.2 >= renewDeadlineMs)
    throw new FlagError('--leader-elect-retry-period × 1.2 must be less than --leader-elect-renew-deadline');
  const logLevel = f['log-level'];
  if (parseLogLevel(logLevel, 'info') !== logLevel)
    throw new FlagError(`--log-level must be debug, info, warn or error, got ${JSON.stringify(logLevel)}`);
  return {
    kubeconfig: f.kubeconfig || undefined,
    namespaces: f['watch-namespaces'],
    systemNamespace: f['system-namespace'] || podNs,
    concurrency: f.concurrency,
    podConcurrency: f['pod-concurrency'],
    leaderElect: f['leader-elect'],
    leaseName: f['leader-elect-resource-name'],
    leaseNamespace: f['leader-elect-resource-namespace'] || podNs,
    digestKeyNamespace: f['digest-key-namespace'] || f['leader-elect-resource-namespace'] || podNs,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    identity: f['leader-elect-identity'] || `${hostname()}-${randomBytes(3).toString('hex')}`,
    secretConnections: f['secret-connections'],
    reconnectHook: f['reconnect-hook'],
    reconnectTimeoutMs: f['reconnect-timeout'],
    reconnectConcurrency: f['reconnect-concurrency'],
    firstDeliveryWaitMs: f['first-delivery-wait'],
    clusterDomain: f['cluster-domain'],
    metricsHost: host,
    metricsPort: port,
    relistPeriodMs: f['relist-period-seconds'] * 1000,
    watchTimeoutSeconds: f['watch-timeout-seconds'],
    heapReleaseIntervalMs: f['heap-release-interval'],
    contentCacheBytes: f['content-cache-mib'] * 2 ** 20,
    logLevel: parseLogLevel(logLevel),
    deprecations: line.deprecations,
  };
}

function splitHostPort(v: string): [string, number] {
  const i = v.lastIndexOf(':');
  const port = Number(v.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new FlagError(`--metrics-bind-address must be host:port, got ${JSON.stringify(v)}`);
  return [v.slice(0, i) || '0.0.0.0', port];
}
