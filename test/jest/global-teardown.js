export default async function globalTeardown() {
  const cp = globalThis.__kdControlPlane;
  if (!cp) return;
  globalThis.__kdControlPlane = undefined;
  const node = await globalThis.__kdNode;
  globalThis.__kdNode = undefined;
  // The node goes first: its kubelet would otherwise spend the teardown retrying a gone API server.
  const traces = node ? await node.stop() : [];
  await cp.stop();
  // A node that leaves anything behind on the host fails the run, naming what is left.
  if (traces.length) throw new Error(`the node left traces on this machine:\n  ${traces.join('\n  ')}`);
}
