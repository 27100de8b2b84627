"""Serve mode's observer: the engine's output as read by the warmup parser, counted and served.

It runs in a process of its own, forked by `serve.py` before the engine starts, and reads a
copy of the engine's stdout and stderr from two pipes; the engine's real output never passes
through it (docs/runner.md, "Serve mode"). Standard library only.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import selectors
import signal
import struct
import sys
from collections.abc import Callable, Sequence
from mmap import mmap
from pathlib import Path

from warmgate.contract.board import ServeBoard
from warmgate.warmup.engine.parse import LogParser
from warmgate.warmup.hook.lines import parse_hook_line
from warmgate.warmup.serve import specdecode
from warmgate.warmup.serve.tally import ServeTally
from warmgate.warmup.statusboard import Board, Sample, serve_board

MAX_LISTED = 1000  # distinct shapes kept; the counts go on beyond it
_CHUNK = 64 * 1024
_EOL = re.compile(r"\r\n|\r|\n")
LineHook = Callable[[str], None]
# The engine-side process counts the copy bytes it had to skip in this shared 8-byte cell.
DROPPED = struct.Struct("Q")


class Watch:
    """The engine's output as the serve mode reads it: the warmup parser plus line hooks."""

    def __init__(self, state: ServeTally, on_change: Callable[[], None]) -> None:
        self.state = state
        self.parser = LogParser()
        self.line_hooks: list[LineHook] = []
        self._on_change = on_change
        self._partial: dict[str, str] = {}
        self._taken = (0, 0)
        self._seen: dict[str, set[str]] = {}

    def feed(self, text: str, stream: str) -> None:
        """Parse a chunk of one stream; report when a new shape appeared."""
        self.parser.feed(text, stream)
        if self.line_hooks:
            self._lines(text, stream)
        if self._collect():
            self._on_change()

    def _lines(self, text: str, stream: str) -> None:
        pieces = _EOL.split(self._partial.get(stream, "") + text)
        self._partial[stream] = pieces.pop()[-_CHUNK:]
        for line in pieces:
            for hook in self.line_hooks:
                hook(line)

    def changed(self) -> None:
        """Publish the state (another observer of the engine changed it)."""
        self._on_change()

    def bump(self, name: str, by: int = 1) -> None:
        """A hook's counter, exposed under ``hooks`` in the status and as a metric."""
        hooks = self.state.hooks
        hooks[name] = int(hooks.get(name, 0)) + by
        self._on_change()

    def drafter(self, line: str) -> None:
        """The compile hook's lines (a line hook): a drafter compile after the engine's warmup
        is drift, recorded with its shape among the unwarmed shapes (``drafter (decode, 16, 1,
        48)``: no seed can warm it, so none is proposed) and counted under
        ``drafter_compiles``; the direct warmup's closing line is kept as ``drafter_warmup``."""
        if "warmgate-hook" not in line:
            return
        event = parse_hook_line(line)
        if event is None:
            return
        if event.kind == "compile" and event.where == "drafter":
            graph = event.graph
            shape = ", ".join(str(v) for v in graph) if graph is not None else "unnamed"
            self.state.drafter_compiles += 1
            self._add("unwarmed", f"drafter ({shape})")
            self._on_change()
        elif event.kind == "drafter-warmup":
            self.state.drafter_warmup = dict(event.fields)
            self._on_change()

    def _collect(self) -> bool:
        """Take the parser's new entries (it appends, each distinct once per run); a shape an
        earlier engine run of this Pod already logged is not counted again."""
        log, changed = self.parser.state, False
        for shape in log.unwarmed[self._taken[0] :]:
            changed |= self._add("unwarmed", shape.text)
        for miss in log.not_prepared[self._taken[1] :]:
            changed |= self._add("not_prepared", f"{miss.phase} {miss.requested} -> {miss.added}")
        self._taken = (len(log.unwarmed), len(log.not_prepared))
        return changed

    def _add(self, kind: str, text: str) -> bool:
        state = self.state
        listed = state.unwarmed if kind == "unwarmed" else state.not_prepared
        seen = self._seen.setdefault(kind, set(listed))
        if text in seen:
            return False
        seen.add(text)
        if kind == "unwarmed":
            state.unwarmed_count += 1
        else:
            state.not_prepared_count += 1
        if len(listed) < MAX_LISTED:
            listed.append(text)
        return True


def samples(state: ServeTally) -> list[Sample]:
    """The serving Pod's /metrics."""
    found: list[Sample] = [
        ("warmgate_runner_unwarmed_shapes", "Distinct shapes the engine ran unwarmed.", 0.0),
        ("warmgate_runner_not_prepared_buckets", "Distinct bucket lookups not prepared.", 0.0),
        ("warmgate_runner_engine_starts", "Engine starts in this Pod.", 0.0),
        ("warmgate_runner_dropped_log_bytes", "Engine output the parser skipped.", 0.0),
        ("warmgate_runner_drafter_compiles", "Drafter compiles after the engine's warmup.", 0.0),
    ]
    values = (
        state.unwarmed_count,
        state.not_prepared_count,
        state.engine_starts,
        state.dropped_bytes,
        state.drafter_compiles,
    )
    counts = [(n, h, float(v)) for (n, h, _), v in zip(found, values, strict=True)]
    direct = state.drafter_warmup
    for name, help_text in (
        ("planned", "Drafter shapes the direct warmup was asked to warm."),
        ("warmed", "Drafter shapes the direct warmup warmed."),
        ("failed", "Drafter shapes the direct warmup failed."),
        ("seconds", "Seconds the direct drafter warmup took."),
    ):
        value = direct.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            counts.append((f"warmgate_runner_drafter_warmup_{name}", help_text, float(value)))
    return counts + specdecode.samples(state.spec_decode)


def _publisher(board: Board, state: ServeTally, path: Path) -> Callable[[], None]:
    def publish() -> None:
        board.publish(state.board())
        state.save(path)

    return publish


def observe(
    copies: dict[int, str],
    state_file: Path,
    status_port: int | None,
    dropped: mmap,
    *,
    engine: Sequence[str] = (),
    interval_s: float = specdecode.DEFAULT_INTERVAL_S,
) -> None:
    """Parse the copies until both pipes close; serve and save the counts as they change, and
    read the engine's spec-decode counters every ``interval_s`` (0: never)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the engine side decides when it ends: at EOF
    state = ServeTally.load(state_file)
    state.engine_starts += 1
    board = Board(ServeBoard())
    publish = _publisher(board, state, state_file)

    def current() -> list[Sample]:
        state.dropped_bytes = DROPPED.unpack_from(dropped)[0]
        return samples(state)

    board.set_samples(current)
    publish()
    if status_port is not None:
        try:
            serve_board(board, status_port)
        except OSError as exc:  # counting goes on; the operator just cannot read it
            print(f"warmgate: cannot serve the status port {status_port}: {exc}", file=sys.stderr)
    watch = Watch(state, publish)
    watch.line_hooks.append(watch.drafter)
    reader = specdecode.Reader(specdecode.metrics_url(engine), state, interval_s)
    _read(copies, watch, reader)
    watch.parser.close()
    state.dropped_bytes = DROPPED.unpack_from(dropped)[0]
    publish()


def _read(copies: dict[int, str], watch: Watch, reader: specdecode.Reader) -> None:
    decoders = {fd: codecs.getincrementaldecoder("utf-8")(errors="replace") for fd in copies}
    with selectors.DefaultSelector() as selector:
        for fd in copies:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            ready = selector.select(reader.timeout())
            if reader.tick():
                watch.changed()
            for key, _ in ready:
                fd = int(key.fd)
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    selector.unregister(fd)
                    with contextlib.suppress(OSError):
                        os.close(fd)
                    continue
                watch.feed(decoders[fd].decode(chunk), copies[fd])
