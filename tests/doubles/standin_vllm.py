#!/usr/bin/env python3
"""TEST DOUBLE, not vLLM: a stand-in for `vllm serve` on vllm-gaudi, for the warmup runner's tests.

Standard library only, one file (it can be installed as the `vllm` command of an image). It
accepts `vllm serve`'s command line, reads VLLM_BUCKETING_FROM_FILE and applies the engine's own
file-mode filters and spec-decode expansion to it, and prints what the real engine prints, in
vLLM's logging format: process prefixes, colour, levels, VLLM_LOGGING_* and NO_COLOR honoured,
tqdm bars with their postfix, one copy per rank under tensor parallelism, interleaved as writes
of several processes to one pipe interleave. It writes fake recipe files into
PT_HPU_RECIPE_CACHE_CONFIG's folder and serves /health and /v1/completions with http.server.

Every format is quoted next to a comment naming its upstream line: vllm-gaudi v0.26.0 = b059f9c9
("G26:<line>") and main = 091bbadd ("Gmain:<line>"), vLLM v0.26.0 ("vllm/<file>:<line>"). The
golden logs in tests/doubles/fixtures/engine_logs/ pin this output (test_standin_fixtures.py).

Faults are injected with STANDIN_FAULTS, a comma list of:
  crash_at_start        exit 3 right after the banner, before /health
  hang                  stop after the bucket lines; never serve /health
  hang_ignore_term      like hang, and ignore SIGTERM (the runner must SIGKILL)
  unwarmed_on_probe     log an unwarmed configuration and a fallback bucket on the first request
  kv_blocks=N           report N usable KV blocks instead of the pinned count
  extra_decode_bucket   generate one decode bucket the plan does not have
  skip_warmup           log "Skipping warmup..." instead of warming
  logs_on_stderr        records on stderr whatever VLLM_LOGGING_STREAM says (a custom config)
  garble_copies=N       cut the decode-list copy of the first N ranks with another process's
                        write (what a list longer than PIPE_BUF suffers under TP)
  old_vllm              the prefix of older vLLM: "(EngineCore_DP0 pid=N)", coloured unless
                        NO_COLOR, plain records
  fixed_clock           fixed time stamps, pids and timings (for the golden logs)
  exit_after_warmup     exit 0 after "Warmup finished" (and unwarmed_on_probe's lines) instead
                        of serving
  probe_http_500        answer every completion with HTTP 500
  exit_on_probe         exit 4 on the first completion request, its connection closed 1 s
                        before the exit (as a dying engine's sockets close before it is gone)
  slow_warmup=S         sleep S seconds before warming (a warmup long enough to interrupt)
  graph_seconds=S       take S seconds over each graph, the tqdm bar's lines written as each
                        one ends (a warmup that compiles slowly; with TP, one rank after the
                        other)
  drop_drafter_graph=P/B/Q/N  the drafter never runs graph (P, B, Q, N), e.g. decode/32/1/168:
                        an engine whose call sequence differs from the planner's model
  metric_unreadable     Habana's graph_compilation stats() raises (a changed metrics API)
  no_general_plugins    load no vllm.general_plugins entry point (a vLLM that does not load the
                        runner's compile hook): the drafter still runs, nothing reports it
  proposer_renamed      vllm_gaudi's eagle proposer is HpuEagleProposerV2, its method
                        propose_draft (a vllm-gaudi whose drafter code moved)
  drafter_warmup_skip=P/B/Q/N  the engine plugin's direct drafter warmup never reaches shape
                        (P, B, Q, N): the stand-in hides it from the document the plugin reads
                        (a plugin that stopped, or lost a shape, before the end of its set);
                        =decode hides every decode shape
  drafter_warmup_raise=P/B/Q/N  the drafter raises when the direct warmup runs that shape
  vllm_gaudi=PROFILE    the pinned vllm-gaudi the fake runner's signatures follow (v0.26.0 or
                        main-2026-08); without it, the profile of the plan's drafter-warmup
                        document (the stand-in plays the engine the plan was made for)
  skip_requests=N       answer the first N completions at once without scheduling them (a
                        burst that never reached the scheduler together)
  NAME@I (NAME=V@I)     any fault above, only in the Pod of completion index I of an Indexed
                        Job (JOB_COMPLETION_INDEX): e.g. crash_at_start@2 fails shard 2 only
STANDIN_RECORD=<path> writes the argv and the runner-owned env variables there as JSON.
STANDIN_BUCKET_RECIPES=1 also writes one recipe file per bucket it warms (sharded warmup tests).
STANDIN_TRACE=<path> appends one JSON line per engine step of the drafter loop: its wall-clock
time and every forward (the target's graph and the drafter's calls).

Unwarmed lines on demand, while serving: `POST /standin/unwarmed` with
{"configs": [["decode", 24, 1, 768], ...], "not_prepared": [["decode", [24, 1, 800], [24, 1,
896]], ...]} makes every rank log those lines as the engine does (formats in ``unwarmed``).
"""

from __future__ import annotations

import argparse
import ast
import bisect
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import json
import math
import os
import random
import re
import select
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

Bucket = tuple[int, int, int]
PIPE_BUF = 4096  # pipe(7): writes up to this size are atomic, longer ones may interleave
CYAN, PLAIN = "\033[0;36m", "\033[0;0m"  # vllm/utils/system_utils.py:27-28
GREY, RESET = "\033[90m", "\033[0m"  # vllm/logging_utils/formatter.py:94-95
LEVEL_COLOURS = {
    "DEBUG": "\033[37m",
    "INFO": "\033[32m",
    "WARNING": "\033[33m",
    "ERROR": "\033[31m",
}
LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
# Upstream files as vLLM's DEBUG-level path shrinking shows them (formatter.py:21-67).
PATHS = {
    "common.py": "vllm_gaudi/extension/bucketing/common.py",
    "hpu_model_runner.py": "vllm_gaudi/v1/worker/hpu_model_runner.py",
    "hpu_worker.py": "vllm_gaudi/v1/worker/hpu_worker.py",
    "kv_cache_utils.py": "vllm/v1/core/kv_cache_utils.py",
    "api_server.py": "vllm/entrypoints/openai/api_server.py",
}


def faults() -> dict[str, str]:
    """The injected faults: name -> value ("" when the fault has no value). A fault written
    ``name@I`` (or ``name=value@I``) applies only in the Pod of completion index I of an
    Indexed Job (JOB_COMPLETION_INDEX, which the Job controller sets): one shard of a sharded
    warmup fails, the others run."""
    found = {}
    index = os.environ.get("JOB_COMPLETION_INDEX", "").strip()
    for item in filter(None, os.environ.get("STANDIN_FAULTS", "").split(",")):
        fault, at, only = item.partition("@")
        if at and only.strip() != index:
            continue
        name, _, value = fault.partition("=")
        found[name.strip()] = value.strip()
    return found


def env_flag(name: str, default: str = "") -> bool:
    """vllm-gaudi's boolean env rule (§2.2): true, t, 1, yes, y, on, any case."""
    return os.environ.get(name, default).strip().lower() in {"true", "t", "1", "yes", "y", "on"}


class LogConfig:
    """vLLM's logging set-up as its environment makes it (vllm/logger.py:22-72, 156-201)."""

    def __init__(self) -> None:
        self.configured = os.environ.get("VLLM_CONFIGURE_LOGGING", "1") != "0"  # envs.py:812
        self.level = os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper()  # envs.py:817
        self.prefix = os.environ.get("VLLM_LOGGING_PREFIX", "")  # logger.py:22-25
        stream = os.environ.get("VLLM_LOGGING_STREAM", "ext://sys.stdout")
        self.stream = (
            "stderr" if stream.endswith("stderr") or "logs_on_stderr" in faults() else "stdout"
        )
        self.no_color = os.environ.get("NO_COLOR", "0") != "0"  # envs.py:826
        self.color = os.environ.get("VLLM_LOGGING_COLOR", "auto")  # envs.py:824

    def coloured(self, stream: str) -> bool:
        """logger.py:29-38 (records) and system_utils.py:203-211 (prefix) decide alike."""
        if self.no_color or self.color == "0":
            return False
        return self.color == "1" or os.isatty(1 if stream == "stdout" else 2)

    def shown(self, level: str) -> bool:
        """Handler and logger level (logger.py:59, 66); without vLLM's configuration only
        logging.lastResort remains: WARNING and above (Python's logging/__init__.py)."""
        return LEVELS[level] >= (LEVELS[self.level] if self.configured else LEVELS["WARNING"])

    def render(self, level: str, where: str, message: str, stamp: str) -> str:
        """One record: NewLineFormatter or ColoredFormatter (formatter.py:10-125) on _FORMAT
        "{prefix}%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"."""
        if not self.configured:
            return message + "\n"  # lastResort: "%(message)s"
        name, _, line = where.partition(":")
        fileinfo = _shrink(PATHS.get(name, name)) if self.level == "DEBUG" else name
        lvl, head = level, f"{stamp} [{fileinfo}:{line}]"
        if self.coloured(self.stream) and "old_vllm" not in faults():
            lvl = f"{LEVEL_COLOURS[level]}{level}{RESET}"
            head = f"{GREY}{stamp}{RESET} {GREY}[{fileinfo}:{line}]{RESET}"
        lead = f"{self.prefix}{lvl} {head} "
        return lead + message.replace("\n", "\r\n" + lead) + "\n"


def _shrink(relpath: str) -> str:
    """formatter.py:42-56: keep the first part (two after v1) and the last two."""
    parts = relpath.split("/")
    parts = parts[1:] if parts[0] == "vllm" else parts
    keep = 2 if parts[0] == "v1" else 1
    head, rest = parts[:keep], parts[keep:]
    return "/".join(head + (["...", *rest[-2:]] if len(rest) > 2 else rest))


class Proc:
    """One engine process; its writes are queued as (stream, text) pieces, one per write()."""

    def __init__(self, name: str, pid: int, config: LogConfig, clock: Callable[[], str]) -> None:
        self.name, self.pid, self.config, self.clock = name, pid, config, clock
        self.writes: list[tuple[str, str]] = []
        self.new_line = {"stdout": True, "stderr": True}

    def prefix(self, stream: str) -> str:
        """decorate_logs (system_utils.py:201-253), skipped when VLLM_CONFIGURE_LOGGING=0."""
        tag = f"({self.name} pid={self.pid})"
        old = "old_vllm" in faults()
        colour = not self.config.no_color if old else self.config.coloured(stream)
        return f"{CYAN}{tag}{PLAIN} " if colour else f"{tag} "

    def write(self, stream: str, text: str) -> None:
        """write_with_prefix (system_utils.py:215-230): the prefix is a write of its own at each
        line start; a text longer than PIPE_BUF reaches the pipe in several pieces."""
        if not self.config.configured:
            self.writes.append((stream, text))
            return
        for piece in re.split(r"(?<=\n)", text):
            if not piece:
                continue
            if self.new_line[stream]:
                self.writes.append((stream, self.prefix(stream)))
            for start in range(0, len(piece), PIPE_BUF):
                self.writes.append((stream, piece[start : start + PIPE_BUF]))
            self.new_line[stream] = piece.endswith("\n")

    def log(self, level: str, where: str, message: str) -> None:
        """A record of vLLM's "vllm" logger (vllm_gaudi/extension/logger.py:11-18 uses it too)."""
        if self.config.shown(level):
            stream = self.config.stream if self.config.configured else "stderr"
            self.write(stream, self.config.render(level, where, message, self.clock()))


def interleave(procs: list[Proc]) -> list[tuple[str, str]]:
    """The pipes' view of several processes writing at once: one write() of each in turn,
    rank r starting r turns late (ranks never run in lockstep)."""
    merged: list[tuple[str, str]] = []
    queues: list[list[tuple[str, str] | None]] = [
        [None] * r + p.writes for r, p in enumerate(procs)
    ]
    for p in procs:
        p.writes = []
    while any(queues):
        for queue in queues:
            if queue and (write := queue.pop(0)) is not None:
                merged.append(write)
    return merged


def emit(writes: list[tuple[str, str]]) -> None:
    """Hand the writes to the real file descriptors, in order."""
    for stream, text in writes:
        os.write(1 if stream == "stdout" else 2, text.encode("utf-8"))


# ---- the engine's file-mode bucketing: file_strategy.py:34-75, G26 common.py:378-539 ----


def read_seed_file(path: str) -> tuple[list[Bucket], list[Bucket]]:
    """FileBucketingStrategy.get_buckets: tuples of int, list or range; query 1 means decode."""
    prompt, decode = [], []
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        spec = ast.literal_eval(re.sub(r"range\(([^)]*)\)", _expand_range, line))
        dims = [v if isinstance(v, list) else [v] for v in spec]
        for bs in dims[0]:
            for q in dims[1]:
                for ctx in dims[2]:
                    (decode if q == 1 else prompt).append((int(bs), int(q), int(ctx)))
    return sorted(prompt), sorted(decode)


def _expand_range(m: re.Match[str]) -> str:
    return repr(list(range(*(int(v) for v in m.group(1).split(",")))))


# The first field of each omitted-bucket record, verbatim (G26 common.py:429-457).
CONDITIONS = {
    "model_len": "condition: ctx <= ceil((max_model_len - 1) / block_size) and query <= "
    "max_model_len",
    "batched": "condition: bs * query <= max_num_batched_tokens",
    "merged": "ctx <= max_num_prefill_seqs * math.ceil((max_model_len - math.floor(query / "
    "max_num_prefill_seqs)) // block_size)",
    "decode": "condition: bs <= ctx, ",
}


class Shapes:
    """The engine limits that filter and correct file buckets (G26 common.py:414-496)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.mml, self.mbt, self.block = (
            args.max_model_len,
            args.max_num_batched_tokens,
            args.block_size,
        )
        self.merged = env_flag("VLLM_MERGED_PREFILL")
        self.contiguous = env_flag("VLLM_CONTIGUOUS_PA")
        bs_max = int(os.environ.get("VLLM_PROMPT_BS_BUCKET_MAX") or 1)
        self.prefill_seqs = (
            args.max_num_seqs if self.merged else bs_max
        )  # G26 hpu_model_runner.py:1519

    def failed(self, is_prompt: bool, b: Bucket) -> tuple[Any, ...] | None:
        """The omitted-bucket record of the first filter ``b`` fails, or None."""
        bs, q, ctx = b
        if is_prompt and self.merged:  # G26:440-447
            per = self.prefill_seqs
            ok = ctx <= per * math.ceil((self.mml - math.floor(q / per)) // self.block)
        elif is_prompt:  # G26:416-438
            ok = ctx <= math.ceil((self.mml - 1) / self.block) and q <= self.mml
            if ok and bs * q > self.mbt:
                return (CONDITIONS["batched"], "-> bs, query, ctx: ", bs, q, ctx)
        else:  # G26:455-458; contiguous PA has no decode filter (G26:466-469)
            ok = self.contiguous or bs <= ctx
        kind = ("merged" if self.merged else "model_len") if is_prompt else "decode"
        return None if ok else (CONDITIONS[kind], "-> bs, query, ctx: ", bs, q, ctx)

    def correct(self, b: Bucket) -> Bucket:
        """correct_for_max_model_len (G26:452-453, 332-333); identity with contiguous PA."""
        bs, q, ctx = b
        return b if self.contiguous else (bs, q, min(ctx, bs * math.ceil(self.mml / self.block)))

    def generate(
        self, is_prompt: bool, file_buckets: list[Bucket]
    ) -> tuple[list[Bucket], list[Any]]:
        """generate_buckets' file branch (G26:498-501): kept buckets and omitted records."""
        kept, omitted = set(), set()
        for b in file_buckets:
            failure = self.failed(is_prompt, b)
            if failure is None:
                kept.add(b if is_prompt else self.correct(b))
            else:
                omitted.add(failure)
        return sorted(kept), sorted(omitted)

    def spec_expand(self, seeds: list[Bucket], k: int) -> list[Bucket]:
        """generate_spec_decode_buckets (G26:325-363 / Gmain:333-371)."""
        out = set(seeds)
        for bs, q, ctx in seeds:
            if bs * (1 + k) <= ctx:
                out.add(self.correct((bs * (1 + k), q, ctx)))
            out.add(self.correct((bs * (1 + k), q, ctx * (1 + k))))
        return sorted(out)


def format_bytes(size: float) -> str:
    """vllm_gaudi/extension/profiler.py:314-322 (both pins)."""
    n = 0
    while abs(size) > 1024:
        size, n = size / 1024, n + 1
    return f"{size:.4g} {['', 'Ki', 'Mi', 'Gi', 'Ti'][n]}B"


def tqdm_line(desc: str, n: int, total: int, postfix: str) -> str:
    """tqdm.format_meter for a pipe (no width known: a 10-cell bar) at zero elapsed time:
    "Decode warmup processing:  40%|████      | 4/10 [00:00<?, ?item/s, 3/10]"."""
    frac = n / total if total else 0
    full, part = divmod(int(frac * 10 * 8), 8)
    charset = " " + "".join(chr(c) for c in range(0x258F, 0x2587, -1))
    bar = charset[-1] * full + (charset[part] + " " * (9 - full) if full < 10 else "")
    tail = f", {postfix}" if postfix else ""
    return f"{desc}{frac * 100:3.0f}%|{bar}| {n}/{total} [00:00<?, ?item/s{tail}]"


class Engine:
    """The processes of one `vllm serve` and what each logs, phase by phase.

    Each method prints one upstream step with the line it reproduces in a comment. A new
    engine behaviour (a drafter's warmup, a compile-count line) is one more method called from
    ``warm`` or ``main`` through ``on_ranks``, which gives every rank its copy and interleaves
    them as the pipes would.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.config = args, LogConfig()
        fixed = "fixed_clock" in faults()
        self.clock = (
            (lambda: "11-29 19:40:04") if fixed else (lambda: time.strftime("%m-%d %H:%M:%S"))
        )
        base = 100 if fixed else os.getpid()
        self.api = Proc("APIServer", base, self.config, self.clock)
        # vllm/v1/engine/utils.py:167: "EngineCore" without data parallelism; older vLLM named
        # it "EngineCore_DP0". TP workers: multiproc_executor.py:1024-1047 ("Worker_TP<rank>").
        core = "EngineCore_DP0" if "old_vllm" in faults() else "EngineCore"
        self.core = Proc(core, base + 100 if fixed else base + 1, self.config, self.clock)
        tp = args.tensor_parallel_size
        pid0 = base + 200 if fixed else base + 2
        self.ranks = (
            [self.core]
            if tp == 1
            else [Proc(f"Worker_TP{r}", pid0 + r, self.config, self.clock) for r in range(tp)]
        )
        self.k = spec_tokens(args)
        self.method = spec_method(args)
        self.kv = int(faults().get("kv_blocks") or args.num_gpu_blocks_override or 8192)
        self.lock = threading.Lock()

    def on_ranks(self, phase: Callable[[Proc], None]) -> None:
        """Every rank runs ``phase``; their writes reach the pipes interleaved."""
        with self.lock:
            for proc in self.ranks:
                phase(proc)
            emit(interleave(self.ranks))

    def on(self, proc: Proc, phase: Callable[[Proc], None]) -> None:
        """One process runs ``phase``."""
        with self.lock:
            phase(proc)
            emit(interleave([proc]))

    def kv_cache(self, proc: Proc) -> None:
        """Model runner init, then the KV cache: hpu_worker.py:540-546 (both pins)."""
        proc.log("INFO", "hpu_model_runner.py:1522", "Bucketing is ON.")  # Gmain:1524
        pad_slot = self.kv * self.args.block_size  # G26 hpu_model_runner.py:6871-6872
        proc.log(
            "INFO",
            "hpu_worker.py:546",
            f"Usable num_blocks: {self.kv}, actual allocated num_blocks (max across layers): "
            f"{self.kv + 1} (_PAD_BLOCK_ID={self.kv}, _PAD_SLOT_ID={pad_slot})",
        )

    def override(self, proc: Proc) -> None:
        """vLLM core applies --num-gpu-blocks-override (kv_cache_utils.py:2107-2120)."""
        if self.args.num_gpu_blocks_override is not None:
            proc.log(
                "INFO",
                "kv_cache_utils.py:2115",
                f"Overriding num_gpu_blocks=10000 with num_gpu_blocks_override={self.kv}",
            )

    def lists(self) -> dict[str, list[Bucket]]:
        """The engine's lists from the seeds (warmup_model, G26 hpu_model_runner.py:6078-6090)."""
        shapes = Shapes(self.args)
        prompt_file, decode_file = read_seed_file(os.environ["VLLM_BUCKETING_FROM_FILE"])
        prompt, self.prompt_omitted = shapes.generate(True, prompt_file)
        seeds, self.decode_omitted = shapes.generate(False, decode_file)
        decode = shapes.spec_expand(seeds, self.k) if self.k else seeds
        if "extra_decode_bucket" in faults():
            decode = sorted([*decode, (decode[-1][0] + 1, 1, decode[-1][2])])
        return {"prompt": prompt, "seeds": seeds, "decode": decode}

    def log_lists(self, proc: Proc, lists: dict[str, list[Bucket]]) -> None:
        """G26 common.py:170-182 and 217-245 / Gmain:177-189 and 225-253."""
        self.omitted(proc, "prompt", self.prompt_omitted)
        self.generated(proc, "prompt", lists["prompt"])
        if env_flag("PT_HPU_SDPA_QKV_SLICE_MODE_FWD"):  # G26:176-182: filtered, logged again
            thld = int(os.environ.get("VLLM_FUSEDSDPA_SLIDE_THLD") or 8192)
            size = int(os.environ.get("PT_HPU_SDPA_BC_FACTOR") or 1024)
            kept = [b for b in lists["prompt"] if b[2] != 0 or b[1] < thld or b[1] % size == 0]
            self.generated(proc, "prompt", kept)
        self.omitted(proc, "decode", self.decode_omitted)
        if self.k:  # G26:357-361 / Gmain:365-369: only the buckets the expansion added
            seeds = set(lists["seeds"])
            self.generated(proc, "spec decode", [b for b in lists["decode"] if b not in seeds])
        self.generated(proc, "decode", lists["decode"])
        self.garble(proc)

    def omitted(self, proc: Proc, phase: str, records: list[Any]) -> None:
        """G26 common.py:518-524 / Gmain:526-532 (and the DEBUG summary, G26:533-537)."""
        if not records:
            return
        proc.log(
            "WARNING",
            "common.py:520",  # Gmain:528
            f"The following {phase} buckets from custom bucketing file "
            "(VLLM_BUCKETING_FROM_FILE) were omitted during warmup:",
        )
        for record in records:
            proc.log("WARNING", "common.py:524", f"  {record}")  # Gmain:532
        listing = "\n".join(map(str, records))
        proc.log("DEBUG", "common.py:537", f"Omitted {len(records)} {phase} buckets:\n{listing}")

    def generated(self, proc: Proc, kind: str, rows: list[Bucket]) -> None:
        """f"Generated {n} {phase} buckets [bs, query, num_blocks]: {list(buckets)}"."""
        where = "common.py:361" if kind == "spec decode" else "common.py:245"  # Gmain:369, 253
        proc.log(
            "INFO", where, f"Generated {len(rows)} {kind} buckets [bs, query, num_blocks]: {rows}"
        )

    def garble(self, proc: Proc) -> None:
        """garble_copies=N: the next rank's prefix write lands inside the decode-list line of
        the first N ranks, as a write can inside any line longer than PIPE_BUF."""
        rank = self.ranks.index(proc)
        if rank >= int(faults().get("garble_copies") or 0):
            return
        other = self.ranks[(rank + 1) % len(self.ranks)]
        for i, (stream, text) in enumerate(proc.writes):
            if "decode buckets [bs" in text and "spec decode" not in text:
                cut = text.index("]: [") + 14 + 7 * rank  # never two cuts that fit together
                pieces = [text[:cut], f"({other.name} pid={other.pid}) ", text[cut:]]
                proc.writes[i : i + 1] = [(stream, piece) for piece in pieces]
                return

    def warm(self, proc: Proc, lists: dict[str, list[Bucket]]) -> None:
        """warmup_model after the lists (G26 hpu_model_runner.py:6141-6233 / Gmain:6218-6308)."""
        if "skip_warmup" in faults() or env_flag("VLLM_SKIP_WARMUP"):
            proc.log("INFO", "hpu_model_runner.py:6142", "Skipping warmup...")  # Gmain:6219
            return
        time.sleep(float(faults().get("slow_warmup") or 0))
        if not self.args.enforce_eager:  # G26:6171 / Gmain:6246: graphs only without eager
            proc.log("INFO", "hpu_model_runner.py:5416", "Sampler warmup completed successfully")
            for phase, rows in (("Prompt", lists["prompt"]), ("Decode", lists["decode"])):
                self.graphs(proc, phase, rows)
        proc.log(
            "INFO",
            "hpu_model_runner.py:6233",  # Gmain:6308
            "Warmup finished in 0 secs, allocated 0 B of device memory",
        )

    def graphs(self, proc: Proc, phase: str, rows: list[Bucket]) -> None:
        """warmup_graphs' tqdm bar on stderr (G26:5418-5457 / Gmain:5466-5505), then
        log_graph_warmup_summary (G26:5170-5174 / Gmain:5218-5222)."""
        desc, total, last = f"{phase} warmup processing: ", len(rows), [0]

        def show(n: int, postfix: str) -> None:  # tqdm's status printer: "\r" + s + padding
            line = tqdm_line(desc, n, total, postfix)
            proc.write("stderr", "\r" + line + " " * max(last[0] - len(line), 0))
            last[0] = len(line)

        pace = float(faults().get("graph_seconds") or 0)
        show(0, "")
        for idx in range(total):  # set_postfix_str refreshes, then update(1) does
            show(idx, f"{idx}/{total}")
            show(idx + 1, f"{idx}/{total}")
            if pace:  # the bar as it stands reaches the pipe, then the next graph compiles
                emit(interleave([proc]))
                time.sleep(pace)
        show(total, f"{total - 1}/{total}" if total else "")
        proc.write("stderr", "\n")  # tqdm.close with leave=True
        used = format_bytes(total * 1048576)
        proc.log(
            "INFO", "hpu_model_runner.py:5174", f"Graph/{phase} captured:{total} used_mem:{used}"
        )

    def unwarmed(
        self,
        proc: Proc,
        configs: tuple[tuple[Any, ...], ...] = (("decode", 24, 1, 768),),
        misses: tuple[tuple[str, Bucket, Bucket], ...] = (("decode", (24, 1, 800), (24, 1, 896)),),
    ) -> None:
        """G26 hpu_model_runner.py:3588 / Gmain:3643 and G26 common.py:313-314 / Gmain:321-322.

        The default is §5.3's: a partial-draft step (T=3 of k=3) runs a shape no bucket covers.
        """
        for config in configs:  # logger.warning("Configuration: %s was not warmed-up!", cfg)
            proc.log(
                "WARNING", "hpu_model_runner.py:3588", f"Configuration: {config} was not warmed-up!"
            )
        for phase, requested, added in misses:
            where = "common.py:287" if phase == "prompt" else "common.py:313"
            proc.log(
                "WARNING",
                where,
                f"{phase.capitalize()} bucket for {requested} was not prepared. "
                f"Adding new bucket: {added}",
            )


# ---- the drafter (issue 16): scheduling, vllm-gaudi's shape lookups, a fake HPU runtime ----
#
# For eagle, eagle3 and mtp the completions go through an engine loop: vLLM V1's scheduler
# (running requests first, 1 + k tokens per decode trimmed to the token budget and to
# max_model_len - 1; then waiting ones first come first served, prompts chunked to the budget)
# drives a fake `vllm_gaudi` model runner whose forwards and drafter calls run "graphs" on a fake
# HPU runtime. A graph compiles the first time its shape runs; the only thing that reports it is
# Habana's `graph_compilation` metric (a fake `habana_frameworks.torch.hpu.metrics`), read by the
# compile hook vLLM loads as a general plugin, exactly as in the real engine. The shapes follow
# the engine's call sequence (docs/coverage.md, "Drafter graphs": decode call 1 on the target's
# (B*T, 1, C), calls 2..k on (B, 1, find_decode_bucket(B, X)[2]), prefill calls on the prompt's
# shape then (1, 1, ...)). Modelled only with non-contiguous PA and one prompt per prefill batch
# (otherwise completions are answered at once, as before). A test double's simplification: when the
# engine is idle, a burst of requests is admitted together once no connection is pending in the
# listen backlog or being read, and none arrived for ARRIVAL_SETTLE_S (the sweep assumes they
# reach the scheduler within two engine steps; a loaded test machine spreads them further).
# Prefix caching is on as in vLLM V1 (off with contiguous PA or --no-enable-prefix-caching): a new
# request starts after its leading full prompt blocks that earlier prefills computed, never its
# last token (vLLM's max cache hit is prompt - 1); blocks are never evicted here.
ARRIVAL_SETTLE_S = 0.05
ENGINE_STEP_S = 0.0005
DRAFT_METHODS = ("eagle", "eagle3", "mtp")
Graph = tuple[str, int, int, int]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def fallback_value(n: int, base: int) -> int:
    """calc_fallback_value (G26 common.py): round up on a step growing with n's cube root."""
    if n <= 1:
        return n
    step = math.ceil(math.pow(n, 1 / 3)) * base
    return math.ceil(n / step) * step


def first_fit(buckets: list[Bucket], target: Bucket) -> Bucket | None:
    """find_equal_or_closest_greater_config: bisect, then the first bucket covering the target."""
    for b in buckets[bisect.bisect_left(buckets, target) :]:
        if b[0] >= target[0] and b[1] >= target[1] and b[2] >= target[2]:
            return b
    return None


class Lookups:
    """The bucketing manager's runtime lookups over the engine's lists (G26 common.py)."""

    def __init__(self, engine: Engine, lists: dict[str, list[Bucket]]) -> None:
        self.engine, self.args = engine, engine.args
        self.prompt, self.seeds = sorted(lists["prompt"]), sorted(lists["seeds"])
        self.decode = sorted(lists["decode"])
        self.fmc = max((c for _, _, c in self.decode), default=0)

    def find_decode(self, bs: int, blocks: int, seed: bool = False) -> Bucket:
        """find_decode_bucket: blocks capped at the largest ctx, seeds first when asked, else
        a fallback bucket the engine adds to its list (and logs)."""
        blocks = min(blocks, self.fmc) if self.fmc > 0 else blocks
        hit = (first_fit(self.seeds, (bs, 1, blocks)) if seed else None) or first_fit(
            self.decode, (bs, 1, blocks)
        )
        if hit is not None:
            return hit
        ctx = min(fallback_value(blocks, 32), self.fmc) if self.fmc else fallback_value(blocks, 32)
        added = (min(fallback_value(bs, 2), self.args.max_num_seqs), 1, ctx)
        self.missed("Decode", (bs, 1, blocks), added, self.decode)
        return added

    def find_prompt(self, bs: int, query: int, ctx: int) -> Bucket:
        """find_prompt_bucket, with the engine's fallback on a miss."""
        hit = first_fit(self.prompt, (bs, query, ctx))
        if hit is not None:
            return hit
        cap = math.ceil((self.args.max_model_len - 1) / self.args.block_size)
        added = (
            min(fallback_value(bs, 2), self.args.max_num_seqs),
            min(fallback_value(query, 32), self.args.max_num_batched_tokens),
            min(fallback_value(ctx, 32), cap),
        )
        self.missed("Prompt", (bs, query, ctx), added, self.prompt)
        return added

    def warmup_prompt(self, bucket: Bucket, k: int) -> Bucket | None:
        """The shape warmup_graphs compiles for a bs-1 prompt bucket (one dummy request): buckets
        over max_num_batched_tokens are skipped (G26 hpu_model_runner.py 5428 / Gmain 5476); the
        dummy's context is cut so that ctx * block + query <= max_model_len (G26 5589-5603 /
        Gmain 5637-5651); with a draft model the request is k tokens shorter (G26 5606-5611 /
        Gmain 5654-5659); then the runner looks it up like any prefill."""
        _, query, ctx = bucket
        if query > self.args.max_num_batched_tokens:
            return None
        block, mml = self.args.block_size, self.args.max_model_len
        if ctx * block + query > mml:
            ctx = max(0, (mml - query) // block)
        query -= k
        return first_fit(self.prompt, (1, query, ctx)) if query >= 1 else None

    def missed(self, phase: str, wanted: Bucket, added: Bucket, into: list[Bucket]) -> None:
        """G26 common.py:287-288 / 313-314: the miss is logged and the fallback kept."""
        bisect.insort(into, added)
        text = f"{phase} bucket for {wanted} was not prepared. Adding new bucket: {added}"
        self.engine.on_ranks(lambda p: p.log("WARNING", "common.py:313", text))

    def decode_step(self, n: int, s: int, t: int) -> tuple[int, Bucket]:
        """(padded batch B, target shape (B*T, 1, C)) of a decode step (non-contiguous PA)."""
        padded = self.find_decode(n, s, seed=t > 1)[0]
        return padded, (padded * t, 1, self.find_decode(padded * t, t * s)[2])


class DraftCalls:
    """The target's and the drafter's forwards of one engine step, as vllm-gaudi makes them."""

    def __init__(self, lookups: Lookups, k: int) -> None:
        args = lookups.args
        self.look, self.k, self.block, self.mml = lookups, k, args.block_size, args.max_model_len
        self.width = cdiv(self.mml, self.block)  # the block table's columns

    def decode(self, seqs: list[tuple[int, int, int]]) -> tuple[Graph, list[Graph]]:
        """seqs: (computed c, drafts d, accepted a): the target's graph, the drafter's calls."""
        t = 1 + max(d for _, d, _ in seqs)
        s = sum(cdiv(c + 1, self.block) for c, _, _ in seqs)
        padded, shape = self.look.decode_step(len(seqs), s, t)
        target: Graph = ("decode", *shape)
        if t == 1:
            return target, []  # no draft tokens: propose_eagle_decode returns zeros
        calls = [target]
        for j in range(2, self.k + 1):
            blocks = [cdiv(c + a + j, self.block) for c, _, a in seqs]
            if max(blocks) > self.width:
                break  # prepare_attn_metadata's assert: the calls stop
            calls.append(("decode", padded, 1, self.look.find_decode(padded, sum(blocks))[2]))
        return target, calls

    def prefill(
        self, tokens_after: int, query: int, ctx: int, last: bool
    ) -> tuple[Graph, list[Graph]]:
        """A batch-1 prefill chunk; the drafter runs only when it completes the prompt."""
        bs, q, c = self.look.find_prompt(1, query, ctx)
        target: Graph = ("prompt", bs, q, bs * c)
        if not last:
            return target, []
        calls = [target]
        for j in range(2, self.k + 1):
            x = cdiv(tokens_after + j - 1, self.block)
            if x > self.width:
                break
            calls.append(("decode", 1, 1, self.look.find_decode(1, x)[2]))
        return target, calls

    def warmup(self) -> list[list[Graph]]:
        """The drafter calls of warmup_graphs' prompt dummies (_prepare_dummy_scenario)."""
        out = []
        for _bs, query, bucket_ctx in self.look.prompt:
            if query > self.look.args.max_num_batched_tokens:
                continue
            ctx, total = bucket_ctx, query + bucket_ctx * self.block
            if total > self.mml:  # the dummy's context is cut to fit max_model_len
                ctx = max(0, (self.mml - query) // self.block)
                total = ctx * self.block + query
            if query - self.k >= 1:
                out.append(self.prefill(total - self.k, query - self.k, ctx, True)[1])
        return out


class HpuRuntime:
    """The fake HPU: graphs compile on first use; `graph_compilation` counts them."""

    def __init__(self) -> None:
        self.compiles = 0
        self.seen: set[tuple[str, Graph]] = set()

    def run(self, model: str, graph: Graph) -> bool:
        """Run ``graph`` of ``model``; True when it compiled now."""
        if (model, graph) in self.seen:
            return False
        self.seen.add((model, graph))
        self.compiles += 1
        return True


class _Tensor:
    """A fake tensor: its shape and, for a 1-D one, its values (what the stand-in reads)."""

    def __init__(self, *shape: int, values: list[int] | None = None) -> None:
        self.shape = shape
        self.values = values if values is not None else [0] * (shape[0] if len(shape) == 1 else 0)

    def __setitem__(self, key: slice, value: _Tensor) -> None:
        self.values[key] = value.values

    def to(self, *args: object, **kwargs: object) -> _Tensor:
        return self


class _AttnMetadata:
    def __init__(self, graph: Graph) -> None:
        self.is_prompt, self._blocks = graph[0] == "prompt", graph[3]

    def num_blocks(self) -> int:
        return self._blocks


class _Scheduled:
    """What the fake runner hands its proposer at runtime: the step's drafter calls, computed
    by DraftCalls (the stand-in's model of vllm-gaudi's call sequence), in the place of the
    real ``propose``'s common attention metadata."""

    def __init__(self, calls: list[Graph]) -> None:
        self.calls = calls


def _shape(size: Any) -> tuple[int, ...]:
    return tuple(size) if isinstance(size, (tuple, list)) else (int(size),)


def fake_torch() -> ModuleType:
    """TEST DOUBLE `torch`: only what the engine plugin's Gaudi warm path calls
    (warmgate/warmup/hook/drafter_warm.py ``gaudi_warmer``): zeros, full, tensor, two integer
    dtypes, a dtype for hidden states and inference_mode. The stand-in has no tensors."""
    torch = ModuleType("torch")
    torch.int64, torch.int32, torch.bfloat16 = "int64", "int32", "bfloat16"  # type: ignore[attr-defined]
    torch.zeros = lambda size, dtype=None, device=None: _Tensor(*_shape(size))  # type: ignore[attr-defined]
    torch.full = lambda size, value, dtype=None, device=None: _Tensor(*_shape(size))  # type: ignore[attr-defined]
    torch.tensor = lambda data, dtype=None, device=None: _Tensor(  # type: ignore[attr-defined]
        len(data), values=[int(v) for v in data]
    )
    torch.inference_mode = contextlib.nullcontext  # type: ignore[attr-defined]
    return torch


def gaudi_profile() -> str:
    """The pinned vllm-gaudi the fake runner plays: the fault ``vllm_gaudi=``, else the plan's
    (its drafter-warmup document's ``profile``), else v0.26.0."""
    chosen = faults().get("vllm_gaudi")
    if chosen:
        return chosen
    path = os.environ.get("WARMGATE_DRAFTER_WARMUP")
    try:
        with open(path or "", encoding="utf-8") as handle:
            return str(json.load(handle).get("profile") or "v0.26.0")
    except (OSError, ValueError, AttributeError):
        return "v0.26.0"


def hide_direct_shape() -> None:
    """The fault ``drafter_warmup_skip=P/B/Q/N`` (or a phase): the plugin's document without
    that shape (or every shape of that phase)."""
    skip, path = faults().get("drafter_warmup_skip"), os.environ.get("WARMGATE_DRAFTER_WARMUP")
    if not skip or not path:
        return
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    doc["shapes"] = [
        s
        for s in doc["shapes"]
        if "/".join(map(str, s)) != skip and s[0] != skip  # or a phase
    ]
    hidden = Path(path).with_name("drafter-warmup.standin-skip.json")
    hidden.write_text(json.dumps(doc), encoding="utf-8")
    os.environ["WARMGATE_DRAFTER_WARMUP"] = str(hidden)


def fake_modules(engine: Engine, runtime: HpuRuntime) -> dict[str, ModuleType]:
    """TEST DOUBLE modules: Habana's metrics, vllm_gaudi's runner and eagle proposer (with the
    signatures and attributes the engine plugin's direct warmup relies on, so the plugin's own
    warm loop runs against them), and the little of torch that loop calls."""
    mods = {
        name: ModuleType(name)
        for name in (
            "habana_frameworks",
            "habana_frameworks.torch",
            "habana_frameworks.torch.hpu",
            "habana_frameworks.torch.hpu.metrics",
            "vllm_gaudi",
            "vllm_gaudi.v1",
            "vllm_gaudi.v1.worker",
            "vllm_gaudi.v1.spec_decode",
            "vllm_gaudi.v1.worker.hpu_model_runner",
            "vllm_gaudi.v1.spec_decode.hpu_eagle",
        )
    }
    mods["torch"] = fake_torch()
    block = engine.args.block_size

    class LocalContext:  # habana_frameworks.torch.hpu.metrics.metric_localcontext
        def __init__(self, name: str) -> None:
            self.name, self.start, self.end = name, 0, 0

        def __enter__(self) -> LocalContext:
            self.start = runtime.compiles
            return self

        def __exit__(self, *exc: object) -> None:
            self.end = runtime.compiles

        def stats(self) -> list[list[Any]]:
            if "metric_unreadable" in faults():  # a Habana release that changed the API
                raise RuntimeError("graph_compilation stats are not a list any more")
            return [["TotalNumber", self.end - self.start], ["TotalTime", 0], ["AvgTime", 0]]

    class DraftModel:  # the HPU-graph-wrapped drafter: hpu_eagle.py 40, 109 call it so
        def __init__(self) -> None:  # eagle3's fc takes the target's three aux hidden states
            self.model = type("Eagle3Inner", (), {"fc_input_size": 3 * 64})()

        def __call__(self, *, input_ids: _Tensor, attn_metadata: _AttnMetadata) -> None:
            phase = "prompt" if attn_metadata.is_prompt else "decode"
            runtime.run("drafter", (phase, *input_ids.shape, attn_metadata.num_blocks()))

    class HpuEagleProposer:
        def __init__(self) -> None:
            self.model = DraftModel()
            self.method = engine.method
            self.max_model_len = engine.args.max_model_len
            self.num_speculative_tokens = engine.k

        def prepare_attn_metadata(
            self, block_table_cpu_tensor: _Tensor, positions: _Tensor, model_runner: Any
        ) -> _AttnMetadata:
            """A decode's metadata: each sequence's blocks from its position, the block list
            padded to the decode bucket (get_habana_paged_attn_buffers)."""
            seqs, batch = block_table_cpu_tensor.shape[0], positions.shape[0]
            used = sum(p // block + 1 for p in positions.values[:seqs])
            padded = model_runner.get_habana_paged_attn_buffers(used, None, batch, block)
            return _AttnMetadata(("decode", batch, 1, padded))

        def propose(  # noqa: PLR0917 (vllm-gaudi's signature, called positionally)
            self,
            target_token_ids: _Tensor | None,
            target_positions: _Tensor | None,
            target_hidden_states: _Tensor | None,
            last_token_indices: _Tensor | None,
            common_attn_metadata: Any,
            block_table_cpu_tensor: _Tensor | None,
            model_runner: Any,
        ) -> None:
            """At runtime the step's calls (``_Scheduled``); called directly (the plugin's
            decode warmup), call 1 on the inputs' shape, calls 2..k on last_token_indices' rows
            at the smallest block list."""
            if isinstance(common_attn_metadata, _Scheduled):
                calls = common_attn_metadata.calls
            else:
                assert target_token_ids is not None
                assert last_token_indices is not None
                first: Graph = ("decode", *target_token_ids.shape, common_attn_metadata._blocks)
                rows = last_token_indices.shape[0]
                more = model_runner.look.find_decode(rows, 1)[2]
                calls = [first] + [("decode", rows, 1, more)] * (self.num_speculative_tokens - 1)
            raises = faults().get("drafter_warmup_raise", "")
            dropped = faults().get("drop_drafter_graph", "")
            for g in calls:
                if "/".join(map(str, g)) == raises and not isinstance(
                    common_attn_metadata, _Scheduled
                ):
                    raise RuntimeError(f"stand-in fault: the drafter failed on {g}")
                if "/".join(map(str, g)) == dropped:
                    continue  # an engine whose drafter never runs this graph (the model is off)
                self.model(input_ids=_Tensor(g[1], g[2]), attn_metadata=_AttnMetadata(g))

    class HPUModelRunner:
        def __init__(self, drafts: bool) -> None:
            self.drafter = None
            self.scheduled: list[tuple[Graph, list[Graph]]] = []
            self.look: Lookups | None = None
            self.calls: DraftCalls | None = None
            # what the plugin's direct warmup reads (drafter_warm.GAUDI_SURFACE)
            self.block_size, self.hidden_size = block, 64
            self.dtype, self.device = "bfloat16", "hpu"
            self.use_contiguous_pa = False  # drafts are modelled without contiguous PA only
            self.kv_cache_config = type("KVCacheConfig", (), {"num_blocks": engine.kv})()
            if drafts:  # hpu_model_runner.py 1449-1450: imported only for eagle-type methods
                eagle = importlib.import_module("vllm_gaudi.v1.spec_decode.hpu_eagle")
                proposer = getattr(eagle, "HpuEagleProposer", None) or eagle.HpuEagleProposerV2
                self.drafter = proposer()

        def warmup_model(
            self, prompt: list[Graph], decode: list[Graph], drafts: list[list[Graph]]
        ) -> None:
            for g in prompt + decode:
                runtime.run("target", g)
            for calls in drafts if self.drafter else []:
                self._propose(calls)

        def _prepare_dummy_scenario(self, prompt_cfg: Any, decode_cfg: Any) -> None:
            """A dummy prefill of (bs, tokens, ctx): with a draft model the request is k tokens
            shorter (G26 5606-5611), then looked up; the drafter's prefill calls follow."""
            if prompt_cfg is None or self.look is None or self.calls is None:
                return
            _bs, tokens, ctx = prompt_cfg
            if ctx * block + tokens > engine.args.max_model_len:  # G26 5589-5603: cut to fit
                ctx = max(0, (engine.args.max_model_len - tokens) // block)
            query = tokens - engine.k
            target, calls = self.calls.prefill(ctx * block + query, query, ctx, True)
            runtime.run("target", target)
            if self.drafter is not None:
                self._propose(calls)

        def _paged_v026(
            self, block_tables: int, slot_mapping: Any, batch_size: int, block_size: int
        ) -> int:
            assert self.look is not None
            return self.look.find_decode(batch_size, block_tables)[2]

        def _paged_main(
            self,
            block_tables: int,
            slot_mapping: Any,
            batch_size: int,
            block_size: int,
            force_non_contiguous: bool = False,
        ) -> int:
            return self._paged_v026(block_tables, slot_mapping, batch_size, block_size)

        def _propose(self, calls: list[Graph]) -> None:
            propose = getattr(self.drafter, "propose", None) or self.drafter.propose_draft  # type: ignore[union-attr]
            propose(None, None, None, None, _Scheduled(calls), None, self)

        def execute_model(self, scheduled: list[tuple[Graph, list[Graph]]]) -> None:
            self.scheduled = scheduled  # like the real one: it only stores the step

        def _sample(self, grammar_output: object) -> None:
            for target, calls in self.scheduled:
                if runtime.run("target", target):  # _check_config: hpu_model_runner.py 3588
                    text = f"Configuration: {target} was not warmed-up!"
                    engine.on_ranks(
                        lambda p, text=text: p.log("WARNING", "hpu_model_runner.py:3588", text)
                    )
                if calls and self.drafter is not None:
                    self._propose(calls)

    paged = HPUModelRunner._paged_main if gaudi_profile() == "main-2026-08" else None
    HPUModelRunner.get_habana_paged_attn_buffers = paged or HPUModelRunner._paged_v026  # type: ignore[attr-defined]
    metrics = mods["habana_frameworks.torch.hpu.metrics"]
    metrics.metric_localcontext = LocalContext  # type: ignore[attr-defined]
    mods["habana_frameworks.torch.hpu"].synchronize = lambda: None  # type: ignore[attr-defined]
    eagle_module = mods["vllm_gaudi.v1.spec_decode.hpu_eagle"]
    if "proposer_renamed" in faults():  # the drafter's code moved: a hook finds no target
        HpuEagleProposer.__name__ = "HpuEagleProposerV2"
        HpuEagleProposer.propose_draft = HpuEagleProposer.propose  # type: ignore[attr-defined]
        del HpuEagleProposer.propose
        eagle_module.HpuEagleProposerV2 = HpuEagleProposer  # type: ignore[attr-defined]
    else:
        eagle_module.HpuEagleProposer = HpuEagleProposer  # type: ignore[attr-defined]
    if "hook_targets_moved" not in faults():  # an engine whose code moved: nothing to patch
        HPUModelRunner.sample_tokens = HPUModelRunner._sample  # type: ignore[attr-defined]
    mods["vllm_gaudi.v1.worker.hpu_model_runner"].HPUModelRunner = HPUModelRunner  # type: ignore[attr-defined]
    return mods


class FakeModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the fake modules through the import system, so a plugin's import hooks see them."""

    def __init__(self, mods: dict[str, ModuleType]) -> None:
        self.mods = mods

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.mods:
            return None
        package = any(name.startswith(fullname + ".") for name in self.mods)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=package)

    def create_module(self, spec: Any) -> ModuleType:
        return self.mods[spec.name]

    def exec_module(self, module: ModuleType) -> None:
        if any(name.startswith(module.__name__ + ".") for name in self.mods):
            module.__path__ = []


def load_general_plugins(engine: Engine) -> None:
    """vllm/plugins/__init__.py load_general_plugins: every entry point of the group found
    (VLLM_PLUGINS allow-list honoured), each called once; a failing plugin is logged."""
    if "no_general_plugins" in faults():  # a vLLM whose plugin loading changed
        return
    allowed = os.environ.get("VLLM_PLUGINS")
    names = None if allowed is None else allowed.split(",")
    for plugin in importlib.metadata.entry_points(group="vllm.general_plugins"):
        if names is not None and plugin.name not in names:
            continue
        try:
            plugin.load()()
        except Exception as exc:
            text = f"Failed to load plugin {plugin.name}: {exc}"
            engine.on(engine.core, lambda p, text=text: p.log("ERROR", "__init__.py:60", text))


class Request:
    """One completion in the engine loop."""

    def __init__(self, prompt: list[int], max_tokens: int) -> None:
        self.ids = prompt
        self.prompt, self.max_tokens = len(prompt), max(1, max_tokens)
        self.computed = self.output = 0
        self.rng = random.Random(hash(tuple(prompt[:16])))  # how many drafts it accepts
        self.done = threading.Event()


class EngineLoop:
    """vLLM V1's scheduler serving the fake model runner (see the section comment)."""

    def __init__(self, engine: Engine, runner: Any, calls: DraftCalls) -> None:
        args = engine.args
        self.runner, self.calls, self.k = runner, calls, engine.k
        self.mbt, self.mns, self.mml = (
            args.max_num_batched_tokens,
            args.max_num_seqs,
            args.max_model_len,
        )
        self.cv = threading.Condition()
        self.arrived: list[Request] = []
        self.last_arrival = 0.0
        self.connections = 0  # accepted and not closed: being read, waiting for tokens, replying
        self.listener: socket.socket | None = None
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        caching = args.enable_prefix_caching
        self.prefix_caching = not env_flag("VLLM_CONTIGUOUS_PA") if caching is None else caching
        self.cached: set[int] = set()  # hashes of the full prompt blocks computed so far
        threading.Thread(target=self.loop, daemon=True).start()

    def submit(self, req: Request) -> None:
        """Queue a request and wait until it has produced its tokens."""
        with self.cv:
            self.arrived.append(req)
            self.last_arrival = time.monotonic()
            self.cv.notify()
        req.done.wait()

    def connection(self, change: int) -> None:
        """The server accepted (+1) or closed (-1) a connection."""
        with self.cv:
            self.connections += change
            self.last_arrival = time.monotonic()

    def settled(self) -> bool:
        """No request still on its way: none arrived lately, none being read, none in the
        kernel's listen backlog (every submitted one holds its connection)."""
        if time.monotonic() - self.last_arrival < ARRIVAL_SETTLE_S:
            return False
        if self.connections > len(self.arrived):
            return False
        listener = self.listener
        return listener is None or not select.select([listener], [], [], 0)[0]

    def loop(self) -> None:
        while True:
            with self.cv:
                while not (self.arrived or self.waiting or self.running):
                    self.cv.wait()
                if not (self.waiting or self.running):  # idle: let the whole burst arrive
                    while not self.settled():
                        self.cv.wait(0.01)
                self.waiting += self.arrived
                self.arrived = []
            self.step()
            time.sleep(ENGINE_STEP_S)

    def step(self) -> None:
        budget, planned, hits = self.mbt, [], []
        for req in self.running:
            if budget <= 0:
                break
            want = req.prompt - req.computed if req.computed < req.prompt else 1 + self.k
            tokens = min(want, budget, self.mml - 1 - req.computed)
            if tokens > 0:
                planned.append((req, tokens))
                budget -= tokens
        while self.waiting and budget > 0 and len(self.running) < self.mns:
            req = self.waiting.pop(0)
            self.running.append(req)
            req.computed = self.cache_hit(req)
            hits.append(req.computed)
            chunk = min(req.prompt - req.computed, budget)
            planned.append((req, chunk))
            budget -= chunk
        forwards = self.execute(planned)
        self.trace(forwards, hits)
        self.runner.execute_model(forwards)
        sample = getattr(self.runner, "sample_tokens", None) or self.runner._sample
        sample(None)
        for req in [
            r for r in self.running if r.output >= r.max_tokens or r.computed >= self.mml - 1
        ]:
            self.running.remove(req)
            req.done.set()

    def trace(self, forwards: list[tuple[Graph, list[Graph]]], hits: list[int]) -> None:
        """STANDIN_TRACE=<path>: one JSON line per engine step: its time, every forward, and the
        prefix-cache hit (computed tokens) of each request it admitted."""
        path = os.environ.get("STANDIN_TRACE")
        if path:
            steps = [[list(t), [list(c) for c in calls]] for t, calls in forwards]
            line = {"t": time.time(), "hits": hits, "forwards": steps}
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")

    def _block_hashes(self, req: Request, blocks: int) -> list[int]:
        """vLLM's prefix-cache keys: each full block's hash chains its parent's."""
        out, parent, block = [], 0, self.calls.block
        for i in range(blocks):
            parent = hash((parent, tuple(req.ids[i * block : (i + 1) * block])))
            out.append(parent)
        return out

    def cache_hit(self, req: Request) -> int:
        """Computed tokens a new request starts with: its leading full blocks already cached,
        never its last token (vLLM recomputes at least one: max hit length prompt - 1)."""
        if not self.prefix_caching:
            return 0
        hits = 0
        for h in self._block_hashes(req, (req.prompt - 1) // self.calls.block):
            if h not in self.cached:
                break
            hits += 1
        return hits * self.calls.block

    def remember(self, req: Request) -> None:
        """Cache the prompt's full blocks the request has computed."""
        if self.prefix_caching:
            full = min(req.computed, req.prompt) // self.calls.block
            self.cached.update(self._block_hashes(req, full))

    def execute(self, planned: list[tuple[Request, int]]) -> list[tuple[Graph, list[Graph]]]:
        """The step's forwards: the decode batch, then each prefill batch of one."""
        out = []
        decodes = [(r, t) for r, t in planned if r.computed >= r.prompt]
        if decodes:
            seqs = [(r.computed, t - 1, r.rng.randint(0, t - 1)) for r, t in decodes]
            out.append(self.calls.decode(seqs))
            for (req, _), (_, _, accepted) in zip(decodes, seqs, strict=True):
                req.computed += 1 + accepted
                req.output += 1 + accepted
        for req, tokens in [(r, t) for r, t in planned if r.computed < r.prompt]:
            before, req.computed = req.computed, req.computed + tokens
            last = req.computed == req.prompt
            out.append(
                self.calls.prefill(req.computed, tokens, cdiv(before, self.calls.block), last)
            )
            req.output = 1 if last else 0
            self.remember(req)
        return out


def start_drafter(engine: Engine, lists: dict[str, list[Bucket]]) -> EngineLoop | None:
    """The runtime, plugins and model runner; the engine loop for eagle-type methods."""
    runtime = HpuRuntime()
    hide_direct_shape()
    sys.meta_path.insert(0, FakeModules(fake_modules(engine, runtime)))
    load_general_plugins(engine)
    module = importlib.import_module("vllm_gaudi.v1.worker.hpu_model_runner")
    shapes = Shapes(engine.args)  # modelled: one prompt per prefill batch, non-contiguous PA
    modelled = not shapes.contiguous and not shapes.merged and shapes.prefill_seqs == 1
    drafts = engine.method in DRAFT_METHODS and engine.k > 0 and modelled
    runner = module.HPUModelRunner(drafts)
    look = Lookups(engine, lists)
    calls = DraftCalls(look, engine.k)
    runner.look, runner.calls = look, calls  # the dummy prefills' and paged buffers' lookups
    # Modelled: bs-1 prompt buckets only (one prompt per prefill); each compiles its dummy's shape.
    dummies = (look.warmup_prompt(g, engine.k if drafts else 0) for g in look.prompt)
    prompt = [("prompt", b, q, b * c) for b, q, c in sorted({d for d in dummies if d})]
    decode = [("decode", b, q, c) for b, q, c in look.decode]
    runner.warmup_model(prompt, decode, calls.warmup() if drafts else [])
    return EngineLoop(engine, runner, calls) if drafts else None


class Server(ThreadingHTTPServer):
    """The HTTP server; it tells the engine loop about connections (see EngineLoop.settled)."""

    loop: EngineLoop | None = None

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.loop is not None:
            self.loop.connection(+1)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        if self.loop is not None:
            self.loop.connection(-1)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The subset of `vllm serve` flags the runner passes; unknown flags are accepted."""
    p = argparse.ArgumentParser(prog="vllm")
    p.add_argument("subcommand", choices=["serve"])
    p.add_argument("model")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--speculative-config", default=None)
    p.add_argument("--num-gpu-blocks-override", type=int, default=None)
    p.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction, default=False)
    # vLLM V1 caches prefixes by default; vllm-gaudi turns it off with contiguous PA (§2.2).
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    args, _unknown = p.parse_known_args(argv)
    return args


def spec_method(args: argparse.Namespace) -> str:
    """The speculative method of --speculative-config, "" without spec decode."""
    if not args.speculative_config:
        return ""
    return str(json.loads(args.speculative_config).get("method", ""))


def spec_tokens(args: argparse.Namespace) -> int:
    """k from --speculative-config (JSON), 0 without spec decode."""
    if not args.speculative_config:
        return 0
    return int(json.loads(args.speculative_config).get("num_speculative_tokens", 0))


def write_recipes(lists: dict[str, list[Bucket]] | None = None) -> None:
    """Fake recipes where PT_HPU_RECIPE_CACHE_CONFIG=<dir>,<delete>,<MB> points (§4.6).

    With STANDIN_BUCKET_RECIPES=1 also one file per bucket it warms, named by the bucket
    (``buckets/decode-64-1-2048.bin``), written only when absent, as a recipe cache hit would
    leave it: what the sharded warmup's tests count in a merged entry. The stand-in's own
    stand-in for "recipes are cached by graph" (docs/runner.md, "Sharded warmup")."""
    folder, delete, _size = os.environ["PT_HPU_RECIPE_CACHE_CONFIG"].split(",")
    root = Path(folder)
    if delete == "True":
        shutil.rmtree(root, ignore_errors=True)
    (root / "graphs").mkdir(parents=True, exist_ok=True)
    for i in range(3):
        (root / f"recipe-{i}.bin").write_bytes(bytes([i]) * 4096)
    (root / "graphs" / "decode.bin").write_bytes(b"decode-graph" * 100)
    if lists is None or os.environ.get("STANDIN_BUCKET_RECIPES") != "1":
        return
    (root / "buckets").mkdir(exist_ok=True)
    compiled = found = 0
    for phase, rows in (("prompt", lists["prompt"]), ("decode", lists["decode"])):
        for row in rows:
            path = root / "buckets" / f"{phase}-{'-'.join(map(str, row))}.bin"
            if path.exists():
                found += 1
            else:
                compiled += 1
                path.write_bytes(f"{phase} {row}".encode())
    # One write for the whole line: the engine runs unbuffered (PYTHONUNBUFFERED=1, as the
    # runner starts it), where print() writes the text and its newline apart, and the EngineCore
    # prefix written between them once glued itself to this line (a flaky shard test).
    sys.stdout.write(f"standin-recipes compiled={compiled} cached={found}\n")
    sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    """/health and /v1/completions of the OpenAI-compatible server."""

    engine: Engine
    loop: EngineLoop | None = None
    served_name = "model"
    lock = threading.Lock()
    requests_seen = 0

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """uvicorn's access line on stdout, as vLLM's server writes it (no process prefix):
        'INFO:     127.0.0.1:53182 - "GET /health HTTP/1.1" 200 OK' (fixtures/real_engine_logs)."""
        del size
        phrase = self.responses.get(int(code), ("",))[0] if str(code).isdigit() else ""
        host, port = self.client_address[:2]
        line = f'INFO:     {host}:{port} - "{self.requestline}" {code} {phrase}\n'
        os.write(1, line.encode("utf-8"))

    def _reply(self, code: int, payload: dict[str, Any] | None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._reply(200 if self.path == "/health" else 404, None)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/standin/unwarmed":
            self._unwarmed_on_demand(body)
            return
        if self.path != "/v1/completions" or body.get("model") != self.served_name:
            self._reply(404, {"error": "not found"})
            return
        with Handler.lock:
            Handler.requests_seen += 1
            first = Handler.requests_seen == 1
        if first and "exit_on_probe" in faults():
            # A dying engine's sockets close before the process is gone (the kernel closes its
            # files first): the request fails a moment before the exit can be seen.
            self.connection.shutdown(socket.SHUT_RDWR)
            time.sleep(1.0)
            os._exit(4)
        if first and "unwarmed_on_probe" in faults():
            self.engine.on_ranks(self.engine.unwarmed)
        if "probe_http_500" in faults():
            self._reply(500, {"error": "injected"})
            return
        skip = faults().get("skip_requests")
        if skip and Handler.requests_seen <= int(skip):  # answered, but never scheduled
            self._reply(200, {"object": "text_completion", "choices": [{"index": 0, "text": ""}]})
            return
        if self.loop is not None:
            prompt = body.get("prompt") or [0]
            ids = prompt if isinstance(prompt, list) else [ord(c) for c in str(prompt)]
            self.loop.submit(Request([int(i) for i in ids], int(body.get("max_tokens", 16))))
        text = " tok" * int(body.get("max_tokens", 1))
        self._reply(200, {"object": "text_completion", "choices": [{"index": 0, "text": text}]})

    def _unwarmed_on_demand(self, body: dict[str, Any]) -> None:
        """Log the asked-for unwarmed configurations and lookup misses on every rank."""
        configs = tuple(tuple(c) for c in body.get("configs") or ())
        misses = tuple(
            (str(p), (int(r[0]), int(r[1]), int(r[2])), (int(a[0]), int(a[1]), int(a[2])))
            for p, r, a in body.get("not_prepared") or ()
        )
        self.engine.on_ranks(lambda p: self.engine.unwarmed(p, configs, misses))
        self._reply(200, {"logged": len(configs) + len(misses)})


def main(argv: list[str]) -> int:
    """Behave like `vllm serve` until SIGTERM."""
    args = parse_args(argv)
    record = os.environ.get("STANDIN_RECORD")
    if record:
        owned = ("VLLM_BUCKETING_FROM_FILE", "VLLM_SKIP_WARMUP", "PT_HPU_RECIPE_CACHE_CONFIG")
        logging = (
            "VLLM_CONFIGURE_LOGGING",
            "VLLM_LOGGING_LEVEL",
            "VLLM_LOGGING_PREFIX",
            "NO_COLOR",
        )
        env = {k: os.environ.get(k) for k in owned + logging}
        Path(record).write_text(json.dumps({"argv": argv, "env": env, "pid": os.getpid()}))
    engine = Engine(args)
    banner = f"vLLM API server (TEST DOUBLE standin_vllm) model {args.model}"
    engine.on(engine.api, lambda p: p.log("INFO", "api_server.py:1700", banner))
    if "crash_at_start" in faults():
        engine.on(
            engine.core, lambda p: p.log("ERROR", "core.py:700", "EngineCore failed to start")
        )
        return 3
    lists = engine.lists()
    engine.on(engine.core, engine.override)
    engine.on_ranks(engine.kv_cache)
    engine.on_ranks(lambda p: engine.log_lists(p, lists))
    return serve_or_hang(engine, lists)


def serve_or_hang(engine: Engine, lists: dict[str, list[Bucket]]) -> int:
    """Hang if asked to, else warm up and serve until SIGTERM."""
    if "hang_ignore_term" in faults():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "hang" in faults() or "hang_ignore_term" in faults():
        while True:
            time.sleep(3600)
    write_recipes(lists)
    engine.on_ranks(lambda p: engine.warm(p, lists))
    if "exit_after_warmup" in faults():  # the golden logs: the probe's lines follow at once
        if "unwarmed_on_probe" in faults():
            engine.on_ranks(engine.unwarmed)
        return 0
    Handler.loop = start_drafter(engine, lists)
    Handler.engine, Handler.served_name = engine, engine.args.served_model_name or engine.args.model
    # A backlog of 1024 (uvicorn's default is 2048, vLLM's too); http.server's 5 would reset the
    # probe's and the sweep's concurrent bursts (up to max_num_seqs) before they are accepted.
    Server.request_queue_size = 1024
    server = Server((engine.args.host, engine.args.port), Handler)
    if Handler.loop is not None:
        Handler.loop.listener, server.loop = server.socket, Handler.loop
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    where = f"http://{engine.args.host}:{engine.args.port}"
    engine.on(
        engine.api, lambda p: p.log("INFO", "entry.py:140", f"Starting vLLM server on {where}")
    )
    uvicorn(STARTUP)
    server.serve_forever(poll_interval=0.05)
    server.server_close()
    engine.on(engine.api, lambda p: p.log("INFO", "launcher.py:304", HTTP_SHUTDOWN))
    uvicorn(SHUTDOWN)
    return 0


# vLLM 0.32's and uvicorn's lines around serving (fixtures/real_engine_logs, recorded from the
# real engine): uvicorn writes its own, unprefixed, to stderr; vLLM logs the shutdown.
HTTP_SHUTDOWN = "[shutdown] API server: shutting down FastAPI HTTP server"
STARTUP = (
    "Started server process [{pid}]",
    "Waiting for application startup.",
    "Application startup complete.",
)
SHUTDOWN = ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.")


def uvicorn(lines: tuple[str, ...]) -> None:
    """uvicorn's lifecycle lines: 'INFO:     Started server process [123]'."""
    for line in lines:
        os.write(2, f"INFO:     {line.format(pid=os.getpid())}\n".encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
