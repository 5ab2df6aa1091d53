/** The reconciler's configuration: defaults, environment, flags, cross-flag rules, --help and --version. */
import { describe, expect, it } from '@jest/globals';
import { FlagError } from '@kd-connections/shared';
import { loadConfig, type InfoOutput } from '../src/config.js';

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
    const c = loadConfig(['--identity=r1'], {});
    expect([c.systemNamespace, c.leaseNamespace, c.digestKeyNamespace]).toEqual([
      'kd-system',
      'kd-system',
      'kd-system',
    ]);
  });

  it('has in-pod defaults', () => {
    const c = loadConfig(['--identity=r1'], ENV);
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
      clusterDomain: 'cluster.local',
      metricsHost: '0.0.0.0',
      metricsPort: 8080,
      relistPeriodMs: 600_000,
      watchTimeoutSeconds: 300,
      heapReleaseIntervalMs: 10_000,
      contentCacheBytes: 64 * 2 ** 20,
      logLevel: 'info',
    });
    expect(loadConfig([], ENV).identity).toMatch(/-[0-9a-f]{6}$/);
  });

  it('reads the environment, and flags win over it', () => {
    const env = { ...ENV, KD_SECRET_CONNECTIONS: 'false', KD_WATCH_NAMESPACES: 'a,b', KD_LEASE_DURATION: '30s' };
    expect(loadConfig([], env)).toMatchObject({
      secretConnections: false,
      namespaces: ['a', 'b'],
      leaseDurationMs: 30_000,
    });
    expect(
      loadConfig(
        [
          '--secret-connections',
          '--namespaces=c',
          '--lease-duration=20',
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

  it('no longer knows --inline-secret-values: Secret values never enter the public document', () => {
    expect(() => loadConfig(['--inline-secret-values=true'], {})).toThrow(/inline-secret-values/);
  });

  it('accepts booleans as admission does: true/false, 1/0, yes/no; on/off nowhere', () => {
    expect(loadConfig([], { KD_SECRET_CONNECTIONS: 'no' }).secretConnections).toBe(false);
    expect(loadConfig(['--leader-elect=YES'], { KD_LEADER_ELECT: 'no' }).leaderElect).toBe(true);
    expect(() => loadConfig([], { KD_SECRET_CONNECTIONS: 'off' })).toThrow(
      '--secret-connections (from $KD_SECRET_CONNECTIONS) must be true or false, got "off"',
    );
  });

  it.each([
    [['--concurrency=0'], '--concurrency must be an integer ≥ 1, got "0"'],
    [['--lease-duration=1500ms'], '--lease-duration: "1500ms" must be a whole number of seconds'],
    [['--lease-duration=soon'], '--lease-duration must be a number'],
    [['--renew-deadline=15s'], '--renew-deadline must be less than --lease-duration'],
    [['--retry-period=9s'], '--retry-period × 1.2 must be less than --renew-deadline'],
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
    for (const s of ['--lease-duration duration', '$KD_SECRET_CONNECTIONS', '--namespaces list', '--version']) {
      expect(help.out).toContain(s);
    }
    expect(info(['--version'])).toEqual({ code: 0, out: 'kd-connections-reconciler 0.1.0\n' });
  });
});
