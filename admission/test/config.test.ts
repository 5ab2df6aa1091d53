import { describe, expect, it } from '@jest/globals';
import type { FlagSpec } from '@kd-connections/shared/runtime';
import { ADMISSION_FLAGS, ConfigError, parseConfig, parseDuration, usage } from '../src/config.js';

describe('configuration', () => {
  it('has in-pod defaults', () => {
    expect(parseConfig([], {})).toEqual({
      port: 9443,
      bindAddress: '0.0.0.0',
      tlsCertFile: '/etc/kd-connections/tls/tls.crt',
      tlsKeyFile: '/etc/kd-connections/tls/tls.key',
      tlsPollIntervalMs: 10_000,
      kubeconfig: undefined,
      systemNamespace: 'kd-system',
      secretConnections: true,
      secretDelivery: 'document',
      deprecations: [],
      kubedirectorMode: false,
      logLevel: 'info',
      shutdownDelayMs: 0,
      shutdownTimeoutMs: 25_000,
      tlsMode: 'files',
      tlsSecretName: 'kd-connections-admission-tls',
      tlsSecretNamespace: undefined,
      serviceName: 'kd-connections-admission',
      serviceNamespace: undefined,
      extraDnsNames: [],
      extraIpAddresses: [],
      webhookConfigurations: [],
      webhookPathToken: false,
      webhookPathTokenRotationMs: 3_600_000,
      servingCertLifetimeMs: 8760 * 3_600_000,
      caLifetimeMs: 87600 * 3_600_000,
      headersTimeoutMs: 105_000,
      requestTimeoutMs: 120_000,
      clientCaFile: undefined,
      clientAllowedNames: [],
      probePort: undefined,
      namespaces: [],
      excludedNamespaces: ['kube-system'],
      guestconfigImage: 'kd.invalid/kd-guestconfig:local',
      maxInFlight: 8,
      maxInFlightBytes: 8 * 1024 * 1024,
      maxQueued: 200,
      reviewDeadlineMs: 2500,
    });
  });

  it('reads the sidecar image from the flag or its variable, and refuses one that is no reference', () => {
    expect(parseConfig(['--guestconfig-image=ghcr.io/kd/guestconfig:1.2'], {}).valueOf()).toMatchObject({
      guestconfigImage: 'ghcr.io/kd/guestconfig:1.2',
    });
    expect(parseConfig([], { KD_ADMISSION_GUESTCONFIG_IMAGE: 'r.invalid/g@sha256:ab' })).toMatchObject({
      guestconfigImage: 'r.invalid/g@sha256:ab',
    });
    expect(() => parseConfig(['--guestconfig-image=bad image'], {})).toThrow(
      '--guestconfig-image must be an image reference, got "bad image"',
    );
  });

  it('reads the plain probe port and the namespaces the webhooks select', () => {
    expect(parseConfig(['--probe-port=8081', '--watch-namespaces=team-a, team-b,team-a'], {})).toMatchObject({
      probePort: 8081,
      namespaces: ['team-a', 'team-b'],
    });
  });

  it('reads the namespaces the webhooks select and refuses names that are not namespaces', () => {
    expect(
      parseConfig(['--watch-namespaces=team-a, team-b', '--excluded-namespaces=kube-system,kd'], {}),
    ).toMatchObject({
      namespaces: ['team-a', 'team-b'],
      excludedNamespaces: ['kube-system', 'kd'],
    });
    expect(parseConfig(['--excluded-namespaces='], { KD_ADMISSION_WATCH_NAMESPACES: 'ml' })).toMatchObject({
      namespaces: ['ml'],
      excludedNamespaces: [],
    });
    expect(() => parseConfig(['--watch-namespaces=Team_A'], {})).toThrow(
      '--watch-namespaces must list namespace names, got "Team_A"',
    );
  });

  it('reads the slow-client timeouts and optional client-certificate authentication', () => {
    expect(
      parseConfig(
        [
          '--headers-timeout=2',
          '--request-timeout=4.5',
          '--client-ca-file=/etc/kd/client-ca.crt',
          '--client-allowed-names=kube-apiserver, front-proxy',
        ],
        {},
      ),
    ).toMatchObject({
      headersTimeoutMs: 2000,
      requestTimeoutMs: 4500,
      clientCaFile: '/etc/kd/client-ca.crt',
      clientAllowedNames: ['kube-apiserver', 'front-proxy'],
    });
    expect(() => parseConfig(['--headers-timeout=10', '--request-timeout=5'], {})).toThrow(
      '--headers-timeout (10) must not exceed --request-timeout (5)',
    );
    expect(() => parseConfig(['--request-timeout=0'], {})).toThrow(ConfigError);
    expect(() => parseConfig(['--client-allowed-names=kube-apiserver'], {})).toThrow(
      '--client-allowed-names needs --client-ca-file',
    );
  });

  it('takes a webhook path token only where the service can publish it (bootstrap, configurations named)', () => {
    const env = { POD_NAMESPACE: 'kd-system' };
    const hooks = '--webhook-configurations=validating/kd';
    const c = parseConfig(['--tls-mode=bootstrap', hooks, '--webhook-path-token'], env);
    expect(c !== 'help' && c !== 'version' && c.webhookPathToken).toBe(true);
    const why =
      '--webhook-path-token needs --tls-mode=bootstrap and --webhook-configurations (the service publishes the paths)';
    expect(() => parseConfig(['--webhook-path-token', hooks], env)).toThrow(why);
    expect(() => parseConfig(['--tls-mode=bootstrap', '--webhook-path-token'], env)).toThrow(why);
  });

  it('reads bootstrap mode: Secret and Service from $POD_NAMESPACE, names, configurations, lifetimes', () => {
    const c = parseConfig(
      [
        '--tls-mode=bootstrap',
        '--extra-dns-names=webhook.example.com, other.example.com,webhook.example.com',
        '--extra-ip-addresses=127.0.0.1,::1',
        '--webhook-configurations=validating/kd-validate,mutating/kd-mutate',
        '--serving-cert-lifetime=90s',
        '--ca-lifetime=1h30m',
      ],
      { POD_NAMESPACE: 'kd-release' },
    );
    expect(c).toMatchObject({
      tlsMode: 'bootstrap',
      tlsSecretName: 'kd-connections-admission-tls',
      tlsSecretNamespace: 'kd-release',
      serviceName: 'kd-connections-admission',
      serviceNamespace: 'kd-release',
      extraDnsNames: ['webhook.example.com', 'other.example.com'],
      extraIpAddresses: ['127.0.0.1', '::1'],
      webhookConfigurations: [
        { kind: 'validating', name: 'kd-validate' },
        { kind: 'mutating', name: 'kd-mutate' },
      ],
      servingCertLifetimeMs: 90_000,
      caLifetimeMs: 5_400_000,
    });
    const flags = parseConfig(
      [
        '--tls-mode=bootstrap',
        '--tls-secret-name=s',
        '--tls-secret-namespace=secrets',
        '--service-name=svc',
        '--service-namespace=services',
      ],
      { POD_NAMESPACE: 'kd-release' },
    );
    expect(flags).toMatchObject({
      tlsSecretName: 's',
      tlsSecretNamespace: 'secrets',
      serviceName: 'svc',
      serviceNamespace: 'services',
    });
    expect(parseConfig([], { KD_ADMISSION_TLS_MODE: 'bootstrap', POD_NAMESPACE: 'x' })).toMatchObject({
      tlsMode: 'bootstrap',
    });
  });

  it('parses Go-style durations', () => {
    expect(parseDuration('d', '8760h')).toBe(31_536_000_000);
    expect(parseDuration('d', '1h30m15s')).toBe(5_415_000);
    expect(parseDuration('d', '1500ms')).toBe(1500);
    expect(parseDuration('d', '2.5s')).toBe(2500);
  });

  it('reads the environment, and flags win over it', () => {
    const env = {
      KD_ADMISSION_PORT: '8443',
      KD_ADMISSION_BIND_ADDRESS: '127.0.0.1',
      KUBECONFIG: '/tmp/kc',
      POD_NAMESPACE: 'kd-release',
      KD_ADMISSION_SECRET_CONNECTIONS: 'false',
      KD_ADMISSION_LOG_LEVEL: 'debug',
    };
    const fromEnv = parseConfig([], env);
    expect(fromEnv).toMatchObject({
      port: 8443,
      bindAddress: '127.0.0.1',
      kubeconfig: '/tmp/kc',
      systemNamespace: 'kd-release',
      secretConnections: false,
      logLevel: 'debug',
    });
    const flags = parseConfig(
      [
        '--port=0',
        '--bind-address',
        '::1',
        '--system-namespace',
        'catalog',
        '--secret-connections=true',
        '--tls-cert-file',
        '/c',
        '--tls-key-file',
        '/k',
        '--tls-poll-interval',
        '0.5',
        '--shutdown-timeout',
        '3',
      ],
      env,
    );
    expect(flags).toMatchObject({
      port: 0,
      bindAddress: '::1',
      systemNamespace: 'catalog',
      secretConnections: true,
      tlsCertFile: '/c',
      tlsKeyFile: '/k',
      tlsPollIntervalMs: 500,
      shutdownTimeoutMs: 3000,
    });
  });

  it.each([
    [['--port', 'x'], '--port must be an integer 0-65535, got "x"'],
    [['--probe-port=http'], '--probe-port must be an integer 0-65535, got "http"'],
    [['--port=9443', '--probe-port=9443'], '--probe-port must differ from --port (both 9443)'],
    [['--secret-connections=maybe'], '--secret-connections must be true or false, got "maybe"'],
    [['--log-level', 'loud'], '--log-level must be debug, info, warn or error, got "loud"'],
    [['--shutdown-timeout=-1'], '--shutdown-timeout must be a number ≥ 0, got "-1"'],
    [['--nope'], 'unknown flag --nope'],
    [['--tls-mode=secret'], '--tls-mode must be files or bootstrap, got "secret"'],
    [['--tls-mode=bootstrap'], '--tls-secret-namespace (or $POD_NAMESPACE) is required with --tls-mode=bootstrap'],
    [
      ['--tls-mode=bootstrap', '--tls-secret-namespace=x'],
      '--service-namespace (or $POD_NAMESPACE) is required with --tls-mode=bootstrap',
    ],
    [['--serving-cert-lifetime=10d'], '--serving-cert-lifetime must be a duration of at least 1s'],
    [['--ca-lifetime=500ms'], '--ca-lifetime must be a duration of at least 1s'],
    [['--ca-lifetime=h'], '--ca-lifetime must be a duration'],
    [['--extra-ip-addresses=127.0.0.1,localhost'], '--extra-ip-addresses must list IP addresses, got "localhost"'],
    [['--webhook-configurations=kd-validate'], 'entries must be validating/NAME or mutating/NAME, got "kd-validate"'],
    [
      [
        '--tls-mode=bootstrap',
        '--tls-secret-namespace=x',
        '--service-namespace=x',
        '--ca-lifetime=1h',
        '--serving-cert-lifetime=2h',
      ],
      '--serving-cert-lifetime (2h) must not exceed --ca-lifetime (1h)',
    ],
  ])('refuses %j', (argv, message) => {
    expect(() => parseConfig(argv, {})).toThrow(ConfigError);
    expect(() => parseConfig(argv, {})).toThrow(message);
  });

  it('prints usage for --help naming every flag and its variable', () => {
    expect(parseConfig(['--help'], {})).toBe('help');
    for (const f of [
      '--port',
      '--bind-address',
      '--tls-cert-file',
      '--kubeconfig',
      '--secret-connections',
      '$KUBECONFIG',
      '--tls-mode',
      '--tls-secret-name',
      '--tls-secret-namespace',
      '--service-name',
      '--service-namespace',
      '--extra-dns-names',
      '--extra-ip-addresses',
      '--webhook-configurations',
      '--serving-cert-lifetime',
      '--ca-lifetime',
      '$KD_ADMISSION_TLS_MODE',
    ])
      expect(usage()).toContain(f);
  });
});

describe('configuration through the shared flag layer', () => {
  it('answers --version', () => {
    expect(parseConfig(['--version'], {})).toBe('version');
  });

  it('takes Go-style durations for the timeouts that also take plain seconds', () => {
    expect(
      parseConfig(['--shutdown-timeout=1m30s', '--tls-poll-interval=250ms', '--shutdown-delay=2'], {}),
    ).toMatchObject({ shutdownTimeoutMs: 90_000, tlsPollIntervalMs: 250, shutdownDelayMs: 2000 });
  });

  it('reads booleans as the reconciler does: on/off are refused, naming the variable', () => {
    expect(parseConfig([], { KD_ADMISSION_SECRET_CONNECTIONS: 'no' })).toMatchObject({ secretConnections: false });
    expect(() => parseConfig([], { KD_ADMISSION_SECRET_CONNECTIONS: 'off' })).toThrow(
      '--secret-connections (from $KD_ADMISSION_SECRET_CONNECTIONS) must be true or false, got "off"',
    );
  });

  it('one environment prefix, KD_ADMISSION_; the names of 0.1.0 still work, each with a deprecation to log', () => {
    const old = parseConfig(['--namespaces=ml'], {
      KD_SYSTEM_NAMESPACE: 'catalog',
      KD_SECRET_CONNECTIONS: 'false',
      KD_KUBEDIRECTOR_MODE: 'true',
      KD_LOG_LEVEL: 'warn',
    });
    expect(old).toMatchObject({
      namespaces: ['ml'],
      systemNamespace: 'catalog',
      secretConnections: false,
      kubedirectorMode: true,
      logLevel: 'warn',
      deprecations: [
        '--namespaces is deprecated and goes in 0.3.0: use --watch-namespaces',
        '$KD_SYSTEM_NAMESPACE is deprecated and goes in 0.3.0: use $KD_ADMISSION_SYSTEM_NAMESPACE',
        '$KD_SECRET_CONNECTIONS is deprecated and goes in 0.3.0: use $KD_ADMISSION_SECRET_CONNECTIONS',
        '$KD_KUBEDIRECTOR_MODE is deprecated and goes in 0.3.0: use $KD_ADMISSION_KUBEDIRECTOR_MODE',
        '$KD_LOG_LEVEL is deprecated and goes in 0.3.0: use $KD_ADMISSION_LOG_LEVEL',
      ],
    });
    const envs = Object.values(ADMISSION_FLAGS).flatMap((f: FlagSpec) => (f.env ? [f.env] : []));
    expect(envs.filter((e) => e !== 'KUBECONFIG' && !e.startsWith('KD_ADMISSION_'))).toEqual([]);
    expect(parseConfig([], {})).toMatchObject({ deprecations: [] });
  });

  it('adds up repeated list flags; a repeated single flag takes the last value', () => {
    expect(
      parseConfig(['--extra-dns-names=a.example.com', '--extra-dns-names=b.example.com', '--port=1', '--port=2'], {}),
    ).toMatchObject({ extraDnsNames: ['a.example.com', 'b.example.com'], port: 2 });
  });

  it('prints help in the shared format', () => {
    expect(usage()).toMatch(/^Usage: kd-connections-admission \[flags\]/);
    expect(usage()).toContain('  --port int');
    expect(usage()).toContain('[default 9443, $KD_ADMISSION_PORT]');
  });

  it('--kubedirector-mode (or KD_ADMISSION_KUBEDIRECTOR_MODE) turns on running next to KubeDirector', () => {
    expect((parseConfig(['--kubedirector-mode=true'], {}) as { kubedirectorMode: boolean }).kubedirectorMode).toBe(
      true,
    );
    expect(
      (parseConfig([], { KD_ADMISSION_KUBEDIRECTOR_MODE: 'true' }) as { kubedirectorMode: boolean }).kubedirectorMode,
    ).toBe(true);
  });
});
