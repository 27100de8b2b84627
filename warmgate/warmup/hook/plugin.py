"""The compile hook inside the engine: counts graph compilations per step and per drafter forward.

vLLM loads it in every process it starts through its general-plugin entry point (group
``vllm.general_plugins``, name ``warmgate_hook``, value ``warmgate.warmup.hook.plugin:register``):
the runner writes that entry point as a dist-info folder on the engine's PYTHONPATH (``hookenv``),
so nothing is installed in the image. vLLM calls every plugin before a process starts work and
skips plugins missing from ``VLLM_PLUGINS`` when that is set (vllm/plugins/__init__.py,
``load_plugins_by_group``, ``load_general_plugins``).

Why a hook (docs/coverage.md, "Drafter graphs"): vllm-gaudi's ``_check_config`` sees the target's
forwards only, and its own ``track_graph_compile`` wraps ``HPUWorker.execute_model``, which runs
no forward (every forward, target and drafter, runs in ``HPUModelRunner.sample_tokens``). So the
hook wraps, with Habana's ``metric_localcontext("graph_compilation")`` and a synchronize before
reading it, exactly as ``track_graph_compile`` does (vllm_gaudi/v1/worker/hpu_worker.py 755-763,
both pinned commits):

- ``HPUModelRunner.sample_tokens``: one ``compile where=step`` line per step that compiled;
- ``HPUModelRunner.warmup_model``: one ``warmup`` line with the warmup's total (no line per
  warmup compile);
- ``HpuEagleProposer.propose``: during the call its ``model`` is a proxy that measures every
  drafter forward and names it ``(phase, batch, query, attn_metadata.num_blocks())`` like the
  target's ``_check_config`` (hpu_model_runner.py 3579-3605 / 3634-3660; hpu_eagle.py 40, 109),
  and logs a ``ran`` line the first time each graph runs in the process, compiled or not.

A metric that cannot be read (a changed format, an exception in ``stats()`` or the synchronize)
stops the counting with a ``not-attached`` line: an unreadable count is never "no compiles".

The engine's modules are patched when they are imported (a ``sys.meta_path`` finder), so loading
the plugin in the API server imports nothing of vllm_gaudi or Habana. Every target is checked
first; when one is missing or fails, the hook logs ``not-attached`` with the reason and leaves
that target as it was: the engine always runs. Standard library only (Habana's module is the
engine's own).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, ClassVar

from warmgate.contract.drafterwarm import DRAFTER_WARMUP_ENV
from warmgate.warmup.hook import burst_gate, drafter_warm
from warmgate.warmup.hook.lines import format_hook_line

RUNNER_MODULE = "vllm_gaudi.v1.worker.hpu_model_runner"
EAGLE_MODULE = "vllm_gaudi.v1.spec_decode.hpu_eagle"
CPU_WORKER_MODULE = "vllm.v1.worker.cpu_worker"
METRICS_MODULE = "habana_frameworks.torch.hpu.metrics"
HPU_MODULE = "habana_frameworks.torch.hpu"


class _State:
    """Per-process state: the runner's steps and the drafter's forwards run in one thread."""

    registered = False
    in_warmup = False
    broken = False
    step_drafter = 0
    gate_hold_s = 0.0
    drafter_total = 0
    ran: ClassVar[set[tuple[Any, ...]]] = set()  # graphs this process has run (``ran``)
    recent: ClassVar[list[tuple[Any, ...]]] = []  # graphs run since the direct warmup looked


def emit(kind: str, **fields: Any) -> None:
    """One hook line on stderr in a single write (whole in a pipe up to 4096 bytes)."""
    line = format_hook_line(kind, os.getpid(), time.time(), **fields)
    with contextlib.suppress(OSError):
        os.write(2, line.encode("utf-8", "replace"))


NO_GAUDI = (
    "vllm_gaudi is not installed in this engine (e.g. a CPU build of vLLM): no Gaudi model "
    "runner or drafter to attach to"
)


def register() -> None:
    """The plugin entry point: patch vllm_gaudi's runner and drafter when they are imported."""
    if _State.registered:
        return  # "plugins can be loaded for multiple times" (load_general_plugins)
    _State.registered = True
    gaudi = gaudi_installed()
    emit("loaded", gaudi=gaudi)  # the plugin mechanism worked in this process
    _gate_bursts()
    if not gaudi:  # nothing will ever import the targets: say so instead of staying silent
        emit("not-attached", target="step", reason=NO_GAUDI)
        if os.environ.get(DRAFTER_WARMUP_ENV):
            # vLLM's CPU build: the direct drafter warmup only (issue 33: the mechanism)
            try:
                _watch(CPU_WORKER_MODULE, attach_cpu_worker)
            except Exception as exc:
                emit("not-attached", target="drafter-warmup", reason=f"cannot watch: {exc}")
        return
    try:
        _watch(RUNNER_MODULE, attach_runner)
        _watch(EAGLE_MODULE, attach_drafter)
    except Exception as exc:  # never stop the engine over its hook
        emit("not-attached", target="step", reason=f"cannot watch imports: {exc}")


def _gate_bursts() -> None:
    """With ``WARMGATE_BURST_GATE`` (seconds), hold each burst until it is whole (burst_gate.py);
    only EngineCore calls the scheduler, so the wrapper is idle in the other processes."""
    value = os.environ.get(burst_gate.BURST_GATE_ENV)
    if not value:
        return
    try:
        hold_s = float(value)
        if not hold_s > 0:
            raise ValueError(f"{burst_gate.BURST_GATE_ENV}={value!r} is not a positive number")
        _State.gate_hold_s = hold_s
        _watch(burst_gate.SCHEDULER_MODULE, attach_burst_gate)
    except Exception as exc:
        emit("not-attached", target="burst-gate", reason=f"{type(exc).__name__}: {exc}")


def attach_burst_gate(module: ModuleType) -> None:
    """Gate the bursts at vLLM's scheduler (burst_gate.py)."""
    burst_gate.attach(module, _State.gate_hold_s, emit)


def gaudi_installed() -> bool:
    """Whether this process can import vllm_gaudi (found, not imported: nothing of the engine
    is loaded by the hook)."""
    if "vllm_gaudi" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("vllm_gaudi") is not None
    except (ImportError, ValueError):
        return False


def _watch(name: str, attach: Callable[[ModuleType], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        _safely(attach, module)
        return
    for finder in sys.meta_path:
        if isinstance(finder, AfterImport):
            finder.callbacks[name] = attach
            return
    sys.meta_path.insert(0, AfterImport({name: attach}))


def _safely(attach: Callable[[ModuleType], None], module: ModuleType) -> None:
    try:
        attach(module)
    except Exception as exc:
        target = "step"
        if attach is attach_drafter:
            target = "drafter"
        elif attach is attach_cpu_worker:
            target = "drafter-warmup"
        elif attach is attach_burst_gate:
            target = "burst-gate"
        emit("not-attached", target=target, reason=f"{type(exc).__name__}: {exc}")


class AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader the other finders return for a watched module, so
    ``attach`` runs right after the module's code (and every import it makes) has run."""

    def __init__(self, callbacks: dict[str, Callable[[ModuleType], None]]) -> None:
        self.callbacks = callbacks

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        attach = self.callbacks.pop(fullname, None)
        if attach is None:
            return None
        spec: importlib.machinery.ModuleSpec | None = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None:
            return None
        inner = spec.loader
        if isinstance(inner, importlib.abc.Loader) and hasattr(inner, "exec_module"):
            spec.loader = _Attaching(inner, attach)
        return spec


class _Attaching(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, attach: Callable[[ModuleType], None]) -> None:
        self.inner, self.attach = inner, attach

    def __getattr__(self, name: str) -> Any:
        # get_source, is_package, resource readers: tracebacks and importlib.resources still work
        return getattr(self.inner, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _safely(self.attach, module)


class Counter:
    """Habana's graph_compilation metric around a call, synchronized before it is read."""

    def __init__(self) -> None:
        metrics = importlib.import_module(METRICS_MODULE)
        context = getattr(metrics, "metric_localcontext", None)
        if not callable(context):
            raise LookupError(f"{METRICS_MODULE}.metric_localcontext missing")
        self.context: Callable[[str], Any] = context
        self.sync = getattr(importlib.import_module(HPU_MODULE), "synchronize", None)

    @contextlib.contextmanager
    def measure(self) -> Iterator[list[int]]:
        """Yields a box that holds the compile count once the block has ended.

        A metric that cannot be entered, synchronized, left or read breaks the hook for good
        (``_broken``: a ``not-attached`` line): from then on nothing is counted, and the runner
        reads "not verified", never "no compiles" (issue 25). The engine's own exceptions pass
        through untouched.
        """
        box = [0]
        if _State.broken:
            yield box
            return
        try:
            local = self.context("graph_compilation")
            gc = local.__enter__()
        except Exception as exc:
            _broken(exc)
            yield box
            return
        try:
            yield box
        except BaseException:
            with contextlib.suppress(Exception):
                local.__exit__(None, None, None)
            raise
        try:
            if callable(self.sync):
                self.sync()
            local.__exit__(None, None, None)
            box[0] = _total(gc)
        except Exception as exc:
            box[0] = 0
            _broken(exc)


def _broken(exc: Exception) -> None:
    if _State.broken:
        return
    _State.broken = True
    reason = f"graph_compilation metric failed: {type(exc).__name__}: {exc}"
    emit("not-attached", target="step", reason=reason)


class MetricUnreadable(ValueError):
    """``stats()`` did not hold a ``TotalNumber`` count: a format this hook does not know."""


def _total(gc: Any) -> int:
    """TotalNumber of ``stats()``: [["TotalNumber", n], ["TotalTime", us], ["AvgTime", us]].

    Anything else raises (MetricUnreadable, or whatever ``stats()`` raised): a changed format
    must read as unknown, not as zero compiles (hpu_worker.py 755-763 reads ``stats()[0][1]``).
    """
    stats = {str(k): v for k, v in gc.stats()}
    if "TotalNumber" not in stats:
        raise MetricUnreadable(f"no TotalNumber in stats() {sorted(stats)}")
    value = stats["TotalNumber"]
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise MetricUnreadable(f"TotalNumber is {value!r}, not a count")
    return int(value)


def _method(module: ModuleType, cls_name: str, name: str) -> tuple[type, Callable[..., Any]]:
    cls = getattr(module, cls_name, None)
    method = getattr(cls, name, None)
    if not isinstance(cls, type) or not callable(method):
        raise LookupError(f"{module.__name__}.{cls_name}.{name} missing")
    return cls, method


def attach_runner(module: ModuleType) -> None:
    """Count compiles per engine step (sample_tokens) and in the engine's warmup."""
    cls, sample = _method(module, "HPUModelRunner", "sample_tokens")
    counter = Counter()
    targets = ["sample_tokens"]
    with contextlib.suppress(LookupError):
        _, warm = _method(module, "HPUModelRunner", "warmup_model")
        cls.warmup_model = _counted_warmup(warm, counter)  # type: ignore[attr-defined]
        targets.append("warmup_model")
    cls.sample_tokens = _counted_step(sample, counter)  # type: ignore[attr-defined]
    emit("attached", targets=targets)


def attach_cpu_worker(module: ModuleType) -> None:
    """vLLM's CPU build: warm the planned drafter shapes after the worker's own warmup."""
    cls, original = _method(module, "CPUWorker", "compile_or_warm_up_model")

    def compile_or_warm_up_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        drafter_warm.guarded("cpu", emit, drafter_warm.warm_cpu, self)
        return result

    compile_or_warm_up_model.__wrapped__ = original  # type: ignore[attr-defined]
    cls.compile_or_warm_up_model = compile_or_warm_up_model  # type: ignore[attr-defined]
    emit("attached", targets=["drafter-warmup"])


def attach_drafter(module: ModuleType) -> None:
    """Name the drafter's compiles by shape (eagle, eagle3, mtp: HpuEagleProposer)."""
    cls, propose = _method(module, "HpuEagleProposer", "propose")
    counter = Counter()
    cls.propose = _named_drafter(propose, counter)  # type: ignore[attr-defined]
    emit("attached", targets=["drafter"])


def _counted_step(original: Callable[..., Any], counter: Counter) -> Callable[..., Any]:
    def sample_tokens(self: Any, *args: Any, **kwargs: Any) -> Any:
        _State.step_drafter = 0
        with counter.measure() as box:
            result = original(self, *args, **kwargs)
        if box[0] and not _State.in_warmup:
            emit("compile", where="step", count=box[0], drafter=_State.step_drafter)
        return result

    sample_tokens.__wrapped__ = original  # type: ignore[attr-defined]
    return sample_tokens


def _counted_warmup(original: Callable[..., Any], counter: Counter) -> Callable[..., Any]:
    def warmup_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        _State.in_warmup, before = True, _State.drafter_total
        try:
            with counter.measure() as box:
                result = original(self, *args, **kwargs)
                # Every planned drafter shape, directly, before the engine reports healthy
                # (issue 33); its compiles count in this warmup's total.
                drafter_warm.guarded("gaudi", emit, drafter_warm.warm_gaudi, self, _take_recent)
        finally:
            _State.in_warmup = False
        if not _State.broken:  # a broken metric counted nothing: no figure at all
            emit("warmup", count=box[0], drafter=_State.drafter_total - before)
        return result

    warmup_model.__wrapped__ = original  # type: ignore[attr-defined]
    return warmup_model


def _named_drafter(original: Callable[..., Any], counter: Counter) -> Callable[..., Any]:
    def propose(self: Any, *args: Any, **kwargs: Any) -> Any:
        model = getattr(self, "model", None)
        if model is None or isinstance(model, CountedModel):
            return original(self, *args, **kwargs)
        self.model = CountedModel(model, counter)
        try:
            return original(self, *args, **kwargs)
        finally:
            self.model = model

    propose.__wrapped__ = original  # type: ignore[attr-defined]
    return propose


class CountedModel:
    """Stands in for the drafter's model during ``propose``: measures each forward, and passes
    every other attribute through (``model.model.combine_hidden_states``, ``compute_logits``)."""

    def __init__(self, inner: Any, counter: Counter) -> None:
        self.__dict__["_inner"], self.__dict__["_counter"] = inner, counter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_inner"], name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        graph = graph_of(kwargs)
        with self.__dict__["_counter"].measure() as box:
            result = self.__dict__["_inner"](*args, **kwargs)
        if graph is not None and _State.in_warmup:
            _State.recent.append(tuple(graph))
        if graph is not None and (key := tuple(graph)) not in _State.ran:
            # The first run of a graph in this process, compiled now or before (recipe cache):
            # the runner's evidence that a planned graph was driven (issue 25).
            _State.ran.add(key)
            emit("ran", where="drafter", graph=graph, warmup=_State.in_warmup)
        if box[0]:
            _State.step_drafter += box[0]
            _State.drafter_total += box[0]
            if not _State.in_warmup:
                emit("compile", where="drafter", graph=graph, count=box[0])
        return result


def _take_recent() -> list[tuple[Any, ...]]:
    """The drafter graphs run since the last call (the direct warmup's evidence per shape)."""
    taken = list(_State.recent)
    _State.recent.clear()
    return taken


def graph_of(kwargs: dict[str, Any]) -> list[Any] | None:
    """(phase, batch, query, blocks) of a drafter forward, from input_ids and attn_metadata
    (hpu_eagle.py 40-46, 109-115: keyword arguments), or None when they cannot be read."""
    try:
        shape = tuple(int(d) for d in kwargs["input_ids"].shape)
        attn = kwargs["attn_metadata"]
        phase = "prompt" if getattr(attn, "is_prompt", False) else "decode"
        query = shape[1] if len(shape) > 1 else 1
        return [phase, shape[0], query, int(attn.num_blocks())]
    except Exception:
        return None
