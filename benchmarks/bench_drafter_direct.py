"""Issue 33's figures: per example, the drafter shapes in the plan, those the direct warmup warms,
those left to runtime, and the estimated Gaudi seconds of the direct warmup against the sweep.

    .venv/bin/python benchmarks/bench_drafter_direct.py

Estimates only (warmgate/buckets/cost.py, the sweep's own parameters); nothing ran on Gaudi.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets.cost import estimate_direct_warmup, format_span
from warmgate.reconcile.planning import evaluate
from warmgate.resources.runner_plan import direct_warmup

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


def main() -> None:
    print(
        f"{'example':<34}{'method':>7}{'plan':>6}{'direct':>8}{'runtime':>8}"
        f"{'engine':>7}{'swept':>7}  {'direct warmup':<16}{'sweep':<16}ratio"
    )
    for path in EXAMPLES:
        sdd = SpecDecodeDeployment.model_validate(yaml.safe_load(path.read_text()))
        result = evaluate(sdd)
        drafter = result.evaluation.drafter if result.evaluation else None
        bundle = result.to_run(None)
        method = sdd.spec.speculative.method
        if drafter is None or drafter.report is None or bundle is None:
            why = drafter.error if drafter is not None and drafter.error else "no drafter graphs"
            print(f"{path.stem:<34}{method:>7}  -  ({why})")
            continue
        report = drafter.report
        spec = direct_warmup(sdd, bundle.drafter_sweep, bundle.drafter_warmup)
        planned = len(report.shapes)
        direct = len(spec.shapes) if spec is not None else 0
        unwarmed = {s.engine_config for s in report.unwarmed}
        left = len(unwarmed - set(spec.shapes if spec else ()))
        warmed = [s.engine_config for s in report.shapes if s.warmed]
        shapes = spec.shapes if spec is not None else ()
        model = result.evaluation.model if result.evaluation else None
        low, high = estimate_direct_warmup(shapes, warmed, model=model)
        s_low, s_high = drafter.seconds
        ratio = f"{high / s_high:.2f}" if s_high else "-"
        print(
            f"{path.stem:<34}{method:>7}{planned:>6}{direct:>8}{left:>8}{len(warmed):>7}"
            f"{drafter.swept:>7}  {format_span(low, high):<16}{format_span(s_low, s_high):<16}"
            f"{ratio}  (runtime-unwarmed {len(unwarmed)}, of them warmed directly "
            f"{len(unwarmed) - left})"
        )


if __name__ == "__main__":
    main()
