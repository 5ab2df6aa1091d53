/**
 * Configuration from flags, then environment, then defaults. Flags win so a manifest's `args` are the
 * whole story; environment variables suit the chart's `env` and local runs.
 */
import { parseArgs } from 'node:util';
import { parseLogLevel, type LogLevel } from '@kd-connections/shared';

export interface AdmissionConfig {
  port: number;
  bindAddress: string;
  tlsCertFile: string;
  tlsKeyFile: string;
  tlsPollIntervalMs: number;
  /** Explicit kubeconfig file; undefined means $KUBECONFIG, then in-cluster, then ~/.kube/config. */
  kubeconfig: string | undefined;
  systemNamespace: string;
  secretConnections: boolean;
  logLevel: LogLevel;
  /** Readiness is false this long before the listener closes, so endpoints can drop the pod first. */
  shutdownDelayMs: number;
  /** Longest wait for in-flight requests on SIGTERM. */
  shutdownTimeoutMs: number;
}

interface Option {
  flag: string;
  env: string;
  help: string;
  default?: string;
}

const OPTIONS: Option[] = [
  { flag: 'port', env: 'KD_ADMISSION_PORT', default: '9443', help: 'HTTPS port (0 picks a free one)' },
  { flag: 'bind-address', env: 'KD_ADMISSION_BIND_ADDRESS', default: '0.0.0.0', help: 'address to listen on' },
  {
    flag: 'tls-cert-file',
    env: 'KD_ADMISSION_TLS_CERT_FILE',
    default: '/etc/kd-connections/tls/tls.crt',
    help: 'serving certificate (PEM); reloaded when it changes',
  },
  {
    flag: 'tls-key-file',
    env: 'KD_ADMISSION_TLS_KEY_FILE',
    default: '/etc/kd-connections/tls/tls.key',
    help: 'serving key (PEM); reloaded when it changes',
  },
  {
    flag: 'tls-poll-interval',
    env: 'KD_ADMISSION_TLS_POLL_INTERVAL',
    default: '10',
    help: 'seconds between checks of the certificate files (besides file watching)',
  },
  {
    flag: 'kubeconfig',
    env: 'KUBECONFIG',
    help: 'kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)',
  },
  {
    flag: 'system-namespace',
    env: 'KD_SYSTEM_NAMESPACE',
    help: 'namespace of the system app catalog (appCatalog: system); default $POD_NAMESPACE, else kd-system',
  },
  {
    flag: 'secret-connections',
    env: 'KD_SECRET_CONNECTIONS',
    default: 'true',
    help: 'allow Secret connections; false refuses them and Secrets are not watched',
  },
  { flag: 'log-level', env: 'KD_LOG_LEVEL', default: 'info', help: 'debug, info, warn or error' },
  {
    flag: 'shutdown-delay',
    env: 'KD_ADMISSION_SHUTDOWN_DELAY',
    default: '0',
    help: 'seconds to stay up, not ready, after SIGTERM before closing the listener',
  },
  {
    flag: 'shutdown-timeout',
    env: 'KD_ADMISSION_SHUTDOWN_TIMEOUT',
    default: '25',
    help: 'seconds to wait for in-flight requests on SIGTERM',
  },
];

export function usage(): string {
  const lines = OPTIONS.map(
    (o) => `  --${o.flag.padEnd(20)} ${o.help}${o.default !== undefined ? ` (default ${o.default})` : ''} [$${o.env}]`,
  );
  return ['Usage: node admission/dist/main.js [options]', '', ...lines, '  --help'].join('\n');
}

export class ConfigError extends Error {}

function bool(name: string, v: string): boolean {
  const s = v.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(s)) return true;
  if (['false', '0', 'no', 'off'].includes(s)) return false;
  throw new ConfigError(`--${name} must be true or false, got ${JSON.stringify(v)}`);
}

function seconds(name: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n < min)
    throw new ConfigError(`--${name} must be a number ≥ ${min}, got ${JSON.stringify(v)}`);
  return Math.round(n * 1000);
}

/** Parses argv (without node and script) and env; throws ConfigError with a readable message. */
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv): AdmissionConfig | 'help' {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        ...Object.fromEntries(OPTIONS.map((o) => [o.flag, { type: 'string' as const }])),
        help: { type: 'boolean' },
      },
      allowPositionals: false,
      strict: true,
    }));
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  if (values.help) return 'help';
  const get = (flag: string): string | undefined => {
    const o = OPTIONS.find((x) => x.flag === flag)!;
    const v = values[flag];
    if (typeof v === 'string') return v;
    const e = env[o.env];
    return e !== undefined && e !== '' ? e : o.default;
  };
  const port = Number(get('port'));
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`--port must be an integer 0-65535, got ${JSON.stringify(get('port'))}`);
  }
  const level = get('log-level')!;
  if (parseLogLevel(level, 'info') !== level) {
    throw new ConfigError(`--log-level must be debug, info, warn or error, got ${JSON.stringify(level)}`);
  }
  return {
    port,
    bindAddress: get('bind-address')!,
    tlsCertFile: get('tls-cert-file')!,
    tlsKeyFile: get('tls-key-file')!,
    tlsPollIntervalMs: seconds('tls-poll-interval', get('tls-poll-interval')!, 0.1),
    kubeconfig: get('kubeconfig'),
    systemNamespace: get('system-namespace') ?? (env.POD_NAMESPACE || 'kd-system'),
    secretConnections: bool('secret-connections', get('secret-connections')!),
    logLevel: parseLogLevel(level),
    shutdownDelayMs: seconds('shutdown-delay', get('shutdown-delay')!, 0),
    shutdownTimeoutMs: seconds('shutdown-timeout', get('shutdown-timeout')!, 0),
  };
}
