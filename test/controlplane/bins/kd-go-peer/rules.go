package main

// The connection rules of shared/src/domain (validate-kdcluster.ts, classify-connection.ts, connectable.ts,
// generator.ts) ported to Go for the benchmark's peer webhook: same checks, same messages, same patch.
// Objects are the JSON the API server sends (map[string]any), as unstructured.Unstructured holds them.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sync"

	"github.com/Masterminds/semver/v3"
)

type obj = map[string]any

// Lookup is the read port: the informer cache (a live metadata read on a ConfigMap/Secret miss).
type Lookup interface {
	App(ctx context.Context, ns, name string) (obj, bool)
	Cluster(ctx context.Context, ns, name string) (obj, bool)
	ConfigMapLabels(ctx context.Context, ns, name string) (map[string]string, bool)
	SecretLabels(ctx context.Context, ns, name string) (map[string]string, bool)
}

type FieldError struct{ Field, Message string }

const (
	labelCMType     = "kubedirector.hpe.com/cmType"
	labelSecretType = "kubedirector.hpe.com/secretType"
	cycleLimit      = 64
)

var connectionLists = []string{"clusters", "configmaps", "secrets"}
var kindOfList = map[string]string{"clusters": "Cluster", "configmaps": "ConfigMap", "secrets": "Secret"}

func get(o obj, path ...string) any {
	var cur any = o
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func str(v any) (string, bool) { s, ok := v.(string); return s, ok }

// jsString renders a value the way JavaScript's String() does for the messages.
func jsString(v any) string {
	switch t := v.(type) {
	case nil:
		return "undefined"
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	default:
		return "[object Object]"
	}
}

// jsonString is JSON.stringify: no HTML escaping of <, > and & (json.Marshal escapes them).
func jsonString(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// number reads a JSON number whichever way it was decoded: encoding/json gives float64, the
// informer cache's unstructured objects int64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

// ---- names

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func invalidObjectName(v any) string {
	s, ok := v.(string)
	if !ok {
		if v == nil {
			return "must be a string, not null"
		}
		return "must be a string, not " + jsTypeof(v)
	}
	switch {
	case s == "":
		return "must not be empty"
	case strings.Contains(s, "/"):
		return `must be a name in the same namespace, without a "namespace/" prefix`
	case len(s) > 253:
		return fmt.Sprintf("must be at most 253 characters (has %d)", len(s))
	case !dns1123.MatchString(s):
		return "must be a lowercase RFC 1123 name: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	}
	return ""
}

func jsTypeof(v any) string {
	switch v.(type) {
	case float64:
		return "number"
	case bool:
		return "boolean"
	case string:
		return "string"
	default:
		return "object"
	}
}

// ---- connectable_to

var exactVersion = regexp.MustCompile(`^v?\d+(\.\d+)*([-+][0-9A-Za-z.+-]+)?$`)
var numericVersion = regexp.MustCompile(`^\d+(\.\d+)*$`)

func versionMatches(spec string, version any) bool {
	v, ok := version.(string)
	if !ok {
		return false
	}
	s := strings.TrimSpace(spec)
	if s == "" {
		return false
	}
	if exactVersion.MatchString(s) {
		a := strings.TrimPrefix(s, "v")
		b := strings.TrimPrefix(strings.TrimSpace(v), "v")
		if a == b {
			return true
		}
		if !numericVersion.MatchString(a) || !numericVersion.MatchString(b) {
			return false
		}
		pa, pb := strings.Split(a, "."), strings.Split(b, ".")
		for i := 0; i < len(pa) || i < len(pb); i++ {
			x, y := 0.0, 0.0
			if i < len(pa) {
				x, _ = strconv.ParseFloat(pa[i], 64)
			}
			if i < len(pb) {
				y, _ = strconv.ParseFloat(pb[i], 64)
			}
			if x != y {
				return false
			}
		}
		return true
	}
	c, err := constraint(s)
	if err != nil {
		return false
	}
	sv, err := semver.NewVersion(v)
	if err != nil {
		return false
	}
	return c.Check(sv)
}

var (
	constraints   = map[string]*semver.Constraints{}
	constraintsMu sync.RWMutex
)

// constraint parses a range once (the same few entries are checked by every review), as
// shared/src/domain/connectable.ts memoizes its parsed ranges.
func constraint(s string) (*semver.Constraints, error) {
	constraintsMu.RLock()
	c, ok := constraints[s]
	constraintsMu.RUnlock()
	if ok {
		return c, nil
	}
	c, err := semver.NewConstraint(s)
	if err != nil {
		return nil, err
	}
	constraintsMu.Lock()
	if len(constraints) >= 1000 {
		constraints = map[string]*semver.Constraints{}
	}
	constraints[s] = c
	constraintsMu.Unlock()
	return c, nil
}

func entryFields(e obj) []string {
	var out []string
	for _, k := range []string{"category", "distroID", "version"} {
		if _, ok := e[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

func entryMatches(e obj, target obj) bool {
	if len(entryFields(e)) == 0 {
		return false
	}
	if c, ok := e["category"]; ok && c != target["category"] {
		return false
	}
	if d, ok := e["distroID"]; ok && d != target["distroID"] {
		return false
	}
	if v, ok := e["version"]; ok {
		s, _ := v.(string)
		if !versionMatches(s, target["version"]) {
			return false
		}
	}
	return true
}

func describeEntry(e obj) string {
	var parts []string
	for _, k := range entryFields(e) {
		parts = append(parts, k+": "+jsonString(e[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func describeApp(app obj) string {
	s, _ := app["spec"].(obj)
	q := func(v any) string {
		if v == nil || v == "" {
			return "none"
		}
		return jsonString(v)
	}
	name, _ := str(get(app, "metadata", "name"))
	return fmt.Sprintf(`app "%s" (category %s, distroID %s, version %s)`, name, q(s["category"]), q(s["distroID"]), q(s["version"]))
}

func describeAllowed(rules []any) string {
	var parts []string
	for _, r := range rules {
		e, _ := r.(obj)
		parts = append(parts, describeEntry(e))
	}
	return strings.Join(parts, ", ")
}

// ---- app resolution

type resolved struct {
	app obj
	ns  string
}

func resolveApp(ctx context.Context, l Lookup, clusterNS string, spec obj, systemNS string) *resolved {
	name, ok := spec["app"].(string)
	if !ok || name == "" {
		return nil
	}
	order := []string{clusterNS, systemNS}
	switch spec["appCatalog"] {
	case "local":
		order = []string{clusterNS}
	case "system":
		order = []string{systemNS}
	}
	for _, ns := range order {
		if a, ok := l.App(ctx, ns, name); ok {
			return &resolved{a, ns}
		}
	}
	return nil
}

func appSearchDescription(clusterNS string, appCatalog any, systemNS string) string {
	switch appCatalog {
	case "local":
		return fmt.Sprintf(`in namespace "%s" (appCatalog "local")`, clusterNS)
	case "system":
		return fmt.Sprintf(`in the system catalog (namespace "%s", appCatalog "system")`, systemNS)
	}
	return fmt.Sprintf(`in namespace "%s" or in the system catalog (namespace "%s")`, clusterNS, systemNS)
}

// ---- one connection

type verdict struct{ state, message, note string }

func selfMessage(name string) string {
	return fmt.Sprintf(`a cluster cannot connect to itself ("%s")`, name)
}

func notFound(kind, name, ns string) string {
	return fmt.Sprintf(`%s "%s" not found in namespace "%s"`, strings.ToLower(kind), name, ns)
}

func classifyCluster(ctx context.Context, l Lookup, ns, self, name string, own *resolved, ownSpec obj, systemNS string) verdict {
	if name == self {
		return verdict{state: "NotConnectable", message: selfMessage(name)}
	}
	target, ok := l.Cluster(ctx, ns, name)
	if !ok {
		return verdict{state: "Missing", message: notFound("Cluster", name, ns)}
	}
	tspec, _ := target["spec"].(obj)
	if tspec == nil {
		tspec = obj{}
	}
	targetApp := resolveApp(ctx, l, ns, tspec, systemNS)
	var ownRules any
	if own != nil {
		ownRules = get(own.app, "spec", "connectable_to")
	}
	if targetApp == nil {
		where := appSearchDescription(ns, tspec["appCatalog"], systemNS)
		unchecked := ""
		if own != nil && ownRules != nil {
			n, _ := str(get(own.app, "metadata", "name"))
			unchecked = fmt.Sprintf(`; it cannot be checked against connectable_to of app "%s"`, n)
		}
		return verdict{state: "NotConnectable", message: fmt.Sprintf(`cluster "%s" uses app "%s", which was not found %s%s`, name, jsString(tspec["app"]), where, unchecked)}
	}
	if own == nil {
		which := fmt.Sprintf(`app "%s" was not found %s`, jsString(ownSpec["app"]), appSearchDescription(ns, ownSpec["appCatalog"], systemNS))
		return verdict{state: "NotConnectable", message: fmt.Sprintf("this cluster's %s, so connectable_to cannot be checked", which)}
	}
	if ownRules != nil {
		rules, _ := ownRules.([]any)
		ownName, _ := str(get(own.app, "metadata", "name"))
		tAppSpec, _ := targetApp.app["spec"].(obj)
		why := ""
		if len(rules) == 0 {
			why = fmt.Sprintf(`app "%s" allows no cluster connections (connectable_to is empty)`, ownName)
		} else {
			match := false
			for _, r := range rules {
				if e, ok := r.(obj); ok && entryMatches(e, tAppSpec) {
					match = true
					break
				}
			}
			if !match {
				why = fmt.Sprintf(`connectable_to of app "%s" does not allow it; allowed: %s`, ownName, describeAllowed(rules))
			}
		}
		if why != "" {
			return verdict{state: "NotConnectable", message: fmt.Sprintf(`cluster "%s" uses %s: %s`, name, describeApp(targetApp.app), why)}
		}
	}
	if ready, _ := number(get(target, "status", "members", "ready")); ready > 0 {
		return verdict{state: "Connected"}
	}
	return verdict{state: "Connected", note: fmt.Sprintf(`cluster "%s" has no ready members yet; its section of configmeta fills in as they come up`, name)}
}

func classifyObject(ctx context.Context, l Lookup, kind, ns, name string) verdict {
	var labels map[string]string
	var ok bool
	label := labelCMType
	if kind == "ConfigMap" {
		labels, ok = l.ConfigMapLabels(ctx, ns, name)
	} else {
		labels, ok = l.SecretLabels(ctx, ns, name)
		label = labelSecretType
	}
	if !ok {
		return verdict{state: "Missing", message: notFound(kind, name, ns)}
	}
	if _, has := labels[label]; !has {
		return verdict{state: "Unlabeled", message: fmt.Sprintf("%s \"%s\" lacks label %s; add it (its value groups the %s in configmeta) to make it connectable", strings.ToLower(kind), name, label, kind)}
	}
	return verdict{state: "Connected"}
}

// ---- the cluster

func connectionSet(conns any, list string) map[string]bool {
	out := map[string]bool{}
	if items, ok := get(asObj(conns), list).([]any); ok {
		for _, x := range items {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

func asObj(v any) obj { o, _ := v.(obj); return o }

func generatorValueError(v any) *FieldError {
	if v == nil {
		return nil
	}
	if f, ok := v.(float64); ok && f >= 0 && f == math.Trunc(f) {
		return nil
	}
	prefix := ""
	if _, ok := v.(string); ok {
		prefix = "the string "
	}
	return &FieldError{"spec.configMetaGenerator", fmt.Sprintf("must be a whole number (0 or more), not %s%s; leave it out of manifests and the webhook sets it", prefix, jsonString(v))}
}

func checkGenerator(was, now any) []FieldError {
	if e := generatorValueError(now); e != nil {
		return []FieldError{*e}
	}
	w, ok := was.(float64)
	if !ok {
		return nil
	}
	if now == nil {
		return []FieldError{{"spec.configMetaGenerator", fmt.Sprintf("may not be removed (it is %s); leave it out of manifests and the webhook keeps it", jsString(w))}}
	}
	if n, ok := now.(float64); ok && n < w {
		return []FieldError{{"spec.configMetaGenerator", fmt.Sprintf("may not be lowered (from %s to %s); it counts configmeta regenerations and only goes up", jsString(w), jsString(n))}}
	}
	return nil
}

// ValidateCluster is validateCluster of shared/src/domain/validate-kdcluster.ts.
func ValidateCluster(ctx context.Context, op string, object, oldObject obj, l Lookup, systemNS string) (errs []FieldError, warnings []string) {
	ns, _ := str(get(object, "metadata", "namespace"))
	name, _ := str(get(object, "metadata", "name"))
	if get(object, "metadata", "deletionTimestamp") != nil {
		return nil, nil
	}
	spec, ok := object["spec"].(obj)
	if !ok {
		return []FieldError{{"spec", "required"}}, nil
	}
	var oldSpec obj
	if op == "UPDATE" && oldObject != nil {
		oldSpec, _ = oldObject["spec"].(obj)
	}
	if op == "UPDATE" && oldSpec != nil && reflect.DeepEqual(spec, oldSpec) {
		return nil, nil
	}
	appChanged := oldSpec == nil || oldSpec["app"] != spec["app"] || oldSpec["appCatalog"] != spec["appCatalog"]
	own := resolveApp(ctx, l, ns, spec, systemNS)
	if own == nil {
		msg := fmt.Sprintf(`app "%s" not found %s`, jsString(spec["app"]), appSearchDescription(ns, spec["appCatalog"], systemNS))
		if appChanged {
			errs = append(errs, FieldError{"spec.app", msg})
		} else {
			warnings = append(warnings, "spec.app: "+msg+"; connections cannot be checked against its connectable_to")
		}
	}
	conns := spec["connections"]
	var oldConns any
	if oldSpec != nil {
		oldConns = oldSpec["connections"]
	}
	for _, list := range connectionLists {
		before := connectionSet(oldConns, list)
		items, _ := get(asObj(conns), list).([]any)
		seen := map[string]int{}
		for i, item := range items {
			field := fmt.Sprintf("spec.connections.%s[%d]", list, i)
			if bad := invalidObjectName(item); bad != "" {
				errs = append(errs, FieldError{field, jsonString(item) + " " + bad})
				continue
			}
			n := item.(string)
			if first, dup := seen[n]; dup {
				errs = append(errs, FieldError{field, fmt.Sprintf(`duplicate entry "%s" (also at index %d)`, n, first)})
				continue
			}
			seen[n] = i
			if list == "clusters" && n == name {
				errs = append(errs, FieldError{field, selfMessage(n)})
				continue
			}
			added := !before[n]
			var v verdict
			if list == "clusters" {
				v = classifyCluster(ctx, l, ns, name, n, own, spec, systemNS)
			} else {
				v = classifyObject(ctx, l, kindOfList[list], ns, n)
			}
			if v.state != "Connected" {
				if added {
					m := v.message
					if m == "" {
						m = v.state
					}
					errs = append(errs, FieldError{field, m})
				} else {
					warnings = append(warnings, field+": "+v.message+"; kept because it was connected before this change")
				}
			} else if added && v.note != "" {
				warnings = append(warnings, field+": "+v.note)
			}
		}
	}
	var oldGen any
	if oldSpec != nil {
		oldGen = oldSpec["configMetaGenerator"]
	}
	errs = append(errs, checkGenerator(oldGen, spec["configMetaGenerator"])...)

	before := connectionSet(oldConns, "clusters")
	var addedClusters []string
	for _, c := range orderedSet(get(asObj(conns), "clusters")) {
		if !before[c] && c != name {
			addedClusters = append(addedClusters, c)
		}
	}
	if len(errs) == 0 && len(addedClusters) > 0 {
		if cycle := findCycle(ctx, name, ns, addedClusters, l); cycle != nil {
			warnings = append(warnings, "spec.connections.clusters: connection cycle "+strings.Join(cycle, " → ")+"; allowed (each cluster sees the others one hop deep)")
		}
	}
	return errs, warnings
}

// orderedSet: the distinct strings of a list in first-seen order (a JavaScript Set's iteration order).
func orderedSet(v any) []string {
	items, _ := v.([]any)
	seen := map[string]bool{}
	var out []string
	for _, x := range items {
		if s, ok := x.(string); ok && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func findCycle(ctx context.Context, self, ns string, start []string, l Lookup) []string {
	visited := map[string]bool{}
	var queue [][]string
	for _, s := range start {
		queue = append(queue, []string{self, s})
	}
	for len(queue) > 0 && len(visited) < cycleLimit {
		path := queue[0]
		queue = queue[1:]
		at := path[len(path)-1]
		if visited[at] {
			continue
		}
		visited[at] = true
		c, _ := l.Cluster(ctx, ns, at)
		next := orderedSet(get(c, "spec", "connections", "clusters"))
		sort.Strings(next)
		for _, n := range next {
			if n == self {
				return append(append([]string{}, path...), self)
			}
			if !visited[n] {
				queue = append(queue, append(append([]string{}, path...), n))
			}
		}
	}
	return nil
}

// DenialMessage is denialMessage of shared/src/domain/field-errors.ts.
func DenialMessage(kind, ns, name string, errs []FieldError) string {
	where := name
	if ns != "" {
		where = ns + "/" + name
	}
	count := fmt.Sprintf("%d problems", len(errs))
	if len(errs) == 1 {
		count = "1 problem"
	}
	lines := []string{fmt.Sprintf("%s %s is not valid (%s):", kind, where, count)}
	for _, e := range errs {
		lines = append(lines, "- "+e.Field+": "+e.Message)
	}
	return strings.Join(lines, "\n")
}

// DecideGenerator is decideGenerator of shared/src/domain/generator.ts: the value to add, if any.
func DecideGenerator(op string, object, oldObject obj) (value float64, patch bool, err *FieldError) {
	spec := asObj(object["spec"])
	incoming := spec["configMetaGenerator"]
	if e := generatorValueError(incoming); e != nil {
		return 0, false, e
	}
	in, hasIn := incoming.(float64)
	var v float64
	has := false
	if op == "CREATE" || oldObject == nil {
		if hasAny(spec["connections"]) {
			v, has = in+1, true
		} else {
			v, has = in, hasIn
		}
	} else {
		oldSpec := asObj(oldObject["spec"])
		base, hasBase := oldSpec["configMetaGenerator"].(float64)
		if changedConnections(oldSpec["connections"], spec["connections"]) {
			x := base
			if hasIn {
				x = in
			}
			v, has = math.Max(x, base+1), true
		} else if !hasIn {
			v, has = base, hasBase
		} else {
			v, has = in, true
		}
	}
	return v, has && (!hasIn || v != in), nil
}

func hasAny(conns any) bool {
	for _, l := range connectionLists {
		if len(connectionSet(conns, l)) > 0 {
			return true
		}
	}
	return false
}

func changedConnections(a, b any) bool {
	for _, l := range connectionLists {
		x, y := connectionSet(a, l), connectionSet(b, l)
		if len(x) != len(y) {
			return true
		}
		for k := range x {
			if !y[k] {
				return true
			}
		}
	}
	return false
}
