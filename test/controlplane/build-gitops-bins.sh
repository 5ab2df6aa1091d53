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
#   bash build-gitops-bins.sh [source-controller|kustomize-controller|argocd ...]
#   (default: the two Flux controllers; argocd only when named — see test/gitops/argocd.pending.ts)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${KD_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kd-connections/bin}
mkdir -p "$out"
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly

log() { printf '[build-gitops-bins] %s\n' "$*" >&2; }

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
  local start=$SECONDS src
  (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' "$module")
  rm -rf "$out/$name-crds" && mkdir -p "$out/$name-crds"
  # shellcheck disable=SC2086 # the glob is meant to expand
  cp $src/$crds "$out/$name-crds/"
  mv -f "$out/$name.tmp" "$out/$name"
  printf '%s' "$stamp" >"$out/$name.stamp"
  log "$name $version: built in $((SECONDS - start)) s"
}

names=("$@")
((${#names[@]})) || names=(source-controller kustomize-controller)
for n in "${names[@]}"; do build "$n"; done
echo "$out"
