"""Engine facts from a child process with guarded imports, and the tensor-parallel fit check."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from warmgate.warmup.engine import facts


def fake_stack(root: Path, count: int, name: str) -> Path:
    """Stand-in torch / habana_frameworks / vllm / vllm_gaudi modules (test doubles)."""
    hpu = root / "habana_frameworks" / "torch" / "hpu"
    hpu.mkdir(parents=True)
    (root / "habana_frameworks" / "__init__.py").write_text("")
    (root / "habana_frameworks" / "torch" / "__init__.py").write_text("__version__ = '1.22.0'\n")
    (hpu / "__init__.py").write_text(
        f"def device_count():\n    return {count}\n\ndef get_device_name():\n    return {name!r}\n"
    )
    (root / "torch.py").write_text("__version__ = '2.7.1+hpu'\n")
    (root / "vllm.py").write_text("__version__ = '0.11.0'\n")
    (root / "vllm_gaudi.py").write_text("raise ImportError('broken plugin')\n")
    return root


def child_env(path: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return env


def test_collects_versions_and_device_from_the_image(tmp_path: Path) -> None:
    root = fake_stack(tmp_path, 8, "GAUDI3")
    found = facts.collect(sys.executable, child_env(root), timeout_s=60)
    assert (found.torch, found.habana_frameworks, found.vllm) == ("2.7.1+hpu", "1.22.0", "0.11.0")
    assert (found.hpu_count, found.device_name, found.gaudi_generation) == (8, "GAUDI3", "Gaudi3")
    assert found.vllm_gaudi is None
    assert found.errors["vllm_gaudi"] == "ImportError: broken plugin"


def test_missing_packages_become_null_facts(tmp_path: Path) -> None:
    found = facts.collect(sys.executable, child_env(None), timeout_s=60)
    assert found.hpu_count is None
    assert "habana_frameworks.torch" in found.errors
    assert found.python == sys.version.split()[0]


def test_broken_interpreter_is_a_facts_error(tmp_path: Path) -> None:
    with pytest.raises(facts.FactsError):
        facts.collect(str(tmp_path / "no-python"), child_env(None), timeout_s=10)


@pytest.mark.parametrize(
    ("name", "generation"),
    [("GAUDI2", "Gaudi2"), ("GAUDI3", "Gaudi3"), ("Gaudi 2", "Gaudi2"), ("GAUDI", "Gaudi")],
)
def test_generation_names(name: str, generation: str) -> None:
    assert facts.gaudi_generation(name) == generation


def fact(count: int | None) -> facts.EngineFacts:
    return facts.EngineFacts(None, None, None, None, None, count, None, None, {})


def test_refusal_when_device_count_does_not_fit_tensor_parallel() -> None:
    assert facts.refusal(fact(4), 8, require_device=True) == (
        "4 HPU(s) visible, tensor parallel size 8 needs at least that many"
    )
    assert facts.refusal(fact(8), 8, require_device=True) is None
    assert facts.refusal(fact(None), 1, require_device=False) is None
    assert "cannot count HPUs" in str(facts.refusal(fact(None), 1, require_device=True))
