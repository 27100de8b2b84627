"""``warmgate plan``: prove shape coverage of a manifest or engine flags, complete it, cost it."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from warmgate.api import engine_shape_config, load_manifest
from warmgate.buckets import EngineShapeConfig, ModelProfile
from warmgate.cli._engine_args import (
    EngineArgumentError,
    add_engine_arguments,
    engine_config_from_args,
)
from warmgate.cli.plan_drafter import add_drafter_arguments, drafter_summary
from warmgate.cli.plan_figures import add_figure_arguments, figure_lines, figures
from warmgate.cli.plan_render import render_json, render_table
from warmgate.cli.plan_shards import add_shard_arguments, shard_figures, shard_lines
from warmgate.reconcile.planning.model_size import ModelSize, model_size
from warmgate.reconcile.planning.proven_plan import PlanPolicy, ProvenPlan, evaluate_plan

__all__ = ["evaluate", "register", "run"]


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
    g.add_argument(
        "--structured-outputs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="clients may send structured-output requests (default: the manifest's, else on, "
        "as vLLM's server): partial drafts are then in scope whatever --partial-drafts says",
    )
    g.add_argument("--prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--complete", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--max-extra-buckets", type=int, default=None, metavar="N")
    g.add_argument(
        "--optimize-for",
        choices=("ServingSpeed", "WarmupTime"),
        default=None,
        help="what completion trades (default: the manifest's, else ServingSpeed: decode KV "
        "padding within 1.05x of the engine plan's)",
    )
    g.add_argument("--strict", action="store_true", help="exit 1 unless the plan is covered")
    g.add_argument("--top", type=int, default=10, help="uncovered shapes to list (default 10)")
    g.add_argument("--output", "-o", choices=("table", "json"), default="table")
    add_figure_arguments(g)
    add_shard_arguments(g)
    g.add_argument(
        "--bucket-file",
        dest="write_bucket_file",
        type=Path,
        default=None,
        metavar="PATH",
        help="write the (completed) seed file here",
    )
    g.add_argument(
        "--engine-bucket-file",
        dest="bucket_file",
        type=Path,
        default=None,
        metavar="PATH",
        help="read a VLLM_BUCKETING_FROM_FILE input file",
    )
    c = parser.add_argument_group("cost", "warmup time model (docs/coverage.md)")
    c.add_argument(
        "--params-b",
        type=float,
        default=None,
        help="model size in billions (default: the manifest's spec.model.parameters or known "
        "model, else 8)",
    )
    c.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    c.add_argument("--recipe-cache", action="store_true", help="a warm PT_HPU_RECIPE_CACHE")


def run(args: argparse.Namespace) -> int:
    """Plan, prove, complete and print; 2 for bad input, 1 for --strict with gaps left."""
    try:
        evaluation = evaluate(args)
    except (EngineArgumentError, ValueError, OSError) as exc:
        print(f"warmgate plan: {exc}", file=sys.stderr)
        return 2
    if args.write_bucket_file is not None:
        args.write_bucket_file.write_text(evaluation.effective.to_bucket_file())
    extra = figures(evaluation, args.optimum)
    sharded = shard_figures(evaluation, args.shards, _tensor_parallel(args))
    drafter = drafter_summary(evaluation)
    if args.output == "json":
        document = render_json(evaluation, args.top, recipe_cache=args.recipe_cache)
        document = {**document, **extra, **sharded, "drafter": drafter.to_dict(args.top)}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        table = render_table(evaluation, args.top, recipe_cache=args.recipe_cache)
        lines = figure_lines(extra) + shard_lines(sharded)
        sys.stdout.write(table + "\n".join(lines) + "\n" + drafter.render())
    return 1 if args.strict and not evaluation.covered else 0


def _tensor_parallel(args: argparse.Namespace) -> int:
    """The engine's TP (cards per shard): the manifest's, else 1."""
    if args.manifest is None:
        return 1
    return int(load_manifest(args.manifest).spec.engine.tensor_parallel_size)


def evaluate(args: argparse.Namespace) -> ProvenPlan:
    """The operator's plan pipeline on the manifest or engine flags, with the flags' policy."""
    config, policy, size = _inputs(args)
    params_b = size.params_b if args.params_b is None else args.params_b
    return evaluate_plan(config, policy, ModelProfile(params_b=params_b, dtype=args.dtype))


def _inputs(args: argparse.Namespace) -> tuple[EngineShapeConfig, PlanPolicy, ModelSize]:
    """From the manifest when given (flags override its policy), else from engine flags."""
    if args.manifest is not None:
        sdd = load_manifest(args.manifest)
        config = engine_shape_config(sdd, num_gpu_blocks=args.num_gpu_blocks)
        stated, size = PlanPolicy.of(sdd), model_size(sdd)
    elif args.max_model_len is None:
        raise EngineArgumentError("give a manifest or --max-model-len (with the engine flags)")
    else:
        config, stated = engine_config_from_args(args), PlanPolicy()
        size = ModelSize(ModelProfile().params_b, "the cost model's reference")
    if args.method is not None:  # the prompt warmup's dummies depend on it (docs/coverage.md)
        config = config.model_copy(update={"speculative_method": args.method})
    flags = {
        "partial_drafts": args.partial_drafts,
        "prefix_caching": args.prefix_caching,
        "complete": args.complete,
        "max_extra_buckets": args.max_extra_buckets,
        "method": args.method,
        "sweep_budget_s": args.sweep_budget_s,
        "optimize_for": args.optimize_for,
        "structured_outputs": args.structured_outputs,
    }
    policy = replace(stated, **{k: v for k, v in flags.items() if v is not None})
    if policy.structured_outputs:  # grammar validation truncates drafts anywhere (issue 25)
        policy = replace(policy, partial_drafts=True)
    return config, policy, size
