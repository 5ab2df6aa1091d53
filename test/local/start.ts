/**
 * npm start [-- --kubeconfig PATH] [-- --watch-namespaces a,b]
 * See local-environment.ts for what it does. Ctrl-C stops everything and removes its files.
 */
import { dirname } from 'node:path';
import { ensureBinaries } from '../controlplane/binaries.js';
import { startLocalEnvironment, tour } from './local-environment.js';

function usage(msg?: string): never {
  if (msg) console.error(`npm start: ${msg}`);
  console.error('usage: npm start [-- --kubeconfig PATH] [--watch-namespaces ns1,ns2]');
  process.exit(2);
}

const args = process.argv.slice(2);
let kubeconfig: string | undefined;
let namespaces: string[] | undefined;
for (let i = 0; i < args.length; i++) {
  const [flag, inline] = args[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
  const value = () => inline ?? args[++i] ?? usage(`${flag} needs a value`);
  if (flag === '--kubeconfig') kubeconfig = value();
  // --namespaces: the services' old name for the same list, kept as they keep it.
  else if (flag === '--watch-namespaces' || flag === '--namespaces') namespaces = value().split(',').filter(Boolean);
  else if (flag === '--help' || flag === '-h') usage();
  else usage(`unknown argument ${args[i]}`);
}

const say = (line: string) => console.log(line);
let env: Awaited<ReturnType<typeof startLocalEnvironment>> | undefined;
let stopping = false;
const shutdown = async (code: number) => {
  if (stopping) return;
  stopping = true;
  console.log('\nStopping ...');
  await env?.stop();
  console.log('Stopped; temporary files removed.');
  process.exit(code);
};
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

try {
  env = await startLocalEnvironment({ kubeconfig, namespaces, say });
} catch (e) {
  console.error(`npm start failed: ${(e as Error).message}`);
  process.exit(1);
}
const bins = await ensureBinaries(['kubectl']);
console.log(tour(env, dirname(bins.kubectl), !kubeconfig));
const died = await env.died;
if (!stopping) {
  console.error(`${died.name} exited unexpectedly (code ${died.code}). Its last log lines:\n${died.log}\nStopping.`);
  await shutdown(1);
}
