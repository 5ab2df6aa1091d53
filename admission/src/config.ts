/**
 * Configuration from flags, then environment, then defaults. Flags win so a manifest's `args` are the
 * whole story; environment variables suit the chart's `env` and local runs.
 */
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import type { WebhookConfigurationRef } from '@kd-connections/certs';
import { parseLogLevel, type LogLevel } from '@kd-connections/shared';

export type TlsMode = 'files' | 'bootstrap';

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
  /** files: load tls-cert-file/tls-key-file. bootstrap: read or create the TLS Secret and renew it. */
  tlsMode: TlsMode;
  tlsSecretName: string;
  /** Required in bootstrap mode (flag or $POD_NAMESPACE). */
  tlsSecretNamespace: string | undefined;
  /** The Service the serving certificate is for (SANs svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local). */
  serviceName: string;
  serviceNamespace: string | undefined;
  extraDnsNames: string[];
  extraIpAddresses: string[];
  /** Webhook configurations whose caBundle bootstrap mode keeps current. */
  webhookConfigurations: WebhookConfigurationRef[];
  servingCertLifetimeMs: number;
  caLifetimeMs: number;
  /** Longest wait for a request's headers (Node's headersTimeout); above the 90 s+ keep-alive by default. */
  headersTimeoutMs: number;
  /** Longest wait for a whole request, body included (Node's requestTimeout). */
  requestTimeoutMs: number;
  /** PEM file of the CA(s) a client certificate must chain to; set: every connection must present one. */
  clientCaFile: string | undefined;
  /** With clientCaFile: the client certificate's CN or one of its SANs must be one of these (empty: any). */
  clientAllowedNames: string[];
  /** Plain-HTTP port for /healthz, /readyz and /metrics (kubelet probes with client certificates on); undefined: none. */
  probePort: number | undefined;
  /** The namespaces the webhooks select; the caches watch only these (kdapps also the system namespace). Empty: all. */
  namespaces: string[];
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
  {
    flag: 'tls-mode',
    env: 'KD_ADMISSION_TLS_MODE',
    default: 'files',
    help: 'files: serve --tls-cert-file/--tls-key-file; bootstrap: read or create the TLS Secret, keep the caBundle of --webhook-configurations current, renew',
  },
  {
    flag: 'tls-secret-name',
    env: 'KD_ADMISSION_TLS_SECRET_NAME',
    default: 'kd-connections-admission-tls',
    help: 'bootstrap: the kubernetes.io/tls Secret holding CA and serving pair',
  },
  {
    flag: 'tls-secret-namespace',
    env: 'KD_ADMISSION_TLS_SECRET_NAMESPACE',
    help: "bootstrap: the Secret's namespace (default $POD_NAMESPACE)",
  },
  {
    flag: 'service-name',
    env: 'KD_ADMISSION_SERVICE_NAME',
    default: 'kd-connections-admission',
    help: 'bootstrap: Service the certificate names (svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local)',
  },
  {
    flag: 'service-namespace',
    env: 'KD_ADMISSION_SERVICE_NAMESPACE',
    help: "bootstrap: the Service's namespace (default $POD_NAMESPACE)",
  },
  {
    flag: 'extra-dns-names',
    env: 'KD_ADMISSION_EXTRA_DNS_NAMES',
    help: 'bootstrap: more DNS names for the certificate, comma-separated',
  },
  {
    flag: 'extra-ip-addresses',
    env: 'KD_ADMISSION_EXTRA_IP_ADDRESSES',
    help: 'bootstrap: IP addresses for the certificate, comma-separated (url mode: 127.0.0.1)',
  },
  {
    flag: 'webhook-configurations',
    env: 'KD_ADMISSION_WEBHOOK_CONFIGURATIONS',
    help: 'bootstrap: comma-separated validating/NAME and mutating/NAME whose caBundle is kept current',
  },
  {
    flag: 'serving-cert-lifetime',
    env: 'KD_ADMISSION_SERVING_CERT_LIFETIME',
    default: '8760h',
    help: 'bootstrap: serving certificate lifetime (e.g. 8760h, 90s); renewed at two thirds',
  },
  {
    flag: 'ca-lifetime',
    env: 'KD_ADMISSION_CA_LIFETIME',
    default: '87600h',
    help: 'bootstrap: CA lifetime; renewed at two thirds, old and new CA both published meanwhile',
  },
  {
    flag: 'headers-timeout',
    env: 'KD_ADMISSION_HEADERS_TIMEOUT',
    default: '105',
    help: "seconds a client may take to send a request's headers (slow clients are cut off); ≤ --request-timeout",
  },
  {
    flag: 'request-timeout',
    env: 'KD_ADMISSION_REQUEST_TIMEOUT',
    default: '120',
    help: 'seconds a client may take to send a whole request, body included',
  },
  {
    flag: 'client-ca-file',
    env: 'KD_ADMISSION_CLIENT_CA_FILE',
    help: 'require a client certificate signed by this CA (PEM) on every connection, probes included (use tcpSocket probes); default off',
  },
  {
    flag: 'client-allowed-names',
    env: 'KD_ADMISSION_CLIENT_ALLOWED_NAMES',
    help: "with --client-ca-file: comma-separated names, one of which the client certificate's CN or a SAN must be (default: any)",
  },
  {
    flag: 'probe-port',
    env: 'KD_ADMISSION_PROBE_PORT',
    help: 'also serve /healthz, /readyz and /metrics over plain HTTP on this port (same bind address), e.g. for kubelet probes when --client-ca-file is set; default off',
  },
  {
    flag: 'namespaces',
    env: 'KD_WATCH_NAMESPACES',
    help: 'namespaces the webhooks select, comma-separated (empty: all); only these are watched (kdapps also in the system namespace), so read rights are needed only there',
  },
];

export function usage(): string {
  const lines = OPTIONS.map(
    (o) => `  --${o.flag.padEnd(24)} ${o.help}${o.default !== undefined ? ` (default ${o.default})` : ''} [$${o.env}]`,
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

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go-style duration ("8760h", "90s", "1h30m", "500ms") in milliseconds; throws ConfigError. */
export function parseDuration(name: string, v: string): number {
  const text = v.trim();
  let ms = 0;
  let rest = text;
  const part = /^(\d+(?:\.\d+)?)(ms|s|m|h)/;
  while (rest.length > 0) {
    const m = part.exec(rest);
    if (!m) {
      ms = NaN;
      break;
    }
    ms += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  if (!text || !(ms >= 1000)) {
    throw new ConfigError(
      `--${name} must be a duration of at least 1s such as 8760h, 90s or 1h30m, got ${JSON.stringify(v)}`,
    );
  }
  return Math.round(ms);
}

function list(v: string | undefined): string[] {
  return [
    ...new Set(
      (v ?? '')
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  ];
}

function webhookConfigurations(v: string | undefined): WebhookConfigurationRef[] {
  return list(v).map((item) => {
    const m = /^(validating|mutating)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(item);
    if (!m) {
      throw new ConfigError(
        `--webhook-configurations entries must be validating/NAME or mutating/NAME, got ${JSON.stringify(item)}`,
      );
    }
    return { kind: m[1] as WebhookConfigurationRef['kind'], name: m[2]! };
  });
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
  const tlsMode = get('tls-mode')!;
  if (tlsMode !== 'files' && tlsMode !== 'bootstrap') {
    throw new ConfigError(`--tls-mode must be files or bootstrap, got ${JSON.stringify(tlsMode)}`);
  }
  const podNamespace = env.POD_NAMESPACE || undefined;
  const tlsSecretNamespace = get('tls-secret-namespace') ?? podNamespace;
  const serviceNamespace = get('service-namespace') ?? podNamespace;
  const extraIpAddresses = list(get('extra-ip-addresses'));
  const badIp = extraIpAddresses.find((ip) => isIP(ip) === 0);
  if (badIp !== undefined) {
    throw new ConfigError(`--extra-ip-addresses must list IP addresses, got ${JSON.stringify(badIp)}`);
  }
  const servingCertLifetimeMs = parseDuration('serving-cert-lifetime', get('serving-cert-lifetime')!);
  const caLifetimeMs = parseDuration('ca-lifetime', get('ca-lifetime')!);
  const hooks = webhookConfigurations(get('webhook-configurations'));
  if (tlsMode === 'bootstrap') {
    if (!tlsSecretNamespace) {
      throw new ConfigError('--tls-secret-namespace (or $POD_NAMESPACE) is required with --tls-mode=bootstrap');
    }
    if (!serviceNamespace) {
      throw new ConfigError('--service-namespace (or $POD_NAMESPACE) is required with --tls-mode=bootstrap');
    }
    if (servingCertLifetimeMs > caLifetimeMs) {
      throw new ConfigError(
        `--serving-cert-lifetime (${get('serving-cert-lifetime')}) must not exceed --ca-lifetime (${get('ca-lifetime')})`,
      );
    }
  }
  const headersTimeoutMs = seconds('headers-timeout', get('headers-timeout')!, 0.1);
  const requestTimeoutMs = seconds('request-timeout', get('request-timeout')!, 0.1);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `--headers-timeout (${get('headers-timeout')}) must not exceed --request-timeout (${get('request-timeout')})`,
    );
  }
  const probePortText = get('probe-port');
  const probePort = probePortText === undefined ? undefined : Number(probePortText);
  if (probePort !== undefined && (!Number.isInteger(probePort) || probePort < 0 || probePort > 65535)) {
    throw new ConfigError(`--probe-port must be an integer 0-65535, got ${JSON.stringify(probePortText)}`);
  }
  if (probePort !== undefined && probePort !== 0 && probePort === port) {
    throw new ConfigError(`--probe-port must differ from --port (both ${port})`);
  }
  const clientCaFile = get('client-ca-file');
  const clientAllowedNames = list(get('client-allowed-names'));
  if (clientAllowedNames.length > 0 && !clientCaFile) {
    throw new ConfigError('--client-allowed-names needs --client-ca-file');
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
    tlsMode,
    tlsSecretName: get('tls-secret-name')!,
    tlsSecretNamespace,
    serviceName: get('service-name')!,
    serviceNamespace,
    extraDnsNames: list(get('extra-dns-names')),
    extraIpAddresses,
    webhookConfigurations: hooks,
    servingCertLifetimeMs,
    caLifetimeMs,
    headersTimeoutMs,
    requestTimeoutMs,
    clientCaFile,
    clientAllowedNames,
    probePort,
    namespaces: list(get('namespaces')),
  };
}
