/**
 * The CA Secret of dynamic serving, as storage: read it, create it, or replace its data in one write
 * conditional on the resourceVersion that was read (a JSON Patch `test`). A write that loses a race is an
 * outcome, not an error: the caller re-reads and uses the winner's CA. Events about the certificates are
 * recorded on this Secret.
 */
import { TLS_SECRET_TYPE, type SecretObject } from '@kd-connections/certs';
import {
  errorMessage,
  errorStatus,
  isConflict,
  type EventRecorder,
  type EventTarget,
  type KubeClient,
} from '@kd-connections/shared/runtime';

export type WriteOutcome = { written: SecretObject } | { conflict: string };

export interface TlsSecretStoreOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  events: Pick<EventRecorder, 'record'>;
  /** Appended to every event note: which replica saw it. */
  identity: string;
}

export class TlsSecretStore {
  /** "namespace/name", for messages. */
  readonly where: string;
  /** The Secrets collection of the namespace (watches select the one name). */
  readonly collectionPath: string;
  private readonly objectPath: string;

  constructor(private readonly o: TlsSecretStoreOptions) {
    this.where = `${o.namespace}/${o.name}`;
    this.collectionPath = `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/secrets`;
    this.objectPath = `${this.collectionPath}/${encodeURIComponent(o.name)}`;
  }

  get name(): string {
    return this.o.name;
  }

  /** The Secret as stored now; undefined when it does not exist. */
  async read(): Promise<SecretObject | undefined> {
    try {
      return await this.o.client.get<SecretObject>(this.objectPath);
    } catch (e) {
      if (errorStatus(e) === 404) return undefined;
      throw new Error(`cannot read Secret ${this.where}: ${errorMessage(e)}`);
    }
  }

  /**
   * Creates the Secret (`current` undefined) or replaces its data, conditional on `current`'s
   * resourceVersion. Another writer first (409, 404, failed `test`) comes back as a conflict.
   */
  async write(current: SecretObject | undefined, data: Record<string, string>): Promise<WriteOutcome> {
    try {
      return { written: current ? await this.replaceData(current, data) : await this.create(data) };
    } catch (e) {
      if (errorStatus(e) === 409 || errorStatus(e) === 404 || isConflict(e)) return { conflict: errorMessage(e) };
      throw new Error(`cannot write Secret ${this.where}: ${errorMessage(e)}`);
    }
  }

  /** An Event regarding the Secret (its uid when known), noting this replica. */
  record(type: 'Normal' | 'Warning', reason: string, action: string, note: string, secret?: SecretObject): void {
    const regarding: EventTarget = {
      apiVersion: 'v1',
      kind: 'Secret',
      namespace: this.o.namespace,
      name: this.o.name,
      ...(secret?.metadata.uid ? { uid: secret.metadata.uid } : {}),
    };
    this.o.events.record({ regarding, type, reason, action, note: `${note} [${this.o.identity}]` });
  }

  private create(data: Record<string, string>): Promise<SecretObject> {
    const body: SecretObject = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: this.o.name,
        namespace: this.o.namespace,
        labels: { 'app.kubernetes.io/name': 'kd-connections', 'app.kubernetes.io/component': 'admission-tls' },
      },
      type: TLS_SECRET_TYPE,
      data,
    };
    return this.o.client.request<SecretObject>('POST', this.collectionPath, { body });
  }

  /** One write, conditional on the resourceVersion read: a failed `test` means someone else wrote first. */
  private replaceData(secret: SecretObject, data: Record<string, string>): Promise<SecretObject> {
    return this.o.client.jsonPatch<SecretObject>(this.objectPath, [
      { op: 'test', path: '/metadata/resourceVersion', value: secret.metadata.resourceVersion },
      { op: 'add', path: '/data', value: data },
    ]);
  }
}
