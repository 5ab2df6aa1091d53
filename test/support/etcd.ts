/**
 * Compacts etcd through its HTTP gateway, so that watches from an older resourceVersion get 410 Gone
 * from a real API server (with its watch cache off, watches go straight to etcd).
 */
async function post<T>(etcdUrl: string, path: string, body: unknown): Promise<T> {
  const r = await fetch(`${etcdUrl}${path}`, { method: 'POST', body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`etcd ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

/** Compacts away every revision before the current one; returns that revision. */
export async function compactEtcd(etcdUrl: string): Promise<number> {
  const status = await post<{ header: { revision: string } }>(etcdUrl, '/v3/maintenance/status', {});
  const revision = Number(status.header.revision);
  await post(etcdUrl, '/v3/kv/compaction', { revision, physical: true });
  return revision;
}
