#!/usr/bin/env bash
# Provision the monitoring tools the chart's monitoring files are tested with: a real
# kube-state-metrics (reads the CustomResourceState configuration the chart ships) and promtool
# (`promtool test rules` on the chart's PrometheusRule) and prometheus (the e2e tier scrapes the
# operator and kube-state-metrics with it and evaluates the chart's rules and dashboard), each
# built from its published Go module at a pinned version (`go get` + `go build` in a throw-away
# module).
#
#   kube-state-metrics  k8s.io/kube-state-metrics/v2 at $KSM_VERSION
#   promtool            github.com/prometheus/prometheus/cmd/promtool at $PROMETHEUS_MODULE_VERSION
#   prometheus          github.com/prometheus/prometheus/cmd/prometheus, same module and build
#                       (Prometheus v3.X.Y is published as the Go module version v0.3XX.Y)
#
# Not prometheus-operator: the Go module proxy here refuses its module
# (github.com/prometheus-operator/prometheus-operator@v0.95.2: 403, "not available"), so its
# scrape jobs are recorded once from a build of its source instead (hack/prometheus-operator-jobs.py,
# docs/testing.md "prometheus-operator").
#
# Neither Debian nor PyPI has kube-state-metrics; Debian bookworm's prometheus package is 2.42
# (2023), so they come from their Go modules. Targets: all (default), kube-state-metrics,
# promtool (builds prometheus with it). Prints the folder on stdout (last line); each build
# prints a line when it starts and one with its time, its output goes to .cache/logs/
# (hack/lib/steps.sh). Re-runs reuse what is already there (a version stamp beside each binary).
set -euo pipefail

# v2.15.0: the newest kube-state-metrics the Go module proxy serves here with a verifiable
# checksum (v2.16.0's is missing from the checksum database, v2.17.0 is refused).
KSM_VERSION="${KSM_VERSION:-v2.15.0}"
PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
# Service discovery is chosen at build time (the module's plugins/ folder: every SD but file and
# http sits behind `//go:build !remove_all_sd || enable_<name>_sd`). The tests scrape with
# static_configs and kubernetes_sd_configs only (scenario m's jobs are the ones
# prometheus-operator generates), and promtool imports discovery/kubernetes itself; leaving out
# the other SDs drops their cloud SDKs (AWS, GCE, OCI, Hetzner, ...) from the download and the
# compile, which were most of a cold build.
PROMETHEUS_BUILD_TAGS="${PROMETHEUS_BUILD_TAGS:-remove_all_sd,enable_kubernetes_sd}"
# the release that module version is: v0.3XX.Y -> 3.XX.Y
PROMETHEUS_VERSION="3.$(echo "$PROMETHEUS_MODULE_VERSION" | sed -E 's/^v0\.3([0-9]+)\.([0-9]+)$/\1.\2/')"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${MONITORING_TOOLS_DIR:-$ROOT/.cache/monitoring}"
mkdir -p "$DEST"
STEPS_PREFIX=provision-monitoring
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"   # step: one line per build with its time, output to a log
# shellcheck source=hack/lib/gobuild.sh
source "$ROOT/hack/lib/gobuild.sh"   # TOOL_GO_BUILD_FLAGS

# go_build "NAME..." MODULE VERSION "PACKAGE..." APP_VERSION [TAGS]: builds the PACKAGEs (main
# packages whose binaries Go names NAME...) with the build TAGS into $DEST in one `go build`,
# unless every stamp (module, version, tags) says they are there. Through a throw-away module
# (as provision-envtest.sh does): `go install pkg@v` asks the proxy for the module's version
# list to look for deprecations, and the proxy here refuses that list for kube-state-metrics
# while it serves the pinned version itself.
go_build() {
  local names="$1" module="$2" version="$3" packages="$4" app_version="$5" tags="${6:-}"
  local name="${names%% *}" stamp="$module@$version${6:+ tags=$6}" missing="" n
  for n in $names; do
    [ -x "$DEST/$n" ] && [ "$(cat "$DEST/$n.version" 2>/dev/null)" = "$stamp" ] || missing=1
  done
  [ -z "$missing" ] && return 0
  local work="$DEST/build-$name"
  command -v go >/dev/null || { say "no Go toolchain: cannot build $name ($module@$version)"; return 1; }
  rm -rf "$work" && mkdir -p "$work"
  printf 'module warmgate.dev/monitoring-build\n\ngo %s\n' \
    "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')" > "$work/go.mod"
  local ld="-s -w -X github.com/prometheus/common/version.Version=$app_version"
  # shellcheck disable=SC2086 # $packages: one word per package
  STEP_ABOUT="kube-state-metrics about 3 min, promtool with prometheus about 8 min on 2 cores, empty module cache, more under load" \
    step "$name" "$names from $stamp, go get + go build" \
    go_get_build "$work" "$module@$version" "$ld" "$tags" "$work/out/" $packages
  for n in $names; do
    mv "$work/out/$n" "$DEST/$n"
    echo "$stamp" > "$DEST/$n.version"
  done
  rm -rf "$work"
}

# go_get_build WORK MODULE@VERSION LDFLAGS TAGS OUT PACKAGE...: the build (its output: the step's
# log).
go_get_build() {
  local work="$1" at="$2" ld="$3" tags="$4" out="$5"; shift 5
  cd "$work"
  GOFLAGS=-mod=mod go get "$at"
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build "${TOOL_GO_BUILD_FLAGS[@]}" -tags "$tags" -ldflags "$ld" -o "$out" "$@"
}

ksm() {
  go_build kube-state-metrics k8s.io/kube-state-metrics/v2 "$KSM_VERSION" \
    k8s.io/kube-state-metrics/v2 "${KSM_VERSION#v}"
}
# promtool and prometheus share one module graph and most packages: one build. Without the
# `builtinassets` tag prometheus has no web UI; the tests use its HTTP API only.
promtool() {
  go_build "promtool prometheus" github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" \
    "github.com/prometheus/prometheus/cmd/promtool github.com/prometheus/prometheus/cmd/prometheus" \
    "$PROMETHEUS_VERSION" "$PROMETHEUS_BUILD_TAGS"
}

what="${1:-all}"
case "$what" in
  all) ksm; promtool ;;
  kube-state-metrics) ksm ;;
  promtool|prometheus) promtool ;;
  *) say "usage: $0 [all|kube-state-metrics|promtool|prometheus]"; exit 2 ;;
esac
echo "$DEST"
