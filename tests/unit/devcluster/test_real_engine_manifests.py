"""The SpecDecodeDeployments that run on the real vLLM CPU engine (make run's example and e2e
scenario l): valid for the API, planned and proven by the operator's own pipeline, opted in to
a CPU engine, and the demo's closing text names which engine ran what."""

from __future__ import annotations

import json

import pytest

from warmgate.api import parse_manifest
from warmgate.cli import demo_real
from warmgate.devcluster import engine_image
from warmgate.reconcile.planning.evaluate import evaluate

IMAGE = "localhost/warmgate-vllm-cpu:0123456789abcdef"


def test_the_demos_real_engine_example_is_valid_planned_and_opted_in() -> None:
    doc = demo_real.manifest("demo", IMAGE)
    sdd = parse_manifest(doc)
    assert sdd.spec.image == IMAGE
    assert sdd.spec.model.name == f"{engine_image.MODELS_IN_IMAGE}/target"
    assert sdd.spec.engine.accept_cpu_engine is True
    assert sdd.spec.model.vocab_size == 512  # the probe's token ids stay in the tiny vocabulary
    assert (sdd.spec.engine.max_model_len, sdd.spec.engine.max_num_seqs) == (512, 4)
    result = evaluate(sdd)
    assert result.planned.holds, result.planned.message
    assert result.coverage.holds, result.coverage.message
    assert doc["spec"]["speculative"] == {"method": "ngram", "numSpeculativeTokens": 2}


@pytest.mark.parametrize("real", [True, False])
def test_the_closing_text_says_which_engine_ran_what(real: bool) -> None:
    text = demo_real.closing(real, None if real else "not installed")
    if real:
        assert demo_real.NAME in text
        assert "REAL vLLM engine" in text
        assert "stand-in" in text
    else:
        assert "did not run here (not installed)" in text
    assert json.dumps(text)  # printable as is


def test_make_engine_image_builds_nothing_and_says_why_where_scenario_l_cannot_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make test` provisions the image; turned off, it must not start a multi-GB build."""
    monkeypatch.setenv(engine_image.OPT_OUT, "0")

    def no_build(*_: object) -> None:
        raise AssertionError("built the image although scenario l cannot run")

    monkeypatch.setattr(engine_image, "build", no_build)
    assert engine_image.main() == 0
    said = capsys.readouterr().out
    assert "is not built here" in said
    assert "not root" in said or engine_image.OPT_OUT in said
