"""Direct drafter warmup inside the engine process (issue 33 items 1, 2 and 4).

The engine plugin (``hook/plugin.py``) calls :func:`warm_gaudi` right after vllm-gaudi's
``HPUModelRunner.warmup_model`` and :func:`warm_cpu` right after vLLM's CPU worker's
``compile_or_warm_up_model``: both run in the engine process before it reports healthy (the
API server answers ``/health`` only once every engine process has finished starting). For
every shape of the plan's ``drafter_warmup`` document (the file ``WARMGATE_DRAFTER_WARMUP``
names, format warmgate-drafter-warmup/1, ``contract/drafterwarm.py``) it runs the drafter's own
``propose`` once, with inputs built the way the engine builds them, and logs:

    warmgate-hook v1 drafter-warm pid=7 t=... graph=["decode",16,1,48] ok=true s=0.41 ran=[...]
    warmgate-hook v1 drafter-warm pid=7 t=... graph=["prompt",1,512,0] ok=false reason="..."
    warmgate-hook v1 drafter-warmup pid=7 t=... state=done engine=gaudi planned=293 warmed=293
        failed=0 seconds=41.2

(the last one on one line; ``state``: ``done``, ``off`` when the switch
``WARMGATE_DRAFTER_WARMUP_ENABLED=0`` turned it off, ``unreadable`` when the document cannot
be read, ``no-drafter`` when the engine runs no eagle-type proposer).

**Gaudi** (vllm-gaudi v0.26.0 and main, never run on Gaudi: docs/runner.md, "Direct drafter
warmup", lists what the first Gaudi run must confirm). A decode graph ``(B, 1, C)``: the
first forward's attention metadata is the drafter's own ``prepare_attn_metadata`` over a block
table of ``min(B, C)`` sequences holding ``C`` blocks between them (block ids as the engine's
dummy decode uses them: 0, or ``C - 1`` with contiguous PA) and ``B`` rows, so
``get_habana_paged_attn_buffers`` pads the block list to exactly ``C``; token ids, positions
and hidden states are zeros of the engine's shapes (eagle3: the target's aux hidden states,
``fc`` input width; mtp: the target's hidden size). ``last_token_indices`` holds one row and
the block table passed to ``propose`` one block: calls 2..k run at ``(1, 1, smallest bucket)``.
A prompt graph ``(bs, q, bs * ctx)`` runs the engine's own dummy prefill
(``_prepare_dummy_scenario``) with ``q + k`` tokens (the dummy takes k off again for the draft
tokens), so the target's prefill, its sampler and ``propose_eagle_prefill`` build the drafter's
inputs exactly as at runtime. A shape counts as warmed only when the compile hook saw the
drafter run that very graph during the call (``ran``).

**CPU** (vLLM's ``EagleProposer`` with the CPU model runner: no HPU graphs, no padding). The
CPU form of a drafter shape is the drafter forward's ``num_tokens``: a shape
``(phase, batch, query, blocks)`` is one ``propose`` over ``n = batch * query`` target tokens
split over ``r = min(batch, max_num_seqs, n)`` requests, so its first forward runs ``n``
tokens and calls 2..k run ``r``; ``blocks`` has no CPU form (paged attention reads any block
table without a new graph). The CPU engine's whole reachable set is every ``n`` from 1 to
``max_num_batched_tokens`` and every ``r`` from 1 to ``max_num_seqs``
(:func:`cpu_shape_set`). The common attention metadata is built as the runner builds a
prefill's (query start locations, sequence lengths, a block table of block 0, the null block
no request owns, and its slot mapping).

Standard library only at import time: torch and the engine's modules are the engine's own,
imported inside the engine process when the warmup runs.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from warmgate.contract.drafterwarm import (
    DRAFTER_WARMUP_ENV,
    DRAFTER_WARMUP_SWITCH,
    DrafterWarmupSpec,
    read_drafter_warmup,
)
from warmgate.contract.schema import PlanError
from warmgate.contract.sweepplan import Graph

Emit = Callable[..., None]
# Warms one planned shape: (warmed, why not, what the engine ran) for its drafter-warm line.
Warmer = Callable[[Graph], tuple[bool, str, dict[str, Any]]]

# What the Gaudi path relies on in vllm-gaudi (issue 33 item 4): the parameters of the methods
# it calls, in order (it passes them positionally), and the attributes it reads. Checked
# against vllm-gaudi's source at both pinned commits (tests/runner/data/
# vllm_gaudi_surface.json, tests/runner/test_gaudi_surface.py) and, in the engine, against
# the classes it finds (``surface_problems``): a moved engine ends the direct warmup with
# state=error and the difference, never a guess. Where the commits differ, PROFILE_SURFACE
# holds each profile's side (the plan's ``profile`` picks).
GAUDI_SURFACE: dict[str, dict[str, Any]] = {
    "proposer": {
        "class": "HpuEagleProposer",
        "bases": ["EagleProposer"],
        "methods": {
            "propose": [
                "self",
                "target_token_ids",
                "target_positions",
                "target_hidden_states",
                "last_token_indices",
                "common_attn_metadata",
                "block_table_cpu_tensor",
                "model_runner",
            ],
            "prepare_attn_metadata": [
                "self",
                "block_table_cpu_tensor",
                "positions",
                "model_runner",
            ],
        },
        "attributes": ["model", "method", "max_model_len", "num_speculative_tokens"],
    },
    "runner": {
        "class": "HPUModelRunner",
        "methods": {
            "warmup_model": ["self"],
            "sample_tokens": ["self", "grammar_output"],
            "_prepare_dummy_scenario": ["self", "prompt_cfg", "decode_cfg"],
        },
        "attributes": [
            "drafter",
            "block_size",
            "hidden_size",
            "dtype",
            "device",
            "use_contiguous_pa",
            "kv_cache_config",
        ],
    },
}
# prepare_attn_metadata calls the runner's get_habana_paged_attn_buffers(block_tables,
# slot_mapping, batch_size): main added force_non_contiguous (and caps a contiguous-PA bucket at
# the KV blocks + 1, docs/coverage.md fact 9). A profile's methods must match exactly.
_PAGED_ATTN_BUFFERS = ["self", "block_tables", "slot_mapping", "batch_size", "block_size"]
PROFILE_SURFACE: dict[str, dict[str, list[str]]] = {
    "v0.26.0": {"get_habana_paged_attn_buffers": _PAGED_ATTN_BUFFERS},
    "main-2026-08": {
        "get_habana_paged_attn_buffers": [*_PAGED_ATTN_BUFFERS, "force_non_contiguous"]
    },
}


def surface_problems(runner: Any, profile: str) -> list[str]:
    """How the engine's classes differ from GAUDI_SURFACE and the profile's side (empty: as
    the plugin expects). Only signatures of methods and the class-level methods are checked
    here; instance attributes are read when the warmup runs."""
    problems: list[str] = []
    inspect = importlib.import_module("inspect")
    drafter = getattr(runner, "drafter", None)
    expected = {
        "runner": (runner, {**GAUDI_SURFACE["runner"]["methods"], **PROFILE_SURFACE[profile]}),
        "proposer": (drafter, GAUDI_SURFACE["proposer"]["methods"]),
    }
    exact = set(PROFILE_SURFACE[profile])
    for part, (obj, methods) in expected.items():
        if obj is None:
            problems.append(f"{part}: missing")
            continue
        for name, params in methods.items():
            method = getattr(type(obj), name, None)
            method = getattr(method, "__wrapped__", method)
            try:
                found = list(inspect.signature(method).parameters)
            except (TypeError, ValueError):
                problems.append(f"{part}.{name}: missing")
                continue
            if (found if name in exact else found[: len(params)]) != params:
                problems.append(f"{part}.{name}{tuple(found)} is not {tuple(params)}")
    return problems


@dataclass
class Outcome:
    """What the direct warmup did in this process (the closing line's fields)."""

    state: str
    engine: str
    planned: int = 0
    warmed: int = 0
    failed: int = 0
    seconds: float = 0.0
    reason: str = ""
    failures: list[tuple[Graph, str]] = field(default_factory=list)


def load_spec() -> tuple[DrafterWarmupSpec | None, str]:
    """The document the runner wrote, or (None, why not): unset variable -> (None, "")."""
    path = os.environ.get(DRAFTER_WARMUP_ENV)
    if not path:
        return None, ""
    try:
        with open(path, encoding="utf-8") as handle:
            return read_drafter_warmup(json.load(handle)), ""
    except (OSError, ValueError) as exc:
        return None, f"{path}: {exc}"
    except PlanError as exc:
        return None, f"{path}: {'; '.join(exc.problems)}"


def switched_off() -> bool:
    """The test switch: ``WARMGATE_DRAFTER_WARMUP_ENABLED=0``."""
    return os.environ.get(DRAFTER_WARMUP_SWITCH, "1").strip().lower() in ("0", "false", "no")


def run(
    engine: str,
    emit: Emit,
    warm_one: Warmer,
    spec: DrafterWarmupSpec,
) -> Outcome:
    """Warm every shape of ``spec`` with ``warm_one`` (True, "", fields) or (False, reason, ..),
    one line per shape, then the closing line. An exception of one shape fails that shape only."""
    outcome = Outcome("done", engine, planned=len(spec.shapes))
    began = time.monotonic()
    for shape in spec.shapes:
        t0 = time.monotonic()
        try:
            ok, reason, extra = warm_one(shape)
        except Exception as exc:  # one shape's failure is that shape's, never the engine's
            ok, reason, extra = False, f"{type(exc).__name__}: {exc}"[:300], {}
        fields: dict[str, Any] = {"graph": list(shape), "ok": ok}
        fields["s"] = round(time.monotonic() - t0, 4)
        if not ok:
            fields["reason"] = reason
            outcome.failed += 1
            outcome.failures.append((shape, reason))
        else:
            outcome.warmed += 1
        emit("drafter-warm", **fields, **extra)
    outcome.seconds = round(time.monotonic() - began, 3)
    close(emit, outcome)
    return outcome


def close(emit: Emit, outcome: Outcome) -> None:
    """The closing ``drafter-warmup`` line."""
    fields: dict[str, Any] = {
        "state": outcome.state,
        "engine": outcome.engine,
        "planned": outcome.planned,
        "warmed": outcome.warmed,
        "failed": outcome.failed,
        "seconds": outcome.seconds,
    }
    if outcome.reason:
        fields["reason"] = outcome.reason
    emit("drafter-warmup", **fields)


def guarded(engine: str, emit: Emit, warm: Callable[..., Outcome | None], *args: Any) -> None:
    """Run a whole direct warmup; a failure outside one shape (the engine's attributes not as
    this module expects) ends it with ``state=error`` and the reason, never the engine."""
    try:
        warm(*args, emit=emit)
    except Exception as exc:
        close(emit, Outcome("error", engine, reason=f"{type(exc).__name__}: {exc}"[:500]))


def start(engine: str, emit: Emit) -> DrafterWarmupSpec | None:
    """The spec to warm, or None after logging the closing line that says why not (no line at
    all when the runner asked for no direct warmup)."""
    spec, problem = load_spec()
    if spec is None:
        if problem:
            close(emit, Outcome("unreadable", engine, reason=problem))
        return None
    if switched_off():
        reason = f"{DRAFTER_WARMUP_SWITCH}=0"
        close(emit, Outcome("off", engine, planned=len(spec.shapes), reason=reason))
        return None
    return spec


# ---------------------------------------------------------------------------------------------
# CPU: vLLM's EagleProposer (SpecDecodeBaseProposer.propose) with the CPU model runner.


def cpu_shape_set(max_num_batched_tokens: int, max_num_seqs: int) -> list[Graph]:
    """Every drafter shape the CPU engine can run, in the plan's form: the first forward's
    ``n`` tokens for n in 1..max_num_batched_tokens (one request each, calls 2..k at 1), and
    batches of 1..max_num_seqs one-token requests (calls 1..k at that batch)."""
    prompts: list[Graph] = [("prompt", 1, n, 0) for n in range(1, max_num_batched_tokens + 1)]
    return prompts + [("decode", r, 1, 1) for r in range(1, max_num_seqs + 1)]


def cpu_form(shape: Graph, max_num_seqs: int) -> tuple[int, int]:
    """(first forward's tokens, calls 2..k's tokens) of a shape on the CPU engine."""
    _, batch, query, _ = shape
    tokens = batch * query
    return tokens, max(1, min(batch, max_num_seqs, tokens))


@contextlib.contextmanager
def _recording(drafter: Any) -> Iterator[list[int]]:
    """The token count of every forward of the drafter's model during the block, from a
    forward pre-hook (not a proxy: eagle3's propose checks the model's class)."""
    seen: list[int] = []

    def hook(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids: Any = kwargs.get("input_ids")
        if ids is None:
            ids = kwargs.get("inputs_embeds")
        with contextlib.suppress(Exception):
            seen.append(int(ids.shape[0]))

    handle = drafter.model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def _common_metadata_class() -> Any:
    for name in ("vllm.v1.attention.backend", "vllm.v1.attention.backends.utils"):
        with contextlib.suppress(ImportError):
            cls = getattr(importlib.import_module(name), "CommonAttentionMetadata", None)
            if cls is not None:
                return cls
    raise LookupError("vllm CommonAttentionMetadata not found")


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def cpu_warmer(runner: Any) -> Warmer | None:
    """The CPU warmer of one shape, or None when the runner has no eagle-type proposer."""
    drafter = getattr(runner, "drafter", None)
    if drafter is None or not callable(getattr(drafter, "propose", None)):
        return None
    if not hasattr(drafter, "model") or getattr(drafter, "method", None) not in (
        "eagle",
        "eagle3",
        "mtp",
    ):
        return None
    torch = importlib.import_module("torch")
    metadata_cls = _common_metadata_class()
    sched = runner.scheduler_config
    max_tokens, max_seqs = int(sched.max_num_batched_tokens), int(sched.max_num_seqs)
    k = int(runner.speculative_config.num_speculative_tokens)
    device = runner.device

    def hidden_width() -> tuple[int, Any]:
        buffer = drafter.hidden_states
        width = int(buffer.shape[-1])
        if drafter.method == "eagle3":
            inner: Any = getattr(drafter.model, "model", None)
            size = getattr(inner, "fc_input_size", None)
            if size is None:
                fc: Any = getattr(inner, "fc", None)
                size = getattr(fc, "input_size", None) or int(fc.weight.shape[1])
            width = int(size)
        return width, buffer.dtype

    def warm(shape: Graph) -> tuple[bool, str, dict[str, Any]]:
        tokens, reqs = cpu_form(shape, max_seqs)
        if tokens > max_tokens:
            return False, f"{tokens} tokens over max_num_batched_tokens {max_tokens}", {}
        block = int(drafter.block_size)
        mml = int(drafter.max_model_len)
        lens = _split(tokens, reqs)
        if max(lens) > mml:
            return False, f"a request of {max(lens)} tokens over max_model_len {mml}", {}
        columns = -(-mml // block)
        starts = [0]
        for n in lens:
            starts.append(starts[-1] + n)
        positions = torch.cat([torch.arange(n, dtype=torch.int64) for n in lens]).to(device)
        qsl_cpu = torch.tensor(starts, dtype=torch.int32)
        seq_cpu = torch.tensor(lens, dtype=torch.int32)
        cad = metadata_cls(
            query_start_loc=qsl_cpu.to(device),
            query_start_loc_cpu=qsl_cpu,
            seq_lens=seq_cpu.to(device),
            num_reqs=reqs,
            num_actual_tokens=tokens,
            max_query_len=max(lens),
            max_seq_len=max(lens),
            block_table_tensor=torch.zeros((reqs, columns), dtype=torch.int32, device=device),
            # block 0 is the null block: no request owns it (vLLM's BlockPool)
            slot_mapping=(positions % block).to(torch.int64),
            causal=True,
            seq_lens_cpu_upper_bound=seq_cpu.clone(),
        )
        width, dtype = hidden_width()
        ids_dtype = drafter.input_ids.dtype
        with _recording(drafter) as seen:
            drafter.propose(
                num_speculative_tokens=k,
                target_token_ids=torch.zeros(tokens, dtype=ids_dtype, device=device),
                target_positions=positions,
                target_hidden_states=torch.zeros((tokens, width), dtype=dtype, device=device),
                next_token_ids=torch.zeros(reqs, dtype=ids_dtype, device=device),
                token_indices_to_sample=None,
                common_attn_metadata=cad,
                sampling_metadata=types.SimpleNamespace(all_greedy=True),
            )
        ran = list(seen)
        want = {tokens, reqs} if k > 1 else {tokens}
        if not want <= set(ran):
            return False, f"the drafter ran {ran}, not {sorted(want)}", {"ran": ran}
        return True, "", {"ran": ran}

    return warm


def warm_cpu(worker: Any, *, emit: Emit) -> Outcome | None:
    """After the CPU worker's warmup: warm every planned shape (None: nothing asked)."""
    runner = getattr(worker, "model_runner", worker)
    return _warm_all(
        "cpu", emit, lambda _: cpu_warmer(runner), "the engine runs no eagle-type proposer"
    )


def _warm_all(
    engine: str,
    emit: Emit,
    warmer_for: Callable[[DrafterWarmupSpec], Warmer | None],
    no_drafter: str,
) -> Outcome | None:
    """Either engine's warmup: the planned shapes (None: nothing asked), the engine's warmer
    of one shape (None: no drafter to warm, said as ``no_drafter``), every shape warmed."""
    spec = start(engine, emit)
    if spec is None:
        return None
    warmer = warmer_for(spec)
    if warmer is None:
        outcome = Outcome("no-drafter", engine, planned=len(spec.shapes))
        outcome.reason = no_drafter
        close(emit, outcome)
        return outcome
    torch = importlib.import_module("torch")
    with torch.inference_mode():
        return run(engine, emit, warmer, spec)


# ---------------------------------------------------------------------------------------------
# Gaudi: vllm-gaudi's HpuEagleProposer with HPUModelRunner (never run on Gaudi).


def prompt_forms(shape: Graph, k: int, mml: int, block: int) -> list[int]:
    """The dummy prefill's token counts to try for a prompt graph ``(bs, q, bs * ctx)``.

    The dummy (``_prepare_dummy_scenario``) cuts its context to fit max_model_len, takes k
    tokens off the request for the drafts, then looks the prefill up, as the engine's own warmup
    runs it on each prompt bucket. Where the context fits, ``q + k`` tokens land on ``(q, ctx)``
    itself; where the dummy must cut the context, the engine's warmup passes the bucket's own
    ``q`` (the cut then leaves one more block, looked up back to ``ctx``), so that form comes
    first and the other after it (a lookup of the engine's list decides which one runs it)."""
    _, batch, query, blocks = shape
    ctx = blocks // batch if batch else 0
    tokens = min(query + k, mml)
    if tokens - k < 1:
        raise ValueError(f"no prefill of {query} tokens fits max_model_len {mml}")
    forms = [tokens, query] if ctx * block + tokens <= mml else [query, tokens]
    return list(dict.fromkeys(f for f in forms if f - k >= 1))


def gaudi_warmer(
    runner: Any, spec: DrafterWarmupSpec, ran: Callable[[], list[tuple[Any, ...]]]
) -> Warmer | None:
    """The Gaudi warmer of one shape; ``ran`` returns (and clears) the drafter graphs the compile
    hook saw run since its last call. None when the runner has no eagle-type proposer."""
    drafter = getattr(runner, "drafter", None)
    if drafter is None or not callable(getattr(drafter, "prepare_attn_metadata", None)):
        return None
    problems = surface_problems(runner, spec.profile)
    if problems:
        raise LookupError(f"vllm-gaudi is not as profile {spec.profile}: {'; '.join(problems)}")
    torch = importlib.import_module("torch")
    block = int(runner.block_size)
    mml = int(drafter.max_model_len)
    columns = -(-mml // block)
    k = int(drafter.num_speculative_tokens)
    contiguous = bool(getattr(runner, "use_contiguous_pa", False))
    kv_blocks = _kv_blocks(runner)
    device = runner.device

    def width() -> int:
        if drafter.method == "eagle3":
            inner: Any = getattr(drafter.model, "model", None)
            size = getattr(inner, "fc_input_size", None)
            if size is None:
                size = int(inner.fc.weight.shape[1])
            return int(size)
        return int(runner.hidden_size)

    def decode(shape: Graph) -> None:
        _, batch, _, blocks = shape
        # A bucket's block list may be longer than `batch` rows of the block table can hold
        # (the target's (B*T, 1, C) of B sequences padded up to C): the rows hold what they can
        # and get_habana_paged_attn_buffers pads the list to the bucket, as at runtime.
        used = min(blocks, batch * columns)
        seqs = max(1, min(batch, used))
        per = _split(max(used, seqs), seqs)
        if max(per) > columns:
            raise ValueError(f"{blocks} blocks over {seqs} sequences exceed the block table")
        block_id = 0
        if contiguous:  # as _prepare_dummy_scenario's decode: every block the highest id
            block_id = max(0, min(used - 1, (kv_blocks or used) - 1))
        table = torch.full((seqs, columns), block_id, dtype=torch.int32)
        positions = torch.zeros(batch, dtype=torch.int64)
        positions[:seqs] = torch.tensor([n * block - 1 for n in per], dtype=torch.int64)
        attn = drafter.prepare_attn_metadata(table, positions, runner)
        drafter.propose(
            torch.zeros((batch, 1), dtype=torch.int64, device=device),
            torch.zeros((batch, 1), dtype=torch.int64, device=device),
            torch.zeros((batch, 1, width()), dtype=runner.dtype, device=device),
            torch.zeros(1, dtype=torch.int64, device=device),
            attn,
            torch.zeros((1, columns), dtype=torch.int32),
            runner,
        )

    def prompt(shape: Graph, tokens: int) -> None:
        _, batch, _, blocks = shape
        runner._prepare_dummy_scenario((batch, tokens, blocks // batch if batch else 0), None)

    def warm(shape: Graph) -> tuple[bool, str, dict[str, Any]]:
        ran()
        if shape[0] != "prompt":
            decode(shape)
            seen = [list(g) for g in ran()]
        else:
            seen = []
            for tokens in prompt_forms(shape, k, mml, block):  # the first that runs it
                prompt(shape, tokens)
                seen += [list(g) for g in ran()]
                if list(shape) in seen:
                    break
        if list(shape) not in seen:
            return False, f"the drafter ran {seen}, not the planned graph", {"ran": seen}
        return True, "", {"ran": seen}

    return warm


def _kv_blocks(runner: Any) -> int | None:
    config = getattr(runner, "kv_cache_config", None)
    blocks = getattr(config, "num_blocks", None)
    return int(blocks) if isinstance(blocks, int) else None


def warm_gaudi(
    runner: Any, ran: Callable[[], list[tuple[Any, ...]]], *, emit: Emit
) -> Outcome | None:
    """After vllm-gaudi's warmup_model: warm every planned shape (None: nothing asked)."""
    return _warm_all(
        "gaudi",
        emit,
        lambda spec: gaudi_warmer(runner, spec, ran),
        "the engine runs no HpuEagleProposer",
    )
