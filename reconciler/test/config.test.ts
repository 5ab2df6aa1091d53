/** The reconciler's configuration: defaults, environment, flags, cross-flag rules, --help and --version. */
import { describe, expect, it } from '@jest/globals';
import { FlagError, type FlagSpec } from '@kd-connections/shared/runtime';
import { loadConfig, RECONCILER_FLAGS, type InfoOutput } from '../src/config.js';

const ENV = { POD_NAMESPACE: 'kd-release' };

class Exit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

function info(argv: string[]): { code: number; out: string } {
  let out = '';
  const io: InfoOutput = {
    stdout: (t) => void (out += t),
    exit: (code) => {
      throw new Exit(code);
    },
  };
  try {
    loadConfig(argv, ENV, io);
  } catch (e) {
    if (e instanceof Exit) return { code: e.code, out };
    throw e;
  }
  throw new Error('loadConfig returned instead of exiting');
}

describe('reconciler configuration', () => {
  it("outside a pod (no POD_NAMESPACE): kd-system, the admission service's default too", () => {
    const c = loadConfig(['--leader-elect-identity=r1'], {});
    expect([c.systemNamespace, c.leaseNamespace, c.digestKeyNamespace]).toEqual([
      'kd-system',
      'kd-system',
      'kd-system',
    ]);
  });

  it('has in-pod defaults', () => {
    const c = loadConfig(['--leader-elect-identity=r1'], ENV);
    expect(c).toEqual({
      kubeconfig: undefined,
      namespaces: [],
      systemNamespace: 'kd-release',
      concurrency: 4,
      digestKeyNamespace: 'kd-release',
      podConcurrency: 8,
      leaderElect: true,
      leaseName: 'kd-connections-reconciler',
      leaseNamespace: 'kd-release',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      identity: 'r1',
      secretConnections: true,
      reconnectHook: false,
      reconnectTimeoutMs: 120_000,
      reconnectConcurrency: 4,
      firstDeliveryWaitMs: 60_000,
      clusterDomain: 'cluster.local',
      metricsHost: '0.0.0.0',
      metricsPort: 8080,
      relistPeriodMs: 600_000,
      watchTimeoutSeconds: 300,
      heapReleaseIntervalMs: 10_000,
      contentCacheBytes: 64 * 2 ** 20,
      logLevel: 'info',
      deprecations: [],
    });
    expect(loadConfig([], ENV).identity).toMatch(/-[0-9a-f]{6}$/);
  });

  it('reads the environment, and flags win over it', () => {
    const env = {
      ...ENV,
      KD_RECONCILER_SECRET_CONNECTIONS: 'false',
      KD_RECONCILER_WATCH_NAMESPACES: 'a,b',
      KD_RECONCILER_LEADER_ELECT_LEASE_DURATION: '30s',
    };
    expect(loadConfig([], env)).toMatchObject({
      secretConnections: false,
      namespaces: ['a', 'b'],
      leaseDurationMs: 30_000,
    });
    expect(
      loadConfig(
        [
          '--secret-connections',
          '--watch-namespaces=c',
          '--leader-elect-lease-duration=20',
          '--metrics-bind-address=127.0.0.1:0',
          '--heap-release-interval=0',
          '--content-cache-mib=8',
        ],
        env,
      ),
    ).toMatchObject({
      heapReleaseIntervalMs: 0,
      contentCacheBytes: 8 * 2 ** 20,
      secretConnections: true,
      namespaces: ['c'],
      leaseDurationMs: 20_000,
      metricsHost: '127.0.0.1',
      metricsPort: 0,
    });
  });

  it('still takes the names of 0.1.0 (flags and variables), each with a deprecation to log', () => {
    const c = loadConfig(
      ['--namespaces=a', '--lease-name=l', '--lease-namespace=ns', '--lease-duration=30s', '--identity=r2'],
      { ...ENV, KD_RENEW_DEADLINE: '20s', KD_RETRY_PERIOD: '3s', KD_CONCURRENCY: '2', KD_LOG_LEVEL: 'warn' },
    );
    expect(c).toMatchObject({
      namespaces: ['a'],
      leaseName: 'l',
      leaseNamespace: 'ns',
      leaseDurationMs: 30_000,
      renewDeadlineMs: 20_000,
      retryPeriodMs: 3_000,
      identity: 'r2',
      concurrency: 2,
      logLevel: 'warn',
    });
    expect(c.deprecations).toEqual([
      '--namespaces is deprecated and goes in 0.3.0: use --watch-namespaces',
      '--lease-name is deprecated and goes in 0.3.0: use --leader-elect-resource-name',
      '--lease-namespace is deprecated and goes in 0.3.0: use --leader-elect-resource-namespace',
      '--lease-duration is deprecated and goes in 0.3.0: use --leader-elect-lease-duration',
      '--identity is deprecated and goes in 0.3.0: use --leader-elect-identity',
      '$KD_CONCURRENCY is deprecated and goes in 0.3.0: use $KD_RECONCILER_CONCURRENCY',
      '$KD_RENEW_DEADLINE is deprecated and goes in 0.3.0: use $KD_RECONCILER_LEADER_ELECT_RENEW_DEADLINE',
      '$KD_RETRY_PERIOD is deprecated and goes in 0.3.0: use $KD_RECONCILER_LEADER_ELECT_RETRY_PERIOD',
      '$KD_LOG_LEVEL is deprecated and goes in 0.3.0: use $KD_RECONCILER_LOG_LEVEL',
    ]);
    const envs = Object.values(RECONCILER_FLAGS).flatMap((f: FlagSpec) => (f.env ? [f.env] : []));
    expect(envs.filter((e) => e !== 'KUBECONFIG' && !e.startsWith('KD_RECONCILER_'))).toEqual([]);
    // The new name wins over the old one, whichever way each is given.
    expect(loadConfig([], { ...ENV, KD_CONCURRENCY: '2', KD_RECONCILER_CONCURRENCY: '3' })).toMatchObject({
      concurrency: 3,
      deprecations: [],
    });
  });

  it('no longer knows --inline-secret-values: Secret values never enter the public document', () => {
    expect(() => loadConfig(['--inline-secret-values=true'], {})).toThrow(/inline-secret-values/);
  });

  it('accepts booleans as admission does: true/false, 1/0, yes/no; on/off nowhere', () => {
    expect(loadConfig([], { KD_RECONCILER_SECRET_CONNECTIONS: 'no' }).secretConnections).toBe(false);
    expect(loadConfig(['--leader-elect=YES'], { KD_RECONCILER_LEADER_ELECT: 'no' }).leaderElect).toBe(true);
    expect(() => loadConfig([], { KD_RECONCILER_SECRET_CONNECTIONS: 'off' })).toThrow(
      '--secret-connections (from $KD_RECONCILER_SECRET_CONNECTIONS) must be true or false, got "off"',
    );
  });

  it.each([
    [['--concurrency=0'], '--concurrency must be an integer ≥ 1, got "0"'],
    [
      ['--leader-elect-lease-duration=1500ms'],
      '--leader-elect-lease-duration: "1500ms" must be a whole number of seconds',
    ],
    [['--leader-elect-lease-duration=soon'], '--leader-elect-lease-duration must be a number'],
    [
      ['--leader-elect-renew-deadline=15s'],
      '--leader-elect-renew-deadline must be less than --leader-elect-lease-duration',
    ],
    [
      ['--leader-elect-retry-period=9s'],
      '--leader-elect-retry-period × 1.2 must be less than --leader-elect-renew-deadline',
    ],
    [['--metrics-bind-address=8080'], '--metrics-bind-address must be host:port, got "8080"'],
    [['--log-level=loud'], '--log-level must be debug, info, warn or error, got "loud"'],
    [['--bogus'], 'unknown flag --bogus'],
  ])('refuses %j', (argv, message) => {
    expect(() => loadConfig(argv, ENV)).toThrow(FlagError);
    expect(() => loadConfig(argv, ENV)).toThrow(message);
  });

  it('answers --help with every flag and its variable, and --version, exiting 0', () => {
    const help = info(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/^Usage: kd-connections-reconciler \[flags\]/);
    for (const s of [
      '--leader-elect-lease-duration duration',
      '$KD_RECONCILER_SECRET_CONNECTIONS',
      '--watch-namespaces list',
      '(formerly --lease-duration, $KD_LEASE_DURATION; until 0.3.0)',
      '--version',
    ]) {
      expect(help.out).toContain(s);
    }
    expect(info(['--version'])).toEqual({ code: 0, out: 'kd-connections-reconciler 0.1.0\n' });
  });
});
