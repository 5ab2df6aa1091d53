#!/usr/bin/env node
/**
 * Entry point: `node reconciler/dist/main.js [flags]` (see --help). Logs JSON lines to stdout.
 * SIGTERM/SIGINT: stop working, release the lease, exit 0.
 */
import { programHelp, runService } from '@kd-connections/shared/runtime';
import { loadConfig, RECONCILER_FLAGS, RECONCILER_PROGRAM } from './config.js';
import { ReconcilerService } from './service.js';

await runService({
  component: 'reconciler',
  // --help and --version are answered (and the process exits) inside loadConfig.
  readConfig: () => loadConfig(process.argv.slice(2)),
  onUnhandledRejection: 'exit',
  usage: () => programHelp(RECONCILER_PROGRAM, RECONCILER_FLAGS),
  create: ({ config, kubeConfig, log, exit }) =>
    new ReconcilerService({
      config,
      kubeConfig,
      log,
      // KubeDirector appeared while working: stop writing and exit, so that the restart waits at the guard.
      onRefused: () => exit('KubeDirectorFound', 3),
    }),
});
