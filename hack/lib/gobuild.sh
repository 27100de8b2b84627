# shellcheck shell=bash
# One job: the flags of the provisioning scripts' Go builds: GO_BUILD_FLAGS for the Kubernetes
# binaries and helm, TOOL_GO_BUILD_FLAGS for the test tools (kube-state-metrics, promtool and
# prometheus, warmgate-health). Sourced by hack/provision-*.sh:
#
#   source "$ROOT/hack/lib/gobuild.sh"
#   CGO_ENABLED=0 go build "${GO_BUILD_FLAGS[@]}" -ldflags "-s -w ..." -o OUT PACKAGE...
#
# Every one of them links with -s -w (no symbol table, no DWARF), which throws away the DWARF
# the compiler made for each of their packages: -dwarf=false has the compiler not make it.
# Measured on helm's 730 non-standard packages, cold build cache, two runs each: 11 to 14 %
# less compile CPU, a binary of the same size (docs/testing.md, "Cold times").
# shellcheck disable=SC2034 # used by the scripts that source this file
GO_BUILD_FLAGS=(-trimpath "-gcflags=all=-dwarf=false")

# The test tools (kube-state-metrics, promtool with prometheus, warmgate-health) do little work
# in the tests, and after `make run` their compile is most of what `make test` provisions: their
# packages are compiled without optimizations and inlining (-N -l), the standard library as
# above (the later pattern wins for it), so it stays shared with the Kubernetes and helm builds'.
# Measured on warmgate-health, the standard library cached, empty cache otherwise: 93 s of
# compile CPU against 109 s (docs/testing.md, "After `make run`").
# shellcheck disable=SC2034 # used by the scripts that source this file
TOOL_GO_BUILD_FLAGS=(-trimpath "-gcflags=all=-dwarf=false -N -l" "-gcflags=std=-dwarf=false")
