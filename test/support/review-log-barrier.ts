/**
 * The admission service's log lines leave asynchronously, so a review's line may arrive after the API
 * server has the answer. To assert what a request did NOT log (a webhook never reached), send a later
 * request and wait for its review line: lines are written in order, so every line of the earlier
 * request has been written by then.
 */
import type { TestEnv } from './cluster.js';
import { ok } from './processes.js';
import type { RunningAdmission } from './services.js';

/** A server-side dry-run create of `manifest` (a kdcluster named `name`); waits for its review line. */
export async function reviewLogBarrier(
  env: Pick<TestEnv, 'kubectl'>,
  svc: Pick<RunningAdmission, 'waitForLog'>,
  name: string,
  manifest: string,
): Promise<void> {
  ok(await env.kubectl(['create', '--dry-run=server', '-f', '-'], { input: manifest }), 'barrier');
  await svc.waitForLog((l) => l.msg === 'review' && l.name === name);
}
