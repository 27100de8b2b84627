#!/usr/bin/env bash
# Build warmgate-health (hack/gitops-health/), the helper the GitOps health tests read
# SpecDecodeDeployments with: kstatus (sigs.k8s.io/cli-utils), Flux's health expressions
# (github.com/fluxcd/pkg/runtime/cel, cel-go underneath) and Argo CD's health Lua (gopher-lua),
# each through its own Go module at the version hack/gitops-health/go.mod pins (go.sum checks
# them), from the Go module proxy. Into .cache/gitops-health/ (or $GITOPS_HEALTH_DIR), with a
# version stamp beside it: the digest of the helper's source and module files and the Go
# version; a re-run with the same stamp builds nothing. Prints the folder on stdout (last
# line); the build prints a line when it starts and one with its time, its output goes to
# .cache/logs/ (hack/lib/steps.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/hack/gitops-health"
DEST="${GITOPS_HEALTH_DIR:-$ROOT/.cache/gitops-health}"
NAME=warmgate-health
STEPS_PREFIX=provision-gitops-health
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"   # step: one line per build with its time, output to a log
# shellcheck source=hack/lib/gobuild.sh
source "$ROOT/hack/lib/gobuild.sh"   # TOOL_GO_BUILD_FLAGS

command -v go >/dev/null || { say "no Go toolchain: cannot build $NAME (hack/gitops-health)"; exit 1; }
mkdir -p "$DEST"
stamp="hack/gitops-health sha256:$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go | sha256sum | cut -c1-16) $(go env GOVERSION)"
if [ -x "$DEST/$NAME" ] && [ "$(cat "$DEST/$NAME.version" 2>/dev/null)" = "$stamp" ]; then
  echo "$DEST"
  exit 0
fi

build() {
  cd "$SRC"
  CGO_ENABLED=0 go build "${TOOL_GO_BUILD_FLAGS[@]}" -ldflags "-s -w" -o "$DEST/$NAME.new" .
}
STEP_ABOUT="about 3 min on 2 cores with empty Go caches, 6 min under load" \
  step "$NAME" "$NAME (kstatus, Flux's CEL health, gopher-lua), go build of hack/gitops-health" build
mv "$DEST/$NAME.new" "$DEST/$NAME"
echo "$stamp" > "$DEST/$NAME.version"
echo "$DEST"
