/**
 * Configuration from flags, then environment, then defaults. Flags win so a manifest's `args` are the
 * whole story; environment variables suit the chart's `env` and local runs.
 */
import { isIP } from 'node:net';
import type { WebhookConfigurationRef } from '@kd-connections/certs';
import {
  DEFAULT_GUESTCONFIG_IMAGE,
  SECRET_DELIVERY_MODES,
  type SecretDelivery,
  DNS1123_LABEL_RE,
} from '@kd-connections/shared/domain';
import {
  FlagError,
  packageVersion,
  parseDuration as parseFlagDuration,
  parseLogLevel,
  programHelp,
  readCommandLine,
  type FlagSpec,
  type LogLevel,
  type ProgramInfo,
} from '@kd-connections/shared/runtime';

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
  /** Next to KubeDirector: validate only (no mutation), and no guard against KubeDirector. */
  kubedirectorMode: boolean;
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
  /** Bootstrap: serve reviews only behind a secret path token, and publish it as the webhooks' paths. */
  webhookPathToken: boolean;
  /** How often that token is replaced; 0: never. */
  webhookPathTokenRotationMs: number;
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
  /** The namespaces the webhooks select (their namespaceSelector's In list); the caches watch only these (kdapps also the system namespace). Empty: all. */
  namespaces: string[];
  /** Namespaces the webhooks never select (its NotIn list); reviews for them are refused without a lookup. */
  excludedNamespaces: string[];
  /** The image of the kd-guestconfig sidecar the pod webhook injects into member pods. */
  guestconfigImage: string;
  /** Reviews decided at once; more wait (see maxQueued, reviewDeadlineMs). */
  maxInFlight: number;
  /** Declared body bytes of the reviews in flight, at most (one review is always let in alone). */
  maxInFlightBytes: number;
  /** Reviews waiting for a turn, at most; past it a review is answered 429 at once. */
  maxQueued: number;
  /** Longest a review may take from its first byte to its answer (capped below the API server's ?timeout=). */
  reviewDeadlineMs: number;
  /** --secret-delivery. */
  secretDelivery: SecretDelivery;
  /** Old flag and variable names used (they still work): logged as warnings at start. */
  deprecations: string[];
}

export const ADMISSION_FLAGS = {
  port: {
    type: 'int',
    env: 'KD_ADMISSION_PORT',
    default: 9443,
    min: 0,
    max: 65535,
    help: 'HTTPS port (0 picks a free one)',
  },
  'bind-address': {
    type: 'string',
    env: 'KD_ADMISSION_BIND_ADDRESS',
    default: '0.0.0.0',
    help: 'address to listen on',
  },
  'tls-cert-file': {
    type: 'string',
    env: 'KD_ADMISSION_TLS_CERT_FILE',
    default: '/etc/kd-connections/tls/tls.crt',
    help: 'serving certificate (PEM); reloaded when it changes',
  },
  'tls-key-file': {
    type: 'string',
    env: 'KD_ADMISSION_TLS_KEY_FILE',
    default: '/etc/kd-connections/tls/tls.key',
    help: 'serving key (PEM); reloaded when it changes',
  },
  'tls-poll-interval': {
    type: 'duration',
    bareSeconds: true,
    min: 100,
    env: 'KD_ADMISSION_TLS_POLL_INTERVAL',
    default: '10s',
    help: 'interval between checks of the certificate files (besides file watching)',
  },
  kubeconfig: {
    type: 'string',
    env: 'KUBECONFIG',
    help: 'kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)',
  },
  'system-namespace': {
    type: 'string',
    env: 'KD_ADMISSION_SYSTEM_NAMESPACE',
    formerly: { env: ['KD_SYSTEM_NAMESPACE'] },
    help: 'namespace of the system app catalog (appCatalog: system); default $POD_NAMESPACE, else kd-system',
  },
  'secret-connections': {
    type: 'bool',
    env: 'KD_ADMISSION_SECRET_CONNECTIONS',
    formerly: { env: ['KD_SECRET_CONNECTIONS'] },
    default: true,
    help: 'allow Secret connections; false refuses them and Secrets are not watched',
  },
  'kubedirector-mode': {
    type: 'bool',
    env: 'KD_ADMISSION_KUBEDIRECTOR_MODE',
    formerly: { env: ['KD_KUBEDIRECTOR_MODE'] },
    default: false,
    help: 'run next to KubeDirector: its CRDs, validation only, no mutation (false: refuse to act when KubeDirector is found)',
  },
  'log-level': {
    type: 'string',
    env: 'KD_ADMISSION_LOG_LEVEL',
    formerly: { env: ['KD_LOG_LEVEL'] },
    default: 'info',
    help: 'debug, info, warn or error',
  },
  'shutdown-delay': {
    type: 'duration',
    bareSeconds: true,
    env: 'KD_ADMISSION_SHUTDOWN_DELAY',
    default: '0s',
    help: 'how long to stay up, not ready, after SIGTERM before closing the listener',
  },
  'shutdown-timeout': {
    type: 'duration',
    bareSeconds: true,
    env: 'KD_ADMISSION_SHUTDOWN_TIMEOUT',
    default: '25s',
    help: 'longest wait for in-flight requests on SIGTERM',
  },
  'tls-mode': {
    type: 'string',
    env: 'KD_ADMISSION_TLS_MODE',
    default: 'files',
    metavar: 'files|bootstrap',
    help: 'files: serve --tls-cert-file/--tls-key-file; bootstrap: read or create the CA Secret, sign a serving certificate of its own from it in memory, keep the caBundle of --webhook-configurations current, renew',
  },
  'tls-secret-name': {
    type: 'string',
    env: 'KD_ADMISSION_TLS_SECRET_NAME',
    default: 'kd-connections-admission-tls',
    help: 'bootstrap: the kubernetes.io/tls Secret holding the CA (no serving key is ever stored)',
  },
  'tls-secret-namespace': {
    type: 'string',
    env: 'KD_ADMISSION_TLS_SECRET_NAMESPACE',
    help: "bootstrap: the Secret's namespace (default $POD_NAMESPACE)",
  },
  'service-name': {
    type: 'string',
    env: 'KD_ADMISSION_SERVICE_NAME',
    default: 'kd-connections-admission',
    help: 'bootstrap: Service the certificate names (svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local)',
  },
  'service-namespace': {
    type: 'string',
    env: 'KD_ADMISSION_SERVICE_NAMESPACE',
    help: "bootstrap: the Service's namespace (default $POD_NAMESPACE)",
  },
  'extra-dns-names': {
    type: 'list',
    env: 'KD_ADMISSION_EXTRA_DNS_NAMES',
    help: 'bootstrap: more DNS names for the certificate, comma-separated',
  },
  'extra-ip-addresses': {
    type: 'list',
    env: 'KD_ADMISSION_EXTRA_IP_ADDRESSES',
    help: 'bootstrap: IP addresses for the certificate, comma-separated (url mode: 127.0.0.1)',
  },
  'webhook-configurations': {
    type: 'list',
    env: 'KD_ADMISSION_WEBHOOK_CONFIGURATIONS',
    help: 'bootstrap: comma-separated validating/NAME and mutating/NAME whose caBundle is kept current',
  },
  'webhook-path-token': {
    type: 'bool',
    env: 'KD_ADMISSION_WEBHOOK_PATH_TOKEN',
    default: false,
    help: 'bootstrap: derive a secret token from a key in the CA Secret, set every webhook path of --webhook-configurations to /t/<token>/<webhook>, and answer reviews only there',
  },
  'webhook-path-token-rotation': {
    type: 'duration',
    min: 0,
    env: 'KD_ADMISSION_WEBHOOK_PATH_TOKEN_ROTATION',
    default: '1h',
    help: "bootstrap: how often the path token changes (a failed webhook call's error quotes the URL, so a token may leak; the previous one is accepted min(5m, half of this) longer); 0 = never",
  },
  'serving-cert-lifetime': {
    type: 'duration',
    min: 1000,
    env: 'KD_ADMISSION_SERVING_CERT_LIFETIME',
    default: '8760h',
    help: 'bootstrap: serving certificate lifetime (e.g. 8760h, 90s); each replica renews its own at two thirds, with no API write',
  },
  'ca-lifetime': {
    type: 'duration',
    min: 1000,
    env: 'KD_ADMISSION_CA_LIFETIME',
    default: '87600h',
    help: 'bootstrap: CA lifetime; renewed at two thirds, the old CA kept in the caBundle until no leaf it signed can be served',
  },
  'headers-timeout': {
    type: 'duration',
    bareSeconds: true,
    min: 100,
    env: 'KD_ADMISSION_HEADERS_TIMEOUT',
    default: '105s',
    help: "how long a client may take to send a request's headers (slow clients are cut off); ≤ --request-timeout",
  },
  'request-timeout': {
    type: 'duration',
    bareSeconds: true,
    min: 100,
    env: 'KD_ADMISSION_REQUEST_TIMEOUT',
    default: '120s',
    help: 'how long a client may take to send a whole request, body included',
  },
  'client-ca-file': {
    type: 'string',
    env: 'KD_ADMISSION_CLIENT_CA_FILE',
    help: 'require a client certificate signed by this CA (PEM) on every connection, probes included (use tcpSocket probes); default off',
  },
  'client-allowed-names': {
    type: 'list',
    env: 'KD_ADMISSION_CLIENT_ALLOWED_NAMES',
    help: "with --client-ca-file: comma-separated names, one of which the client certificate's CN or a SAN must be (default: any)",
  },
  'probe-port': {
    type: 'int',
    min: 0,
    max: 65535,
    env: 'KD_ADMISSION_PROBE_PORT',
    help: 'also serve /healthz, /readyz and /metrics over plain HTTP on this port (same bind address), e.g. for kubelet probes when --client-ca-file is set; default off',
  },
  'watch-namespaces': {
    type: 'list',
    env: 'KD_ADMISSION_WATCH_NAMESPACES',
    formerly: { flags: ['namespaces'], env: ['KD_WATCH_NAMESPACES'] },
    help: "namespaces the webhooks select, comma-separated (empty: all); only these are watched (kdapps also in the system namespace) and a review for any other is refused without a lookup. Keep it equal to the webhooks' namespaceSelector",
  },
  'excluded-namespaces': {
    type: 'list',
    env: 'KD_ADMISSION_EXCLUDED_NAMESPACES',
    default: ['kube-system'],
    help: 'namespaces the webhooks never select, comma-separated; a review for one is refused without a lookup (the chart adds the release namespace)',
  },
  'guestconfig-image': {
    type: 'string',
    env: 'KD_ADMISSION_GUESTCONFIG_IMAGE',
    default: DEFAULT_GUESTCONFIG_IMAGE,
    metavar: 'image',
    help: 'image of the kd-guestconfig sidecar injected into member pods (delivers /etc/guestconfig/configmeta.json); the default is the one the local harness builds',
  },
  'max-in-flight': {
    type: 'int',
    min: 1,
    max: 10000,
    env: 'KD_ADMISSION_MAX_IN_FLIGHT',
    default: 8,
    help: 'reviews decided at once; more wait for a turn within their deadline, then get 429 (busy)',
  },
  'max-in-flight-mib': {
    type: 'int',
    min: 1,
    max: 4096,
    env: 'KD_ADMISSION_MAX_IN_FLIGHT_MIB',
    default: 8,
    help: 'MiB of request bodies (as declared) decided at once; a larger review still runs alone',
  },
  'max-queued': {
    type: 'int',
    min: 0,
    max: 100000,
    env: 'KD_ADMISSION_MAX_QUEUED',
    default: 200,
    help: 'reviews waiting for a turn, at most (a waiting review has not been read); past it: 429 at once',
  },
  'review-deadline': {
    type: 'duration',
    bareSeconds: true,
    min: 1,
    env: 'KD_ADMISSION_REVIEW_DEADLINE',
    default: '2500ms',
    help: 'longest a review takes from its first byte to its answer, waiting included; lowered to the API server\'s ?timeout= less 500ms. Past it a validating webhook denies ("could not check N connections in time"), a mutating one allows unchanged. Keep it below the webhooks\' timeoutSeconds',
  },
  'secret-delivery': {
    type: 'string',
    env: 'KD_ADMISSION_SECRET_DELIVERY',
    default: 'document',
    metavar: 'mode',
    help: "how connected Secret values reach member containers: 'document' (in configmeta.json, as KubeDirector renders them, assembled in the pod) or 'private-file' (only in the root-only .priv_configmeta.json, which the stock configcli never reads)",
  },
} satisfies Record<string, FlagSpec>;

export const ADMISSION_PROGRAM: ProgramInfo = {
  name: 'kd-connections-admission',
  version: packageVersion(import.meta.url),
  summary:
    'The kd-connections admission webhook: validates KubeDirectorClusters and gives member pods the configmeta delivery sidecar.',
};

export function usage(): string {
  return programHelp(ADMISSION_PROGRAM, ADMISSION_FLAGS);
}

/** Configuration errors are the flag layer's errors (one class, one message style). */
export const ConfigError = FlagError;
export type ConfigError = FlagError;

/** A Go-style duration ("8760h", "90s", "1h30m", "500ms") in milliseconds; throws ConfigError. */
export const parseDuration = (name: string, text: string): number => parseFlagDuration(name, text);

function namespaceList(name: string, names: string[]): string[] {
  const bad = names.find((n) => !DNS1123_LABEL_RE.test(n));
  if (bad !== undefined) throw new ConfigError(`--${name} must list namespace names, got ${JSON.stringify(bad)}`);
  return names;
}

/** An image reference the kubelet can use: no whitespace, not empty (the registry checks the rest). */
function imageReference(name: string, value: string): string {
  if (!/^[^\s]+$/.test(value))
    throw new ConfigError(`--${name} must be an image reference, got ${JSON.stringify(value)}`);
  return value;
}

function webhookConfigurations(items: string[]): WebhookConfigurationRef[] {
  return items.map((item) => {
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
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv): AdmissionConfig | 'help' | 'version' {
  const line = readCommandLine(ADMISSION_FLAGS, argv, env);
  if (line.kind !== 'run') return line.kind;
  const { values: f, raw } = line;
  const level = f['log-level'];
  if (parseLogLevel(level, 'info') !== level) {
    throw new ConfigError(`--log-level must be debug, info, warn or error, got ${JSON.stringify(level)}`);
  }
  const tlsMode = f['tls-mode'];
  if (tlsMode !== 'files' && tlsMode !== 'bootstrap') {
    throw new ConfigError(`--tls-mode must be files or bootstrap, got ${JSON.stringify(tlsMode)}`);
  }
  const podNamespace = env.POD_NAMESPACE || undefined;
  const tlsSecretNamespace = f['tls-secret-namespace'] ?? podNamespace;
  const serviceNamespace = f['service-namespace'] ?? podNamespace;
  const extraIpAddresses = f['extra-ip-addresses'];
  const badIp = extraIpAddresses.find((ip) => isIP(ip) === 0);
  if (badIp !== undefined) {
    throw new ConfigError(`--extra-ip-addresses must list IP addresses, got ${JSON.stringify(badIp)}`);
  }
  const servingCertLifetimeMs = f['serving-cert-lifetime'];
  const caLifetimeMs = f['ca-lifetime'];
  const hooks = webhookConfigurations(f['webhook-configurations']);
  if (tlsMode === 'bootstrap') {
    if (!tlsSecretNamespace) {
      throw new ConfigError('--tls-secret-namespace (or $POD_NAMESPACE) is required with --tls-mode=bootstrap');
    }
    if (!serviceNamespace) {
      throw new ConfigError('--service-namespace (or $POD_NAMESPACE) is required with --tls-mode=bootstrap');
    }
    if (servingCertLifetimeMs > caLifetimeMs) {
      throw new ConfigError(
        `--serving-cert-lifetime (${raw['serving-cert-lifetime']}) must not exceed --ca-lifetime (${raw['ca-lifetime']})`,
      );
    }
  }
  const webhookPathToken = f['webhook-path-token'];
  if (webhookPathToken && (tlsMode !== 'bootstrap' || hooks.length === 0)) {
    throw new ConfigError(
      '--webhook-path-token needs --tls-mode=bootstrap and --webhook-configurations (the service publishes the paths)',
    );
  }
  const headersTimeoutMs = f['headers-timeout'];
  const requestTimeoutMs = f['request-timeout'];
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `--headers-timeout (${raw['headers-timeout']}) must not exceed --request-timeout (${raw['request-timeout']})`,
    );
  }
  const probePort = f['probe-port'];
  if (probePort !== undefined && probePort !== 0 && probePort === f.port) {
    throw new ConfigError(`--probe-port must differ from --port (both ${f.port})`);
  }
  const clientCaFile = f['client-ca-file'];
  const clientAllowedNames = f['client-allowed-names'];
  if (clientAllowedNames.length > 0 && !clientCaFile) {
    throw new ConfigError('--client-allowed-names needs --client-ca-file');
  }
  return {
    port: f.port,
    bindAddress: f['bind-address'],
    tlsCertFile: f['tls-cert-file'],
    tlsKeyFile: f['tls-key-file'],
    tlsPollIntervalMs: f['tls-poll-interval'],
    kubeconfig: f.kubeconfig,
    systemNamespace: f['system-namespace'] ?? (env.POD_NAMESPACE || 'kd-system'),
    secretConnections: f['secret-connections'],
    kubedirectorMode: f['kubedirector-mode'],
    logLevel: parseLogLevel(level),
    shutdownDelayMs: f['shutdown-delay'],
    shutdownTimeoutMs: f['shutdown-timeout'],
    tlsMode,
    tlsSecretName: f['tls-secret-name'],
    tlsSecretNamespace,
    serviceName: f['service-name'],
    serviceNamespace,
    extraDnsNames: f['extra-dns-names'],
    extraIpAddresses,
    webhookConfigurations: hooks,
    webhookPathToken,
    webhookPathTokenRotationMs: f['webhook-path-token-rotation'],
    servingCertLifetimeMs,
    caLifetimeMs,
    headersTimeoutMs,
    requestTimeoutMs,
    clientCaFile,
    clientAllowedNames,
    probePort,
    namespaces: namespaceList('watch-namespaces', f['watch-namespaces']),
    excludedNamespaces: namespaceList('excluded-namespaces', f['excluded-namespaces']),
    guestconfigImage: imageReference('guestconfig-image', f['guestconfig-image']),
    maxInFlight: f['max-in-flight'],
    maxInFlightBytes: f['max-in-flight-mib'] * 1024 * 1024,
    maxQueued: f['max-queued'],
    reviewDeadlineMs: f['review-deadline'],
    secretDelivery: secretDeliveryMode(f['secret-delivery']),
    deprecations: line.deprecations,
  };
}

function secretDeliveryMode(value: string | undefined): SecretDelivery {
  const v = value ?? 'document';
  if (!(SECRET_DELIVERY_MODES as readonly string[]).includes(v))
    throw new ConfigError(`--secret-delivery must be ${SECRET_DELIVERY_MODES.join(' or ')}, got ${JSON.stringify(v)}`);
  return v as SecretDelivery;
}
