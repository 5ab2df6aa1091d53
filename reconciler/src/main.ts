#!/usr/bin/env node
/**
 * kd-connections reconciler: keeps configmeta current in every member pod.
 * Caches start at once (a standby replica is warm); work starts when this replica leads.
 * SIGTERM/SIGINT: stop working, release the lease, exit.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger, errorMessage, FlagError, flagsHelp, flushLogs, KubeClient } from '@kd-connections/shared';
import { loadConfig, RECONCILER_FLAGS, type ReconcilerConfig } from './config.js';
import { Controller } from './controller.js';
import { LeaderElector } from './leader-election.js';
import { ReconcilerMetrics } from './metrics.js';
import { startProbeServer } from './probe-server.js';

let cfg: ReconcilerConfig;
try {
  if (process.argv.includes('--help')) {
    console.log(`kd-connections reconciler\n\n${flagsHelp(RECONCILER_FLAGS)}`);
    process.exit(0);
  }
  cfg = loadConfig(process.argv.slice(2));
} catch (e) {
  console.error(`kd-connections reconciler: ${errorMessage(e)}${e instanceof FlagError ? '\n(see --help)' : ''}`);
  process.exit(2);
}

const log = createLogger({ component: 'reconciler', level: cfg.logLevel });
const kc = new KubeConfig();
if (cfg.kubeconfig) kc.loadFromFile(cfg.kubeconfig);
else kc.loadFromDefault();
const client = new KubeClient(kc, `kd-connections-reconciler/${cfg.identity}`);
const metrics = new ReconcilerMetrics();
const controller = new Controller(client, cfg, metrics, log);
const probes = await startProbeServer(
  cfg.metricsHost,
  cfg.metricsPort,
  () => controller.caches.synced,
  metrics.registry,
);
log.info('starting', {
  identity: cfg.identity,
  namespaces: cfg.namespaces.length ? cfg.namespaces : ['*'],
  systemNamespace: cfg.systemNamespace,
  metricsPort: probes.port,
  secretConnections: cfg.secretConnections,
  inlineSecretValues: cfg.inlineSecretValues,
});

controller.caches.start();
await controller.caches.waitForSync(10 * 60_000);

let elector: LeaderElector | undefined;
if (cfg.leaderElect) {
  elector = new LeaderElector({
    client,
    namespace: cfg.leaseNamespace,
    name: cfg.leaseName,
    identity: cfg.identity,
    leaseDurationMs: cfg.leaseDurationMs,
    renewDeadlineMs: cfg.renewDeadlineMs,
    retryPeriodMs: cfg.retryPeriodMs,
    log,
    onStartedLeading: () => controller.startLeading(),
    onStoppedLeading: () => void controller.stopLeading(),
  });
  elector.start();
} else {
  controller.startLeading();
}

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info('shutting down', { signal });
  await controller.stopLeading();
  await elector?.stop();
  await controller.caches.stop();
  await probes.close();
  client.close();
  await flushLogs();
  process.exit(0);
};
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
