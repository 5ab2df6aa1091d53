import { describe, expect, it } from '@jest/globals';
import { ConfigError, parseConfig, usage } from '../src/config.js';

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
      logLevel: 'info',
      shutdownDelayMs: 0,
      shutdownTimeoutMs: 25_000,
    });
  });

  it('reads the environment, and flags win over it', () => {
    const env = {
      KD_ADMISSION_PORT: '8443',
      KD_ADMISSION_BIND_ADDRESS: '127.0.0.1',
      KUBECONFIG: '/tmp/kc',
      POD_NAMESPACE: 'kd-release',
      KD_SECRET_CONNECTIONS: 'false',
      KD_LOG_LEVEL: 'debug',
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
    [['--secret-connections=maybe'], '--secret-connections must be true or false, got "maybe"'],
    [['--log-level', 'loud'], '--log-level must be debug, info, warn or error, got "loud"'],
    [['--shutdown-timeout=-1'], '--shutdown-timeout must be a number ≥ 0, got "-1"'],
    [['--nope'], "Unknown option '--nope'"],
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
    ])
      expect(usage()).toContain(f);
  });
});
