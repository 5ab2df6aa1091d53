/**
 * How test workers learn about the node the jest run (or `npm run controlplane`) starts beside the
 * control plane: a small JSON file next to info.json, rewritten as the node starts, becomes Ready or
 * fails. The node starts in the background so tests that need no node do not wait for it.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { ControlPlaneInfo } from './controlplane.js';
import { startNode, type NodeHandle, type NodeInfo, type NodeOptions } from './node.js';

export type NodeStatus =
  | { state: 'starting'; since: string }
  | { state: 'ready'; node: NodeInfo; readyAfterMs: number }
  | { state: 'failed'; error: string }
  | { state: 'disabled'; reason: string };

export function writeNodeStatus(path: string, status: NodeStatus): void {
  writeFileSync(`${path}.tmp`, JSON.stringify(status));
  // rename is atomic: a reader never sees half a file.
  renameSync(`${path}.tmp`, path);
}

export function readNodeStatus(path: string): NodeStatus | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as NodeStatus;
  } catch {
    return undefined;
  }
}

/**
 * Starts a node without waiting for it; the status file follows its progress. Resolves with the node
 * (to stop later) once it is Ready or has failed (then undefined; the file says why).
 */
export function startNodeInBackground(
  cp: ControlPlaneInfo,
  statusPath: string,
  opts: NodeOptions = {},
): Promise<NodeHandle | undefined> {
  if (process.env.KD_TEST_NODE === '0') {
    writeNodeStatus(statusPath, { state: 'disabled', reason: 'KD_TEST_NODE=0' });
    return Promise.resolve(undefined);
  }
  const started = Date.now();
  writeNodeStatus(statusPath, { state: 'starting', since: new Date(started).toISOString() });
  let node: NodeHandle | undefined;
  return (async () => {
    try {
      node = await startNode(cp, opts);
      await node.ready;
      const readyAfterMs = Date.now() - started;
      writeNodeStatus(statusPath, { state: 'ready', node: node.info(), readyAfterMs });
      opts.log?.(`node started and Ready in ${readyAfterMs} ms`);
      return node;
    } catch (e) {
      writeNodeStatus(statusPath, { state: 'failed', error: (e as Error).message });
      return node;
    }
  })();
}
