#!/usr/bin/env node
/**
 * Entry point: `node reconciler/dist/main.js [flags]` (see --help). Logs JSON lines to stdout.
 * SIGTERM/SIGINT: stop working, release the lease, exit 0.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger, errorMessage, FlagError, flushLogs } from '@kd-connections/shared';
import { loadConfig, type ReconcilerConfig } from './config.js';
import { ReconcilerService } from './service.js';

let cfg: ReconcilerConfig;
try {
  cfg = loadConfig(process.argv.slice(2));
} catch (e) {
  console.error(`kd-connections reconciler: ${errorMessage(e)}${e instanceof FlagError ? '\n(see --help)' : ''}`);
  process.exit(2);
}

const log = createLogger({ component: 'reconciler', level: cfg.logLevel });
const kubeConfig = new KubeConfig();
if (cfg.kubeconfig) kubeConfig.loadFromFile(cfg.kubeconfig);
else kubeConfig.loadFromDefault();
const service = new ReconcilerService({
  config: cfg,
  kubeConfig,
  log,
  // KubeDirector appeared while working: stop writing and exit, so that the restart waits at the guard.
  onRefused: () => void shutdown('KubeDirectorFound', 3),
});

let stopping = false;
const shutdown = async (signal: string, code = 0) => {
  if (stopping) return;
  stopping = true;
  log.info('shutting down', { signal });
  await service.stop();
  await flushLogs();
  process.exit(code);
};
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

await service.start();
