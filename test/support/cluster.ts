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

const versions = new Map<string, Promise<string>>();

/** The control plane's Kubernetes version (e.g. v1.36.3), from its kube-apiserver binary, asked once. */
export function apiServerVersion(info: ControlPlaneInfo): Promise<string> {
  const bin = info.binDir['kube-apiserver'];
  let v = versions.get(bin);
  if (!v) {
    v = run(bin, ['--version']).then((r) => {
      const m = /v\d+\.\d+\.\d+\S*/.exec(r.stdout);
      if (r.code !== 0 || !m) throw new Error(`kube-apiserver --version: ${r.stdout}${r.stderr}`);
      return m[0];
    });
    versions.set(bin, v);
  }
  return v;
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
    helm: (args, opts) => runHelm(need(info), args, opts),
  };
}

/** helm against a control plane, its caches and config in the control plane's folder (not $HOME). */
export async function runHelm(i: ControlPlaneInfo, args: string[], opts: { input?: string } = {}): Promise<RunResult> {
  // helm template renders for Kubernetes 1.20 unless told; the chart's kubeVersion needs the real one.
  const version = args[0] === 'template' && !args.includes('--kube-version') ? await apiServerVersion(i) : undefined;
  const extra = version ? ['--kube-version', version] : [];
  return run(i.binDir.helm, ['--kubeconfig', i.kubeconfigPath, ...args, ...extra], {
    input: opts.input,
    env: helmEnv(i),
  });
}

/** helm's cache, config and data (registry logins, repositories) in the control plane's folder. */
export function helmEnv(i: ControlPlaneInfo): Record<string, string> {
  return {
    HELM_CACHE_HOME: `${i.dir}/helm/cache`,
    HELM_CONFIG_HOME: `${i.dir}/helm/config`,
    HELM_DATA_HOME: `${i.dir}/helm/data`,
  };
}
