#!/usr/bin/env bash
# Provision the monitoring tools the chart's monitoring files are tested with: a real
# kube-state-metrics (reads the CustomResourceState configuration the chart ships) and promtool
# (`promtool test rules` on the chart's PrometheusRule), each built from its published Go module
# at a pinned version (`go get` + `go build` in a throw-away module).
#
#   kube-state-metrics  k8s.io/kube-state-metrics/v2 at $KSM_VERSION
#   promtool            github.com/prometheus/prometheus/cmd/promtool at $PROMETHEUS_MODULE_VERSION
#                       (Prometheus v3.X.Y is published as the Go module version v0.3XX.Y)
#
# Neither Debian nor PyPI has kube-state-metrics; Debian bookworm's prometheus package is 2.42
# (2023), so both come from their Go modules. Targets: all (default), kube-state-metrics,
# promtool. Prints the folder on stdout (last line); progress goes to stderr with the time each
# build took. Re-runs reuse what is already there (a version stamp beside each binary).
set -euo pipefail

# v2.15.0: the newest kube-state-metrics the Go module proxy serves here with a verifiable
# checksum (v2.16.0's is missing from the checksum database, v2.17.0 is refused).
KSM_VERSION="${KSM_VERSION:-v2.15.0}"
PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
# the release that module version is: v0.3XX.Y -> 3.XX.Y
PROMETHEUS_VERSION="3.$(echo "$PROMETHEUS_MODULE_VERSION" | sed -E 's/^v0\.3([0-9]+)\.([0-9]+)$/\1.\2/')"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${MONITORING_TOOLS_DIR:-$ROOT/.cache/monitoring}"
mkdir -p "$DEST"
log() { echo "provision-monitoring: $*" >&2; }

# go_build NAME MODULE VERSION PACKAGE APP_VERSION: builds NAME into $DEST unless its stamp says
# it is there. Through a throw-away module (as provision-envtest.sh does): `go install pkg@v`
# asks the proxy for the module's version list to look for deprecations, and the proxy here
# refuses that list for kube-state-metrics while it serves the pinned version itself.
go_build() {
  local name="$1" module="$2" version="$3" package="$4" app_version="$5"
  local stamp="$DEST/$name.version" work="$DEST/build-$name"
  if [ -x "$DEST/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$module@$version" ]; then
    return 0
  fi
  command -v go >/dev/null || { log "no Go toolchain: cannot build $name ($module@$version)"; return 1; }
  local began=$SECONDS
  log "building $name from $module@$version (kube-state-metrics about 3 min, promtool about 11 min on 2 cores with an empty module cache)"
  rm -rf "$work" && mkdir -p "$work"
  printf 'module warmgate.dev/monitoring-build\n\ngo %s\n' \
    "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')" > "$work/go.mod"
  # a ticker shows the build is alive, as provision-envtest.sh does
  ( trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do sleep 60 & nap=$!; wait "$nap"; log "  still building $name ($(( (SECONDS - began) / 60 )) min)"; done ) &
  local ticker=$!
  local ld="-s -w -X github.com/prometheus/common/version.Version=$app_version"
  ( cd "$work" && GOFLAGS=-mod=mod go get "$module@$version" >&2 \
      && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$DEST/$name.partial" "$package" >&2 ) \
    || { kill "$ticker"; return 1; }
  kill "$ticker" 2>/dev/null || true
  mv "$DEST/$name.partial" "$DEST/$name"
  echo "$module@$version" > "$stamp"
  rm -rf "$work"
  log "built $name in $(( SECONDS - began )) s"
}

ksm() {
  go_build kube-state-metrics k8s.io/kube-state-metrics/v2 "$KSM_VERSION" \
    k8s.io/kube-state-metrics/v2 "${KSM_VERSION#v}"
}
promtool() {
  go_build promtool github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" \
    github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_VERSION"
}

what="${1:-all}"
case "$what" in
  all) ksm; promtool ;;
  kube-state-metrics) ksm ;;
  promtool) promtool ;;
  *) log "usage: $0 [all|kube-state-metrics|promtool]"; exit 2 ;;
esac
echo "$DEST"
