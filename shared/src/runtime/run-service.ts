/**
 * The one way a service process runs (controller-runtime's Manager is the model): flags → logger →
 * kubeconfig → the service → signals → graceful shutdown. A service's main.ts gives its flags and how to
 * build it; everything else is here, the same for admission and the reconciler.
 *
 * Exit codes: 0 after a clean stop (SIGTERM/SIGINT) or --help/--version; 1 when start or stop fails;
 * 2 for a configuration error (bad flag, unusable kubeconfig); a service may ask for another (exit()).
 */
import { errorMessage, flushLogs, createLogger, type Logger, type LogLevel } from './logger.js';
import { FlagError } from './flags.js';
import { loadKubeConnection, type LoadedKubeConnection } from './kubeconfig.js';

export interface RunnableService {
  start(): Promise<unknown>;
  stop(): Promise<void>;
}

export interface ServiceConfigBase {
  kubeconfig?: string;
  logLevel: LogLevel;
  /** Deprecated flags used, one warning each. */
  deprecations: string[];
}

export interface RunServiceOptions<C extends ServiceConfigBase> {
  /** "admission": the logger's component and the prefix of errors ("kd-connections admission: …"). */
  component: string;
  /** The flags read; undefined when --help or --version was answered. Throws FlagError. */
  readConfig: () => C | undefined;
  /** The help text printed after a flag error. */
  usage: () => string;
  /**
   * An unhandled rejection: 'log' keeps serving (admission: a bug in one review must not take the service
   * down for everyone); 'exit' logs and exits 1, so the restart starts from a clean state (the reconciler).
   */
  onUnhandledRejection: 'log' | 'exit';
  create: (deps: {
    config: C;
    kubeConfig: LoadedKubeConnection;
    log: Logger;
    /** Stops the service and exits with `code` (e.g. the reconciler when KubeDirector appears). */
    exit: (reason: string, code: number) => void;
  }) => RunnableService;
}

export async function runService<C extends ServiceConfigBase>(o: RunServiceOptions<C>): Promise<void> {
  const name = `kd-connections ${o.component}`;
  const fail = (text: string): never => {
    process.stderr.write(`${name}: ${text}\n`);
    process.exit(2);
  };
  let config: C | undefined;
  try {
    config = o.readConfig();
  } catch (e) {
    if (!(e instanceof FlagError)) throw e;
    return fail(`${e.message}\n\n${o.usage()}`);
  }
  if (config === undefined) return;
  const log = createLogger({ component: o.component, level: config.logLevel });
  for (const d of config.deprecations) log.warn(d);
  let kubeConfig: LoadedKubeConnection;
  try {
    kubeConfig = await loadKubeConnection({ kubeconfig: config.kubeconfig });
  } catch (e) {
    // A client-node error (a $KUBECONFIG list, an exec user) is as much a configuration error.
    return fail(errorMessage(e));
  }

  let stopping = false;
  let service: RunnableService | undefined;
  const exit = (reason: string, code: number) => {
    if (stopping) return;
    stopping = true;
    log.info('signal received', { signal: reason });
    (service ? service.stop() : Promise.resolve()).then(
      () => flushLogs().then(() => process.exit(code)),
      (e: unknown) => {
        log.error('shutdown failed', { error: errorMessage(e) });
        void flushLogs().then(() => process.exit(1));
      },
    );
  };
  const failStart = async (e: unknown) => {
    log.error('start failed', { error: errorMessage(e) });
    await flushLogs();
    process.exit(1);
  };
  try {
    service = o.create({ config, kubeConfig, log, exit });
  } catch (e) {
    return failStart(e);
  }
  process.on('SIGTERM', () => exit('SIGTERM', 0));
  process.on('SIGINT', () => exit('SIGINT', 0));
  process.on('unhandledRejection', (e) => {
    log.error('unhandled rejection', { error: errorMessage(e) });
    if (o.onUnhandledRejection === 'exit') exit('unhandledRejection', 1);
  });
  try {
    await service.start();
  } catch (e) {
    // Asked to stop while starting: the stop decides the exit code.
    if (stopping) return;
    await failStart(e);
  }
}
