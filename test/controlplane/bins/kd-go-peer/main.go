// kd-go-peer: the benchmark's peer webhook — what a Go author would write with controller-runtime for
// the kdcluster validating and mutating webhooks: admission.Handler decoding the AdmissionReview, the
// connection rules against the manager's informer cache (kdapps and kdclusters as unstructured,
// labelled ConfigMaps and Secrets as metadata only, a live metadata read on a miss, as the admission
// service does), the same denial message and the same generator JSON Patch. The cache strips managedFields
// and hands out its objects without deep copies. TLS as the admission service's tlsOptions: TLS 1.2 or
// newer, AEAD suites only. Bench only; never shipped.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var (
	appGVK     = schema.GroupVersionKind{Group: "kubedirector.hpe.com", Version: "v1beta1", Kind: "KubeDirectorApp"}
	clusterGVK = schema.GroupVersionKind{Group: "kubedirector.hpe.com", Version: "v1beta1", Kind: "KubeDirectorCluster"}
	served     atomic.Int64
	// The cache hands out its own objects (read-only here).
	unsafeNoDeepCopy = true
)

type cacheLookup struct{ cached, live client.Reader }

func (c cacheLookup) unstructured(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (obj, bool) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil, false
	}
	return u.Object, true
}

func (c cacheLookup) App(ctx context.Context, ns, name string) (obj, bool) {
	return c.unstructured(ctx, appGVK, ns, name)
}
func (c cacheLookup) Cluster(ctx context.Context, ns, name string) (obj, bool) {
	return c.unstructured(ctx, clusterGVK, ns, name)
}

func (c cacheLookup) meta(ctx context.Context, kind, ns, name string) (map[string]string, bool) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	key := client.ObjectKey{Namespace: ns, Name: name}
	if err := c.cached.Get(ctx, key, m); err == nil {
		return m.Labels, true
	}
	// Only labelled objects are cached: an unlabelled one is read live to say so.
	if err := c.live.Get(ctx, key, m); err != nil {
		if !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "live read %s %s/%s: %v\n", kind, ns, name, err)
		}
		return nil, false
	}
	return m.Labels, true
}

func (c cacheLookup) ConfigMapLabels(ctx context.Context, ns, name string) (map[string]string, bool) {
	return c.meta(ctx, "ConfigMap", ns, name)
}
func (c cacheLookup) SecretLabels(ctx context.Context, ns, name string) (map[string]string, bool) {
	return c.meta(ctx, "Secret", ns, name)
}

func objects(req admission.Request) (object, old obj, err error) {
	if err = json.Unmarshal(req.Object.Raw, &object); err != nil {
		return nil, nil, fmt.Errorf("request.object: %w", err)
	}
	if len(req.OldObject.Raw) > 0 {
		if err = json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return nil, nil, fmt.Errorf("request.oldObject: %w", err)
		}
	}
	return object, old, nil
}

func denied(msg string) admission.Response {
	// As the admission service answers a rule violation: 403 Forbidden, the message naming every problem.
	r := admission.Denied(msg)
	r.Result.Code = http.StatusForbidden
	r.Result.Reason = metav1.StatusReasonForbidden
	r.Result.Message = msg
	return r
}

type validator struct {
	lookup   Lookup
	systemNS string
}

func (v validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	served.Add(1)
	object, old, err := objects(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if object["metadata"] == nil {
		object["metadata"] = obj{}
	}
	// withIdentity: the namespace and name of the request when the object lacks them.
	meta := object["metadata"].(obj)
	if meta["namespace"] == nil && req.Namespace != "" {
		meta["namespace"] = req.Namespace
	}
	if meta["name"] == nil && req.Name != "" {
		meta["name"] = req.Name
	}
	errs, warnings := ValidateCluster(ctx, string(req.Operation), object, old, v.lookup, v.systemNS)
	if len(errs) > 0 {
		ns, _ := str(meta["namespace"])
		name, ok := str(meta["name"])
		if !ok {
			name, _ = str(meta["generateName"])
		}
		return denied(DenialMessage("KubeDirectorCluster", ns, name, errs)).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

type mutator struct{}

func (mutator) Handle(_ context.Context, req admission.Request) admission.Response {
	served.Add(1)
	object, old, err := objects(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	value, patch, ferr := DecideGenerator(string(req.Operation), object, old)
	if ferr != nil {
		ns, _ := str(get(object, "metadata", "namespace"))
		name, ok := str(get(object, "metadata", "name"))
		if !ok {
			name, _ = str(get(object, "metadata", "generateName"))
		}
		return denied(DenialMessage("KubeDirectorCluster", ns, name, []FieldError{*ferr}))
	}
	if !patch {
		return admission.Allowed("")
	}
	return admission.Patched("", jsonpatch.Operation{Operation: "add", Path: "/spec/configMetaGenerator", Value: value})
}

func main() {
	certDir := flag.String("cert-dir", "", "directory with tls.crt and tls.key")
	port := flag.Int("port", 0, "HTTPS port of the webhooks on 127.0.0.1")
	metricsAddr := flag.String("metrics-bind-address", "127.0.0.1:0", "metrics (Prometheus text) address")
	systemNS := flag.String("system-namespace", "kd-connections-system", "namespace of the system app catalog")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))

	// --kubeconfig is controller-runtime's own flag (pkg/client/config).
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	labelled := func(label string) cache.ByObject {
		req, _ := labels.NewRequirement(label, selection.Exists, nil)
		return cache.ByObject{Label: labels.NewSelector().Add(*req)}
	}
	cm := &metav1.PartialObjectMetadata{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	sec := &metav1.PartialObjectMetadata{}
	sec.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: "0",
		// As a Go author tunes a read-only webhook: managedFields never enter the cache, and reads hand out
		// the cached object itself instead of a deep copy (the rules only read what the lookup returns).
		Cache: cache.Options{
			ByObject:                     map[client.Object]cache.ByObject{cm: labelled(labelCMType), sec: labelled(labelSecretType)},
			DefaultTransform:             cache.TransformStripManagedFields(),
			DefaultUnsafeDisableDeepCopy: &unsafeNoDeepCopy,
		},
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    "127.0.0.1",
			Port:    *port,
			CertDir: *certDir,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) {
				c.MinVersion = tls.VersionTLS12
				c.CipherSuites = []uint16{ // TLS 1.2 AEAD suites; TLS 1.3's are all AEAD
					tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
					tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
					tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,
				}
			}},
		}),
	})
	if err != nil {
		fail(err)
	}
	lookup := cacheLookup{cached: mgr.GetClient(), live: mgr.GetAPIReader()}
	// Informers start now, not on the first review.
	for _, gvk := range []schema.GroupVersionKind{appGVK, clusterGVK} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if _, err := mgr.GetCache().GetInformer(context.Background(), u); err != nil {
			fail(err)
		}
	}
	for _, o := range []client.Object{cm, sec} {
		if _, err := mgr.GetCache().GetInformer(context.Background(), o); err != nil {
			fail(err)
		}
	}
	srv := mgr.GetWebhookServer()
	srv.Register("/validate-kdcluster", &webhook.Admission{Handler: validator{lookup: lookup, systemNS: *systemNS}})
	srv.Register("/mutate-kdcluster", &webhook.Admission{Handler: mutator{}})
	// The bench counts reviews served here (controller-runtime's own counters are per webhook path).
	if err := mgr.AddMetricsServerExtraHandler("/served", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d\n", served.Load())
	})); err != nil {
		fail(err)
	}
	// The bench waits for this line: the caches are synced, every answer comes from them.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("caches did not sync")
		}
		fmt.Println("kd-go-peer: ready")
		return nil
	})); err != nil {
		fail(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kd-go-peer:", err)
	os.Exit(1)
}
