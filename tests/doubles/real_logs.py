"""The real engine's golden logs (fixtures/real_engine_logs): normalising and comparing lines.

Recorded by tests/realengine/record_golden.py from the pinned vLLM CPU engine; read by the
stand-in's test (its non-Gaudi lines must have the real lines' shape) and by the tier's drift
test (the engine still prints them). Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

FIXTURES = Path(__file__).with_name("fixtures") / "real_engine_logs"
STAMP = "11-29 19:40:04"
_PID = re.compile(r"(pid=|process \[)(\d+)")
_TIME = re.compile(r"(?<!\d)\d\d-\d\d \d\d:\d\d:\d\d(?!\d)")
_CLIENT = re.compile(r"\b127\.0\.0\.1:\d+ - ")
_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,}\b")
_DIGITS = re.compile(r"\d+")
_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# vllm-gaudi's files and warmup bars: the stand-in prints them in the Gaudi formats, which a CPU
# engine never prints (fixtures/engine_logs holds those). A bar follows a prefix of its own on
# the same line, so the prefix alone is a piece of it once the bar's \r split the line.
GAUDI_FILES = ("common.py", "hpu_model_runner.py", "hpu_worker.py")
_GAUDI_BAR = re.compile(r"^(Prompt|Decode) warmup processing: ")
_BARE_PREFIX = re.compile(r"^\([A-Za-z][\w.-]* pid=\d+\) $")


def normalise(text: str, port: int, folders: Mapping[str, str]) -> str:
    """Fix what changes from run to run: process ids (100, 200, ... in order of appearance),
    times, the server's and clients' ports, folders, memory addresses."""
    pids: dict[str, str] = {}

    def pid(m: re.Match[str]) -> str:
        found = pids.setdefault(m.group(2), str(100 * (len(pids) + 1)))
        return m.group(1) + found

    for folder, name in folders.items():
        text = text.replace(folder, name)
    text = _PID.sub(pid, text)
    text = _TIME.sub(STAMP, text)
    text = re.sub(rf"(?<=:){port}(?!\d)|(?<='port': ){port}(?!\d)", "8000", text)
    text = _CLIENT.sub("127.0.0.1:40000 - ", text)
    return _ADDRESS.sub("0x7f0000000000", text)


def lines(text: str) -> list[str]:
    """The lines as a pipe reader sees them: CRLF, bare CR (tqdm) and LF all end a line."""
    return [x for x in re.split(r"\r\n|\r|\n", text) if x.strip()]


def plain(line: str) -> str:
    """The line without colour (CSI escape sequences)."""
    return _CSI.sub("", line)


def shape(line: str, colour: bool = False) -> str:
    """A line with every number as '#' (and without colour unless ``colour``)."""
    return _DIGITS.sub("#", line if colour else plain(line))


def shapes(texts: Iterable[str], colour: bool = False) -> set[str]:
    """Every line's shape."""
    return {shape(x, colour) for text in texts for x in lines(text)}


def golden(case: str) -> list[str]:
    """The recorded stdout and stderr of ``case`` (plain, colour)."""
    return [(FIXTURES / f"{case}.{stream}").read_text() for stream in ("stdout", "stderr")]


def non_gaudi(text: str) -> list[str]:
    """The lines of a log that are not vllm-gaudi's: process prefixes and vLLM's own records."""
    found = []
    for line in lines(text):
        bare = plain(line)
        if any(f"[{name}:" in bare for name in GAUDI_FILES):
            continue
        if not _GAUDI_BAR.match(bare) and not _BARE_PREFIX.match(bare):
            found.append(line)
    return found
