export default async function globalTeardown() {
  const cp = globalThis.__kdControlPlane;
  if (!cp) return;
  globalThis.__kdControlPlane = undefined;
  await cp.stop();
}
