"""The engine's log line formats, quoted from vLLM and vllm-gaudi, and the clean-up before matching.

Sources (docs/runner.md, "Log formats"): vllm-gaudi v0.26.0 = b059f9c9 and main = 091bbadd,
written here as "G26:line / Gmain:line" when the lines differ; vLLM v0.26.0 (the release that
vllm-gaudi v0.26.0 pins; its PyPI wheel, identical at these lines in v0.27.0, so also for the
commit main pins, 14617c2b, which lies between them), written "vllm/<file>:<line>".
"""

from __future__ import annotations

import re

Bucket = tuple[int, int, int]

# vLLM colours the process prefix (vllm/utils/system_utils.py:27-28, 209-211) and, through its
# ColoredFormatter, the level, time and file (vllm/logging_utils/formatter.py:87-117) when the
# stream is a tty or VLLM_LOGGING_COLOR=1 and NO_COLOR is unset; older vLLM coloured the prefix
# always. The runner sets NO_COLOR=1, and still strips every CSI escape before matching.
_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# decorate_logs writes "(<process name> pid=<pid>) " before each line of a decorated process
# (vllm/utils/system_utils.py:201-253): "EngineCore" (vllm/v1/engine/utils.py:167; older vLLM:
# "EngineCore_DP0"), "Worker_TP1" (vllm/v1/executor/multiproc_executor.py:1024-1047), "APIServer".
# The prefix is its own write(), so under TP it can land in the middle of another rank's line.
PROCESS_TAG = re.compile(r"\((?P<name>[A-Za-z][\w.-]*) pid=(?P<pid>\d+)\) ")

# G26 common.py:239-245 / Gmain:247-253, and G26:357-361 / Gmain:365-369 (only the buckets the
# spec expansion added): f"Generated {n} {phase} buckets [bs, query, num_blocks]: {list(...)}".
# One record, one line: the list repr holds no "\n" for the NewLineFormatter to split
# (vllm/logging_utils/formatter.py:72-74). The bracketed header is optional for the v0 fork.
LIST_HEADER = re.compile(r"Generated (\d+) (spec decode|prompt|decode) buckets(?: \[[^\]]*\])?: ")
_TUPLE_TEXT = r"\(\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\)"
_LIST_BODY = re.compile(rf"\[(?:{_TUPLE_TEXT}(?:\s*,\s*{_TUPLE_TEXT})*)?\]\s*")
TUPLE = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
LIST_KEYS = {"prompt": "prompt", "decode": "decode", "spec decode": "spec_decode"}
# What is left of a list line cut by another process's write: two tuples in a row (no other
# engine line holds that) or a header cut before its ": ".
LIST_FRAGMENT = re.compile(
    rf"\)\s*,\s*{_TUPLE_TEXT}|Generated \d+ (?:spec decode|prompt|decode) buck"
)

# Seeds the engine's filters dropped, G26 common.py:518-524 / Gmain:526-532, at WARNING:
#   "The following %s buckets from custom bucketing file (VLLM_BUCKETING_FROM_FILE) were omitted
#    during warmup:", then one record per seed: logger().warning("  %s", bucket) where bucket is
#   the 5-tuple the failed filter added (G26:429-457 / Gmain:437-465), e.g.
#   "  ('condition: bs <= ctx, ', '-> bs, query, ctx: ', 64, 1, 32)". The same tuples are logged
#   at ERROR when no bucket is left (G26:526-529) and at DEBUG (G26:533-537). Never a [...] list.
OMITTED_HEADER = re.compile(
    r"The following (prompt|decode) buckets from custom bucketing file "
    r"\(VLLM_BUCKETING_FROM_FILE\) were omitted during warmup:"
)
OMITTED_RECORD = re.compile(
    r"\('(?P<condition>[^']*)', '-> bs, query, ctx: ', (\d+), (\d+), (\d+)\)"
)

# G26 hpu_model_runner.py:3579-3588 / Gmain:3634-3643, WARNING, once per new forward shape:
# logger.warning("Configuration: %s was not warmed-up!", cfg), cfg = (phase, bs, seq, blocks).
UNWARMED = re.compile(r"Configuration: (\([^)]*\)) was not warmed-up!")
# G26 common.py:287-288 and 313-314 / Gmain:295-296 and 321-322, WARNING: a lookup miss that
# adds a never-warmed fallback bucket.
NOT_PREPARED = re.compile(
    r"(Prompt|Decode) bucket for (\([^)]*\)) was not prepared\. Adding new bucket: (\([^)]*\))"
)
# G26 hpu_model_runner.py:6231-6233 / Gmain:6306-6308.
FINISHED = re.compile(r"Warmup finished in (\d+(?:\.\d+)?) secs?, allocated (.+?) of device memory")
# tqdm bars on stderr, G26 hpu_model_runner.py:5425-5455 / Gmain:5473-5503:
# "Decode warmup processing:  40%|████      | 57/143 [00:10<00:15,  5.60item/s, 56/143]"; the
# first i/N is tqdm's count, the postfix is the 0-based bucket index.
TQDM = re.compile(r"(Prompt|Decode) warmup processing: .*?(\d+)/(\d+)")
# VLLM_DEVELOPER_MODE, G26 hpu_model_runner.py:5176-5183 / Gmain:5224-5231 (tqdm.write).
DEV_LINE = re.compile(r"\[Warmup\]\[(Prompt|Decode)\]\[(\d+)/(\d+)\]")
# G26 hpu_model_runner.py:5170-5174 / Gmain:5218-5222; absent when graph warmup is skipped.
CAPTURED = re.compile(r"Graph/(Prompt|Decode) captured:\s?(\d+)")
# hpu_worker.py:540-546 (both pins): "Usable num_blocks: N, actual allocated num_blocks (max
# across layers): M (_PAD_BLOCK_ID=N, _PAD_SLOT_ID=...)".
KV_BLOCKS = re.compile(r"Usable num_blocks: (\d+)")
FLAGS = {
    "Skipping warmup...": "skipped_warmup",  # G26 hpu_model_runner.py:6142 / Gmain:6219
    "Bucketing is OFF.": "bucketing_off",  # G26 hpu_model_runner.py:1535 / Gmain:1537
    "Sampler warmup completed successfully": "sampler_warmed",  # G26:5416 / Gmain:5464
}
# vLLM's record format "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s" with
# "%m-%d %H:%M:%S" (vllm/logger.py:22-26): counted to tell "no INFO record at all" (a level
# above INFO, or VLLM_CONFIGURE_LOGGING=0) from "no bucket list".
INFO_RECORD = re.compile(r"\bINFO \d\d-\d\d \d\d:\d\d:\d\d ")


def strip_escapes(line: str) -> str:
    """The line without ANSI colour (or any other CSI) escape sequences."""
    return _CSI.sub("", line) if "\x1b" in line else line


def source_before(line: str, end: int) -> str:
    """The last process tag before ``end`` ("Worker_TP0 pid=12"), or "" when there is none."""
    found = ""
    for match in PROCESS_TAG.finditer(line, 0, end):
        found = f"{match.group('name')} pid={match.group('pid')}"
    return found


def parse_list_body(text: str) -> list[Bucket] | None:
    """The buckets of a whole "[(bs, q, ctx), ...]" text, or None when anything else is in it.

    Strict on purpose: under tensor parallelism another rank's write can land inside a long
    line (a pipe keeps only writes up to PIPE_BUF = 4096 bytes whole), and such a copy must be
    recognised as garbled, never read as a shorter list.
    """
    if _LIST_BODY.fullmatch(text) is None:
        return None
    return [(int(a), int(b), int(c)) for a, b, c in TUPLE.findall(text)]


def omitted_phase(bucket: Bucket) -> str:
    """Which list a dropped seed belonged to: the file's query-1 rows are decode buckets
    (file_strategy.py:60-65, both pins)."""
    return "decode" if bucket[1] == 1 else "prompt"


def normalise_config(text: str) -> str:
    """Canonical repr of a logged config tuple, so equal shapes compare equal.

    vllm-gaudi logs it via %s of a tuple, i.e. its repr, "('decode', 24, 1, 768)"; some
    versions printed "(decode, 24, 1, 768)" (the v0 fork: "(prompt, 1, 36864)"); both become
    the repr form.
    """
    items: list[object] = []
    for raw in text.strip()[1:-1].split(","):
        item = raw.strip().strip("'\"")
        items.append(int(item) if item.isdigit() else item)
    return repr(tuple(items))
