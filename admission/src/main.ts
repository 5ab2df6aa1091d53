/**
 * Entry point: `node admission/dist/main.js [flags]` (see --help). Logs JSON lines to stdout; the
 * "listening" line carries the bound port (useful with --port 0). SIGTERM/SIGINT drain and exit 0.
 */
import { runService, versionText } from '@kd-connections/shared/runtime';
import { ADMISSION_PROGRAM, parseConfig, usage } from './config.js';
import { AdmissionService } from './service.js';

await runService({
  component: 'admission',
  readConfig: () => {
    const config = parseConfig(process.argv.slice(2), process.env);
    if (config === 'help') process.stdout.write(`${usage()}\n`);
    else if (config === 'version') process.stdout.write(`${versionText(ADMISSION_PROGRAM)}\n`);
    else return config;
    return undefined;
  },
  onUnhandledRejection: 'log',
  usage,
  create: ({ config, kubeConfig, log }) => new AdmissionService({ config, kubeConfig, log }),
});
