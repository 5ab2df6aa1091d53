/**
 * Starts a control plane and a node and keeps them running until Ctrl-C, printing the variable that
 * makes `npm test` reuse them (saves the start-up on every run while developing). KD_TEST_NODE=0 starts
 * the control plane alone.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startControlPlane } from './controlplane.js';
import { readNodeStatus, startNodeInBackground } from './node-status.js';

const log = (m: string) => console.error(`[controlplane] ${m}`);
const cp = await startControlPlane({ log });
// The same tainted node the test run starts: tests schedule onto it with TEST_NODE_TOLERATION.
const starting = startNodeInBackground(cp.info(), cp.nodeStatusPath, { log, taint: true });
const stop = () =>
  void (async () => {
    await (await starting)?.stop();
    await cp.stop();
    process.exit(0);
  })();
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
await starting;
const status = readNodeStatus(cp.nodeStatusPath);
if (status?.state !== 'ready') log(`no node: ${status?.state === 'failed' ? status.error : status?.state}`);
const infoPath = join(cp.dir, 'info.json');
writeFileSync(infoPath, JSON.stringify(cp.info()), { mode: 0o600 });
console.log(`export KD_TEST_CONTROLPLANE=${infoPath}`);
console.log(`export KUBECONFIG=${cp.kubeconfigPath}`);
console.log(`# pids ${JSON.stringify(cp.pids())} dir ${cp.dir}`);
