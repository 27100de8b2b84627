"""``warmgate plan``: prove shape coverage of a manifest or engine flags, complete it, cost it."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warmgate.api import engine_shape_config, load_manifest
from warmgate.buckets import (
    BucketPlan,
    CompletionError,
    CoverageReport,
    EngineShapeConfig,
    ModelProfile,
    PlanDiff,
    complete_plan,
    estimate_buckets,
    estimate_plan,
    plan_buckets,
    plan_diff,
    prove_coverage,
)
from warmgate.cli._engine_args import (
    EngineArgumentError,
    add_engine_arguments,
    engine_config_from_args,
)
from warmgate.cli.plan_drafter import add_drafter_arguments, drafter_summary
from warmgate.cli.plan_render import render_table

__all__ = ["PlanResult", "register", "run"]

# CoveragePolicy defaults of the API (warmgate.api.bucketing) when no manifest gives them.
DEFAULT_MAX_EXTRA = 64


@dataclass(frozen=True)
class PlanResult:
    """Everything ``warmgate plan`` found: the engine's plan, its proof, and the completion."""

    plan: BucketPlan
    report: CoverageReport
    completed: BucketPlan | None
    diff: PlanDiff | None
    completion_error: str | None
    max_extra: int
    model: ModelProfile
    recipe_cache: bool

    @property
    def completion_applies(self) -> bool:
        """Completion ran, succeeded and stays within the maxExtraBuckets cap."""
        return self.diff is not None and self.diff.added <= self.max_extra

    @property
    def effective(self) -> BucketPlan:
        """The plan warmgate would warm: the completed one when completion applies."""
        if self.completion_applies and self.completed is not None:
            return self.completed
        return self.plan

    @property
    def effective_covered(self) -> bool:
        """Whether the plan warmgate would warm leaves no reachable shape unwarmed."""
        return self.report.covered or self.completion_applies

    def to_dict(self, top: int) -> dict[str, Any]:
        """JSON-ready form of the whole result."""
        cost = {"model": {"params_b": self.model.params_b, "dtype": self.model.dtype}}
        cost["plan"] = estimate_plan(
            self.plan, self.model, recipe_cache=self.recipe_cache
        ).to_dict()
        completion: dict[str, Any] = {"error": self.completion_error, "applies": False}
        if self.diff is not None and self.completed is not None:
            completion = _completion_dict(self, self.diff, self.completed)
            cost["completed"] = completion.pop("cost")
            cost["added"] = completion.pop("added_cost")
        return {
            "config": self.plan.config.model_dump(mode="json", exclude={"bucket_file"}),
            "plan": {**self.plan.to_dict()["counts"], "digest": self.plan.digest},
            "coverage": self.report.to_dict(top),
            "completion": completion,
            "effective": {"digest": self.effective.digest, "covered": self.effective_covered},
            "cost": cost,
        }


def _completion_dict(result: PlanResult, diff: PlanDiff, completed: BucketPlan) -> dict[str, Any]:
    model, cached = result.model, result.recipe_cache
    added = estimate_buckets(
        diff.added_prompt, diff.added_decode, model, recipe_cache=cached, overhead=False
    )
    return {
        "error": None,
        "applies": result.completion_applies,
        "max_extra_buckets": result.max_extra,
        "added": diff.added,
        "added_prompt": [list(b) for b in diff.added_prompt],
        "added_seeds": [list(b) for b in diff.added_seeds],
        "added_decode": [list(b) for b in diff.added_decode],
        "digest": completed.digest,
        "cost": estimate_plan(completed, model, recipe_cache=cached).to_dict(),
        "added_cost": added.to_dict(),
    }


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``plan`` sub-command."""
    # "resolve": this command's --bucket-file writes the completed seed file (issue 4), so the
    # engine flag that reads a bucket file is renamed --engine-bucket-file here.
    parser = subparsers.add_parser(
        "plan",
        conflict_handler="resolve",
        help="prove that every reachable shape is warmed, complete the plan, estimate warmup",
        description=(
            "Plan vllm-gaudi's buckets for a SpecDecodeDeployment manifest (or engine flags), "
            "prove exactly which reachable steps would run unwarmed shapes, add the fewest "
            "seed buckets that close every gap, and estimate the warmup time."
        ),
    )
    parser.add_argument("manifest", nargs="?", type=Path, help="SpecDecodeDeployment YAML")
    add_engine_arguments(parser)
    _manifest_makes_flags_optional(parser)
    _add_policy_arguments(parser)
    add_drafter_arguments(parser)
    parser.set_defaults(func=run)


def _manifest_makes_flags_optional(parser: argparse.ArgumentParser) -> None:
    """--max-model-len is required only without a manifest; ``run`` checks it instead."""
    for action in parser._actions:
        if action.dest == "max_model_len":
            action.required = False


def _add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("coverage", "proof scope and completion (manifest wins if unset)")
    g.add_argument("--partial-drafts", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--complete", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--max-extra-buckets", type=int, default=None, metavar="N")
    g.add_argument("--strict", action="store_true", help="exit 1 unless the plan is covered")
    g.add_argument("--top", type=int, default=10, help="uncovered shapes to list (default 10)")
    g.add_argument("--output", "-o", choices=("table", "json"), default="table")
    g.add_argument("--bucket-file", dest="write_bucket_file", type=Path, default=None,
                   metavar="PATH", help="write the (completed) seed file here")  # fmt: skip
    g.add_argument("--engine-bucket-file", dest="bucket_file", type=Path, default=None,
                   metavar="PATH", help="read a VLLM_BUCKETING_FROM_FILE input file")  # fmt: skip
    c = parser.add_argument_group("cost", "warmup time model (docs/coverage.md)")
    c.add_argument("--params-b", type=float, default=8.0, help="model size, billions (8)")
    c.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    c.add_argument("--recipe-cache", action="store_true", help="a warm PT_HPU_RECIPE_CACHE")


def run(args: argparse.Namespace) -> int:
    """Plan, prove, complete and print; 2 for bad input, 1 for --strict with gaps left."""
    try:
        result = evaluate(args)
    except (EngineArgumentError, ValueError, OSError) as exc:
        print(f"warmgate plan: {exc}", file=sys.stderr)
        return 2
    if args.write_bucket_file is not None:
        args.write_bucket_file.write_text(result.effective.to_bucket_file())
    drafter = drafter_summary(args, result)
    if args.output == "json":
        doc = {**result.to_dict(args.top), "drafter": drafter.to_dict(args.top)}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(render_table(result, args.top) + drafter.render())
    return 1 if args.strict and not result.effective_covered else 0


def evaluate(args: argparse.Namespace) -> PlanResult:
    """Build the config and policy, prove, and complete when the policy asks for it."""
    cfg, policy = _config_and_policy(args)
    partial, complete, max_extra = policy
    plan = plan_buckets(cfg)
    report = prove_coverage(plan, partial, prefix_caching=args.prefix_caching)
    completed = diff = error = None
    if complete and not report.covered:
        try:
            completed = complete_plan(cfg, partial, prefix_caching=args.prefix_caching)
            diff = plan_diff(plan, completed)
        except CompletionError as exc:
            error = str(exc)
    model = ModelProfile(params_b=args.params_b, dtype=args.dtype)
    return PlanResult(plan, report, completed, diff, error, max_extra, model, args.recipe_cache)


def _config_and_policy(
    args: argparse.Namespace,
) -> tuple[EngineShapeConfig, tuple[bool, bool, int]]:
    """From the manifest when given (flags override its policy), else from engine flags."""
    partial, complete, max_extra = True, True, DEFAULT_MAX_EXTRA
    if args.manifest is not None:
        sdd = load_manifest(args.manifest)
        cfg = engine_shape_config(sdd, num_gpu_blocks=args.num_gpu_blocks)
        policy = sdd.spec.buckets.coverage
        if args.prefix_caching is None:  # the manifest's engine switch, unless a flag overrides
            args.prefix_caching = sdd.spec.engine.enable_prefix_caching
        partial, complete, max_extra = (
            policy.partial_drafts,
            policy.complete,
            policy.max_extra_buckets,
        )
    elif args.max_model_len is None:
        raise EngineArgumentError("give a manifest or --max-model-len (with the engine flags)")
    else:
        cfg = engine_config_from_args(args)
    return cfg, (
        partial if args.partial_drafts is None else args.partial_drafts,
        complete if args.complete is None else args.complete,
        max_extra if args.max_extra_buckets is None else args.max_extra_buckets,
    )
