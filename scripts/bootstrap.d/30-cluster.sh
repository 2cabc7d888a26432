#!/usr/bin/env bash
# Cluster lab binaries: kube-apiserver/controller-manager/scheduler and the kubelet of the
# lab's real node (k8s.io/kubernetes, one module, one version),
# kwok (sigs.k8s.io/kwok), KEDA operator + metrics API server (github.com/kedacore/keda/v2),
# the lab's own DRA kubelet plugin for the real node (lab/cluster/go/dra, built from
# k8s.io/dynamic-resource-allocation), all built from the Go modules under lab/cluster/go/,
# plus etcd from Debian trixie's etcd-server .deb (unpacked, not installed). Everything
# lands in ${KGC_CACHE}/cluster/.
# Idempotent: a module is rebuilt only when its go.mod/go.sum or the Go version changed
# (and, for a module of our own code — OWN_SOURCES — its .go files).
#
# Env: KGC_CACHE (default ~/.cache/kgc), GO (default: go on PATH, else /usr/local/go/bin/go),
#      KGC_CLUSTER_MODULES (default "kube kwok keda dra"), KGC_CLUSTER_FORCE=1 rebuilds,
#      KGC_CLUSTER_TIMINGS=<file> appends "module seconds" lines.
set -euo pipefail

REPO="${KGC_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
CACHE="${KGC_CACHE:-$HOME/.cache/kgc}/cluster"
BIN="$CACHE/bin"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
# Go toolchain used when no go >= 1.26 is installed: the official toolchain module, fetched
# through the Go module proxy (the same download GOTOOLCHAIN=auto does), pinned by SHA256.
GO_TOOLCHAIN_VERSION="v0.0.1-go1.26.8.linux-amd64"
GO_TOOLCHAIN_SHA256="30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7"
MODULES="${KGC_CLUSTER_MODULES-kube kwok keda dra}"
mkdir -p "$BIN" "$CACHE/logs"

# Dedicated build cache so the lab's builds are reproducible and measurable on their own.
export GOCACHE="${KGC_CLUSTER_GOCACHE:-$CACHE/gocache}"
export GOFLAGS="-trimpath"
export CGO_ENABLED=0
export GOTOOLCHAIN=local

log() { printf '30-cluster: %s\n' "$*" >&2; }

go_ok() {
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  [[ "${v%%.*}" -gt 1 || ( "${v%%.*}" -eq 1 && "$(cut -d. -f2 <<<"$v")" -ge 26 ) ]]
}

ensure_go() {
  go_ok "$GO" && return 0
  local dir="$CACHE/go-toolchain"
  if ! go_ok "$dir/bin/go"; then
    log "no go >= 1.26 at $GO; fetching golang.org/toolchain@$GO_TOOLCHAIN_VERSION via the module proxy"
    local tmp; tmp="$(mktemp -d)"
    # the module proxy this machine's Go is set up with (first entry of GOPROXY)
    local proxy="${GOPROXY:-$(command -v go >/dev/null && go env GOPROXY)}"
    proxy="${proxy%%,*}"; proxy="${proxy%%|*}"
    [[ -n "$proxy" && "$proxy" != direct && "$proxy" != off ]] || {
      log "no Go module proxy configured (set GOPROXY)"; return 1; }
    curl -fsSL "$proxy/golang.org/toolchain/@v/$GO_TOOLCHAIN_VERSION.zip" -o "$tmp/go.zip"
    echo "$GO_TOOLCHAIN_SHA256  $tmp/go.zip" | sha256sum -c --quiet
    (cd "$tmp" && unzip -q go.zip)
    rm -rf "$dir"
    mv "$tmp/golang.org/toolchain@$GO_TOOLCHAIN_VERSION" "$dir"
    chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/*
    rm -rf "$tmp"
  fi
  GO="$dir/bin/go"
}

# ---- etcd from Debian trixie (SHA256 checked against the archive's Packages index) ----
. "$(dirname "$0")/../lib/debian-suite.sh"

fetch_etcd() {
  [[ -x "$BIN/etcd" ]] && return 0
  local tmp; tmp="$(mktemp -d)"
  local suite="${KGC_ETCD_SUITE:-trixie}"
  # apt-get download (signature-checked by apt) through a private state dir: nothing installed
  suite_download "$suite" "$tmp" etcd-server
  local deb; deb="$(ls "$tmp"/etcd-server_*.deb)"
  local version; version="$(dpkg-deb -f "$deb" Version)"
  mkdir -p "$CACHE/etcd"
  dpkg-deb -x "$deb" "$CACHE/etcd/root"
  install -m 0755 "$CACHE/etcd/root/usr/bin/etcd" "$BIN/etcd"
  echo "etcd-server $version ($suite)" > "$CACHE/etcd/VERSION"
  rm -rf "$tmp"
  log "etcd $version unpacked"
}

# ---- Go modules ----
declare -A PKGS=(
  [kube]="k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet"
  [kwok]="sigs.k8s.io/kwok/cmd/kwok"
  [keda]="github.com/kedacore/keda/v2/cmd/operator ./gen/adapter"
  [dra]="./cmd/kgc-dra-plugin"
)
declare -A OUTS=(
  [kube]="kube-apiserver kube-controller-manager kube-scheduler kubelet"
  [kwok]="kwok"
  [keda]="operator adapter"
  [dra]="kgc-dra-plugin"
)
declare -A LDX=(
  [kube]="-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
  [kwok]="-X sigs.k8s.io/kwok/pkg/consts.Version=v0.8.0"
  [keda]="-X github.com/kedacore/keda/v2/version.Version=2.21.0"
  [dra]=""
)
# Modules whose .go files are our code (not a tools.go pinning upstream commands): their
# sources (not their _test.go files) are part of the stamp, so an edit rebuilds. The
# others keep a go.mod/go.sum stamp (generated files such as keda's gen/ must not be in it).
declare -A OWN_SOURCES=([dra]=1)

# KEDA's metrics adapter binds its /metrics listener to ":<port>" (all interfaces) with no
# flag for the address. The build uses a generated, git-ignored copy of that one main
# package (gen/adapter/, from the module cache) with the format string changed to
# "127.0.0.1:<port>", so the whole lab stays on loopback. (go build -overlay refuses files
# beneath GOMODCACHE.)
keda_adapter_source() {
  local dir="$1" modcache src
  modcache="$(cd "$dir" && "$GO" env GOMODCACHE)"
  src="$modcache/github.com/kedacore/keda/v2@$(keda_version "$dir")/cmd/adapter"
  grep -q 'fmt.Sprintf(":%v", metricsAPIServerPort)' "$src/main.go" \
    || { log "keda: adapter source changed, loopback patch does not apply"; return 1; }
  rm -rf "$dir/gen/adapter"
  mkdir -p "$dir/gen/adapter"
  sed 's/fmt.Sprintf(":%v", metricsAPIServerPort)/fmt.Sprintf("127.0.0.1:%v", metricsAPIServerPort)/' \
    "$src/main.go" > "$dir/gen/adapter/main.go"
}

mod_version() { awk -v m="$2" '$1=="require"{$1=""; $0=$0} $1==m{print $2; exit}' "$1/go.mod"; }
keda_version() { mod_version "$1" github.com/kedacore/keda/v2; }
kwok_version() { mod_version "$1" sigs.k8s.io/kwok; }

# Data the lab reads at run time, taken from the module cache (never copied into the repo).
copy_module_data() {
  local go_dir="$REPO/lab/cluster/go" modcache
  modcache="$(cd "$go_dir/keda" && "$GO" env GOMODCACHE)"
  (cd "$go_dir/keda" && "$GO" mod download github.com/kedacore/keda/v2)
  (cd "$go_dir/kwok" && "$GO" mod download sigs.k8s.io/kwok)
  local keda="$modcache/github.com/kedacore/keda/v2@$(keda_version "$go_dir/keda")"
  local kwok="$modcache/sigs.k8s.io/kwok@$(kwok_version "$go_dir/kwok")"
  rm -rf "$CACHE/keda-crds" "$CACHE/kwok-stages" "$CACHE/kwok-crds"
  mkdir -p "$CACHE/keda-crds" "$CACHE/kwok-stages" "$CACHE/kwok-crds"
  cp "$kwok"/kustomize/crd/bases/kwok.x-k8s.io_logs.yaml \
     "$kwok"/kustomize/crd/bases/kwok.x-k8s.io_clusterlogs.yaml "$CACHE/kwok-crds/"
  cp "$keda"/config/crd/bases/*.yaml "$CACHE/keda-crds/"
  cp "$kwok/kustomize/stage/node/fast/node-initialize.yaml" \
     "$kwok/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "$kwok/kustomize/stage/pod/general/pod-delete.yaml" \
     "$kwok/kustomize/stage/pod/general/pod-complete.yaml" "$CACHE/kwok-stages/"
  chmod -R u+w "$CACHE/keda-crds" "$CACHE/kwok-stages" "$CACHE/kwok-crds"
}

build_module() {
  local m="$1" dir="$REPO/lab/cluster/go/$1"
  local stamp_file="$BIN/.$m.stamp" stamp
  local srcs=()
  if [[ -n "${OWN_SOURCES[$m]:-}" ]]; then
    mapfile -t srcs < <(cd "$dir" && find . -name '*.go' ! -name '*_test.go' -type f | LC_ALL=C sort)
  fi
  # file names are hashed with the contents: a renamed or removed source changes the stamp
  stamp="$( (cat "$dir/go.mod" "$dir/go.sum" 2>/dev/null
             for f in "${srcs[@]}"; do printf '%s\0' "$f"; cat "$dir/$f"; done) \
           | sha256sum | cut -c1-16)-$("$GO" env GOVERSION)"
  local ok=1 o
  for o in ${OUTS[$m]}; do [[ -x "$BIN/$m/$o" ]] || ok=0; done
  if [[ $ok == 1 && "$(cat "$stamp_file" 2>/dev/null)" == "$stamp" && "${KGC_CLUSTER_FORCE:-0}" != 1 ]]; then
    log "$m: up to date"; return 0
  fi
  log "$m: building ${PKGS[$m]}"
  mkdir -p "$BIN/$m"
  local t0 t1
  t0=$(date +%s)
  (cd "$dir" && "$GO" mod download)
  t1=$(date +%s)
  [[ $m == keda ]] && keda_adapter_source "$dir"
  (cd "$dir" && nice -n 10 "$GO" build -ldflags="-s -w ${LDX[$m]}" -o "$BIN/$m/" ${PKGS[$m]}) \
    >"$CACHE/logs/build-$m.log" 2>&1 || { log "$m: build failed, see $CACHE/logs/build-$m.log"; tail -20 "$CACHE/logs/build-$m.log" >&2; return 1; }
  local t2; t2=$(date +%s)
  echo "$stamp" > "$stamp_file"
  log "$m: download $((t1-t0)) s, build $((t2-t1)) s"
  [[ -n "${KGC_CLUSTER_TIMINGS:-}" ]] && echo "$m download=$((t1-t0)) build=$((t2-t1))" >> "$KGC_CLUSTER_TIMINGS"
  return 0
}

need_tools() {
  local missing=()
  command -v curl >/dev/null || missing+=(curl ca-certificates)
  command -v xz >/dev/null || missing+=(xz-utils)
  command -v unzip >/dev/null || missing+=(unzip)
  command -v dpkg-deb >/dev/null || missing+=(dpkg)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

need_tools
ensure_go
fetch_etcd
# the data comes from the kwok and keda modules: left alone when only others are built
# (e.g. KGC_CLUSTER_MODULES=dra while a lab reads it)
if [[ " $MODULES " == *" kwok "* || " $MODULES " == *" keda "* ]]; then copy_module_data; fi
rc=0
for m in $MODULES; do build_module "$m" || rc=1; done
exit $rc
