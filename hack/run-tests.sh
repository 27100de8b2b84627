#!/usr/bin/env bash
# The test tiers of `make test`: two pytest runs side by side, every test run once.
#
#   the node and the engines   -m "e2e or realengine": the e2e tier on the local node (one cluster
#                              per machine: warmgate/devcluster/lock.py) and every test that runs
#                              the real vLLM CPU engine. Mostly waiting (the kubelet, Jobs,
#                              rollouts, engine starts), and the memory-heavy part: a CPU engine
#                              takes 3 to 4.5 GB, so the engines stay in this one run and never
#                              meet another run's engines on the 24 GB machine.
#   the rest                   -m "not (e2e or realengine)": unit, runner and integration tiers
#                              (CPU-bound, each integration module with its own control plane on
#                              free loopback ports).
#
# One after the other they took 26 min (docs/testing.md, "Cold times"); side by side the
# waiting of the first overlaps the compute of the second. The rest's output streams here; the
# node run writes to a log that is printed whole when it ends (two live streams would
# interleave line by line). Extra arguments go to both runs. Exit status: 0 when both passed.
#
#   hack/run-tests.sh                 # what `make test` runs after provisioning
#   hack/run-tests.sh -x --timeout 600
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PY:-.venv/bin/python}"
NODE_MARKS="e2e or realengine"
LOG_DIR="${STEPS_LOG_DIR:-$ROOT/.cache/logs}"
NODE_LOG="$LOG_DIR/pytest-node-and-engines.log"
mkdir -p "$LOG_DIR"
# shellcheck source=hack/lib/steps.sh
STEPS_PREFIX=tests
source "$ROOT/hack/lib/steps.sh"

# Each run writes its tiers' figures (tests/support/tier_report.py); the closing table joins them.
NODE_TIERS="$LOG_DIR/tiers-node-and-engines.json"
REST_TIERS="$LOG_DIR/tiers-rest.json"
rm -f "$NODE_TIERS" "$REST_TIERS"

began=$SECONDS
# The node run keeps no .pytest_cache (the other run writes it; two writers would race).
WARMGATE_TIER_REPORT="$NODE_TIERS" \
  "$PY" -m pytest tests -m "$NODE_MARKS" -p no:cacheprovider "$@" >"$NODE_LOG" 2>&1 </dev/null &
node=$!
# SIGTERM: a background job of a script ignores SIGINT. The dev cluster's reaper tears the node down
# when its test run dies (warmgate/devcluster/reaper.py).
# EXIT too: however this script ends, the node run never outlives it (an orphan would hold the
# machine's node lock and make the next run wait).
stop() { kill -TERM "$node" 2>/dev/null; wait "$node"; exit 130; }
trap stop INT TERM
trap 'kill -TERM "$node" 2>/dev/null' EXIT
say "the e2e tier and the real engines run beside the other tiers; their output: $(shown "$NODE_LOG") (printed whole when they end)"

WARMGATE_TIER_REPORT="$REST_TIERS" "$PY" -m pytest tests -m "not ($NODE_MARKS)" "$@"
rest=$?
rest_took=$((SECONDS - began))
if kill -0 "$node" 2>/dev/null; then
  say "unit, runner and integration tiers done in $(duration "$rest_took"); waiting for the e2e tier and the real engines (tail -f $(shown "$NODE_LOG"))"
fi
wait "$node"
node_rc=$?
trap - INT TERM
echo
echo "==================== the e2e tier and the real engines ($(shown "$NODE_LOG")) ===================="
cat "$NODE_LOG"
echo
status() { if [ "$1" -eq 0 ]; then echo passed; else echo "FAILED (pytest exit $1)"; fi; }
node_summary="$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$NODE_LOG" | tail -1 | tr -d '=' | xargs)"
echo
echo "==================== the tiers of both runs (minutes: each tier's tests one after the other) ===================="
"$PY" hack/tier-table.py "$REST_TIERS" "$NODE_TIERS"
say "unit, runner and integration: $(status "$rest") in $(duration "$rest_took"); e2e and real engines: $(status "$node_rc") (${node_summary:-no summary}); $(duration $((SECONDS - began))) in all"
[ "$rest" -eq 0 ] && [ "$node_rc" -eq 0 ]
