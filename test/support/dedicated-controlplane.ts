/**
 * A control plane of one test file's own, for fault tests that stop, compact or restart it (the shared
 * one must stay up for every other file). It offers the same TestEnv surface as useTestEnv, plus the
 * ControlPlane handle (stopApiServer/startApiServer, etcdUrl, auditLogPath). Started in beforeAll and
 * stopped in afterAll of the calling file.
 */
import { afterAll, beforeAll, expect } from '@jest/globals';
import { basename } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane, type StartOptions } from '../controlplane/controlplane.js';
import { namespaceName, runHelm, type TestEnv } from './cluster.js';
import { createNamespace } from './namespaces.js';
import { runKubectl } from './processes.js';

export interface DedicatedTestEnv extends TestEnv {
  readonly cp: ControlPlane;
}

export function useDedicatedControlPlane(
  opts: StartOptions = {},
  seed = basename(expect.getState().testPath ?? 'test'),
): DedicatedTestEnv {
  let cp: ControlPlane | undefined;
  let kc: KubeConfig | undefined;
  const namespace = namespaceName(seed);
  beforeAll(async () => {
    cp = await startControlPlane(opts);
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    await createNamespace(kc, namespace);
  }, 180_000);
  afterAll(async () => {
    await cp?.stop();
  }, 60_000);
  const need = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('useDedicatedControlPlane() values are available inside tests and hooks only');
    return v;
  };
  return {
    get cp() {
      return need(cp);
    },
    get info() {
      return need(cp).info();
    },
    get kc() {
      return need(kc);
    },
    namespace,
    kubectl: (args, opts) => runKubectl(need(cp), namespace, args, opts),
    helm: (args, opts) => runHelm(need(cp).info(), args, opts),
  };
}
