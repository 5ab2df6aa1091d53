/**
 * The key of the MAC over connected Secrets' data (shared's secretDataMac). It lives in one Secret in the
 * reconciler's own namespace, which only the reconciler may read, so the digests folded into
 * status.connectionsHash cannot be tested against guesses by anyone who can only view clusters. The
 * Secret is read on every start (restarts write nothing) and created once when missing; two replicas
 * starting together both try, the loser's create gets 409 and it reads the winner's key. The key is
 * never logged.
 */
import { randomBytes } from 'node:crypto';
import { DIGEST_KEY_BYTES } from '@kd-connections/shared/configmeta';
import { errorStatus, type KubeClient, type Logger } from '@kd-connections/shared/runtime';

export const DIGEST_KEY_SECRET = 'kd-connections-digest-key';
const FIELD = 'key';

interface KeySecret {
  data?: Record<string, string>;
}

const path = (namespace: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets${name ? `/${encodeURIComponent(name)}` : ''}`;

function keyOf(s: KeySecret, namespace: string): Buffer {
  const key = Buffer.from(s.data?.[FIELD] ?? '', 'base64');
  if (key.length < DIGEST_KEY_BYTES)
    throw new Error(
      `Secret ${namespace}/${DIGEST_KEY_SECRET}: data.${FIELD} must hold at least ${DIGEST_KEY_BYTES} random bytes (base64); ` +
        'delete the Secret to have a new key created',
    );
  return key;
}

async function read(client: KubeClient, namespace: string): Promise<Buffer | undefined> {
  try {
    return keyOf(await client.get<KeySecret>(path(namespace, DIGEST_KEY_SECRET)), namespace);
  } catch (e) {
    if (errorStatus(e) === 404) return undefined;
    throw e;
  }
}

/** Reads the digest key from `namespace`, creating it (race-safe) when it does not exist yet. */
export async function loadDigestKey(client: KubeClient, namespace: string, log: Logger): Promise<Buffer> {
  const existing = await read(client, namespace);
  if (existing) return existing;
  const body = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: DIGEST_KEY_SECRET, namespace, labels: { 'app.kubernetes.io/managed-by': 'kd-connections' } },
    type: 'Opaque',
    // Never changed: a new key would change every connectionsHash and regenerate every cluster once.
    immutable: true,
    data: { [FIELD]: randomBytes(DIGEST_KEY_BYTES).toString('base64') },
  };
  try {
    const created = await client.request<KeySecret>('POST', path(namespace), { body });
    log.info('created the Secret digest key', { secret: `${namespace}/${DIGEST_KEY_SECRET}` });
    return keyOf(created, namespace);
  } catch (e) {
    if (errorStatus(e) !== 409) throw e;
  }
  // Another replica created it first.
  const theirs = await read(client, namespace);
  if (!theirs)
    throw new Error(`Secret ${namespace}/${DIGEST_KEY_SECRET} was created by another writer and then deleted`);
  return theirs;
}
