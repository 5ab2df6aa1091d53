/**
 * node node-watchdog.js <owner pid> <state file>: started detached by startNode(). Waits until the owner
 * is gone; if the owner did not clean up (Ctrl-C, SIGKILL, a crash), stops the node's processes and
 * undoes its host changes, then removes the state file.
 */
import { rmSync } from 'node:fs';
import { cleanupNodeHost, pidAlive, readNodeState } from './node-host.js';

const [ownerArg, statePath] = process.argv.slice(2);
const owner = Number(ownerArg);
if (!owner || !statePath) {
  console.error('usage: node-watchdog.js <owner pid> <state file>');
  process.exit(2);
}
const timer = setInterval(() => {
  if (pidAlive(owner)) return;
  clearInterval(timer);
  const state = readNodeState(statePath);
  // Gone already (a clean stop), or taken over by a newer run: nothing of ours to clean.
  if (!state || state.ownerPid !== owner) return;
  const problems = cleanupNodeHost(state);
  if (problems.length === 0) rmSync(statePath, { force: true });
}, 500);
