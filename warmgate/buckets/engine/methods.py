"""The speculative-decoding methods and what each one means to the engine: the one table.

Everything that depends on the method reads its traits here: the CRD's enum and its CEL rules
(`warmgate.api.vllm_spec`), the engine's prompt warmup (`config.prompt_dummy_shortenings`), the
drafter's graphs and their sweep (`warmgate.buckets.drafter`), the runner's compile hook, the
probe workload and the engine's speculative config (`warmgate.resources`). Adding a method is a
line in `SpeculativeMethod` and a row in `METHODS` (a test checks they agree), plus what the
stand-in engine and the tests need to know of it.

Sources (vLLM 0.32 / vllm-gaudi at the pinned commits, docs/coverage.md "Drafter graphs"):
``SpeculativeConfig.use_eagle()`` is true for eagle, eagle3 and mtp, which run
``HpuEagleProposer`` (a draft model on the HPU, k tokens of the prompt warmup's budget left for
drafts); ngram runs ``NgramProposer`` on the CPU (no graphs, no budget), and its drafts come
from the prompt, so only prompts that repeat tokens make it draft.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

SpeculativeMethod = Literal["eagle", "eagle3", "mtp", "ngram"]


@dataclass(frozen=True)
class MethodTraits:
    """What a speculative method is, as far as warmgate is concerned.

    ``proposer``: vllm-gaudi's proposer class that drafts for it (docs and messages).
    ``draft_model``: spec.speculative.draftModel is required, or refused (mtp drafts with the
    target's own MTP layers, ngram with none). ``drafter_graphs``: a draft model runs on the
    accelerator, whose graphs the engine's warmup mostly never compiles (proven and swept);
    it also shortens the prompt warmup's dummies by k. ``prompt_lookup``: the drafts are
    n-gram matches in the prompt (the `ngram` spec block; the probe's repeated-token step).
    ``aux_hidden_states``: the drafter combines the target's hidden states of several layers
    (eagle3's combine_hidden_states, outside the drafter's graph).
    """

    draft_model: Literal["required", "refused"]
    drafter_graphs: bool
    proposer: str
    prompt_lookup: bool = False
    aux_hidden_states: bool = False


METHODS: Final[dict[SpeculativeMethod, MethodTraits]] = {
    "eagle": MethodTraits("required", drafter_graphs=True, proposer="HpuEagleProposer"),
    "eagle3": MethodTraits(
        "required", drafter_graphs=True, proposer="HpuEagleProposer", aux_hidden_states=True
    ),
    "mtp": MethodTraits("refused", drafter_graphs=True, proposer="HpuEagleProposer"),
    "ngram": MethodTraits(
        "refused", drafter_graphs=False, proposer="NgramProposer", prompt_lookup=True
    ),
}

METHOD_NAMES: Final[tuple[SpeculativeMethod, ...]] = get_args(SpeculativeMethod)
# Methods that run a draft model on the accelerator (vLLM's SpeculativeConfig.use_eagle()).
DRAFT_MODEL_METHODS: Final[tuple[SpeculativeMethod, ...]] = tuple(
    m for m, t in METHODS.items() if t.drafter_graphs
)


def traits(method: str | None) -> MethodTraits | None:
    """The traits of a method; None for no method or an unknown one."""
    return METHODS.get(method) if method is not None else None  # type: ignore[call-overload]


def methods_where(**trait: object) -> tuple[SpeculativeMethod, ...]:
    """The methods whose traits have these values, in table order, e.g.
    ``methods_where(draft_model="required")`` -> ("eagle", "eagle3")."""
    return tuple(m for m, t in METHODS.items() if all(getattr(t, k) == v for k, v in trait.items()))
