"""Streaming parser of vllm-gaudi engine output: bucket lists, warmup progress, unwarmed shapes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

Bucket = tuple[int, int, int]
ProgressCallback = Callable[[str, int, int], None]

# Line formats are quoted from the shared doc vllm-gaudi-bucketing.md (section in brackets).
# [§3.2] "Generated {n} {prompt|decode} buckets [bs, query, num_blocks]: [...]" and, with spec
# decode, "Generated {n} spec decode buckets ...". The bracketed header is optional because the
# v0 fork printed "Generated 24 prompt buckets: [...]".
_GENERATED = re.compile(
    r"Generated (\d+) (spec decode|prompt|decode) buckets(?: \[[^\]]*\])?:\s?(.*)$"
)
# [§2.6] file buckets dropped by the engine's filters.
_OMITTED = re.compile(
    r"The following (prompt|decode) buckets from custom bucketing file "
    r"\(VLLM_BUCKETING_FROM_FILE\) were omitted during warmup:\s?(.*)$"
)
_TUPLE = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
# [§4.3] "Configuration: ('decode', 24, 1, 768) was not warmed-up!" (tuple is Python's repr).
_UNWARMED = re.compile(r"Configuration: (\([^)]*\)) was not warmed-up!")
# [§3.4] lookup misses that add a never-warmed fallback bucket.
_NOT_PREPARED = re.compile(
    r"(Prompt|Decode) bucket for (\([^)]*\)) was not prepared\. Adding new bucket: (\([^)]*\))"
)
# [§4.1 step 12] "Warmup finished in {secs:.0f} secs, allocated {bytes} of device memory".
_FINISHED = re.compile(
    r"Warmup finished in (\d+(?:\.\d+)?) secs?, allocated (.+?) of device memory"
)
# [§4.2] tqdm bars "Decode warmup processing:  40%|...| 57/143 [...]" and developer-mode lines.
_TQDM = re.compile(r"(Prompt|Decode) warmup processing: .*?(\d+)/(\d+)")
_DEV_LINE = re.compile(r"\[Warmup\]\[(Prompt|Decode)\]\[(\d+)/(\d+)\]")
_CAPTURED = re.compile(r"Graph/(Prompt|Decode) captured:\s?(\d+)")
# vllm-gaudi hpu_worker: "Usable num_blocks: 8192, actual allocated num_blocks: 8193 (...)".
_KV_BLOCKS = re.compile(r"Usable num_blocks: (\d+)")
_FLAGS = {
    "Skipping warmup...": "skipped_warmup",
    "Bucketing is OFF.": "bucketing_off",
    "Sampler warmup completed successfully": "sampler_warmed",
}
# A stream that never ends a line must not grow memory without bound (16 MiB per line).
MAX_LINE_CHARS = 16 * 1024 * 1024
_EOL = re.compile(r"\r\n|\r|\n")
# A new log record ends an unclosed wrapped list: "INFO 11-29 19:40:04 [...]", optionally after
# vLLM's "(EngineCore_DP0 pid=12) " process prefix, or a tqdm bar.
_RECORD_START = re.compile(
    r"^(?:\([^)]*pid=\d+\) )?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d |"
    r"(?:Prompt|Decode) warmup processing:)"
)
_LIST_KEYS = {"prompt": "prompt", "decode": "decode", "spec decode": "spec_decode"}


@dataclass
class UnwarmedShape:
    """One forward configuration the engine ran without having warmed it."""

    text: str
    after_warmup: bool


@dataclass
class NotPrepared:
    """One bucket lookup miss and the fallback bucket it created."""

    phase: str
    requested: str
    added: str
    after_warmup: bool


@dataclass
class _PendingList:
    key: str
    declared: int
    text: str


@dataclass
class EngineLog:
    """Everything learnt from the engine's output so far."""

    lists: dict[str, list[Bucket]] = field(default_factory=dict)
    declared: dict[str, int] = field(default_factory=dict)
    omitted: dict[str, list[Bucket]] = field(default_factory=dict)
    unwarmed: list[UnwarmedShape] = field(default_factory=list)
    not_prepared: list[NotPrepared] = field(default_factory=list)
    progress: dict[str, tuple[int, int]] = field(default_factory=dict)
    captured: dict[str, int] = field(default_factory=dict)
    warmup_secs: float | None = None
    warmup_allocated: str | None = None
    kv_blocks: int | None = None
    flags: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    list_problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def warmup_finished(self) -> bool:
        """True once "Warmup finished in N secs" was seen."""
        return self.warmup_secs is not None


class LogParser:
    """Feed it text as it arrives, per stream; lines end at \\n, \\r\\n or tqdm's bare \\r."""

    def __init__(self, on_progress: ProgressCallback | None = None) -> None:
        self.state = EngineLog()
        self._partial: dict[str, list[str]] = {}
        self._pending: dict[str, _PendingList] = {}
        self._on_progress = on_progress

    def feed(self, text: str, stream: str = "stdout") -> None:
        """Consume a chunk; a line split across chunks is completed by the next chunk."""
        pieces = self._partial.setdefault(stream, [])
        if not _EOL.search(text):
            # Joining only at a line end keeps a multi-megabyte bucket line linear in its size.
            pieces.append(text)
            self._guard_length(stream, pieces)
            return
        lines = _EOL.split("".join(pieces) + text)
        pieces[:] = [lines.pop()]
        for line in lines:
            self._line(line, stream)
        self._guard_length(stream, pieces)

    def _guard_length(self, stream: str, pieces: list[str]) -> None:
        if sum(len(p) for p in pieces) > MAX_LINE_CHARS:
            self.state.problems.append(f"{stream}: dropped a line longer than {MAX_LINE_CHARS}")
            pieces.clear()

    def close(self) -> None:
        """End of all streams: parse partial lines and report lists that never closed."""
        for stream, pieces in sorted(self._partial.items()):
            tail = "".join(pieces)
            if tail:
                self._line(tail, stream)
        self._partial.clear()
        for pending in self._pending.values():
            self._finish_list(pending, closed=False)
        self._pending.clear()

    def _line(self, line: str, stream: str) -> None:
        pending = self._pending.get(stream)
        if pending is not None and not _RECORD_START.match(line):
            self._continue_list(pending, line, stream)
            return
        if pending is not None:
            self._finish_list(self._pending.pop(stream), closed=False)
        self._match(line, stream)

    def _match(self, line: str, stream: str) -> None:
        for handler in (self._generated, self._omitted, self._unwarmed, self._not_prepared):
            if handler(line, stream):
                return
        self._scalars(line)

    def _generated(self, line: str, stream: str) -> bool:
        m = _GENERATED.search(line)
        if m is None:
            return False
        key = _LIST_KEYS[m.group(2)]
        self._start_list(_PendingList(key, int(m.group(1)), ""), m.group(3), stream)
        return True

    def _omitted(self, line: str, stream: str) -> bool:
        m = _OMITTED.search(line)
        if m is None:
            return False
        self._start_list(_PendingList("omitted_" + m.group(1), -1, ""), m.group(2), stream)
        return True

    def _start_list(self, pending: _PendingList, rest: str, stream: str) -> None:
        self._pending[stream] = pending
        self._continue_list(pending, rest, stream)

    def _continue_list(self, pending: _PendingList, piece: str, stream: str) -> None:
        # Long lists may arrive wrapped over several lines (§10 item 2: read them back whole);
        # the list is complete when its outer brackets balance.
        pending.text += piece
        opened = pending.text.count("[")
        if opened and opened == pending.text.count("]"):
            self._finish_list(self._pending.pop(stream), closed=True)

    def _finish_list(self, pending: _PendingList, closed: bool) -> None:
        rows = [(int(a), int(b), int(c)) for a, b, c in _TUPLE.findall(pending.text)]
        if pending.key.startswith("omitted_"):
            self.state.omitted[pending.key.removeprefix("omitted_")] = rows
            return
        issues = [] if closed else [f"{pending.key} bucket list ended before its closing ']'"]
        if pending.declared != len(rows):
            issues.append(
                f"{pending.key} bucket list declares {pending.declared} buckets, "
                f"{len(rows)} were parsed"
            )
        # With tensor parallelism every worker logs the same list, and big writes of several
        # processes to one pipe can interleave: a clean copy wins over a garbled one.
        state = self.state
        if issues and pending.key in state.lists and pending.key not in state.list_problems:
            return
        state.lists[pending.key] = rows
        state.declared[pending.key] = pending.declared
        if issues:
            state.list_problems[pending.key] = issues
        else:
            state.list_problems.pop(pending.key, None)

    def _unwarmed(self, line: str, _stream: str) -> bool:
        m = _UNWARMED.search(line)
        if m is None:
            return False
        text = _normalise_tuple(m.group(1))
        if all(u.text != text for u in self.state.unwarmed):
            self.state.unwarmed.append(UnwarmedShape(text, self.state.warmup_finished))
        return True

    def _not_prepared(self, line: str, _stream: str) -> bool:
        m = _NOT_PREPARED.search(line)
        if m is None:
            return False
        phase, requested, added = m.group(1).lower(), m.group(2), m.group(3)
        entry = NotPrepared(phase, requested, added, self.state.warmup_finished)
        self.state.not_prepared.append(entry)
        return True

    def _scalars(self, line: str) -> None:
        for needle, flag in _FLAGS.items():
            if needle in line:
                self.state.flags.add(flag)
        self._progress(line)
        if m := _FINISHED.search(line):
            self.state.warmup_secs = float(m.group(1))
            self.state.warmup_allocated = m.group(2)
        if m := _KV_BLOCKS.search(line):
            self.state.kv_blocks = int(m.group(1))
        if m := _CAPTURED.search(line):
            self.state.captured[m.group(1).lower()] = int(m.group(2))

    def _progress(self, line: str) -> None:
        m = _TQDM.search(line) or _DEV_LINE.search(line)
        if m is None:
            return
        phase, done, total = m.group(1).lower(), int(m.group(2)), int(m.group(3))
        if self.state.progress.get(phase) == (done, total):
            return
        self.state.progress[phase] = (done, total)
        if self._on_progress is not None:
            self._on_progress(phase, done, total)


def _normalise_tuple(text: str) -> str:
    """Canonical repr of a logged config tuple, so equal shapes compare equal.

    vllm-gaudi versions log it as repr, "('decode', 24, 1, 768)", or via %s formatting,
    "(decode, 24, 1, 768)" (the v0 fork: "(prompt, 1, 36864)"); both become the repr form.
    """
    items = []
    for raw in text.strip()[1:-1].split(","):
        item = raw.strip().strip("'\"")
        items.append(int(item) if item.isdigit() else item)
    return repr(tuple(items))
