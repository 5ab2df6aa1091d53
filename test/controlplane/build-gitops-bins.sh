#!/usr/bin/env bash
# Builds the GitOps engines the gitops tests run against the test control plane — Flux's source-controller
# and kustomize-controller, and Argo CD's multi-call binary (application-controller, repo-server) — from
# the Go module proxy into the same cache as build-bins.sh, and copies each engine's CRDs from the very
# module it was built from next to it (<cache>/<name>-crds/). One pinning module per binary under
# bins/<dir>/ (go.mod + go.sum committed): upstream's go.mod with its replace blocks copied in, since a
# dependency's replaces never reach the module that builds it.
#
# A separate script from build-bins.sh so that its stamps (hash of go.mod + go.sum + this script) stay
# apart: a change here never rebuilds kube-apiserver. Rebuilt only when missing or its module changed.
#
#   bash build-gitops-bins.sh [source-controller|kustomize-controller|argocd ...]   (default: all three)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${KD_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kd-connections/bin}
mkdir -p "$out"
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly

log() { printf '[build-gitops-bins] %s\n' "$*" >&2; }

# Argo CD v2's application-controller serves metrics and /healthz on 0.0.0.0 with no flag to change it
# (controller/appcontroller.go). Tests keep every listener on loopback, so argocd is built from a
# temporary copy of the module with that one address literal changed to 127.0.0.1, through a temporary
# go.mod (-modfile) replacing the module by the copy (Go refuses -overlay inside the module cache); the
# build fails if upstream's line is not there exactly once. Prints the -modfile flag.
argocd_loopback_modfile() {
  local dir=$1 src=$2 tmp file
  tmp=$(mktemp -d)
  cp -r "$src" "$tmp/argo-cd" && chmod -R u+w "$tmp/argo-cd"
  file=$tmp/argo-cd/controller/appcontroller.go
  sed -i 's/"0\.0\.0\.0:%d", metricsPort/"127.0.0.1:%d", metricsPort/' "$file"
  [[ $(diff "$src/controller/appcontroller.go" "$file" | grep -c '^>') == 1 ]] ||
    { log "argocd: the metrics address line was not found exactly once in $src/controller/appcontroller.go"; exit 1; }
  { cat "$dir/go.mod"; printf '\nreplace %s => %s\n' "$3" "$tmp/argo-cd"; } >"$tmp/go.mod"
  cp "$dir/go.sum" "$tmp/go.sum"
  echo "-modfile=$tmp/go.mod"
}

build() {
  local name=$1 dir module pkg crds ldflags version stamp
  case $name in
    source-controller | kustomize-controller)
      dir=$here/bins/flux-$name module=github.com/fluxcd/$name pkg=$module crds=config/crd/bases/*.yaml
      ldflags="-s -w"
      ;;
    argocd)
      dir=$here/bins/argocd module=github.com/argoproj/argo-cd/v2 pkg=$module/cmd crds=manifests/crds/*-crd.yaml
      ;;
    *) log "unknown binary $name"; exit 2 ;;
  esac
  version=$(cd "$dir" && go list -m -f '{{.Version}}' "$module")
  [[ $name == argocd ]] &&
    ldflags="-s -w -X $module/common.version=${version#v} -X $module/common.gitTreeState=clean"
  stamp=$(cat "$dir/go.mod" "$dir/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
  if [[ -x "$out/$name" && -d "$out/$name-crds" && -f "$out/$name.stamp" && $(cat "$out/$name.stamp") == "$stamp" ]]; then
    log "$name: cached in $out"
    return
  fi
  log "$name $version: building (the first build downloads modules; argocd takes many minutes on 2 cores)"
  local start=$SECONDS src modfile=()
  (cd "$dir" && go mod download "$module")
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' "$module")
  if [[ $name == argocd ]]; then
    local flag
    flag=$(argocd_loopback_modfile "$dir" "$src" "$module")
    modfile=("$flag")
  fi
  (cd "$dir" && go build -trimpath "${modfile[@]}" -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
  if ((${#modfile[@]})); then rm -rf "$(dirname "${modfile[0]#-modfile=}")"; fi
  rm -rf "$out/$name-crds" && mkdir -p "$out/$name-crds"
  # shellcheck disable=SC2086 # the glob is meant to expand
  cp $src/$crds "$out/$name-crds/"
  mv -f "$out/$name.tmp" "$out/$name"
  printf '%s' "$stamp" >"$out/$name.stamp"
  log "$name $version: built in $((SECONDS - start)) s"
}

names=("$@")
((${#names[@]})) || names=(source-controller kustomize-controller argocd)
for n in "${names[@]}"; do build "$n"; done
echo "$out"
