#!/usr/bin/env bash
# Builds the real KubeDirector operator (github.com/bluek8s/kubedirector, Apache-2.0) into the same cache
# as build-bins.sh (<cache>/kubedirector), and copies its deploy/ tree next to it (<cache>/kubedirector-deploy/:
# CRDs, RBAC, example catalog and clusters) so tests use the manifests of the very tree that was built.
#
# Source: ../shared/third_party/kubedirector relative to the checkout (read-only; pinned commit in
# ../shared/third_party/README.md). Where that is absent, the pinned commit is fetched with git from
# upstream into the cache; if neither works the script fails saying what it needs — it never skips.
#
# LOOPBACK ONLY. Upstream, at start, registers the MutatingWebhookConfiguration `kubedirector-webhook` with
# clientConfig.service (the API server would dial the Service's ClusterIP, a private-range address that
# leaves the machine), serves its validator on :8443 (all addresses) and metrics on 0.0.0.0:8383. The
# build patches a COPY of the tree so that:
#   - the webhook configuration uses clientConfig.url https://127.0.0.1:<port>/validate (both webhooks);
#   - the validator listens on 127.0.0.1:<port> only, its certificate carries IP SAN 127.0.0.1;
#   - the validator's Service is headless (clusterIP None: no ClusterIP exists to dial);
#   - metrics bind 127.0.0.1:<port>;
#   - leader election uses MY_NAMESPACE (a local process has no in-cluster namespace file).
# <port>s come from KD_VALIDATOR_PORT / KD_METRICS_PORT at run time (defaults 8443 / 8383), so concurrent
# harnesses do not collide. Every edit must match upstream's line(s) exactly the expected number of times,
# otherwise the build FAILS (an upstream move must never silently fall back to the unsafe address).
#
# Rebuilt only when the binary is missing or the stamp (hash of the source tree + this script) changed.
# Prints the cache directory on the last line of stdout.
#
#   KD_BIN_CACHE          where the binary goes (default: ${XDG_CACHE_HOME:-~/.cache}/kd-connections/bin)
#   KD_KUBEDIRECTOR_SRC   source tree to build (default: ../shared/third_party/kubedirector, else git)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")
repo=$(cd "$here/../.." && pwd)
out=${KD_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kd-connections/bin}
mkdir -p "$out"
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0

upstream=https://github.com/bluek8s/kubedirector
pinned=f404588da4a172a3970db939481c891c872f4a0c

log() { printf '[build-kubedirector] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

source_tree() { # prints the tree to build from; fetches the pinned commit when ../shared is absent
  if [[ -n ${KD_KUBEDIRECTOR_SRC:-} ]]; then
    [[ -f $KD_KUBEDIRECTOR_SRC/cmd/manager/main.go ]] || die "KD_KUBEDIRECTOR_SRC=$KD_KUBEDIRECTOR_SRC has no cmd/manager/main.go"
    echo "$KD_KUBEDIRECTOR_SRC"
    return
  fi
  local shared=$repo/../shared/third_party/kubedirector
  if [[ -f $shared/cmd/manager/main.go ]]; then
    (cd "$shared" && pwd)
    return
  fi
  local dst=$out/kubedirector-git
  if [[ ! -f $dst/cmd/manager/main.go ]] || [[ $(git -C "$dst" rev-parse HEAD 2>/dev/null) != "$pinned" ]]; then
    command -v git >/dev/null || die "needs ../shared/third_party/kubedirector or git to fetch $upstream@$pinned"
    log "../shared/third_party/kubedirector is absent: fetching $upstream@$pinned with git"
    rm -rf "$dst" && mkdir -p "$dst"
    git -C "$dst" init -q &&
      git -C "$dst" fetch -q --depth 1 "$upstream" "$pinned" &&
      git -C "$dst" checkout -q FETCH_HEAD ||
      die "could not fetch $upstream@$pinned (needs network access to github.com, or ../shared/third_party/kubedirector)"
  fi
  echo "$dst"
}

# replace_exactly <file> <count> <perl substitution>: applies a multi-line perl substitution and fails
# unless it replaced exactly <count> times.
replace_exactly() {
  local file=$1 count=$2 expr=$3 n
  n=$(KD_EXPR=$expr perl -0777 -i -pe 'BEGIN { $n = 0 } $n += eval "s$ENV{KD_EXPR}"; die $@ if $@; END { print STDERR "$n\n" }' "$file" 2>&1 >/dev/null | tail -n1)
  [[ $n == "$count" ]] || die "loopback patch: expected $count match(es) in ${file#"$tmp"/}, found $n — upstream moved; refusing to build"
}

patch_loopback() { # patch_loopback <copy of the tree>
  local t=$1
  replace_exactly "$t/cmd/manager/main.go" 1 '/metricsHost               = "0\.0\.0\.0"/metricsHost               = "127.0.0.1"/g'
  replace_exactly "$t/cmd/manager/main.go" 1 '/MetricsBindAddress: fmt\.Sprintf\("%s:%d", metricsHost, metricsPort\),/MetricsBindAddress: kdLoopbackMetricsAddr(metricsPort),/g'
  replace_exactly "$t/cmd/manager/main.go" 1 '/LeaderElectionID:   "kubedirector-lock",/LeaderElectionID:   "kubedirector-lock",\n\t\tLeaderElectionNamespace: os.Getenv("MY_NAMESPACE"),/g'
  cat >"$t/cmd/manager/zz_kd_loopback.go" <<'EOF'
package main

// Added by kd-connections' build-kubedirector.sh: metrics on loopback only.

import (
	"fmt"
	"os"
	"strconv"
)

func kdLoopbackMetricsAddr(def int32) string {
	port := strconv.Itoa(int(def))
	if p := os.Getenv("KD_METRICS_PORT"); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			fmt.Fprintf(os.Stderr, "KD_METRICS_PORT=%q is not a port number\n", p)
			os.Exit(2)
		}
		port = p
	}
	return "127.0.0.1:" + port
}
EOF
  replace_exactly "$t/pkg/validator/server.go" 1 '/Addr: ":" \+ strconv\.Itoa\(validationPort\),/Addr: kdLoopbackValidationAddr(strconv.Itoa(validationPort)),/g'
  replace_exactly "$t/pkg/validator/util.go" 2 '/Service: &arv1\.ServiceReference\{\n\t+Namespace: namespace,\n\t+Name:      serviceName,\n\t+Path:      shared\.StrPtr\(validationPath\),\n\t+\},/URL: shared.StrPtr("https:\/\/" + kdLoopbackValidationAddr(strconv.Itoa(validationPort)) + validationPath),/g'
  replace_exactly "$t/pkg/validator/util.go" 1 '/(serviceName,\n\t+namespace,\n\t+)\[\]string\{\},(\n\t+\[\]string\{\},\n\t+\))/$1\[\]string{"127.0.0.1"},$2/g'
  replace_exactly "$t/pkg/validator/util.go" 1 '/(Spec: v1\.ServiceSpec\{\n)(\t+)(Selector: serviceLabels,)/$1$2ClusterIP: "None",\n$2$3/g'
  # util.go gains a strconv use; add the import once (fails if the import block moved).
  replace_exactly "$t/pkg/validator/util.go" 1 '/\n\t"strings"\n/\n\t"strconv"\n\t"strings"\n/g'
  cat >"$t/pkg/validator/zz_kd_loopback.go" <<'EOF'
package validator

// Added by kd-connections' build-kubedirector.sh: the validator is served, and registered, on loopback only.

import (
	"fmt"
	"os"
	"strconv"
)

func kdLoopbackValidationAddr(def string) string {
	port := def
	if p := os.Getenv("KD_VALIDATOR_PORT"); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			fmt.Fprintf(os.Stderr, "KD_VALIDATOR_PORT=%q is not a port number\n", p)
			os.Exit(2)
		}
		port = p
	}
	return "127.0.0.1:" + port
}
EOF
  # Nothing of the unsafe forms may survive in the copy.
  ! grep -rn --include='*.go' -e 'ServiceReference{' -e '"0\.0\.0\.0"' -e 'Addr: ":"' "$t/cmd" "$t/pkg" >&2 ||
    die "loopback patch: an unsafe address form survived in the patched copy"
}

src=$(source_tree)
stamp=$( (cd "$src" && find . -path ./.git -prune -o -type f -print | LC_ALL=C sort | xargs sha256sum; cat "$self") | sha256sum | cut -c1-16)
if [[ -x $out/kubedirector && -d $out/kubedirector-deploy && -f $out/kubedirector.stamp && $(cat "$out/kubedirector.stamp") == "$stamp" ]]; then
  log "kubedirector: cached in $out"
  echo "$out"
  exit 0
fi

start=$SECONDS
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/kubedirector" && chmod -R u+w "$tmp/kubedirector"
rm -rf "$tmp/kubedirector/.git"
patch_loopback "$tmp/kubedirector"
log "kubedirector: generating zz_generated.deepcopy.go (its Makefile's deepcopy-gen step; first run downloads modules)"
(
  cd "$tmp/kubedirector"
  go run k8s.io/code-generator/cmd/deepcopy-gen \
    -O zz_generated.deepcopy \
    -i github.com/bluek8s/kubedirector/pkg/apis/kubedirector/v1beta1 \
    -h /dev/null -o . -p github.com/bluek8s/kubedirector/pkg/apis/kubedirector/v1beta1
  mv github.com/bluek8s/kubedirector/pkg/apis/kubedirector/v1beta1/zz_generated.deepcopy.go pkg/apis/kubedirector/v1beta1/
  rm -rf github.com
)
log "kubedirector: go build ./cmd/manager"
(cd "$tmp/kubedirector" && go build -trimpath -ldflags "-s -w" -o "$out/kubedirector.tmp" ./cmd/manager)
rm -rf "$out/kubedirector-deploy" && cp -r "$src/deploy" "$out/kubedirector-deploy" && chmod -R u+w "$out/kubedirector-deploy"
mv -f "$out/kubedirector.tmp" "$out/kubedirector"
printf '%s' "$stamp" >"$out/kubedirector.stamp"
log "kubedirector: built in $((SECONDS - start)) s"
echo "$out"
