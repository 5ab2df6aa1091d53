/**
 * The watch-fed caches behind admission: kdapps and kdclusters (whole objects, slimmed), and ConfigMaps
 * and Secrets that carry the type label, as metadata only (PartialObjectMetadata, trimmed to identity
 * and labels by shared's trim-object). Secrets are not watched at all when Secret connections are disabled. All namespaces, or
 * with `namespaces` one informer per namespace (kdapps also in the system namespace), so the service
 * needs read rights only there.
 */
import { type LookupStores } from '@kd-connections/shared/caches';
import { metaOnly, slimObject } from '@kd-connections/shared/configmeta';
import {
  GROUP,
  KDAPP_PLURAL,
  KDCLUSTER_PLURAL,
  LABEL_CM_TYPE,
  LABEL_SECRET_TYPE,
  VERSION,
  type KDApp,
  type KDCluster,
  type MetaObject,
} from '@kd-connections/shared/domain';
import {
  Informer,
  NamespacedCache,
  type KubeClient,
  type KubeObject,
  type Logger,
} from '@kd-connections/shared/runtime';

export interface CacheOptions {
  client: KubeClient;
  secretConnections: boolean;
  log: Logger;
  onRestart?: (informer: string, reason: string) => void;
  /** Watch only these namespaces (empty or absent: all). */
  namespaces?: string[];
  /** With `namespaces`: kdapps are watched here too (the system catalog). */
  systemNamespace?: string;
}

export class AdmissionCaches {
  readonly apps: NamespacedCache<KubeObject & KDApp>;
  readonly clusters: NamespacedCache<KubeObject & KDCluster>;
  readonly configmaps: NamespacedCache<KubeObject & MetaObject>;
  readonly secrets: NamespacedCache<KubeObject & MetaObject> | undefined;

  constructor(opts: CacheOptions) {
    const common = (name: string) => ({
      name,
      client: opts.client,
      log: opts.log,
      onRestart: (reason: string) => opts.onRestart?.(name, reason),
    });
    const watched = opts.namespaces?.length ? opts.namespaces : undefined;
    const kd = (plural: string) => (ns: string | undefined) =>
      ns ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}` : `/apis/${GROUP}/${VERSION}/${plural}`;
    const core = (plural: string) => (ns: string | undefined) =>
      ns ? `/api/v1/namespaces/${ns}/${plural}` : `/api/v1/${plural}`;
    const whole =
      <T extends object>(name: string, plural: string) =>
      (ns: string | undefined) =>
        new Informer({
          ...common(name),
          path: kd(plural)(ns),
          transform: (o) => slimObject(o as unknown as T & { metadata?: Record<string, unknown> }) as KubeObject & T,
        });
    // Apps of the system catalog are needed whatever namespaces are watched.
    const appNamespaces = watched && opts.systemNamespace ? [...watched, opts.systemNamespace] : watched;
    this.apps = new NamespacedCache(appNamespaces, whole<KDApp>('kdapps', KDAPP_PLURAL));
    this.clusters = new NamespacedCache(watched, whole<KDCluster>('kdclusters', KDCLUSTER_PLURAL));
    const labelled = (name: string, label: string) => (ns: string | undefined) =>
      new Informer({
        ...common(name),
        path: core(name)(ns),
        labelSelector: label,
        metadataOnly: true,
        transform: (o) => metaOnly(o) as KubeObject & MetaObject,
      });
    this.configmaps = new NamespacedCache(watched, labelled('configmaps', LABEL_CM_TYPE));
    this.secrets = opts.secretConnections
      ? new NamespacedCache(watched, labelled('secrets', LABEL_SECRET_TYPE))
      : undefined;
  }

  private all(): NamespacedCache<KubeObject>[] {
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
