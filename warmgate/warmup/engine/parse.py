"""Streaming parser of engine output: bucket lists, dropped seeds, progress, unwarmed shapes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from warmgate.warmup.engine import formats as fmt
from warmgate.warmup.engine.formats import Bucket
from warmgate.warmup.hook.lines import HookEvent, parse_hook_line

ProgressCallback = Callable[[str, int, int], None]

# A stream that never ends a line must not grow memory without bound (16 MiB per line).
MAX_LINE_CHARS = 16 * 1024 * 1024
# The hook logs a line per compile outside warmup; a runaway engine must not exhaust memory.
MAX_HOOK_EVENTS = 100_000
_EOL = re.compile(r"\r\n|\r|\n")


@dataclass
class UnwarmedShape:
    """One forward configuration the engine ran without having warmed it."""

    text: str
    after_warmup: bool


@dataclass(frozen=True)
class NotPrepared:
    """One bucket lookup miss and the fallback bucket it created."""

    phase: str
    requested: str
    added: str
    after_warmup: bool


@dataclass(frozen=True)
class OmittedSeed:
    """A seed bucket of the file that one of the engine's filters dropped, and that filter."""

    phase: str
    bucket: Bucket
    condition: str


@dataclass
class ListCopies:
    """Every copy of one bucket list: each engine process (every TP rank) logs its own."""

    clean: dict[str, list[Bucket]] = field(default_factory=dict)
    declared: dict[str, int] = field(default_factory=dict)
    garbled: list[str] = field(default_factory=list)

    def add_clean(self, source: str, rows: list[Bucket]) -> None:
        """A readable copy; a process logging the list again (the sliding-window prompt
        filter, G26 common.py:176-182) replaces its earlier copy."""
        self.clean[source] = rows
        self.declared[source] = len(rows)

    def agreed(self) -> list[Bucket] | None:
        """The list when there is a readable copy and every readable copy is the same."""
        copies = list(self.clean.values())
        if not copies or any(sorted(c) != sorted(copies[0]) for c in copies[1:]):
            return None
        return copies[0]

    def disagree(self) -> bool:
        """True when two processes logged different lists."""
        return len(self.clean) > 1 and self.agreed() is None


@dataclass
class EngineLog:
    """Everything learnt from the engine's output so far."""

    copies: dict[str, ListCopies] = field(default_factory=dict)
    omitted: list[OmittedSeed] = field(default_factory=list)
    omitted_headers: set[str] = field(default_factory=set)
    unwarmed: list[UnwarmedShape] = field(default_factory=list)
    not_prepared: list[NotPrepared] = field(default_factory=list)
    progress: dict[str, tuple[int, int]] = field(default_factory=dict)
    captured: dict[str, int] = field(default_factory=dict)
    warmup_secs: float | None = None
    warmup_allocated: str | None = None
    kv_blocks_seen: set[int] = field(default_factory=set)
    flags: set[str] = field(default_factory=set)
    info_records: int = 0
    list_fragments: int = 0
    problems: list[str] = field(default_factory=list)
    hook_events: list[HookEvent] = field(default_factory=list)
    # vLLM's process prefixes seen, "(EngineCore pid=200) ": name -> pids (at most 64 names)
    processes: dict[str, set[int]] = field(default_factory=dict)

    @property
    def warmup_finished(self) -> bool:
        """True once "Warmup finished in N secs" was seen."""
        return self.warmup_secs is not None

    @property
    def kv_blocks(self) -> int | None:
        """The usable KV block count the engine reported (every TP rank reports it)."""
        return min(self.kv_blocks_seen) if self.kv_blocks_seen else None

    def add_list(self, key: str, rows: list[Bucket], source: str = "") -> None:
        """Record a readable copy of list ``key`` ("prompt", "decode", "spec_decode")."""
        self.copies.setdefault(key, ListCopies()).add_clean(source, rows)

    @property
    def lists(self) -> dict[str, list[Bucket]]:
        """Each list some process logged readably, when all readable copies agree."""
        found = {key: c.agreed() for key, c in self.copies.items()}
        return {key: rows for key, rows in found.items() if rows is not None}


class LogParser:
    """Feed it text as it arrives, per stream; lines end at \\n, \\r\\n or tqdm's bare \\r."""

    def __init__(self, on_progress: ProgressCallback | None = None) -> None:
        self.state = EngineLog()
        self._partial: dict[str, list[str]] = {}
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
            self._line(line)
        self._guard_length(stream, pieces)

    def _guard_length(self, stream: str, pieces: list[str]) -> None:
        if sum(len(p) for p in pieces) > MAX_LINE_CHARS:
            self.state.problems.append(f"{stream}: dropped a line longer than {MAX_LINE_CHARS}")
            pieces.clear()

    def close(self) -> None:
        """End of all streams: parse what is left of each."""
        for _stream, pieces in sorted(self._partial.items()):
            tail = "".join(pieces)
            if tail:
                self._line(tail)
        self._partial.clear()

    def _line(self, raw: str) -> None:
        # A line may hold several records (another rank's write, or a record glued to a tqdm
        # bar on one stream), so every matcher looks at every line.
        line = fmt.strip_escapes(raw)
        self._list(line)
        self._omitted(line)
        self._unwarmed(line)
        self._not_prepared(line)
        self._scalars(line)
        self._hook(line)
        self._processes(line)

    def _processes(self, line: str) -> None:
        seen = self.state.processes
        for m in fmt.PROCESS_TAG.finditer(line):
            if m.group("name") in seen or len(seen) < 64:
                seen.setdefault(m.group("name"), set()).add(int(m.group("pid")))

    def _list(self, line: str) -> None:
        headers = list(fmt.LIST_HEADER.finditer(line))
        if not headers:
            self.state.list_fragments += fmt.LIST_FRAGMENT.search(line) is not None
            return
        # Only the last header's text can run whole to the end of the line; an earlier one was
        # cut by another process's write that landed inside it.
        for head in headers[:-1]:
            self._garbled(line, head)
        head = headers[-1]
        rows = fmt.parse_list_body(line[head.end() :])
        if rows is None or len(rows) != int(head.group(1)):
            self._garbled(line, head)
            return
        key = fmt.LIST_KEYS[head.group(2)]
        self.state.add_list(key, rows, fmt.source_before(line, head.start()))

    def _garbled(self, line: str, head: re.Match[str]) -> None:
        key = fmt.LIST_KEYS[head.group(2)]
        where = fmt.source_before(line, head.start()) or "a process without prefix"
        note = f"unreadable copy from {where} (declares {head.group(1)})"
        self.state.copies.setdefault(key, ListCopies()).garbled.append(note)

    def _omitted(self, line: str) -> None:
        if m := fmt.OMITTED_HEADER.search(line):
            self.state.omitted_headers.add(m.group(1))
        for m in fmt.OMITTED_RECORD.finditer(line):
            bucket = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
            seed = OmittedSeed(fmt.omitted_phase(bucket), bucket, m.group("condition").strip())
            if seed not in self.state.omitted:
                self.state.omitted.append(seed)

    def _unwarmed(self, line: str) -> None:
        for m in fmt.UNWARMED.finditer(line):
            text = fmt.normalise_config(m.group(1))
            if all(u.text != text for u in self.state.unwarmed):
                self.state.unwarmed.append(UnwarmedShape(text, self.state.warmup_finished))

    def _not_prepared(self, line: str) -> None:
        for m in fmt.NOT_PREPARED.finditer(line):
            phase, requested, added = m.group(1).lower(), m.group(2), m.group(3)
            if any(
                (n.phase, n.requested, n.added) == (phase, requested, added)
                for n in self.state.not_prepared
            ):
                continue  # every TP rank logs its own miss
            entry = NotPrepared(phase, requested, added, self.state.warmup_finished)
            self.state.not_prepared.append(entry)

    def _hook(self, line: str) -> None:
        event = parse_hook_line(line)
        if event is None:
            return
        if len(self.state.hook_events) < MAX_HOOK_EVENTS:
            self.state.hook_events.append(event)
        elif len(self.state.hook_events) == MAX_HOOK_EVENTS:
            self.state.problems.append(f"more than {MAX_HOOK_EVENTS} hook lines: the rest dropped")
            self.state.hook_events.append(event)

    def _scalars(self, line: str) -> None:
        state = self.state
        for needle, flag in fmt.FLAGS.items():
            if needle in line:
                state.flags.add(flag)
        state.info_records += len(fmt.INFO_RECORD.findall(line))
        self._progress(line)
        if m := fmt.FINISHED.search(line):
            state.warmup_secs = float(m.group(1))
            state.warmup_allocated = m.group(2)
        for m in fmt.KV_BLOCKS.finditer(line):
            state.kv_blocks_seen.add(int(m.group(1)))
        if m := fmt.CAPTURED.search(line):
            state.captured[m.group(1).lower()] = int(m.group(2))

    def _progress(self, line: str) -> None:
        m = fmt.TQDM.search(line) or fmt.DEV_LINE.search(line)
        if m is None:
            return
        phase, done, total = m.group(1).lower(), int(m.group(2)), int(m.group(3))
        known = self.state.progress.get(phase)
        # TP ranks each draw a bar: report the furthest one, never step back.
        if known is not None and known[1] == total and done <= known[0]:
            return
        self.state.progress[phase] = (done, total)
        if self._on_progress is not None:
            self._on_progress(phase, done, total)
