/**
 * Starts a control plane and keeps it running until Ctrl-C, printing the variable that makes
 * `npm test` reuse it (saves the start-up on every run while developing).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startControlPlane } from './controlplane.js';

const cp = await startControlPlane({ log: (m) => console.error(`[controlplane] ${m}`) });
const infoPath = join(cp.dir, 'info.json');
writeFileSync(infoPath, JSON.stringify(cp.info()), { mode: 0o600 });
console.log(`export KD_TEST_CONTROLPLANE=${infoPath}`);
console.log(`export KUBECONFIG=${cp.kubeconfigPath}`);
console.log(`# pids ${JSON.stringify(cp.pids())} dir ${cp.dir}`);
const stop = () => void cp.stop().then(() => process.exit(0));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
