/** The node's generated configuration: each setting that was found necessary on these machines. */
import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  containerdConfig,
  containerdPaths,
  isolatedPodNetwork,
  POD_BRIDGE,
  trustLoopbackRegistry,
} from './containerd.js';
import { kubeletConfig, TEST_NODE_TAINT } from './node.js';

describe('containerd configuration', () => {
  const p = containerdPaths('/tmp/kd-node-x/containerd');
  const toml = containerdConfig(p, 'kd.invalid/pause:local', '/usr/lib/cni');

  it('keeps root, state, socket, opt and CNI configuration under the run folder', () => {
    for (const line of [
      'root = "/tmp/kd-node-x/containerd/root"',
      'state = "/tmp/kd-node-x/containerd/state"',
      'address = "/tmp/kd-node-x/containerd/containerd.sock"',
      'path = "/tmp/kd-node-x/containerd/opt"',
      'conf_dir = "/tmp/kd-node-x/containerd/cni"',
      'Root = "/tmp/kd-node-x/containerd/state/runc"',
    ])
      expect(toml).toContain(line);
  });

  it('uses the local pause image and never lowers oom_score_adj below what it may', () => {
    expect(toml).toContain('sandbox_image = "kd.invalid/pause:local"');
    expect(toml).toContain('restrict_oom_score_adj = true');
  });

  it('reads registry hosts from the run folder; only a loopback registry is written there, over plain HTTP', () => {
    expect(toml).toContain('config_path = "/tmp/kd-node-x/containerd/certs.d"');
    const hosts = mkdtempSync(join(tmpdir(), 'kd-hosts-'));
    try {
      trustLoopbackRegistry(hosts, '127.0.0.1:5001');
      expect(readFileSync(join(hosts, '127.0.0.1:5001', 'hosts.toml'), 'utf8')).toBe(
        'server = "http://127.0.0.1:5001"\n\n[host."http://127.0.0.1:5001"]\n  capabilities = ["pull", "resolve"]\n',
      );
      for (const host of ['registry.example.com:5000', '10.0.0.1:5000', '127.0.0.1'])
        expect(() => trustLoopbackRegistry(hosts, host)).toThrow(`${host} is not 127.0.0.1:<port>`);
    } finally {
      rmSync(hosts, { recursive: true, force: true });
    }
  });
});

describe('the isolated pod network', () => {
  it('is a bridge with no gateway, no masquerade and no routes', () => {
    const net = isolatedPodNetwork('/tmp/ipam') as { plugins: Record<string, any>[] };
    expect(net.plugins).toHaveLength(1);
    expect(net.plugins[0]).toMatchObject({
      type: 'bridge',
      bridge: POD_BRIDGE,
      isGateway: false,
      isDefaultGateway: false,
      ipMasq: false,
      ipam: { type: 'host-local', routes: [], dataDir: '/tmp/ipam' },
    });
  });
});

describe('kubelet configuration', () => {
  const cfg = kubeletConfig('/tmp/kd-node-x', '/tmp/kd-node-x/containerd/containerd.sock', '/tmp/ca.crt') as Record<
    string,
    any
  >;

  it('has the settings cgroup v1 hosts without CAP_SYS_RESOURCE need, on loopback only', () => {
    expect(cfg).toMatchObject({
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      failSwapOn: false,
      readOnlyPort: 0,
      address: '127.0.0.1',
      healthzBindAddress: '127.0.0.1',
      containerRuntimeEndpoint: 'unix:///tmp/kd-node-x/containerd/containerd.sock',
      podLogsDir: '/tmp/kd-node-x/pod-logs',
      makeIPTablesUtilChains: false,
      imageGCHighThresholdPercent: 100,
    });
    expect(cfg.authentication).toEqual({
      x509: { clientCAFile: '/tmp/ca.crt' },
      webhook: { enabled: false },
      anonymous: { enabled: false },
    });
    expect(cfg.registerWithTaints).toBeUndefined();
  });

  it("registers the test node's taint when asked", () => {
    expect(kubeletConfig('/d', '/s', '/c', true)).toMatchObject({ registerWithTaints: [TEST_NODE_TAINT] });
  });
});
