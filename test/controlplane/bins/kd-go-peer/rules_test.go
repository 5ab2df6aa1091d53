package main

import (
	"context"
	"testing"
)

// The version rules of shared/src/domain/connectable.ts (its unit tests hold the same cases).
func TestVersionMatches(t *testing.T) {
	cases := []struct {
		spec, version string
		want          bool
	}{
		{">=2.4 <3", "2.4.5", true},
		{">=2.4 <3", "3.0.0", false},
		{">=2.4 <3", "2.3.9", false},
		{"2.4", "2.4.0", true},
		{"2.4", "2.4.1", false},
		{"v2.4.5", "2.4.5", true},
		{"5.1.0.0", "5.1.0.1", false},
		{"^1.2", "1.9.0", true},
		{"", "1.0.0", false},
	}
	for _, c := range cases {
		if got := versionMatches(c.spec, c.version); got != c.want {
			t.Errorf("versionMatches(%q, %q) = %v, want %v", c.spec, c.version, got, c.want)
		}
	}
}

type mapLookup struct{ apps, clusters map[string]obj }

func (m mapLookup) App(_ context.Context, ns, name string) (obj, bool) {
	a, ok := m.apps[ns+"/"+name]
	return a, ok
}
func (m mapLookup) Cluster(_ context.Context, ns, name string) (obj, bool) {
	c, ok := m.clusters[ns+"/"+name]
	return c, ok
}
func (mapLookup) ConfigMapLabels(context.Context, string, string) (map[string]string, bool) {
	return map[string]string{labelCMType: "x"}, true
}
func (mapLookup) SecretLabels(context.Context, string, string) (map[string]string, bool) {
	return nil, false
}

// A denial names every problem the way denialMessage does, with < and > as JSON.stringify writes them;
// a ready count decoded as int64 (the informer cache's unstructured objects) counts as ready.
func TestDenialAndReady(t *testing.T) {
	l := mapLookup{
		apps: map[string]obj{
			"ns/nb":    {"metadata": obj{"name": "nb"}, "spec": obj{"category": "notebook", "connectable_to": []any{obj{"version": ">=2.4 <3"}}}},
			"ns/train": {"metadata": obj{"name": "train"}, "spec": obj{"category": "training", "version": "2.4.5"}},
		},
		clusters: map[string]obj{
			"ns/t0":  {"spec": obj{"app": "train"}, "status": obj{"members": obj{"ready": int64(1)}}},
			"ns/nb0": {"spec": obj{"app": "nb"}},
		},
	}
	object := obj{"metadata": obj{"namespace": "ns", "name": "me"}, "spec": obj{"app": "nb", "connections": obj{"clusters": []any{"t0", "nb0"}}}}
	errs, warnings := ValidateCluster(context.Background(), "CREATE", object, nil, l, "sys")
	if len(warnings) != 0 {
		t.Errorf("warnings %q, want none (t0 has a ready member)", warnings)
	}
	got := DenialMessage("KubeDirectorCluster", "ns", "me", errs)
	want := "KubeDirectorCluster ns/me is not valid (1 problem):\n" +
		`- spec.connections.clusters[1]: cluster "nb0" uses app "nb" (category "notebook", distroID none, version none): connectable_to of app "nb" does not allow it; allowed: {version: ">=2.4 <3"}`
	if got != want {
		t.Errorf("message\n%s\nwant\n%s", got, want)
	}
	if v, patch, err := DecideGenerator("CREATE", object, nil); err != nil || !patch || v != 1 {
		t.Errorf("DecideGenerator = %v %v %v, want 1 true nil", v, patch, err)
	}
}
