/**
 * The real KubeDirector operator (bluek8s/kubedirector, built by test/controlplane/build-kubedirector.sh
 * from ../shared/third_party/kubedirector with its listeners and webhook registration confined to
 * loopback) run as a local process against a test control plane, installed the way its deploy/ does it:
 * its CRDs, its ServiceAccount + ClusterRole + ClusterRoleBinding (rbac-default.yaml, namespace `default`)
 * and its Deployment (scaled to 0: KubeDirector looks itself up by OPERATOR_NAME to own what it creates,
 * but its image cannot be pulled here). It acts with its ServiceAccount's token, not as admin.
 *
 * Why a local process and not a pod: the API server must reach its validating webhook, and a pod's
 * address would only be reachable through a Service ClusterIP — a private-range address that is never
 * dialed here. A local process serves the webhook on 127.0.0.1 and registers it by URL.
 *
 * Before KubeDirector starts, installLoopbackGuard() makes the API server refuse any webhook
 * configuration that names a Service or a URL host other than 127.0.0.1 — so even an unpatched build
 * could not make the API server dial out; it would fail to start instead.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { binCacheDir } from '../controlplane/binaries.js';
import { freePort } from '../controlplane/net.js';
import { kubeconfigYaml } from '../controlplane/controlplane.js';
import { ok, repoRoot, sleep, type RunResult } from './processes.js';
import { waitEstablished } from './crds.js';

/** The namespace deploy/kubedirector/rbac-default.yaml binds KubeDirector's ServiceAccount in. */
export const KD_NAMESPACE = 'default';
export const KD_OPERATOR_NAME = 'kubedirector';
export const KD_WEBHOOK_NAME = 'kubedirector-webhook';
export const KD_VALIDATOR_SERVICE = 'kubedirector-validator';

export interface KubeDirectorHost {
  readonly info: {
    readonly dir: string;
    readonly server: string;
    readonly caPem: string;
    readonly kubeconfigPath: string;
    readonly binDir: { readonly kubectl: string };
  };
  kubectl(args: string[], opts?: { input?: string; namespace?: string | false }): Promise<RunResult>;
}

/** Path of the operator binary and of its deploy/ tree, building them first when missing or stale. */
export async function kubedirectorBinary(): Promise<{ bin: string; deploy: string }> {
  const script = join(repoRoot, 'test', 'controlplane', 'build-kubedirector.sh');
  // Always run the script: it only hashes the tree when the cache is current (well under a second).
  await new Promise<void>((resolve, reject) => {
    const child = spawn('nice', ['-n', '10', 'bash', script], { stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`build-kubedirector.sh exited ${code}`))));
  });
  const dir = binCacheDir();
  return { bin: join(dir, 'kubedirector'), deploy: join(dir, 'kubedirector-deploy') };
}

export const LOOPBACK_GUARD_NAME = 'kd-tests-webhooks-loopback-only';

/**
 * A ValidatingAdmissionPolicy (+ binding, Deny) refusing every Mutating/ValidatingWebhookConfiguration
 * with a webhook that names clientConfig.service or a URL not on https://127.0.0.1:<port>/.
 */
export async function installLoopbackGuard(host: KubeDirectorHost): Promise<void> {
  const loopbackOnly =
    "object.webhooks.all(w, !has(w.clientConfig.service) && has(w.clientConfig.url) && w.clientConfig.url.matches('^https://127[.]0[.]0[.]1:[0-9]+(/|$)'))";
  const docs = [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: LOOPBACK_GUARD_NAME },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: ['admissionregistration.k8s.io'],
              apiVersions: ['v1'],
              operations: ['CREATE', 'UPDATE'],
              resources: ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'],
            },
          ],
        },
        validations: [
          {
            expression: `!has(object.webhooks) || ${loopbackOnly}`,
            message:
              'test harness: webhooks must use clientConfig.url on https://127.0.0.1 (never clientConfig.service)',
          },
        ],
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: LOOPBACK_GUARD_NAME },
      spec: { policyName: LOOPBACK_GUARD_NAME, validationActions: ['Deny'] },
    },
  ];
  ok(
    await host.kubectl(['apply', '--server-side', '-f', '-'], {
      input: docs.map((d) => JSON.stringify(d)).join('\n---\n'),
      namespace: false,
    }),
    'apply the loopback guard policy',
  );
}

/** KubeDirector's CRDs, RBAC and (scaled-to-0) Deployment from its deploy/ tree. */
export async function installKubeDirector(host: KubeDirectorHost, deploy: string): Promise<void> {
  const kd = join(deploy, 'kubedirector');
  const crds = readdirSync(kd)
    .filter((f) => f.endsWith('_crd.yaml'))
    .map((f) => join(kd, f));
  if (crds.length < 3) throw new Error(`expected KubeDirector's CRDs in ${kd}, found ${crds.join(', ') || 'none'}`);
  ok(await host.kubectl(['apply', ...crds.flatMap((f) => ['-f', f])], { namespace: false }), 'apply KubeDirector CRDs');
  await waitEstablished(
    host,
    crds.flatMap((f) => ['-f', f]),
  );
  ok(
    await host.kubectl(['apply', '-n', KD_NAMESPACE, '-f', join(kd, 'rbac-default.yaml')], { namespace: false }),
    'apply rbac-default.yaml',
  );
  // The Deployment as deploy/ has it, scaled to 0 (its image is not pullable here; the process is local).
  const dep = readFileSync(join(kd, 'deployment-prebuilt.yaml'), 'utf8').replace(/replicas: 1\b/, 'replicas: 0');
  if (!/replicas: 0\b/.test(dep)) throw new Error('deployment-prebuilt.yaml: no `replicas: 1` line to scale to 0');
  ok(
    await host.kubectl(['apply', '-n', KD_NAMESPACE, '-f', '-'], { input: dep, namespace: false }),
    'apply Deployment',
  );
}

export interface KubeDirectorProcess {
  readonly pid: number;
  readonly validatorPort: number;
  readonly metricsPort: number;
  output(): string;
  readonly exited: boolean;
  stop(): Promise<void>;
}

/** A kubeconfig for KubeDirector's ServiceAccount (a bound token from the TokenRequest API). */
async function serviceAccountKubeconfig(host: KubeDirectorHost): Promise<string> {
  const r = ok(
    await host.kubectl(['create', 'token', 'kubedirector', '-n', KD_NAMESPACE, '--duration=6h'], { namespace: false }),
    'create a token for the kubedirector ServiceAccount',
  );
  const token = r.stdout.trim();
  const path = join(host.info.dir, 'kubedirector.kubeconfig');
  const admin = JSON.parse(kubeconfigYaml(host.info.server, host.info.caPem, '', '')) as {
    users: { user: Record<string, string> }[];
  };
  admin.users[0]!.user = { token };
  writeFileSync(path, JSON.stringify(admin), { mode: 0o600 });
  return path;
}

/** Starts the operator; resolves when its validator answers /healthz on 127.0.0.1. */
export async function startKubeDirector(host: KubeDirectorHost, bin: string): Promise<KubeDirectorProcess> {
  if (!existsSync(bin)) throw new Error(`no KubeDirector binary at ${bin}`);
  const [validatorPort, metricsPort] = [await freePort(), await freePort()];
  const kubeconfig = await serviceAccountKubeconfig(host);
  const child: ChildProcess = spawn(bin, [], {
    env: {
      PATH: process.env.PATH,
      HOME: host.info.dir,
      KUBECONFIG: kubeconfig,
      MY_NAMESPACE: KD_NAMESPACE,
      OPERATOR_NAME: KD_OPERATOR_NAME,
      WATCH_NAMESPACE: '',
      KD_VALIDATOR_PORT: String(validatorPort),
      KD_METRICS_PORT: String(metricsPort),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (c: Buffer) => {
    out = (out + c.toString()).slice(-300_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited = false;
  const exit = new Promise<void>((r) =>
    child.once('exit', () => {
      exited = true;
      r();
    }),
  );
  const p: KubeDirectorProcess = {
    pid: child.pid!,
    validatorPort,
    metricsPort,
    output: () => out,
    get exited() {
      return exited;
    },
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(t);
    },
  };
  const end = Date.now() + 120_000;
  for (;;) {
    // The validator's certificate must verify against KubeDirector's own CA (its Secret) for 127.0.0.1:
    // the same check the API server makes when it calls the webhook by URL.
    const up = await validatorCa(host)
      .then((ca) => (ca ? healthz(validatorPort, ca) : false))
      .catch(() => false);
    if (up) return p;
    if (exited) throw new Error(`KubeDirector exited before its validator was up:\n${out.slice(-6000)}`);
    if (Date.now() > end) {
      await p.stop();
      throw new Error(
        `KubeDirector's validator not up on 127.0.0.1:${validatorPort} after 120 s:\n${out.slice(-6000)}`,
      );
    }
    await sleep(300);
  }
}

/** The CA KubeDirector signed its validator's certificate with (Secret kubedirector-validator-secret). */
export async function validatorCa(host: KubeDirectorHost): Promise<string | undefined> {
  const r = await host.kubectl(['get', 'secret', 'kubedirector-validator-secret', '-n', KD_NAMESPACE, '-o', 'json'], {
    namespace: false,
  });
  if (r.code !== 0) return undefined;
  const data = (JSON.parse(r.stdout) as { data?: Record<string, string> }).data ?? {};
  return data['ca.crt'] ? Buffer.from(data['ca.crt'], 'base64').toString() : undefined;
}

function healthz(port: number, ca: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = https.get({ host: '127.0.0.1', port, path: '/healthz', ca, timeout: 3000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}
