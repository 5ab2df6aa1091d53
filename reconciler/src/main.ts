#!/usr/bin/env node
/**
 * Entry point: `node reconciler/dist/main.js [flags]` (see --help). Logs JSON lines to stdout.
 * SIGTERM/SIGINT: stop working, release the lease, exit 0.
 */
import {
  createLogger,
  errorMessage,
  FlagError,
  flushLogs,
  loadKubeConnection,
  type LoadedKubeConnection,
} from '@kd-connections/shared/runtime';
import { loadConfig, type ReconcilerConfig } from './config.js';
import { ReconcilerService } from './service.js';

let cfg: ReconcilerConfig;
let kubeConfig: LoadedKubeConnection;
try {
  cfg = loadConfig(process.argv.slice(2));
  kubeConfig = await loadKubeConnection({ kubeconfig: cfg.kubeconfig });
} catch (e) {
  console.error(`kd-connections reconciler: ${errorMessage(e)}${e instanceof FlagError ? '\n(see --help)' : ''}`);
  process.exit(2);
}

const log = createLogger({ component: 'reconciler', level: cfg.logLevel });
for (const d of cfg.deprecations) log.warn(d);
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
