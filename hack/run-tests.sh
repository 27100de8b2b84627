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
# before. Extra arguments go to every run.
#
# TEST_PARTS and TEST_TOOLS (set by `make test`): Makefile targets provisioned beside the tests,
# by two `make -j$JOBS READY_DIR=... TARGET...` side by side (what the node's runs wait for, and
# the tools: in one make the tools' long builds took every job slot while a quick part waited),
# their output in one log printed whole at the end. Each target's name appears in
# $WARMGATE_PROVISIONED when it is made (`assets` once its four parts are), `.exit` when both
# makes ended (the worse status). A run waits
# at its start for the parts it cannot start without (the last field below); a test waits at the
# use of its part, and tests whose parts are not made yet run last (tests/support/provisioned.py).
# Without them nothing is provisioned: the parts are there or the tests skip (fail under CI).
# Exit status: 0 when every run and the provisioning passed.
#
#   hack/run-tests.sh                 # after provisioning (what `make test` runs, without its parts)
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
# 18 to 20 minutes, one after the other)|the parts the run waits for before it starts
INTEGRATION_RUN="integration|integration and not ($NODE_MARKS)|||assets"
if [ "${WARMGATE_E2E_SHARED_NODE:-1}" = 0 ]; then
  NODE_RUNS=("$INTEGRATION_RUN" "node-and-engines|$NODE_MARKS|||assets images vllm-engine")
else
  NODE_RUNS=(
    "$INTEGRATION_RUN"
    "node-owner|e2e and (node_alone or node_owner)|owner||assets images"
    "node-guest-1|e2e and not (node_alone or node_owner)|guest|1/2|assets images"
    "node-guest-2|e2e and not (node_alone or node_owner)|guest|2/2|assets images"
    "node-engines|realengine and not e2e|engines||vllm-engine"
  )
fi
SHARE="$(mktemp -d "${TMPDIR:-/tmp}/warmgate-node-share.XXXXXX")"

# The provisioning beside the tests, in a session of its own whose process group (its id in
# .pgid) is killed whole if the tests are stopped. `.exit` is written whole (a rename), so a
# reader never sees it empty.
provision_pid="" PROVISION_LOG="$LOG_DIR/provision.log"
PROVISIONED_TARGETS="$(echo ${TEST_PARTS:-} ${TEST_TOOLS:-})"
if [ -n "$PROVISIONED_TARGETS" ]; then
  export WARMGATE_PROVISIONED="$SHARE/provisioned" WARMGATE_PROVISION_LOG="$PROVISION_LOG"
  mkdir -p "$WARMGATE_PROVISIONED"
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid --fork --wait bash -c 'echo $$ >"$2/.pgid"
    provide() { [ -z "$3" ] || make --no-print-directory -j"$1" READY_DIR="$2" $3; }
    provide "$1" "$2" "$3" & parts=$!
    provide "$1" "$2" "$4" & tools=$!
    wait "$parts"; rc=$?; wait "$tools"; rc2=$?; [ "$rc" -ne 0 ] || rc=$rc2
    echo "$rc" >"$2/.exit.partial" && mv "$2/.exit.partial" "$2/.exit"; exit "$rc"' \
    provision "${JOBS:-4}" "$WARMGATE_PROVISIONED" "${TEST_PARTS:-}" "${TEST_TOOLS:-}" \
    >"$PROVISION_LOG" 2>&1 </dev/null &
  provision_pid=$!
  say "provisioning beside the tests: $PROVISIONED_TARGETS (output: $(shown "$PROVISION_LOG"), printed whole when it ends)"
fi

# made PART: whether the provisioning beside the tests made it (tests/support/provisioned.py,
# `made`, says the same: `assets` is made once its parts are).
made() {
  local at="$WARMGATE_PROVISIONED"
  [ -e "$at/$1" ] || { [ "$1" = assets ] && [ -e "$at/etcd" ] && [ -e "$at/kubectl" ] \
    && [ -e "$at/kube" ] && [ -e "$at/helm" ]; }
}
# await PART...: returns once each part is made (at once without a provisioning beside the
# tests); 1 when the provisioning ended without one.
await_parts() {
  [ -n "${WARMGATE_PROVISIONED:-}" ] || return 0
  local part
  for part in "$@"; do
    until made "$part"; do
      if [ -e "$WARMGATE_PROVISIONED/.exit" ] && ! made "$part"; then
        echo "this run needs \`make $part\`: the provisioning beside the tests ended without it (make exit $(cat "$WARMGATE_PROVISIONED/.exit")): see $PROVISION_LOG"
        return 1
      fi
      sleep 2
    done
  done
}
# Each run writes its tiers' figures (tests/support/tier_report.py); the closing table joins them.
REST_TIERS="$LOG_DIR/tiers-rest.json"
rm -f "$LOG_DIR"/tiers-*.json

began=$SECONDS began_at=$(date +%s)
pids=() names=()
for run in "${NODE_RUNS[@]}"; do
  IFS='|' read -r name marks role part needs <<<"$run"
  # No .pytest_cache in the node's runs (the rest writes it; two writers would race).
  # shellcheck disable=SC2086 # $needs: one word per part
  (
    await_parts $needs || exit 4
    WARMGATE_TIER_REPORT="$LOG_DIR/tiers-$name.json" WARMGATE_E2E_ROLE="$role" \
      WARMGATE_E2E_SHARE="$SHARE" WARMGATE_E2E_GUEST_PART="$part" \
      exec "$PY" -m pytest tests -m "$marks" -p no:cacheprovider --durations=15 "$@"
  ) >"$LOG_DIR/pytest-$name.log" 2>&1 </dev/null &
  pids+=("$!") names+=("$name")
done
# SIGTERM: a background job of a script ignores SIGINT. The dev cluster's reaper tears the node down
# when its test run dies (warmgate/devcluster/reaper.py).
# EXIT too: however this script ends, the node's runs never outlive it (an orphan would hold the
# machine's node lock and make the next run wait).
# The provisioning too (its whole process group: make and the builds under it).
stop_provisioning() {
  [ -n "$provision_pid" ] || return 0
  kill -TERM -- "-$(cat "$WARMGATE_PROVISIONED/.pgid" 2>/dev/null)" 2>/dev/null
}
stop() { stop_provisioning; kill -TERM "${pids[@]}" 2>/dev/null; wait "${pids[@]}"; exit 130; }
trap stop INT TERM
trap 'stop_provisioning; kill -TERM "${pids[@]}" 2>/dev/null; rm -rf "$SHARE"' EXIT
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
if [ -n "$provision_pid" ]; then
  wait "$provision_pid"
  rc=$?
  provision_pid=""
  ended=$(($(stat -c %Y "$PROVISION_LOG") - began_at))
  summaries=("provisioning ($PROVISIONED_TARGETS): $( [ "$rc" -eq 0 ] && echo passed || echo "FAILED (make exit $rc)") after $(duration "$ended")" "${summaries[@]}")
  [ "$rc" -eq 0 ] || all_rc=$rc
fi
trap - INT TERM
if [ -n "$PROVISIONED_TARGETS" ]; then
  echo
  echo "==================== the provisioning beside the tests ($(shown "$PROVISION_LOG")) ===================="
  cat "$PROVISION_LOG"
fi
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
