{{/* Names ---------------------------------------------------------------------------------------- */}}

{{- define "kd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names get suffixes of up to 19 characters ("-reconciler-metrics"), so the base stays at 44. */}}
{{- define "kd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 44 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 44 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 44 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kd.admission.fullname" -}}{{ include "kd.fullname" . }}-admission{{- end -}}
{{- define "kd.reconciler.fullname" -}}{{ include "kd.fullname" . }}-reconciler{{- end -}}
{{- define "kd.webhook.name" -}}{{ include "kd.fullname" . }}{{- end -}}
{{- define "kd.lease.name" -}}{{ include "kd.reconciler.fullname" . }}{{- end -}}

{{- define "kd.admission.serviceAccountName" -}}
{{- if .Values.admission.serviceAccount.create -}}
{{- default (include "kd.admission.fullname" .) .Values.admission.serviceAccount.name -}}
{{- else -}}
{{- required "admission.serviceAccount.name is required when admission.serviceAccount.create is false" .Values.admission.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kd.reconciler.serviceAccountName" -}}
{{- if .Values.reconciler.serviceAccount.create -}}
{{- default (include "kd.reconciler.fullname" .) .Values.reconciler.serviceAccount.name -}}
{{- else -}}
{{- required "reconciler.serviceAccount.name is required when reconciler.serviceAccount.create is false" .Values.reconciler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kd.systemNamespace" -}}
{{- default .Release.Namespace .Values.systemNamespace -}}
{{- end -}}

{{/* The Secret holding the admission serving pair (in-cluster modes). */}}
{{- define "kd.tls.secretName" -}}
{{- if eq .Values.certificates.mode "secret" -}}
{{- .Values.certificates.secret.name -}}
{{- else if eq .Values.certificates.mode "bootstrap" -}}
{{- default (printf "%s-tls" (include "kd.admission.fullname" .)) .Values.certificates.bootstrap.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "kd.admission.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "kd.certManager.certificateName" -}}{{ include "kd.admission.fullname" . }}{{- end -}}

{{/* Modes ---------------------------------------------------------------------------------------- */}}

{{/* "true" when the webhook is served from outside the cluster (webhook.url): no admission workload. */}}
{{- define "kd.urlMode" -}}
{{- if .Values.webhook.url -}}true{{- end -}}
{{- end -}}

{{- define "kd.inCluster" -}}
{{- if not .Values.webhook.url -}}true{{- end -}}
{{- end -}}

{{- define "kd.bootstrap" -}}
{{- if and (not .Values.webhook.url) (eq .Values.certificates.mode "bootstrap") -}}true{{- end -}}
{{- end -}}

{{/* The service publishes the webhook paths (with a secret token) itself: the chart renders none.
     Unset counts as on: `helm upgrade --reuse-values` from a chart without the value renders with the
     old values, and must not turn the protection off. */}}
{{- define "kd.pathToken" -}}
{{- if and (include "kd.bootstrap" .) (ne (toString .Values.certificates.bootstrap.webhookPathToken) "false") -}}true{{- end -}}
{{- end -}}

{{/* Labels --------------------------------------------------------------------------------------- */}}

{{- define "kd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kd-connections
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "kd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kd.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kd.componentLabels" -}}
{{ include "kd.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Argo CD orders a sync by wave: RBAC and certificates (-1), workloads and Services (0), then the
     webhook configurations (1), so the API server never calls a webhook before its pods are ready. */}}
{{- define "kd.syncWave" -}}
argocd.argoproj.io/sync-wave: {{ . | quote }}
{{- end -}}

{{/* Images --------------------------------------------------------------------------------------- */}}

{{- define "kd.image" -}}
{{- $img := .component.image -}}
{{- $registry := default .ctx.Values.image.registry (.ctx.Values.global).imageRegistry -}}
{{- $repo := ternary (printf "%s/%s" $registry $img.repository) $img.repository (ne $registry "") -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .ctx.Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* Pod spec shared by both Deployments (called with (dict "ctx" . "values" .Values.<component>)). ----- */}}

{{/* image.pullSecrets and global.imagePullSecrets, each name once. */}}
{{- define "kd.imagePullSecrets" -}}
{{- $names := list -}}
{{- range concat (.ctx.Values.image.pullSecrets | default list) ((.ctx.Values.global).imagePullSecrets | default list) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- range uniq $names }}
- name: {{ . }}
{{- end -}}
{{- end -}}

{{- define "kd.priorityClassName" -}}
{{- default (.ctx.Values.global).priorityClassName .values.priorityClassName -}}
{{- end -}}

{{/* hostNetwork, DNS, pull secrets, priority class and node placement of a component's pod. */}}
{{- define "kd.podPlacement" -}}
{{- if .values.hostNetwork }}
hostNetwork: true
# Service names still resolve through cluster DNS from the node's network namespace.
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- with include "kd.imagePullSecrets" . }}
imagePullSecrets:
  {{- . | nindent 2 }}
{{- end }}
{{- with include "kd.priorityClassName" . }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod security for pods other than the two Deployments (whose values set their own): the restricted
     Pod Security Standard plus a read-only root filesystem. ---------------------------------------- */}}

{{- define "kd.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "kd.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The architectures the images are built for (npm run images): every pod of the chart requires one. */}}
{{- define "kd.archAffinity" -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      - matchExpressions:
          - key: kubernetes.io/arch
            operator: In
            values: [amd64, arm64]
{{- end -}}

{{/* When the user set no affinity: nodes of the images' architectures, preferred anti-affinity on hostname. */}}
{{- define "kd.affinity" -}}
{{- if .values.affinity -}}
{{ toYaml .values.affinity }}
{{- else -}}
{{ include "kd.archAffinity" .ctx }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "kd.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 12 }}
{{- end -}}
{{- end -}}

{{/* Webhooks ------------------------------------------------------------------------------------- */}}

{{/* caBundle as the API wants it (base64 of PEM); accepts the PEM itself too. */}}
{{- define "kd.caBundle" -}}
{{- $ca := .Values.webhook.caBundle | trim -}}
{{- if hasPrefix "-----BEGIN" $ca -}}
{{- printf "%s\n" $ca | b64enc -}}
{{- else -}}
{{- $ca | nospace -}}
{{- end -}}
{{- end -}}

{{- define "kd.webhook.clientConfig" -}}
{{- $ctx := .ctx -}}
{{- if $ctx.Values.webhook.url -}}
url: {{ printf "%s%s" (trimSuffix "/" $ctx.Values.webhook.url) .path | quote }}
{{- else -}}
service:
  name: {{ include "kd.admission.fullname" $ctx }}
  namespace: {{ $ctx.Release.Namespace }}
  {{- if not (include "kd.pathToken" $ctx) }}
  path: {{ .path | quote }}
  {{- end }}
  port: {{ $ctx.Values.admission.service.port }}
{{- end -}}
{{- if and $ctx.Values.webhook.caBundle (or $ctx.Values.webhook.url (eq $ctx.Values.certificates.mode "secret")) }}
caBundle: {{ include "kd.caBundle" $ctx }}
{{- end -}}
{{- end -}}

{{- define "kd.webhook.kdRules" -}}
- apiGroups: [kubedirector.hpe.com]
  apiVersions: [v1beta1]
  operations: [CREATE, UPDATE]
  resources: [{{ . }}]
  scope: Namespaced
{{- end -}}

{{/* kube-system and the release namespace are never sent to the webhooks (no lock-out of the control
     plane or of the webhook's own namespace); with watchNamespaces only those are. Called with
     (dict "ctx" . "kdapps" true) for validate-kdapp, whose selector also takes in the system namespace:
     the system catalog is used by every namespace, so its apps must be validated too, even when it is
     the release namespace (nothing the webhook's own pods need is a kdapp). */}}
{{- define "kd.webhook.namespaceSelector" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values -}}
{{- $system := include "kd.systemNamespace" $ctx -}}
{{- if $v.webhook.namespaceSelector -}}
{{ toYaml $v.webhook.namespaceSelector }}
{{- else -}}
{{- $excluded := uniq (concat (list "kube-system" $ctx.Release.Namespace) $v.webhook.excludeNamespaces) -}}
{{- $only := uniq $v.watchNamespaces -}}
{{- if .kdapps -}}
{{- $excluded = without $excluded $system -}}
{{- if $only }}{{ $only = uniq (append $only $system) }}{{ end -}}
{{- end -}}
matchExpressions:
{{- with $excluded }}
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- toYaml . | nindent 6 }}
{{- end }}
{{- with $only }}
  - key: kubernetes.io/metadata.name
    operator: In
    values:
      {{- toYaml . | nindent 6 }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* Called with (dict "ctx" . "kdapps" bool). */}}
{{- define "kd.webhook.common" -}}
admissionReviewVersions: [v1]
sideEffects: None
matchPolicy: Equivalent
timeoutSeconds: {{ .ctx.Values.webhook.timeoutSeconds }}
namespaceSelector:
  {{- include "kd.webhook.namespaceSelector" . | nindent 2 }}
{{- end -}}

{{/* The validating webhooks (failurePolicy Fail) are not called for what they would allow anyway, so an
     admission outage cannot block it: an object being deleted (finalizer removal must go through) and an
     update that leaves spec alone (labels, annotations, finalizers). The service skips both too. */}}
{{- define "kd.webhook.validatingMatchConditions" -}}
matchConditions:
  - name: not-being-deleted
    expression: '!has(object.metadata.deletionTimestamp)'
  - name: spec-changed
    expression: "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"
{{- end -}}

{{/* Next to KubeDirector the kdcluster webhook is called only for what it judges: a create, or an update
     that changes the app reference or a connection list. KubeDirector's own writes — finalizers, status
     (a subresource, never matched), typed full-object updates that rewrite spec without changing those
     fields — never reach it, so they go through even while admission is down. Lists are compared with
     absent = [], so a typed update that drops an empty list is not a change. */}}
{{- define "kd.webhook.kubedirectorMatchConditions" -}}
matchConditions:
  - name: not-being-deleted
    expression: '!has(object.metadata.deletionTimestamp)'
  - name: app-or-connections-changed
    expression: >-
      request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) ||
      (has(object.spec.app) ? object.spec.app : '') != (has(oldObject.spec.app) ? oldObject.spec.app : '') ||
      (has(object.spec.appCatalog) ? object.spec.appCatalog : 'local') !=
      (has(oldObject.spec.appCatalog) ? oldObject.spec.appCatalog : 'local') ||
      ['clusters', 'configmaps', 'secrets'].exists(l,
      (has(object.spec.connections) && l in object.spec.connections ? object.spec.connections[l] : []) !=
      (has(oldObject.spec.connections) && l in oldObject.spec.connections ? oldObject.spec.connections[l] : []))
{{- end -}}

{{/* NetworkPolicy egress shared by both services. */}}
{{- define "kd.np.apiEgress" -}}
# The Kubernetes API (the only thing either service calls).
- ports:
    {{- range .apiServerPorts }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
  {{- with .apiServerCIDRs }}
  to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  {{- end }}
{{- with .extraEgress }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Checks that need more than one value (the schema checks each value on its own). ----------------- */}}

{{- define "kd.validate" -}}
{{- if and (not .Values.webhook.url) (eq .Values.certificates.mode "secret") -}}
{{- if not .Values.certificates.secret.name -}}
{{- fail "certificates.mode=secret needs certificates.secret.name: the name of an existing kubernetes.io/tls Secret in the release namespace" -}}
{{- end -}}
{{- if not .Values.webhook.caBundle -}}
{{- fail "certificates.mode=secret needs webhook.caBundle: the CA (PEM or base64 of PEM) that signed the certificate in certificates.secret.name" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.webhook.caBundle (not .Values.webhook.url) (ne .Values.certificates.mode "secret") -}}
{{- fail (printf "webhook.caBundle is only used with webhook.url or certificates.mode=secret; with certificates.mode=%s the CA is injected at run time, so leave webhook.caBundle empty" .Values.certificates.mode) -}}
{{- end -}}
{{- if .Values.admission.clientAuth.enabled -}}
{{- if .Values.webhook.url -}}
{{- fail "admission.clientAuth configures the in-cluster admission Deployment; with webhook.url run the outside service with --client-ca-file (and --probe-port) yourself" -}}
{{- end -}}
{{- if not (contains "-----BEGIN CERTIFICATE-----" .Values.admission.clientAuth.caBundle) -}}
{{- fail "admission.clientAuth.enabled=true needs admission.clientAuth.caBundle: the PEM of the CA that signed the API server's webhook client certificate" -}}
{{- end -}}
{{- if eq (int .Values.admission.clientAuth.probePort) (int .Values.admission.port) -}}
{{- fail (printf "admission.clientAuth.probePort must differ from admission.port (both %d): the probes port is plain HTTP" (int .Values.admission.port)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.watchNamespaces (not (include "kd.admission.servedNamespaces" .)) -}}
{{- fail (printf "watchNamespaces %s: the webhooks serve none of these (kube-system, the release namespace %q and webhook.excludeNamespaces are never sent to them); list the namespaces whose kdclusters are to be admitted and reconciled" (toJson .Values.watchNamespaces) .Release.Namespace) -}}
{{- end -}}
{{- include "kd.validatePodSpecs" . -}}
{{- if and (gt (int .Values.reconciler.replicas) 1) (not .Values.reconciler.leaderElection.enabled) -}}
{{- fail "reconciler.replicas > 1 needs reconciler.leaderElection.enabled=true: two reconcilers without a Lease would both write" -}}
{{- end -}}
{{- include "kd.validateNoKubeDirector" . -}}
{{- end -}}

{{/* The default mode refuses to render where KubeDirector is installed: the API serves
     kubedirectorconfigs, a resource only KubeDirector installs (the guard's first sign, in its words).
     Known from discovery (.Capabilities), which needs no right and which `helm install`, Flux and Argo CD
     (it passes the cluster's API versions) all fill; nothing is read from the cluster. An offline `helm template` knows only what
     --api-versions says; there the services' own guard refuses to act. */}}
{{- define "kd.validateNoKubeDirector" -}}
{{- if and (not .Values.kubedirector.enabled) (.Capabilities.APIVersions.Has "kubedirector.hpe.com/v1beta1/KubeDirectorConfig") -}}
{{- fail "kd-connections' default mode is not installed next to KubeDirector: KubeDirector's operator is installed (the API serves kubedirectorconfigs.kubedirector.hpe.com). In its default mode kd-connections owns the kdcluster CRD and fields KubeDirector prunes. To run next to KubeDirector set kubedirector.enabled=true; or remove KubeDirector first" -}}
{{- end -}}
{{- end -}}

{{/* With watchNamespaces, the namespaces the webhooks send reviews from (comma-separated): the list without
     kube-system, the release namespace and webhook.excludeNamespaces (which a custom
     webhook.namespaceSelector replaces, so then only the first two are taken out). The admission service
     watches these and is granted reads (Secrets included) in these only. Empty without watchNamespaces. */}}
{{- define "kd.admission.servedNamespaces" -}}
{{- $never := list "kube-system" .Release.Namespace -}}
{{- if not .Values.webhook.namespaceSelector }}{{ $never = concat $never .Values.webhook.excludeNamespaces }}{{ end -}}
{{- $served := list -}}
{{- range uniq .Values.watchNamespaces }}{{ if not (has . $never) }}{{ $served = append $served . }}{{ end }}{{ end -}}
{{- join "," $served -}}
{{- end -}}

{{/* The admission service's flags for the namespaces kd.webhook.namespaceSelector selects, from the same
     values (one per line): a review for any other was not sent by the API server and is refused before
     anything is looked up. A custom selector cannot be mirrored as lists; then every namespace is served. */}}
{{- define "kd.admission.namespaceArgs" -}}
{{- if .Values.webhook.namespaceSelector -}}
--excluded-namespaces=
{{- else -}}
{{- with .Values.watchNamespaces -}}
--watch-namespaces={{ join "," (uniq .) }}{{ "\n" }}
{{- end -}}
--excluded-namespaces={{ join "," (uniq (concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces)) }}
{{- end -}}
{{- end -}}

{{/* The pod-spec overrides: combinations the schema cannot state clearly. */}}
{{- define "kd.validatePodSpecs" -}}
{{- range $k, $_ := .Values.commonLabels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $k) (eq $k "helm.sh/chart") -}}
{{- fail (printf "commonLabels.%s: the chart sets app.kubernetes.io/* and helm.sh/chart itself (selectors and the tests find objects by them); use another key" $k) -}}
{{- end -}}
{{- end -}}
{{- $builtin := dict "admission" (list "tmp" "tls" "client-ca") "reconciler" (list "tmp") -}}
{{- range $component := list "admission" "reconciler" -}}
{{- $v := index $.Values $component -}}
{{- $names := index $builtin $component -}}
{{- range $v.extraVolumes -}}
{{- if has .name $names -}}
{{- fail (printf "%s.extraVolumes: a volume named %q already exists in the pod (the chart uses %s); choose another name" $component .name (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- if and (eq (($v.strategy).type | default "") "Recreate") ($v.strategy).rollingUpdate -}}
{{- fail (printf "%s.strategy.type=Recreate has no rollingUpdate: also set %s.strategy.rollingUpdate=null (and know that Recreate stops every replica before starting new ones)" $component $component) -}}
{{- end -}}
{{- range $sc := list "podSecurityContext" "securityContext" -}}
{{- $c := index $v $sc | default dict -}}
{{- if and (hasKey $c "runAsUser") (eq (int (index $c "runAsUser")) 0) (index $c "runAsNonRoot") -}}
{{- fail (printf "%s.%s.runAsUser=0 contradicts runAsNonRoot=true (the kubelet would refuse to start the container): set runAsNonRoot=false too, or another uid" $component $sc) -}}
{{- end -}}
{{- end -}}
{{- $declared := concat $names (list) -}}
{{- range $v.extraVolumes }}{{ $declared = append $declared .name }}{{ end -}}
{{- range $v.extraVolumeMounts -}}
{{- if not (has .name $declared) -}}
{{- fail (printf "%s.extraVolumeMounts: %q mounts a volume the pod does not have; add it to %s.extraVolumes" $component .name $component) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.admission.hostNetwork -}}
{{- $ports := list (int .Values.admission.port) -}}
{{- if .Values.admission.clientAuth.enabled }}{{ $ports = append $ports (int .Values.admission.clientAuth.probePort) }}{{ end -}}
{{- range $ports -}}
{{- if lt . 1024 -}}
{{- fail (printf "admission.hostNetwork=true needs ports of 1024 or higher (got %d): in the node's network namespace a non-root process cannot bind a lower port" .) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.reconciler.hostNetwork (has (int .Values.reconciler.metricsPort) $ports) -}}
{{- fail (printf "admission and reconciler both use port %d on the node's network (hostNetwork=true for both): give reconciler.metricsPort another port" (int .Values.reconciler.metricsPort)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.reconciler.hostNetwork (lt (int .Values.reconciler.metricsPort) 1024) -}}
{{- fail (printf "reconciler.hostNetwork=true needs reconciler.metricsPort of 1024 or higher (got %d): in the node's network namespace a non-root process cannot bind a lower port" (int .Values.reconciler.metricsPort)) -}}
{{- end -}}
{{- end -}}

{{/* CRDs ----------------------------------------------------------------------------------------- */}}

{{/* Whether the chart renders the CRDs: crds.install, and never next to KubeDirector (its CRDs stay as
     they are). */}}
{{- define "kd.crds.enabled" -}}
{{- if and .Values.crds.install (not .Values.kubedirector.enabled) }}true{{ end -}}
{{- end -}}

{{/* One CRD from files/crds/ (the single copy; the tests and `npm start` apply those files as they
     are), with the release's labels, `helm.sh/resource-policy: keep` when crds.keep, and the earliest
     Argo CD sync wave. As a template (not crds/) Helm, Argo CD and Flux all upgrade it the same way, and
     Helm refuses to take over a CRD another owner installed (e.g. KubeDirector's). Called with
     (dict "ctx" . "file" name). */}}
{{- define "kd.crd" -}}
{{- $ctx := .ctx -}}
{{- if include "kd.crds.enabled" $ctx -}}
{{- $crd := $ctx.Files.Get (printf "files/crds/%s" .file) | fromYaml -}}
{{- if or (not $crd.metadata) $crd.Error -}}
{{- fail (printf "files/crds/%s is missing or not valid YAML: %v" .file $crd.Error) -}}
{{- end -}}
{{- $labels := merge (include "kd.labels" $ctx | fromYaml) ($crd.metadata.labels | default dict) -}}
{{- $annotations := merge (include "kd.syncWave" "-2" | fromYaml) ($crd.metadata.annotations | default dict) -}}
{{- if $ctx.Values.crds.keep -}}
{{- $_ := set $annotations "helm.sh/resource-policy" "keep" -}}
{{- end -}}
{{- $_ := set $crd.metadata "labels" $labels -}}
{{- $_ := set $crd.metadata "annotations" $annotations -}}
---
{{ toYaml $crd }}
{{- end -}}
{{- end -}}
