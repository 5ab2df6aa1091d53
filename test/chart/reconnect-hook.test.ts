/**
 * reconciler.reconnectHook in the chart: off by default (no pods/exec, no flag); on, the reconciler gets
 * `create` on pods/exec and the flags, and the pod write policy lets its account exec exactly the
 * commands the hooks use — checked on the real API server (the policy is evaluated at admission, before
 * the API server looks for the pod's node, so a Pending pod is enough).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { GUESTCONFIG_SIDECAR } from '@kd-connections/shared/domain';
import {
  notifyCommand,
  READ_FILES_COMMAND,
  RECONNECT_COMMAND,
  RECONNECT_STARTSCRIPT,
} from '@kd-connections/shared/plan';
import { useTestEnv } from '../support/cluster.js';
import { kubectlOk } from '../support/kd-objects.js';
import { eventually, run } from '../support/processes.js';
import {
  CHART,
  containerArgs,
  find,
  helmTemplate,
  one,
  randomName,
  serviceAccountKubeconfig,
  sets,
  TempDir,
  type Doc,
} from './chart-support.js';

const env = useTestEnv();
const ns = env.namespace;
const REL = randomName('kdr');
const fullname = `${REL}-kd-connections`;
const ON = sets({ 'reconciler.reconnectHook.enabled': true });
const rulesOf = (docs: Doc[]) =>
  docs.filter((d) => d.kind === 'ClusterRole' || d.kind === 'Role').flatMap((d) => d.rules as Doc[]);
const NOTIFY = notifyCommand(RECONNECT_STARTSCRIPT, { seq: 1, op: 'addnodes', role: 'worker', fqdns: ['a.x', 'b.x'] });
const execRules = (docs: Doc[]) => rulesOf(docs).filter((r) => (r.resources as string[]).includes('pods/exec'));

describe('reconciler.reconnectHook as rendered', () => {
  it('off by default: no pods/exec anywhere, no reconnect flags, the policy as before', async () => {
    const { docs } = await helmTemplate(env, REL, ns);
    expect(execRules(docs)).toEqual([]);
    expect(containerArgs(one(docs, 'Deployment', `${fullname}-reconciler`)).join(' ')).not.toContain('--reconnect');
    const policy = one(docs, 'ValidatingAdmissionPolicy', `${fullname}-reconciler-pod-writes`);
    expect(policy.spec.matchConditions.map((c: Doc) => c.name)).toEqual(['reconciler']);
  });

  it('on: create on pods/exec (only), the flags, and a policy exception naming exactly the hook commands', async () => {
    const { docs } = await helmTemplate(env, REL, ns, [...ON, ...sets({ 'reconciler.reconnectHook.timeout': '45s' })]);
    expect(execRules(docs)).toEqual([{ apiGroups: [''], resources: ['pods/exec'], verbs: ['create'] }]);
    const args = containerArgs(one(docs, 'Deployment', `${fullname}-reconciler`));
    expect(args).toEqual(expect.arrayContaining(['--reconnect-hook=true', '--reconnect-timeout=45s']));
    const policy = one(docs, 'ValidatingAdmissionPolicy', `${fullname}-reconciler-pod-writes`);
    const exception = policy.spec.matchConditions.find((c: Doc) => c.name === 'not-the-reconnect-hook');
    // The commands the policy allows are the ones the reconciler runs.
    const list = (xs: string[]) => `[${xs.map((x) => `'${x}'`).join(', ')}]`;
    expect(exception.expression).toContain(list(RECONNECT_COMMAND));
    expect(exception.expression).toContain(list(READ_FILES_COMMAND));
    NOTIFY.filter((w, i) => i !== 8 && i !== 10).forEach((w) => expect(exception.expression).toContain(`'${w}'`));
    // Only CEL of the oldest Kubernetes the chart supports (no list.slice, 1.35's).
    expect(exception.expression).not.toContain('slice(');
    expect(exception.expression).toContain(`'${GUESTCONFIG_SIDECAR}'`);
  });

  it('values.schema.json refuses a timeout that is not a duration', async () => {
    const r = await env.helm([
      'template',
      REL,
      CHART,
      ...ON,
      ...sets({ 'reconciler.reconnectHook.timeout': '2 minutes' }),
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('reconnectHook');
  });
});

describe('the pod write policy with the reconnect hook on (real API server)', () => {
  const dir = new TempDir();
  const sa = 'reconnect-rec';
  let kubeconfig: string;
  let applied: Doc[] = [];
  const execAs = (args: string[]) =>
    run(env.info.binDir.kubectl, ['--kubeconfig', kubeconfig, '--namespace', ns, 'exec', 'pending-0', ...args]);
  const POLICY = `ValidatingAdmissionPolicy '${fullname}-reconciler-pod-writes'`;

  beforeAll(async () => {
    await kubectlOk(env, ['create', 'serviceaccount', sa]);
    await kubectlOk(env, ['create', 'role', sa, '--verb=get', '--resource=pods']);
    await kubectlOk(env, ['create', 'role', `${sa}-exec`, '--verb=create', '--resource=pods/exec']);
    for (const r of [sa, `${sa}-exec`])
      await kubectlOk(env, ['create', 'rolebinding', r, `--role=${r}`, `--serviceaccount=${ns}:${sa}`]);
    // A pod that never runs (no toleration for the test node's taint): the policy answers before the node.
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'pending-0' },
      spec: {
        containers: [
          { name: 'app', image: 'registry.invalid/app:1' },
          { name: GUESTCONFIG_SIDECAR, image: 'registry.invalid/sidecar:1' },
        ],
      },
    };
    await kubectlOk(env, ['create', '-f', '-'], { input: JSON.stringify(pod) });
    const { docs } = await helmTemplate(env, REL, ns, [
      ...ON,
      ...sets({ 'reconciler.serviceAccount.create': false, 'reconciler.serviceAccount.name': sa }),
    ]);
    applied = [...find(docs, 'ValidatingAdmissionPolicy'), ...find(docs, 'ValidatingAdmissionPolicyBinding')];
    await kubectlOk(env, ['apply', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: applied }),
    });
    kubeconfig = await serviceAccountKubeconfig(env, dir, ns, sa);
  }, 120_000);

  afterAll(async () => {
    for (const d of applied) await env.kubectl(['delete', d.kind, d.metadata.name, '--ignore-not-found']);
    dir.remove();
  });

  it('refuses any other exec, and lets the hook commands through to the pod', async () => {
    // The policy takes effect shortly after it is created.
    await eventually(
      'the policy refuses a shell',
      async () => (await execAs(['-c', 'app', '--', 'sh'])).stderr.includes(POLICY),
      30_000,
      500,
    );
    for (const args of [
      ['-c', 'app', '--', 'sh', '-c', 'id'],
      ['-c', GUESTCONFIG_SIDECAR, '--', 'cat', '/etc/shadow'],
      ['-c', 'app', '--', ...RECONNECT_COMMAND.slice(0, 2), `${RECONNECT_COMMAND[2]}; id`],
      ['-i', '-c', 'app', '--', ...RECONNECT_COMMAND],
      ['-c', GUESTCONFIG_SIDECAR, '--', ...RECONNECT_COMMAND],
      // --addnodes with a word more, another event, or the script line changed.
      ['-c', 'app', '--', ...NOTIFY, 'x'],
      ['-c', 'app', '--', ...NOTIFY.slice(0, 4), '--configure', ...NOTIFY.slice(5)],
      ['-c', 'app', '--', 'sh', '-c', 'id; /opt/guestconfig/*/startscript "$@"', ...NOTIFY.slice(3)],
      ['-c', GUESTCONFIG_SIDECAR, '--', ...NOTIFY],
      // Another flag in the role's or the fqdns' place.
      ['-c', 'app', '--', ...NOTIFY.slice(0, 8), '--configure', ...NOTIFY.slice(9)],
      ['-c', 'app', '--', ...NOTIFY.slice(0, 10), 'a.x,--configure'],
    ]) {
      const r = await execAs(args);
      expect({ args, code: r.code, policy: r.stderr.includes(POLICY) }).toEqual({ args, code: 1, policy: true });
    }
    for (const args of [
      ['-c', 'app', '--', ...RECONNECT_COMMAND],
      ['-c', GUESTCONFIG_SIDECAR, '--', ...READ_FILES_COMMAND],
      ['-c', 'app', '--', ...NOTIFY],
      [
        '-c',
        'app',
        '--',
        ...notifyCommand(RECONNECT_STARTSCRIPT, { seq: 2, op: 'delnodes', role: 'w', fqdns: ['b', 'c'] }),
      ],
    ]) {
      const r = await execAs(args);
      // Admitted: what fails now is the pod (it has no node), not the policy.
      expect({ args, policy: r.stderr.includes(POLICY), stderr: r.stderr }).toEqual({
        args,
        policy: false,
        stderr: expect.stringContaining('pending-0 does not have a host assigned'),
      });
    }
  });
});
