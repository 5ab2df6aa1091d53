/** Keys of namespaced objects: no Kubernetes client, no domain. */
/** "namespace/name", the key every cache, queue and index uses. */
export function objectKey(namespace: string | undefined, name: string | undefined): string {
  return `${namespace ?? ''}/${name ?? ''}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
