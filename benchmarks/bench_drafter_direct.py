"""Issue 33's figures: per example, the drafter shapes in the plan, those the direct warmup warms,
those left to runtime (with the reason: only the engine limit ``drafter_plan.DIRECT_LIMIT``),
and the estimated Gaudi seconds of the direct warmup against the whole sweep it replaces, the
sweep's sample the plan now keeps (``drafter_plan.SAMPLE_BUDGET_S``), and the serving start-up
the direct warmup adds (every shape from the restored recipe cache: no compile).

    .venv/bin/python benchmarks/bench_drafter_direct.py

Estimates only (warmgate/buckets/cost.py, the sweep's own parameters); nothing ran on Gaudi.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets.cost import estimate_direct_warmup, format_span
from warmgate.buckets.drafter.sweep import plan_sweep
from warmgate.reconcile.planning.drafter_plan import DIRECT_LIMIT, sweep_budget
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.resources.runner_plan import direct_warmup

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


def main() -> None:
    for path in EXAMPLES:
        sdd = SpecDecodeDeployment.model_validate(yaml.safe_load(path.read_text()))
        result = evaluate(sdd)
        evaluation = result.evaluation
        drafter = evaluation.drafter if evaluation else None
        bundle = result.to_run(None)
        method = sdd.spec.speculative.method
        if evaluation is None or drafter is None or drafter.report is None or bundle is None:
            why = drafter.error if drafter is not None and drafter.error else "no drafter graphs"
            print(f"{path.stem}: {method}: - ({why})")
            continue
        report, model = drafter.report, evaluation.model
        spec = direct_warmup(sdd, bundle.drafter_sweep, bundle.drafter_warmup)
        shapes = spec.shapes if spec is not None else ()
        unwarmed = {s.engine_config for s in report.unwarmed}
        left = sorted(unwarmed - set(shapes))
        reasons = Counter(
            "engine limit: " + DIRECT_LIMIT.split(":")[0] if g in drafter.direct_limits else "?"
            for g in left
        )
        warmed = [s.engine_config for s in report.shapes if s.warmed]
        low, high = estimate_direct_warmup(shapes, warmed, model=model)
        serve_low, serve_high = estimate_direct_warmup(shapes, shapes, model=model)
        budget = sweep_budget(sdd.spec.warmup.timeout_seconds)
        full = plan_sweep(evaluation.effective, report, budget_s=budget, model=model)
        f_low, f_high = full.seconds
        s_low, s_high = drafter.seconds
        ratio = f"{high / f_high:.2f}" if f_high else "-"
        ratio_low = f"{low / f_low:.2f}" if f_low else "-"
        print(
            f"{path.stem}: {method} k={report.k}: {len(report.shapes)} drafter shapes in the plan, "
            f"{len(shapes)} warmed directly ({len(unwarmed) - len(left)} of the {len(unwarmed)} "
            f"the engine would compile at runtime), {len(left)} left to runtime "
            f"{dict(reasons) or ''}, {len(warmed)} built by the engine's own warmup"
        )
        print(
            f"    direct warmup {format_span(low, high)}; the whole sweep it replaces "
            f"{full.spec.driven} shapes in {len(full.spec.steps)} steps "
            f"{format_span(f_low, f_high)} "
            f"(budget {budget:.0f} s); direct / sweep high {ratio}, low {ratio_low}"
        )
        print(
            f"    the sweep's sample the plan keeps: {drafter.swept} shapes in "
            f"{len(drafter.sweep.spec.steps) if drafter.sweep else 0} steps "
            f"{format_span(s_low, s_high)}; serving start-up added (recipe-cache hits) "
            f"{format_span(serve_low, serve_high)}"
        )


if __name__ == "__main__":
    main()
