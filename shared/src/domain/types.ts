/**
 * The two kinds, `kubedirector.hpe.com/v1beta1`, as far as kd-connections reads and writes them.
 * Fields KubeDirector has that we do not model are kept by the CRD (preserve-unknown-fields) and
 * typed here as an open index signature, so nothing is lost when an object passes through.
 */

export const GROUP = 'kubedirector.hpe.com';
export const VERSION = 'v1beta1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KDCLUSTER_PLURAL = 'kubedirectorclusters';
export const KDAPP_PLURAL = 'kubedirectorapps';

/** Labels and annotations (KubeDirector's own names where KubeDirector had them). */
export const LABEL_CM_TYPE = 'kubedirector.hpe.com/cmType';
export const LABEL_SECRET_TYPE = 'kubedirector.hpe.com/secretType';
export const LABEL_KDCLUSTER = 'kubedirector.hpe.com/kdcluster';
export const LABEL_ROLE = 'kubedirector.hpe.com/role';
export const ANNOTATION_CONFIGMETA = 'kubedirector.hpe.com/configmeta';
export const ANNOTATION_CONFIGMETA_GENERATOR = 'kubedirector.hpe.com/configmeta-generator';
export const ANNOTATION_CONFIGMETA_HASH = 'kubedirector.hpe.com/configmeta-hash';
/** On a pod: "false" opts out of the configmeta volume the pod webhook adds. */
export const ANNOTATION_CONFIGMETA_VOLUME = 'kubedirector.hpe.com/configmeta-volume';

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  creationTimestamp?: string | Date;
  deletionTimestamp?: string | Date;
  [key: string]: unknown;
}

/** Any object we only need the metadata of (ConfigMaps and Secrets in admission). */
export interface MetaObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface ConnectableToEntry {
  category?: string;
  distroID?: string;
  /** An exact version ("2.4.5", "1.0") or a semver range (">=2.4 <3", "^7", "2.x"). */
  version?: string;
}

export interface KDAppService {
  id: string;
  label?: { name?: string; description?: string };
  endpoint?: {
    port: number;
    urlScheme?: string;
    path?: string;
    isDashboard?: boolean;
    hasAuthToken?: boolean;
  };
  exported_service?: string;
  [key: string]: unknown;
}

/** KubeDirector's setup package of a role (or the app's default); its startscript takes --reconnect. */
export interface ConfigPackage {
  packageURL?: string;
  useNewSetupLayout?: boolean;
  [key: string]: unknown;
}

export interface KDAppRole {
  id: string;
  cardinality?: string;
  imageRepoTag?: string;
  /** null: this role has none; absent: the app's defaultConfigPackage. */
  configPackage?: ConfigPackage | null;
  /** The lifecycle events this role's startscript is run for (KubeDirector's field); absent: all. */
  eventList?: string[];
  [key: string]: unknown;
}

export interface KDAppSpec {
  label?: { name?: string; description?: string };
  distroID?: string;
  version?: string;
  configSchemaVersion?: number;
  defaultImageRepoTag?: string;
  /** What this app provides, e.g. "streaming", "training". */
  category?: string;
  /** The config package of roles that name none (KubeDirector's field). */
  defaultConfigPackage?: ConfigPackage | null;
  /** The eventList of roles that name none (KubeDirector's webhook copies it into each role). */
  defaultEventList?: string[];
  /** Which clusters a cluster of this app may connect to. Absent: any. Empty: none. */
  connectable_to?: ConnectableToEntry[];
  roles?: KDAppRole[];
  services?: KDAppService[];
  config?: {
    configMeta?: Record<string, string>;
    roleServices?: { roleID: string; serviceIDs: string[] }[];
    selectedRoles?: string[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export interface KDApp {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: KDAppSpec;
}

export interface ResourceList {
  cpu?: string | number;
  memory?: string | number;
  [key: string]: string | number | undefined;
}

export interface KDClusterRole {
  id: string;
  members?: number;
  resources?: { requests?: ResourceList; limits?: ResourceList };
  [key: string]: unknown;
}

export interface Connections {
  clusters?: string[];
  configmaps?: string[];
  secrets?: string[];
}

export type AppCatalog = 'local' | 'system';

export interface KDClusterSpec {
  app: string;
  appCatalog?: AppCatalog;
  roles?: KDClusterRole[];
  connections?: Connections;
  configMetaGenerator?: number;
  [key: string]: unknown;
}

export type ConnectionKind = 'Cluster' | 'ConfigMap' | 'Secret';
export type ConnectionState = 'Connected' | 'Missing' | 'NotConnectable' | 'Unlabeled';

export interface ConnectionStatus {
  kind: ConnectionKind;
  name: string;
  state: ConnectionState;
  message?: string;
  /** Short digest of what pods see from this connection; lets the reconciler name the one that changed. */
  contentHash?: string;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface MembersStatus {
  total: number;
  ready: number;
  /** Members holding the configmeta of the current generator. */
  synced: number;
}

/** A member's reconnect hook state (only with the reconnect hook on); tied to the pod's uid. */
export interface MemberReconnect {
  uid: string;
  /** The configmeta generator the app in this member was set up or last reconnected with. */
  generator: number;
  /** The generator whose hook last failed, while it fails. */
  failedGenerator?: number;
  /** Consecutive failures for failedGenerator (the retry backoff grows with it). */
  failures?: number;
  lastFailureTime?: string;
  /** The failure in words: exit code, timeout or exec error. */
  message?: string;
  /**
   * The last membership change (status.rosterChanges seq) this member's app was told of, or the one its
   * first document already reflected. Absent until the member's document lists the journal's roster.
   */
  rosterSeq?: number;
  /** The membership notification that failed last, until one succeeds (attempts bounded, then given up). */
  changeFailure?: ChangeFailure;
}

/** A failing `--addnodes` / `--delnodes` run of one member. */
export interface ChangeFailure {
  /** The change (status.rosterChanges.changes[].seq). */
  seq: number;
  failures: number;
  lastFailureTime: string;
  message: string;
  /** Attempts ran out: the member moved past this change without hearing of it. */
  gaveUp?: boolean;
}

/** KubeDirector's membership notifications: `startscript --addnodes|--delnodes --role R --fqdns …`. */
export type RosterOp = 'addnodes' | 'delnodes';

/** One membership change: members of `role` that joined (addnodes) or left (delnodes) the documents. */
export interface RosterChange {
  seq: number;
  op: RosterOp;
  role: string;
  fqdns: string[];
  /** On the last change of a roster update: the digest of the roster it leads to. */
  roster?: string;
}

/**
 * The membership journal (only with the reconnect hook on): the roster (role → member DNS names) every
 * document lists as of change `seq`, and the changes some member has not been told of yet.
 */
export interface RosterJournal {
  seq: number;
  roster: Record<string, string[]>;
  changes: RosterChange[];
}

export interface KDClusterStatus {
  observedGeneration?: number;
  lastConfigMetaGenerator?: number;
  /** The highest node id ever given to a member (KubeDirector's field); ids are never reused. */
  lastNodeID?: number;
  /** Member pod name → its node id, kept for the member's life. */
  nodeIDs?: Record<string, number>;
  /** Member pod name → its role and DNS name: the seat it holds, kept while its pod restarts (seats.ts). */
  seatHolders?: Record<string, { role: string; fqdn: string }>;
  /** Member pod name → its reconnect hook state (only with the reconnect hook on). */
  memberReconnects?: Record<string, MemberReconnect>;
  /** The membership journal the --addnodes/--delnodes notifications follow (only with the reconnect hook on). */
  rosterChanges?: RosterJournal;
  connectionsHash?: string;
  connections?: ConnectionStatus[];
  members?: MembersStatus;
  /** "connected/declared", for the printer column. */
  connectionsSummary?: string;
  /** "ready/total", for the printer column. */
  membersSummary?: string;
  conditions?: Condition[];
  [key: string]: unknown;
}

export interface KDCluster {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: KDClusterSpec;
  status?: KDClusterStatus;
}

/** The parts of a Pod the renderer and the reconciler use. */
export interface PodLike {
  metadata: ObjectMeta;
  spec?: {
    hostname?: string;
    subdomain?: string;
    containers?: { name: string; [key: string]: unknown }[];
    [key: string]: unknown;
  };
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    [key: string]: unknown;
  };
}

/** A ConfigMap as the renderer needs it. */
export interface ConfigMapLike {
  metadata: ObjectMeta;
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
  /** Set (and data left out) when its configmeta entry is too big to be delivered (connected-object-size.ts). */
  tooLargeBytes?: number;
}

/**
 * A Secret as the reconciler keeps it: identity, labels, keys and a keyed MAC of the values, plus the
 * values themselves only when inlining was opted into. No annotations (they may quote the values).
 */
export interface SecretLike {
  metadata: ObjectMeta;
  keys: string[];
  /**
   * HMAC-SHA256 over the uid and the canonical data (see secretDataMac): lets a value change trigger a
   * regeneration while a metadata-only write (managedFields, a server-side apply switch) does not.
   */
  dataMac?: string;
  /** base64 values as stored: the reconciler's cache keeps them for the private document only. */
  data?: Record<string, string>;
  /** Set (and data, keys and MAC left out) when its private entry is too big to be delivered. */
  tooLargeBytes?: number;
}

export const CONNECTION_LISTS = ['clusters', 'configmaps', 'secrets'] as const;
export type ConnectionList = (typeof CONNECTION_LISTS)[number];

export const KIND_OF_LIST: Record<ConnectionList, ConnectionKind> = {
  clusters: 'Cluster',
  configmaps: 'ConfigMap',
  secrets: 'Secret',
};
