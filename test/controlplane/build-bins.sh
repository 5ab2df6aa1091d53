#!/usr/bin/env bash
# Builds kube-apiserver, etcd, kubectl and helm — and the node's kubelet, kube-controller-manager and
# kube-scheduler — from the Go module proxy into a cache outside the repository. Each tool is pinned by
# its own module under bins/<dir>/ (go.mod + go.sum committed), so one tool's dependencies never move
# another's (MVS would otherwise upgrade kube-apiserver's etcd client when etcd's server sits in the
# same module). The three node binaries share bins/kube-node/: kube-apiserver's go.mod unchanged, its
# go.sum plus the kubelet's extra modules (cadvisor, containerd api, CSI spec, OCI specs).
#
# kd-go-peer is the benchmark's controller-runtime peer webhook (its Go sources live in its module);
# it is built only when asked for by name (`npm run bench` does, on first use), never by default.
#
# A binary is rebuilt only when it is missing or its module changed (a stamp holds the hash of
# go.mod + go.sum (+ the module's .go files) + this script). Prints the cache directory on the last line of stdout.
#
#   KD_BIN_CACHE   where binaries go (default: ${XDG_CACHE_HOME:-~/.cache}/kd-connections/bin)
#   bash build-bins.sh [name ...]   (default: all seven; kd-go-peer only by name)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${KD_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kd-connections/bin}
mkdir -p "$out"

# Never download a newer toolchain behind our back, never pick up a go.work above us,
# static binaries like upstream's.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly

log() { printf '[build-bins] %s\n' "$*" >&2; }

module_version() { # module_version <dir> <module path>: the pinned version from go.mod
  sed -n "s#^[[:space:]]*\(require[[:space:]]*\)\{0,1\}$2 \(v[^ ]*\).*#\2#p" "$1/go.mod" | head -n1
}

module_dir() { # module_dir <name>: the folder under bins/ that pins it
  case $1 in
    kubelet | kube-controller-manager | kube-scheduler) echo "$here/bins/kube-node" ;;
    *) echo "$here/bins/$1" ;;
  esac
}

stamp_of() {
  local d
  d=$(module_dir "$1")
  cat "$d/go.mod" "$d/go.sum" "${BASH_SOURCE[0]}" $(find "$d" -maxdepth 1 -name '*.go' | sort) | sha256sum | cut -c1-16
}

k8s_ldflags() { # version stamping as upstream hack/lib/version.sh does it
  local v=$1 dir=$2 minor commit date ldf="-s -w"
  minor=$(cut -d. -f2 <<<"$v")
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  commit=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$v" 2>/dev/null |
    sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p' | head -n1 || true)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$date"
    [[ -n $commit ]] && ldf+=" -X $p.gitCommit=$commit"
  done
  printf '%s' "$ldf"
}

build() {
  local name=$1 dir pkg ldflags version stamp
  dir=$(module_dir "$name")
  stamp=$(stamp_of "$name")
  if [[ -x "$out/$name" && -f "$out/$name.stamp" && $(cat "$out/$name.stamp") == "$stamp" ]]; then
    log "$name: cached in $out"
    return
  fi
  case $name in
    kube-apiserver | kubectl | kubelet | kube-controller-manager | kube-scheduler)
      version=$(module_version "$dir" k8s.io/kubernetes)
      pkg=k8s.io/kubernetes/cmd/$name
      ldflags=$(k8s_ldflags "$version" "$dir")
      ;;
    etcd)
      version=$(module_version "$dir" go.etcd.io/etcd/server/v3)
      pkg=go.etcd.io/etcd/server/v3
      ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$version"
      ;;
    helm)
      version=$(module_version "$dir" helm.sh/helm/v3)
      pkg=helm.sh/helm/v3/cmd/helm
      ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
      ;;
    kd-go-peer)
      version=$(module_version "$dir" sigs.k8s.io/controller-runtime)
      pkg=.
      ldflags="-s -w"
      ;;
    *) log "unknown binary $name"; exit 2 ;;
  esac
  log "$name $version: building (first build downloads modules; kube-apiserver takes several minutes on 2 cores)"
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
  mv -f "$out/$name.tmp" "$out/$name"
  printf '%s' "$stamp" >"$out/$name.stamp"
  log "$name $version: built in $((SECONDS - start)) s"
}

names=("$@")
((${#names[@]})) || names=(kube-apiserver etcd kubectl helm kubelet kube-controller-manager kube-scheduler)
for n in "${names[@]}"; do build "$n"; done
echo "$out"
