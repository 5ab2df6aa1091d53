/**
 * Starts a control plane and a node and keeps them running until Ctrl-C, printing the variable that
 * makes `npm test` reuse them (saves the start-up on every run while developing). KD_NO_NODE=1 starts
 * the control plane alone.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startControlPlane } from './controlplane.js';
import { startNode, type NodeHandle } from './node.js';

const log = (m: string) => console.error(`[controlplane] ${m}`);
const cp = await startControlPlane({ log });
let node: NodeHandle | undefined;
const stop = () =>
  void (async () => {
    await node?.stop();
    await cp.stop();
    process.exit(0);
  })();
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
if (!process.env.KD_NO_NODE) {
  try {
    node = await startNode(cp.info(), { log });
    await node.ready;
  } catch (e) {
    log(`no node: ${(e as Error).message}`);
    node = undefined;
  }
}
const infoPath = join(cp.dir, 'info.json');
writeFileSync(infoPath, JSON.stringify({ ...cp.info(), node: node?.info() }), { mode: 0o600 });
console.log(`export KD_TEST_CONTROLPLANE=${infoPath}`);
console.log(`export KUBECONFIG=${cp.kubeconfigPath}`);
console.log(`# pids ${JSON.stringify(cp.pids())} dir ${cp.dir}${node ? ` node ${node.dir}` : ''}`);
