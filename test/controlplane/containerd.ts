/**
 * containerd for the harness's node: root, state, socket and CNI configuration all under the run's
 * folder, the locally built pause image as sandbox image, the harness's own images imported from archives,
 * and the product's images pulled from a registry on 127.0.0.1 (hosts in `registryHosts`, see
 * trustLoopbackRegistry), the way a user's node pulls them. Settings that were each found by a failure on these machines:
 * - restrict_oom_score_adj: without CAP_SYS_RESOURCE runc cannot lower oom_score_adj to -998 and sandbox
 *   creation fails with only "can't get final child's PID from pipe: EOF";
 * - a CNI configuration, or the runtime reports its network not ready and the node stays NotReady:
 *   here an isolated bridge (isolatedPodNetwork) that lets no pod reach anything outside it; member
 *   pods use hostNetwork and stay on 127.0.0.1.
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface ContainerdPaths {
  root: string;
  state: string;
  socket: string;
  cniConfDir: string;
  /** Where containerd's "opt" plugin installs things (default /opt/containerd). */
  opt: string;
  config: string;
  /** The registry host configuration (config_path): one <host>/hosts.toml per registry. */
  registryHosts: string;
}

export function containerdPaths(dir: string): ContainerdPaths {
  return {
    root: join(dir, 'root'),
    state: join(dir, 'state'),
    socket: join(dir, 'containerd.sock'),
    cniConfDir: join(dir, 'cni'),
    opt: join(dir, 'opt'),
    config: join(dir, 'config.toml'),
    registryHosts: join(dir, 'certs.d'),
  };
}

/** containerd 1.6 configuration (version 2 schema). */
export function containerdConfig(p: ContainerdPaths, sandboxImage: string, cniBinDir: string): string {
  const q = (s: string) => JSON.stringify(s);
  return `version = 2
root = ${q(p.root)}
state = ${q(p.state)}
disabled_plugins = ["io.containerd.grpc.v1.cri.btrfs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = ${q(p.socket)}

[ttrpc]
  address = ${q(`${p.socket}.ttrpc`)}

[debug]
  level = "warn"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = ${q(p.opt)}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${q(sandboxImage)}
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = ${q(join(p.state, 'runc'))}
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ${q(p.registryHosts)}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${q(cniBinDir)}
    conf_dir = ${q(p.cniConfDir)}
    max_conf_num = 1
`;
}

/** The host-side bridge of pods without host network (a fixed name: one node per host). */
export const POD_BRIDGE = 'kd-cni0';
/** Their addresses: a private range unused on these machines, reachable only from the bridge. */
export const POD_SUBNET = '10.254.254.0/24';

/**
 * The node's only pod network: a bridge with no address on the host side, no gateway, no routes and no
 * masquerade, so a pod without host network reaches the other pods on the bridge and nothing else —
 * not the host, not beyond it. (containerd needs an eth0 with an address; loopback alone is refused.)
 */
export function isolatedPodNetwork(ipamDataDir: string): object {
  return {
    cniVersion: '0.4.0',
    name: 'kd-isolated',
    plugins: [
      {
        type: 'bridge',
        bridge: POD_BRIDGE,
        isGateway: false,
        isDefaultGateway: false,
        ipMasq: false,
        hairpinMode: false,
        ipam: { type: 'host-local', ranges: [[{ subnet: POD_SUBNET }]], routes: [], dataDir: ipamDataDir },
      },
    ],
  };
}

/**
 * Creates the bridge before any pod does, with IPv6 off: otherwise it gets a link-local address and a
 * pod could reach the host's services on fe80::…%eth0. The bridge plugin reuses it as it is.
 */
export function createPodBridge(): void {
  const ip = (...args: string[]) => {
    const r = spawnSync('ip', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr || r.error?.message}`);
  };
  if (!existsSync(`/sys/class/net/${POD_BRIDGE}`)) ip('link', 'add', POD_BRIDGE, 'type', 'bridge');
  writeFileSync(`/proc/sys/net/ipv6/conf/${POD_BRIDGE}/disable_ipv6`, '1');
  ip('link', 'set', POD_BRIDGE, 'up');
}

export function writeContainerdFiles(p: ContainerdPaths, sandboxImage: string, cniBinDir: string): void {
  for (const d of [p.root, p.state, p.cniConfDir, p.registryHosts]) mkdirSync(d, { recursive: true });
  writeFileSync(
    join(p.cniConfDir, '10-kd-isolated.conflist'),
    JSON.stringify(isolatedPodNetwork(join(p.state, 'cni-ipam')), null, 2),
  );
  writeFileSync(p.config, containerdConfig(p, sandboxImage, cniBinDir));
}

/** Imports an OCI archive into the namespace the CRI plugin uses. */
export async function importImage(ctr: string, socket: string, archive: string): Promise<void> {
  await run(ctr, ['--address', socket, '-n', 'k8s.io', 'images', 'import', archive]);
}

/**
 * Lets the node pull from a registry on this machine's loopback over plain HTTP (`host` is
 * `127.0.0.1:<port>`): containerd reads the hosts file at each pull, so a registry started after the node
 * is usable at once. Only a loopback host is accepted: the node never pulls from anywhere else.
 */
export function trustLoopbackRegistry(registryHosts: string, host: string): void {
  if (!/^127\.0\.0\.1:\d+$/.test(host)) throw new Error(`trustLoopbackRegistry: ${host} is not 127.0.0.1:<port>`);
  mkdirSync(join(registryHosts, host), { recursive: true });
  writeFileSync(
    join(registryHosts, host, 'hosts.toml'),
    `server = "http://${host}"\n\n[host."http://${host}"]\n  capabilities = ["pull", "resolve"]\n`,
  );
}
