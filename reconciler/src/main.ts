#!/usr/bin/env node
/**
 * Entry point: `node reconciler/dist/main.js [flags]` (see --help). Logs JSON lines to stdout.
 * SIGTERM/SIGINT: stop working, release the lease, exit 0.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger, errorMessage, FlagError, flagsHelp, flushLogs } from '@kd-connections/shared';
import { loadConfig, RECONCILER_FLAGS, type ReconcilerConfig } from './config.js';
import { ReconcilerService } from './service.js';

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
const kubeConfig = new KubeConfig();
if (cfg.kubeconfig) kubeConfig.loadFromFile(cfg.kubeconfig);
else kubeConfig.loadFromDefault();
const service = new ReconcilerService({ config: cfg, kubeConfig, log });

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info('shutting down', { signal });
  await service.stop();
  await flushLogs();
  process.exit(0);
};
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

await service.start();
