/**
 * The small API cluster tests use: the control plane's connection details, a client-node KubeConfig,
 * a namespace of the test file's own, and kubectl/helm run against the test kubeconfig.
 */
import { afterAll, beforeAll, expect } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { randomBytes } from 'node:crypto';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ControlPlaneInfo } from '../controlplane/controlplane.js';
import { createNamespace } from './namespaces.js';
import { run, runKubectl, type RunResult } from './processes.js';

export function controlPlaneInfo(): ControlPlaneInfo {
  const path = process.env.KD_TEST_CONTROLPLANE;
  if (!path) throw new Error('KD_TEST_CONTROLPLANE is not set: run cluster tests through jest (npm test)');
  return JSON.parse(readFileSync(path, 'utf8')) as ControlPlaneInfo;
}

export function kubeConfigFor(info: ControlPlaneInfo = controlPlaneInfo()): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(info.kubeconfigPath);
  return kc;
}

/** A DNS-1123 namespace name derived from the test file, unique per run. */
export function namespaceName(seed: string): string {
  const base = seed
    .toLowerCase()
    .replace(/\.test\.ts$/, '')
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return `${base.slice(0, 50)}-${randomBytes(3).toString('hex')}`.replace(/^-/, 'ns-');
}

export interface TestEnv {
  readonly info: ControlPlaneInfo;
  readonly kc: KubeConfig;
  readonly namespace: string;
  kubectl(args: string[], opts?: { input?: string; namespace?: string | false }): Promise<RunResult>;
  helm(args: string[], opts?: { input?: string }): Promise<RunResult>;
}

/**
 * Call once at the top of a cluster test file: creates the file's namespace before its tests and
 * deletes it after (no namespace controller runs, so it stays Terminating; names never repeat).
 */
export function useTestEnv(seed = basename(expect.getState().testPath ?? 'test')): TestEnv {
  let info: ControlPlaneInfo | undefined;
  let kc: KubeConfig | undefined;
  const namespace = namespaceName(seed);
  beforeAll(async () => {
    info = controlPlaneInfo();
    kc = kubeConfigFor(info);
    await createNamespace(kc, namespace);
  });
  afterAll(async () => {
    if (kc)
      await kc
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: namespace })
        .catch(() => undefined);
  });
  const need = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('useTestEnv() values are available inside tests and hooks only');
    return v;
  };
  return {
    get info() {
      return need(info);
    },
    get kc() {
      return need(kc);
    },
    namespace,
    kubectl: (args, opts) => runKubectl(need(info), namespace, args, opts),
    helm(args, opts = {}) {
      const i = need(info);
      return run(i.binDir.helm, ['--kubeconfig', i.kubeconfigPath, ...args], {
        input: opts.input,
        // helm writes caches and config; keep them out of $HOME.
        env: {
          HELM_CACHE_HOME: `${i.dir}/helm/cache`,
          HELM_CONFIG_HOME: `${i.dir}/helm/config`,
          HELM_DATA_HOME: `${i.dir}/helm/data`,
        },
      });
    },
  };
}
