#!/usr/bin/env bash
# Builds the OCI registry and its push client from the Go module proxy into the same cache as
# build-bins.sh: CNCF Distribution's `registry` (github.com/distribution/distribution/v3, cmd/registry),
# which the harness runs on 127.0.0.1, and go-containerregistry's `crane`, which `npm run images -- --push`
# pushes the image indexes with and the tests read the registry with. One pinning module per binary under
# bins/<name>/ (go.mod + go.sum committed; neither upstream go.mod has a replace block to copy).
#
# A separate script from build-bins.sh so that its stamps (hash of go.mod + go.sum + this script) stay
# apart: a change here never rebuilds kube-apiserver. Rebuilt only when missing or its module changed.
# Prints the cache directory on the last line of stdout.
#
#   KD_BIN_CACHE   where binaries go (default: ${XDG_CACHE_HOME:-~/.cache}/kd-connections/bin)
#   bash build-registry-bins.sh [registry|crane ...]   (default: both)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${KD_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kd-connections/bin}
mkdir -p "$out"
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly

log() { printf '[build-registry-bins] %s\n' "$*" >&2; }

build() {
  local name=$1 dir module pkg ldflags version stamp
  case $name in
    registry)
      module=github.com/distribution/distribution/v3 pkg=$module/cmd/registry
      ;;
    crane)
      module=github.com/google/go-containerregistry pkg=$module/cmd/crane
      ;;
    *) log "unknown binary $name"; exit 2 ;;
  esac
  dir=$here/bins/$name
  version=$(cd "$dir" && go list -m -f '{{.Version}}' "$module")
  case $name in
    # as upstream's Makefile stamps it (`registry --version`)
    registry) ldflags="-s -w -X $module/version.version=$version -X $module/version.mainpkg=$module" ;;
    # as upstream's .goreleaser.yaml stamps it (`crane version`)
    crane) ldflags="-s -w -X $module/cmd/crane/cmd.Version=$version" ;;
  esac
  stamp=$(cat "$dir/go.mod" "$dir/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
  if [[ -x "$out/$name" && -f "$out/$name.stamp" && $(cat "$out/$name.stamp") == "$stamp" ]]; then
    log "$name: cached in $out"
    return
  fi
  log "$name $version: building (the first build downloads modules)"
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
  mv -f "$out/$name.tmp" "$out/$name"
  printf '%s' "$stamp" >"$out/$name.stamp"
  log "$name $version: built in $((SECONDS - start)) s"
}

names=("$@")
((${#names[@]})) || names=(registry crane)
for n in "${names[@]}"; do build "$n"; done
echo "$out"
