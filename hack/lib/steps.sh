# shellcheck shell=bash
# One job: print each provisioning step as a line when it starts and a line with its time when
# it ends, send the tools' own output (apt-get, go, pip) to a log file the lines name, and on
# a failure print the log's last lines and the file. Sourced by every hack/provision-*.sh:
#
#   source "$ROOT/hack/lib/steps.sh"
#   STEPS_PREFIX=provision-envtest            # the word in front of each line (default: script name)
#   STEP_ABOUT="about 20 s" step etcd "etcd from Debian's etcd-server" apt_install etcd-server
#
# `step NAME LABEL CMD [ARG...]` runs CMD (a command or a shell function) in a subshell with
# `set -e`, its stdout and stderr written to $STEPS_LOG_DIR/$STEPS_PREFIX.NAME.log (the folder
# defaults to .cache/logs of the repository), and returns CMD's exit status. Call it as a plain
# command under `set -e`, not in an `if` or after `||`: there bash ignores `set -e` inside the
# function, so a failing command in the middle of CMD would not stop it. STEP_ABOUT, when set,
# says in the first line how long the step usually takes. The format:
#
#   provision-envtest: etcd from Debian's etcd-server (about 20 s) ... (log: .cache/logs/provision-envtest.etcd.log)
#   provision-envtest: etcd from Debian's etcd-server: 18 s
#   provision-envtest: helm v3.21.4, go install: FAILED after 41 s (exit 1); the last lines of .cache/logs/...:
#       (the log's last 25 lines)
#   provision-envtest: the whole output: /path/to/.cache/logs/provision-envtest.helm.log
#
# A step still running after STEPS_TICK_SECONDS (120) prints "still running (4 min 0 s)" at
# that interval, so a long build on a slow machine shows it is alive. warmgate/devcluster/steps.py
# prints the image builds in the same format (tests/unit/devcluster/test_steps.py checks both).

STEPS_PREFIX="${STEPS_PREFIX:-$(basename "${BASH_SOURCE[1]:-$0}" .sh)}"
STEPS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STEPS_LOG_DIR="${STEPS_LOG_DIR:-$STEPS_ROOT/.cache/logs}"
STEPS_TICK_SECONDS="${STEPS_TICK_SECONDS:-120}"
STEPS_TAIL_LINES="${STEPS_TAIL_LINES:-25}"

# say MESSAGE: one line on stderr, after the prefix (stdout stays free for the scripts' result).
say() { echo "$STEPS_PREFIX: $*" >&2; }

# duration SECONDS: "18 s", "9 min 2 s".
duration() {
  local s="$1"
  if [ "$s" -lt 60 ]; then echo "$s s"; else echo "$((s / 60)) min $((s % 60)) s"; fi
}

# shown PATH: the path relative to the repository when it is inside it (shorter lines).
shown() { local p="$1"; echo "${p#"$STEPS_ROOT"/}"; }

step() {
  local name="$1" label="$2"; shift 2
  mkdir -p "$STEPS_LOG_DIR"
  local log="$STEPS_LOG_DIR/$STEPS_PREFIX.$name.log" began=$SECONDS rc=0 ticker
  echo "== $(date -u +%FT%TZ) $label: $*" >"$log"
  say "$label${STEP_ABOUT:+ ($STEP_ABOUT)} ... (log: $(shown "$log"))"
  _steps_ticker "$label" "$began" &
  ticker=$!
  # set -e inside the subshell: a step stops at its first failing command, as a script would
  # (not in an `if`, where bash would ignore it). The caller's errexit is restored after.
  local errexit=""; [[ $- == *e* ]] && errexit=1
  set +e
  ( set -e; "$@" ) >>"$log" 2>&1 </dev/null
  rc=$?
  [ -z "$errexit" ] || set -e
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  local took; took="$(duration $((SECONDS - began)))"
  if [ "$rc" -eq 0 ]; then
    say "$label: $took"
    return 0
  fi
  say "$label: FAILED after $took (exit $rc); the last lines of $(shown "$log"):"
  tail -n "$STEPS_TAIL_LINES" "$log" | sed 's/^/    /' >&2
  say "the whole output: $log"
  return "$rc"
}

# The ticker naps one second at a time with its output closed, so killing it never leaves a
# sleeper holding the caller's stderr open.
_steps_ticker() {
  local label="$1" began="$2" next="$STEPS_TICK_SECONDS"
  while :; do
    sleep 1 </dev/null >/dev/null 2>&1
    if [ $((SECONDS - began)) -ge "$next" ]; then
      say "$label: still running ($(duration $((SECONDS - began))))"
      next=$((next + STEPS_TICK_SECONDS))
    fi
  done
}
