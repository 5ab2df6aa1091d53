/**
 * Entry point: `node admission/dist/main.js [flags]` (see --help). Logs JSON lines to stdout; the
 * "listening" line carries the bound port (useful with --port 0). SIGTERM/SIGINT drain and exit 0.
 */
import {
  createLogger,
  errorMessage,
  flushLogs,
  loadKubeConnection,
  type LoadedKubeConnection,
  versionText,
} from '@kd-connections/shared/runtime';
import { ADMISSION_PROGRAM, ConfigError, parseConfig, usage, type AdmissionConfig } from './config.js';
import { AdmissionService } from './service.js';

async function main(): Promise<void> {
  let config: AdmissionConfig | 'help' | 'version';
  try {
    config = parseConfig(process.argv.slice(2), process.env);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`${e.message}\n\n${usage()}\n`);
    process.exit(2);
  }
  if (config === 'help') {
    process.stdout.write(usage() + '\n');
    return;
  }
  if (config === 'version') {
    process.stdout.write(versionText(ADMISSION_PROGRAM) + '\n');
    return;
  }
  const log = createLogger({ component: 'admission', level: config.logLevel });
  for (const d of config.deprecations) log.warn(d);
  let kubeConfig: LoadedKubeConnection;
  try {
    kubeConfig = await loadKubeConnection({ kubeconfig: config.kubeconfig });
  } catch (e) {
    // A client-node error (a $KUBECONFIG list, an exec user) is as much a configuration error.
    process.stderr.write(`kd-connections admission: ${errorMessage(e)}\n`);
    process.exit(2);
  }
  const service = new AdmissionService({ config, kubeConfig, log });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('signal received', { signal });
    service.stop().then(
      () => flushLogs().then(() => process.exit(0)),
      (e) => {
        log.error('shutdown failed', { error: errorMessage(e) });
        void flushLogs().then(() => process.exit(1));
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // A bug in one review must not take the service down for everyone; log it and keep serving.
  process.on('unhandledRejection', (e) => log.error('unhandled rejection', { error: errorMessage(e) }));

  await service.start();
}

main().catch((e) => {
  process.stderr.write(`admission: ${errorMessage(e)}\n`);
  process.exit(1);
});
