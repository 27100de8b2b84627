"""Test-side simulation of a serving engine running one sweep step, for the sweep's proof.

A vLLM V1 scheduler (running requests first, each decode 1 + k tokens trimmed to the token
budget and to max_model_len - 1; then waiting requests first come first served, prompts chunked
to the budget) drives vllm-gaudi's runner (one prompt per prefill batch, decodes as one batch),
whose drafter calls come from ``drafter_sim.EngineCalls``. The drafts' acceptance and the
requests' arrival are the adversary: the test tries several of each.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from drafter_sim import EngineCalls, Key, cdiv

from warmgate.buckets import BucketPlan

Accept = Callable[[int, int, int], int]  # (request, engine step, drafts) -> accepted drafts


@dataclass
class _Request:
    index: int
    computed: int = 0
    output: int = 0


def accept_all(_req: int, _step: int, drafts: int) -> int:
    return drafts


def accept_none(_req: int, _step: int, _drafts: int) -> int:
    return 0


def accept_random(seed: int) -> Accept:
    rng = random.Random(seed)
    return lambda _req, _step, drafts: rng.randint(0, drafts)


def accept_split(req: int, _step: int, drafts: int) -> int:
    """Half the requests accept everything, half nothing: contexts drift apart fastest."""
    return drafts if req % 2 else 0


ACCEPTS: dict[str, Accept] = {
    "all": accept_all,
    "none": accept_none,
    "split": accept_split,
}


def run_step(
    plan: BucketPlan,
    concurrency: int,
    prompt: int,
    max_tokens: int,
    *,
    accept: Accept,
    arrivals: list[int],
) -> set[Key]:
    """Every drafter graph the engine runs while serving the step; asserts nothing is preempted."""
    cfg = plan.config
    calls = EngineCalls(plan)
    k, budget_max, mml = cfg.num_speculative_tokens, cfg.max_num_batched_tokens, cfg.max_model_len
    if cfg.num_gpu_blocks is not None:
        assert concurrency * cdiv(prompt + max_tokens + k, cfg.block_size) <= cfg.num_gpu_blocks
    pending = sorted(range(concurrency), key=lambda i: arrivals[i])
    waiting: list[_Request] = []
    running: list[_Request] = []
    seen: set[Key] = set()
    step = 0
    while pending or waiting or running:
        waiting += [_Request(i) for i in pending if arrivals[i] <= step]
        pending = [i for i in pending if arrivals[i] > step]
        budget, plan_step = budget_max, []
        for req in running:
            if budget <= 0:
                break
            want = prompt - req.computed if req.computed < prompt else 1 + k
            tokens = min(want, budget, mml - 1 - req.computed)
            if tokens > 0:
                plan_step.append((req, tokens))
                budget -= tokens
        while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
            req = waiting.pop(0)
            running.append(req)
            tokens = min(prompt, budget)
            plan_step.append((req, tokens))
            budget -= tokens
        seen |= _execute(calls, plan_step, prompt, accept, step)
        running = [r for r in running if r.output < max_tokens]
        step += 1
        assert step < 100_000, "the simulated step does not finish"
    return seen


def _execute(
    calls: EngineCalls,
    plan_step: list[tuple[_Request, int]],
    prompt: int,
    accept: Accept,
    step: int,
) -> set[Key]:
    """Run one engine step: the decode batch, then each prefill batch of one."""
    seen: set[Key] = set()
    decodes = [(req, tokens) for req, tokens in plan_step if req.computed >= prompt]
    prefills = [(req, tokens) for req, tokens in plan_step if req.computed < prompt]
    if decodes:
        seqs = []
        for req, tokens in decodes:
            drafts = tokens - 1
            seqs.append((req.computed, drafts, accept(req.index, step, drafts)))
        seen |= {key for _, key in calls.decode(seqs)}
        for (req, _), (_, _, accepted) in zip(decodes, seqs, strict=True):
            req.computed += 1 + accepted
            req.output += 1 + accepted
    for req, tokens in prefills:
        before = req.computed
        req.computed += tokens
        if req.computed == prompt:  # only a completing chunk has logits, so the drafter runs
            seen |= {key for _, key in calls.prefill(prompt, tokens, cdiv(before, calls.block))}
            req.output = 1
    return seen
