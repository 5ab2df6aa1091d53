/**
 * Both services under the chart's restricted security context.
 *
 * 1. The chart's two Deployments (helm template, default values) are created with server-side dry-run
 *    in a namespace labelled pod-security.kubernetes.io/enforce=restricted: Pod Security Admission
 *    accepts them without a warning, and accepts (enforce) a Pod made from each pod template; a pod
 *    template with one setting loosened is refused, so the check can fail. The securityContext fields
 *    are asserted one by one.
 * 2. The built services need no writable filesystem and no root: each runs as uid/gid 65532 (setpriv
 *    --reuid 65532 --regid 65532 --clear-groups) with the chart's container arguments, in a working
 *    directory it cannot write, with TMPDIR and HOME pointing there too, the code not writable to it
 *    either; each starts, becomes ready and serves, and leaves no file behind in /tmp. The code runs
 *    from a root-owned copy of the built workspaces (hard links where possible), because the checkout
 *    may sit below a directory uid 65532 cannot enter (/root, a mktemp -d).
 *
 * RBAC of both service accounts is verified by the chart tests (test/chart/install.test.ts and
 * test/chart/bootstrap-rbac.test.ts, `kubectl auth can-i --list`).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useTestEnv } from '../support/cluster.js';
import { repoRoot, run, type ServiceProcess } from '../support/processes.js';
import { startAdmission, startReconciler } from '../support/services.js';
import { freePort } from '../controlplane/net.js';
import { containerArgs, helmTemplate, one, withArgs, withoutBootstrapArgs, type Doc } from '../chart/chart-support.js';
import { installCrds } from '../support/crds.js';

const env = useTestEnv();
// The uid and gid the chart runs both containers as (kd.podSecurityContext, distroless "nonroot").
const UID = 65532;
const AS_NOBODY = ['setpriv', `--reuid=${UID}`, `--regid=${UID}`, '--clear-groups', '--'];
let docs: Doc[];
let admissionDeployment: Doc;
let reconcilerDeployment: Doc;
const started: ServiceProcess[] = [];
let dir: string;
let stage: string;

beforeAll(async () => {
  await installCrds(env);
  docs = (await helmTemplate(env, 'kd', env.namespace)).docs;
  admissionDeployment = one(docs, 'Deployment', 'kd-kd-connections-admission');
  reconcilerDeployment = one(docs, 'Deployment', 'kd-kd-connections-reconciler');
  // The pods below run as the chart's ServiceAccounts; the API server admits them only once those exist.
  const accounts = docs.filter((d) => d.kind === 'ServiceAccount');
  const created = await env.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: accounts }),
  });
  expect({ code: created.code, stderr: created.stderr, accounts: accounts.length }).toEqual({
    code: 0,
    stderr: '',
    accounts: 2,
  });
  const label = await env.kubectl(
    [
      'label',
      'namespace',
      env.namespace,
      'pod-security.kubernetes.io/enforce=restricted',
      'pod-security.kubernetes.io/enforce-version=latest',
      'pod-security.kubernetes.io/warn=restricted',
      'pod-security.kubernetes.io/warn-version=latest',
    ],
    { namespace: false },
  );
  expect(label.code).toBe(0);
}, 60_000);

afterAll(async () => {
  for (const p of started) await p.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (stage) rmSync(stage, { recursive: true, force: true });
});

/** A copy of what the built services load (package manifests, dist/, node_modules), readable by anyone. */
async function stageRuntime(): Promise<string> {
  const to = mkdtempSync(join(tmpdir(), 'kd-nobody-code-'));
  chmodSync(to, 0o755);
  const paths = ['package.json', 'node_modules'];
  for (const ws of ['shared', 'certs', 'admission', 'reconciler']) {
    mkdirSync(join(to, ws), { mode: 0o755 });
    paths.push(join(ws, 'package.json'), join(ws, 'dist'));
  }
  for (const p of paths) {
    // Hard links are instant on one filesystem; a plain copy otherwise. Symlinks (the workspaces in
    // node_modules/@kd-connections) stay relative, so they point into the copy.
    const linked = await run('cp', ['-al', join(repoRoot, p), join(to, p)]);
    if (linked.code !== 0) ok(await run('cp', ['-a', join(repoRoot, p), join(to, p)]), `copying ${p}`);
  }
  return to;
}

function ok(r: { code: number | null; stderr: string }, what: string): void {
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${r.stderr}`);
}

const dryRunCreate = (obj: Doc) =>
  env.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { input: JSON.stringify(obj) });

function podFrom(deployment: Doc, mutate: (spec: any) => void = () => {}): Doc {
  const spec = structuredClone(deployment.spec.template.spec);
  mutate(spec);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `${deployment.metadata.name}-probe`, labels: deployment.spec.template.metadata.labels },
    spec,
  };
}

describe('the chart under Pod Security Admission "restricted"', () => {
  it.each([
    ['admission', () => admissionDeployment],
    ['reconciler', () => reconcilerDeployment],
  ])('%s: the Deployment and a Pod from its template are admitted', async (_name, deployment) => {
    const d = deployment();
    const r = await dryRunCreate(d);
    expect(r.code).toBe(0);
    // warn=restricted: a Deployment whose template violates the profile is admitted WITH a warning.
    expect(r.stderr).not.toMatch(/would violate PodSecurity/);
    // enforce=restricted applies to Pods: this is the one that would be refused.
    const pod = await dryRunCreate(podFrom(d));
    expect({ code: pod.code, stderr: pod.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(pod.stdout).metadata.namespace).toBe(env.namespace);
  });

  it('a pod template with one setting loosened is refused (the check can fail)', async () => {
    const loosened: [string, (spec: any) => void][] = [
      ['allowPrivilegeEscalation', (s) => (s.containers[0].securityContext.allowPrivilegeEscalation = true)],
      [
        'runAsNonRoot',
        (s) => (delete s.securityContext.runAsNonRoot, delete s.containers[0].securityContext.runAsNonRoot),
      ],
      ['capabilities', (s) => (s.containers[0].securityContext.capabilities = { drop: ['NET_RAW'] })],
      [
        'seccompProfile',
        (s) => (delete s.securityContext.seccompProfile, delete s.containers[0].securityContext.seccompProfile),
      ],
    ];
    for (const [what, loosen] of loosened) {
      const r = await dryRunCreate(podFrom(admissionDeployment, loosen));
      expect({ what, code: r.code }).toEqual({ what, code: 1 });
      expect(r.stderr).toContain('violates PodSecurity "restricted:latest"');
    }
  });

  it('both containers: non-root, no privilege escalation, all capabilities dropped, RuntimeDefault seccomp, read-only root', () => {
    for (const d of [admissionDeployment, reconcilerDeployment]) {
      const pod = d.spec.template.spec;
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      expect(pod.containers).toHaveLength(1);
      expect(pod.containers[0].securityContext).toEqual({
        runAsNonRoot: true,
        runAsUser: 65532,
        runAsGroup: 65532,
        allowPrivilegeEscalation: false,
        privileged: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      // The only writable mount is an emptyDir at /tmp (bounded); the pod runs nothing else.
      const writable = pod.containers[0].volumeMounts.filter((m: any) => !m.readOnly);
      expect(writable).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
      expect(pod.volumes.find((v: any) => v.name === 'tmp')).toEqual({ name: 'tmp', emptyDir: { sizeLimit: '16Mi' } });
      expect(pod.initContainers ?? []).toEqual([]);
    }
  });
});

/** `test -w path` as uid 65532. */
const writableByNobody = async (path: string) =>
  (await run(AS_NOBODY[0]!, [...AS_NOBODY.slice(1), 'test', '-w', path])).code === 0;

function httpsGet(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((ok, fail) => {
    https
      .get(url, { ca, agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
      })
      .on('error', fail);
  });
}

function uidOf(pid: number): number {
  return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

describe('the built services as uid 65532 without a writable filesystem', () => {
  it('start, become ready and serve; write nothing', async () => {
    // A directory the services can read but not write: certificate, key and kubeconfig in it belong to
    // root, readable by group 65532 (the key and kubeconfig are not world-readable).
    dir = mkdtempSync(join(tmpdir(), 'kd-nobody-'));
    chmodSync(dir, 0o755);
    const put = (name: string, content: string, mode: number) => {
      const p = join(dir, name);
      writeFileSync(p, content, { mode });
      chownSync(p, 0, UID);
      chmodSync(p, mode);
      return p;
    };
    const cert = put('tls.crt', env.info.webhookServing.certPem, 0o644);
    const key = put('tls.key', env.info.webhookServing.keyPem, 0o640);
    const kubeconfig = put('kubeconfig', readFileSync(env.info.kubeconfigPath, 'utf8'), 0o640);
    stage = await stageRuntime();
    for (const p of [dir, stage, join(stage, 'admission', 'dist'), join(stage, 'reconciler', 'dist')]) {
      expect({ p, writable: await writableByNobody(p) }).toEqual({ p, writable: false });
    }
    expect(await writableByNobody('/tmp')).toBe(true); // the emptyDir the chart mounts there
    const tmpBefore = new Set(readdirSync('/tmp'));
    const since = Date.now();
    const envNonRoot = {
      KUBECONFIG: '',
      HOME: dir,
      TMPDIR: dir,
      POD_NAMESPACE: env.namespace,
      POD_NAME: 'admission-nobody',
    };

    const port = await freePort();
    const asNobody = { prefix: AS_NOBODY, cwd: dir, root: stage, kubeconfig, waitReady: false };
    const admission = await startAdmission(
      env,
      withArgs(withoutBootstrapArgs(containerArgs(admissionDeployment)), {
        port: String(port),
        'bind-address': '127.0.0.1',
        // files mode: the chart's default bootstrap mode writes a Secret, not a file; files are what
        // a cert-manager or user Secret volume gives the pod.
        'tls-mode': 'files',
        'tls-cert-file': cert,
        'tls-key-file': key,
        kubeconfig,
      }),
      { ...asNobody, port, certificateFiles: false, env: envNonRoot },
    );
    started.push(admission);
    const reconciler = await startReconciler(
      { info: env.info },
      {
        ...asNobody,
        args: withArgs(containerArgs(reconcilerDeployment), {
          'metrics-bind-address': undefined,
          kubeconfig,
          namespaces: env.namespace,
        }),
        env: { ...envNonRoot, KD_RECONCILER_LEADER_ELECT_IDENTITY: 'reconciler-nobody' },
      },
    );
    started.push(reconciler);
    const metricsPort = reconciler.port;
    const url = admission.url;
    await admission.waitReady(60_000);
    await reconciler.waitReady(60_000);
    expect(uidOf(admission.child.pid!)).toBe(UID);
    expect(uidOf(reconciler.child.pid!)).toBe(UID);

    // Serves: a review answered (denied: the app does not exist) and metrics from both.
    const review = await new Promise<{ status: number; body: string }>((ok, fail) => {
      const body = JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: 'nobody-1',
          kind: { group: 'kubedirector.hpe.com', version: 'v1beta1', kind: 'KubeDirectorCluster' },
          operation: 'CREATE',
          namespace: env.namespace,
          object: { metadata: { name: 'c', namespace: env.namespace }, spec: { app: 'missing' } },
        },
      });
      const req = https.request(url('/validate-kdcluster'), {
        method: 'POST',
        ca: env.info.webhookCaPem,
        agent: false,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body: text }));
      });
      req.on('error', fail);
      req.end(body);
    });
    expect(review.status).toBe(200);
    expect(JSON.parse(review.body).response).toMatchObject({ uid: 'nobody-1', allowed: false });
    expect((await httpsGet(url('/metrics'), env.info.webhookCaPem)).body).toContain('kd_admission_requests_total');
    expect(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()).toContain(
      'nodejs_heap_size_used_bytes',
    );

    // Nothing written: no file of uid 65532 in /tmp (the emptyDir), none in the working directory.
    const created = readdirSync('/tmp').filter((f) => !tmpBefore.has(f));
    const byNobody = created.filter((f) => {
      try {
        const st = statSync(join('/tmp', f));
        return st.uid === UID && st.mtimeMs >= since - 1000;
      } catch {
        return false;
      }
    });
    expect(byNobody).toEqual([]);
    expect(readdirSync(dir).sort()).toEqual(['kubeconfig', 'tls.crt', 'tls.key']);
    for (const p of [admission, reconciler]) {
      expect(p.logs().filter((l) => l.level === 'error')).toEqual([]);
      expect(await p.stop()).toBe(0);
    }
  }, 120_000);
});
