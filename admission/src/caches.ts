/**
 * The watch-fed caches behind admission: kdapps and kdclusters (whole objects, slimmed), and ConfigMaps
 * and Secrets that carry the type label, as metadata only (PartialObjectMetadata, trimmed to identity
 * and labels by shared's trim-object). Secrets are not watched at all when Secret connections are disabled.
 */
import {
  GROUP,
  Informer,
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  LABEL_CM_TYPE,
  metaOnly,
  slimObject,
  LABEL_SECRET_TYPE,
  VERSION,
  type KDApp,
  type KDCluster,
  type KubeClient,
  type KubeObject,
  type Logger,
  type LookupStores,
  type MetaObject,
} from '@kd-connections/shared';

export interface CacheOptions {
  client: KubeClient;
  secretConnections: boolean;
  log: Logger;
  onRestart?: (informer: string, reason: string) => void;
}

export class AdmissionCaches {
  readonly apps: Informer<KubeObject & KDApp>;
  readonly clusters: Informer<KubeObject & KDCluster>;
  readonly configmaps: Informer<KubeObject & MetaObject>;
  readonly secrets: Informer<KubeObject & MetaObject> | undefined;

  constructor(opts: CacheOptions) {
    const common = (name: string) => ({
      name,
      client: opts.client,
      log: opts.log,
      onRestart: (reason: string) => opts.onRestart?.(name, reason),
    });
    this.apps = new Informer({
      ...common('kdapps'),
      path: `/apis/${GROUP}/${VERSION}/${KDAPP_PLURAL}`,
      transform: (o) => slimObject(o as unknown as KDApp) as KubeObject & KDApp,
    });
    this.clusters = new Informer({
      ...common('kdclusters'),
      path: `/apis/${GROUP}/${VERSION}/${KDCLUSTER_PLURAL}`,
      transform: (o) => slimObject(o as unknown as KDCluster) as KubeObject & KDCluster,
    });
    this.configmaps = new Informer({
      ...common('configmaps'),
      path: '/api/v1/configmaps',
      labelSelector: LABEL_CM_TYPE,
      metadataOnly: true,
      transform: (o) => metaOnly(o) as KubeObject & MetaObject,
    });
    this.secrets = opts.secretConnections
      ? new Informer({
          ...common('secrets'),
          path: '/api/v1/secrets',
          labelSelector: LABEL_SECRET_TYPE,
          metadataOnly: true,
          transform: (o) => metaOnly(o) as KubeObject & MetaObject,
        })
      : undefined;
  }

  private all(): Informer<KubeObject & Record<string, unknown>>[] {
    return [this.apps, this.clusters, this.configmaps, ...(this.secrets ? [this.secrets] : [])] as never[];
  }

  get stores(): LookupStores {
    return { apps: this.apps, clusters: this.clusters, configmaps: this.configmaps, secrets: this.secrets };
  }

  start(): void {
    for (const i of this.all()) i.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.all().map((i) => i.stop()));
  }

  /** Names of the caches that have not completed their first list yet. */
  unsynced(): string[] {
    const out: string[] = [];
    if (!this.apps.synced) out.push('kdapps cache');
    if (!this.clusters.synced) out.push('kdclusters cache');
    if (!this.configmaps.synced) out.push('configmaps cache');
    if (this.secrets && !this.secrets.synced) out.push('secrets cache');
    return out;
  }

  sizes(): Record<string, number> {
    const s: Record<string, number> = {
      kdapps: this.apps.size,
      kdclusters: this.clusters.size,
      configmaps: this.configmaps.size,
    };
    if (this.secrets) s.secrets = this.secrets.size;
    return s;
  }
}
