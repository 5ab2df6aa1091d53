/**
 * One real control plane per jest run, shared by every cluster test file (each gets its own namespace).
 * Test workers find it through KD_TEST_CONTROLPLANE (the path of its info.json), which they inherit.
 * If KD_TEST_CONTROLPLANE is already set (a control plane kept running with `npm run controlplane`),
 * it is reused and left running.
 *
 * A node (containerd, kubelet, scheduler, controller-manager) starts in the background beside it;
 * tests that need running pods wait for it (test/node/node-support.ts), the others do not.
 * KD_TEST_NODE=0 leaves it out.
 *
 * Plain JS importing the compiled harness: jest resolves a global setup's imports with Node itself,
 * and `npm test` builds (tsc -b) before it runs jest.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startControlPlane } from '../dist/controlplane/controlplane.js';
import { startNodeInBackground } from '../dist/controlplane/node-status.js';

export default async function globalSetup() {
  if (process.env.KD_TEST_CONTROLPLANE) return;
  const started = Date.now();
  const log = (m) => process.stderr.write(`\n[controlplane] ${m}`);
  const cp = await startControlPlane({ log });
  const infoPath = join(cp.dir, 'info.json');
  writeFileSync(infoPath, JSON.stringify(cp.info()), { mode: 0o600 });
  process.env.KD_TEST_CONTROLPLANE = infoPath;
  globalThis.__kdControlPlane = cp;
  globalThis.__kdNode = startNodeInBackground(cp.info(), cp.nodeStatusPath, { log, taint: true });
  process.stderr.write(`\n[controlplane] ready at ${cp.server} in ${Date.now() - started} ms\n`);
}
