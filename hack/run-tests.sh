#!/usr/bin/env bash
# The test tiers of `make test`: six pytest runs side by side, every test run once.
#
#   the node's owner           -m "e2e and (node_alone or node_owner)": starts the local node (one
#                              cluster per machine: warmgate/devcluster/lock.py) and runs the
#                              e2e scenarios that need the node alone or its own processes.
#   the node's two guests      -m "e2e and not (node_alone or node_owner)": the other scenarios,
#                              each in its own namespace, on the owner's cluster, each guest
#                              with its share of them (tests/support/node_share.py: a module
#                              marked node_alone waits until no other scenario runs, and the
#                              others wait for it).
#   the real engines           -m "realengine and not e2e": every test that runs the real vLLM CPU
#                              engine and needs no node. A CPU engine takes 3 to 4.5 GB: these
#                              modules and scenario l (the node's real engines) take the engines
#                              lock, so the engines never meet on the 24 GB machine.
#   the integration tier       -m "integration and not (e2e or realengine)": each module with its
#                              own control plane on free loopback ports (mostly waiting on it).
#   the rest                   -m "not (e2e or realengine or integration)": the unit and runner
#                              tiers (CPU-bound). One run for the rest and the integration tier
#                              took 16 to 17 minutes one test after the other (their tests'
#                              own times: unit 4, runner 5.5, integration 6.5 min).
#
# The node's runs are mostly waiting (the kubelet, Jobs, rollouts, engine starts): side by side
# their waiting overlaps, and the rest's compute fills it (the real engines' run is named with
# them: it holds the memory-heavy part). The rest's output streams here; the
# node's runs write to logs printed whole when they end (live streams would interleave line by
# line); each ends with its 15 slowest steps (pytest --durations: a module's setup is charged to its
# first test), where a slower scenario shows first. WARMGATE_E2E_SHARED_NODE=0 runs the node's tests in one run, one after the other, as
# before. Extra arguments go to every run. Exit status: 0 when every run passed.
#
#   hack/run-tests.sh                 # what `make test` runs after provisioning
#   hack/run-tests.sh -x --timeout 600
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PY:-.venv/bin/python}"
NODE_MARKS="e2e or realengine"
LOG_DIR="${STEPS_LOG_DIR:-$ROOT/.cache/logs}"
mkdir -p "$LOG_DIR"
# shellcheck source=hack/lib/steps.sh
STEPS_PREFIX=tests
source "$ROOT/hack/lib/steps.sh"

# name|marker expression|role for tests/support/node_share.py (none: not on the node)|the guest's
# share of the scenarios (two guests: the scenarios mostly wait on the node, and one guest took
# 18 to 20 minutes, one after the other)
INTEGRATION_RUN="integration|integration and not ($NODE_MARKS)|"
if [ "${WARMGATE_E2E_SHARED_NODE:-1}" = 0 ]; then
  NODE_RUNS=("$INTEGRATION_RUN" "node-and-engines|$NODE_MARKS|")
else
  NODE_RUNS=(
    "$INTEGRATION_RUN"
    "node-owner|e2e and (node_alone or node_owner)|owner"
    "node-guest-1|e2e and not (node_alone or node_owner)|guest|1/2"
    "node-guest-2|e2e and not (node_alone or node_owner)|guest|2/2"
    "node-engines|realengine and not e2e|engines"
  )
fi
SHARE="$(mktemp -d "${TMPDIR:-/tmp}/warmgate-node-share.XXXXXX")"
# Each run writes its tiers' figures (tests/support/tier_report.py); the closing table joins them.
REST_TIERS="$LOG_DIR/tiers-rest.json"
rm -f "$LOG_DIR"/tiers-*.json

began=$SECONDS began_at=$(date +%s)
pids=() names=()
for run in "${NODE_RUNS[@]}"; do
  IFS='|' read -r name marks role part <<<"$run"
  # No .pytest_cache in the node's runs (the rest writes it; two writers would race).
  WARMGATE_TIER_REPORT="$LOG_DIR/tiers-$name.json" WARMGATE_E2E_ROLE="$role" \
    WARMGATE_E2E_SHARE="$SHARE" WARMGATE_E2E_GUEST_PART="$part" \
    "$PY" -m pytest tests -m "$marks" -p no:cacheprovider --durations=15 "$@" \
    >"$LOG_DIR/pytest-$name.log" 2>&1 </dev/null &
  pids+=("$!") names+=("$name")
done
# SIGTERM: a background job of a script ignores SIGINT. The dev cluster's reaper tears the node down
# when its test run dies (warmgate/devcluster/reaper.py).
# EXIT too: however this script ends, the node's runs never outlive it (an orphan would hold the
# machine's node lock and make the next run wait).
stop() { kill -TERM "${pids[@]}" 2>/dev/null; wait "${pids[@]}"; exit 130; }
trap stop INT TERM
trap 'kill -TERM "${pids[@]}" 2>/dev/null; rm -rf "$SHARE"' EXIT
say "the integration tier, the e2e tier and the real engines run beside the unit and runner tiers, in ${#pids[@]} run(s); their output: $(shown "$LOG_DIR")/pytest-*.log (printed whole when they end)"

WARMGATE_TIER_REPORT="$REST_TIERS" "$PY" -m pytest tests -m "not ($NODE_MARKS or integration)" "$@"
rest=$?
rest_took=$((SECONDS - began))
say "unit and runner tiers done in $(duration "$rest_took"); waiting for the other runs (tail -f $(shown "$LOG_DIR")/pytest-*.log)"

status() { if [ "$1" -eq 0 ]; then echo passed; else echo "FAILED (pytest exit $1)"; fi; }
summaries=() all_rc=$rest
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  log="$LOG_DIR/pytest-${names[$i]}.log"
  # when it ended: its log's last write (a run that ended while the unit and runner tiers still
  # ran is reaped only after them)
  ended=$(($(stat -c %Y "$log") - began_at))
  summary="$(grep -E '^=+ .*(passed|failed|error|skipped|deselected).* in [0-9.]+s' "$log" | tail -1 | tr -d '=' | xargs)"
  summaries+=("${names[$i]}: $(status "$rc") after $(duration "$ended") (${summary:-no summary})")
  [ "$rc" -eq 0 ] || all_rc=$rc
done
trap - INT TERM
for i in "${!names[@]}"; do
  echo
  echo "==================== ${names[$i]} ($(shown "$LOG_DIR/pytest-${names[$i]}.log")) ===================="
  cat "$LOG_DIR/pytest-${names[$i]}.log"
done
echo
echo "==================== the tiers of every run (minutes: each tier's tests one after the other, per run) ===================="
reports=("$REST_TIERS")
for name in "${names[@]}"; do reports+=("$LOG_DIR/tiers-$name.json"); done
"$PY" hack/tier-table.py "${reports[@]}"
echo
say "unit and runner: $(status "$rest") in $(duration "$rest_took")"
for line in "${summaries[@]}"; do say "$line"; done
say "$(duration $((SECONDS - began))) in all"
[ "$all_rc" -eq 0 ]
