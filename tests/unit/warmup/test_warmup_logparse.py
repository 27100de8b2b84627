"""The streaming log parser against the exact line formats of the shared bucketing doc."""

from __future__ import annotations

from warmgate.warmup.logparse import MAX_LINE_CHARS, LogParser
from warmgate.warmup.plan import bucket_digest

PREFIX = "(EngineCore_DP0 pid=4242) INFO 11-29 19:40:04 [common.py:85] "
# §6 config A seed decode buckets, first row of the appendix list.
SEEDS = [(1, 1, 1), (1, 1, 32), (2, 1, 64), (4, 1, 64), (4, 1, 128)]


def generated(kind: str, rows: list[tuple[int, int, int]]) -> str:
    return f"{PREFIX}Generated {len(rows)} {kind} buckets [bs, query, num_blocks]: {rows!r}\n"


def parse(*chunks: str, stream: str = "stdout") -> LogParser:
    parser = LogParser()
    for chunk in chunks:
        parser.feed(chunk, stream)
    parser.close()
    return parser


def test_generated_lists_in_the_documented_format() -> None:
    prompt = [(1, 128, 0), (1, 128, 1), (1, 256, 0)]
    spec = [(1, 1, 1), (2, 1, 2), (2, 1, 32)]
    state = parse(
        generated("prompt", prompt), generated("decode", SEEDS), generated("spec decode", spec)
    ).state
    assert state.lists == {"prompt": prompt, "decode": SEEDS, "spec_decode": spec}
    assert state.declared == {"prompt": 3, "decode": 5, "spec_decode": 3}
    assert state.problems == []


def test_doc_example_line_without_process_prefix() -> None:
    line = (
        "INFO 07-07 19:27:37 [common.py:85] Generated 2 prompt buckets "
        "[bs, query, num_blocks]: [(1, 128, 0), (1, 128, 1)]\n"
    )
    assert parse(line).state.lists["prompt"] == [(1, 128, 0), (1, 128, 1)]


def test_wrapped_list_over_many_lines_and_chunks() -> None:
    text = generated("decode", SEEDS)
    head, body = text.split(": [", 1)
    wrapped = head + ": [" + "\n".join(body[i : i + 7] for i in range(0, len(body), 7))
    state = parse(*(wrapped[i : i + 5] for i in range(0, len(wrapped), 5))).state
    assert state.lists["decode"] == SEEDS
    assert state.problems == []


def test_very_long_list_in_small_chunks() -> None:
    rows = [(1, 128 * q, c) for q in range(1, 129) for c in range(160)]  # 20 480 buckets
    text = generated("prompt", rows)
    assert len(text) > 300_000
    state = parse(*(text[i : i + 4096] for i in range(0, len(text), 4096))).state
    assert len(state.lists["prompt"]) == 20_480
    assert bucket_digest(state.lists["prompt"]) == bucket_digest(rows)


def test_character_by_character_feed_equals_whole_feed() -> None:
    text = (
        generated("prompt", [(1, 128, 0)])
        + "\rDecode warmup processing:  50%|#| 1/2 [00:00<00:00]"
        + "\rDecode warmup processing: 100%|#| 2/2 [00:00<00:00]\r\n"
        + "WARNING 11-29 19:41:00 [hpu_model_runner.py:1] "
        + "Configuration: ('decode', 24, 1, 768) was not warmed-up!\r\n"
        + "INFO 11-29 19:41:00 [hpu_model_runner.py:2] "
        + "Warmup finished in 49 secs, allocated 12.5 GiB of device memory"
    )
    whole = parse(text).state
    split = parse(*text).state
    assert split == whole
    assert whole.warmup_secs == 49.0
    assert whole.warmup_allocated == "12.5 GiB"
    assert whole.progress == {"decode": (2, 2)}


def test_tqdm_carriage_returns_report_progress() -> None:
    seen: list[tuple[str, int, int]] = []
    parser = LogParser(on_progress=lambda *p: seen.append(p))
    parser.feed("\rPrompt warmup processing:   0%|          | 0/63 [00:00<?, ?it/s]", "stderr")
    parser.feed("\rPrompt warmup processing:  90%|#########| 57/63 [00:10<00:01]", "stderr")
    parser.feed("\rPrompt warmup processing:  90%|#########| 57/63 [00:11<00:01]", "stderr")
    parser.feed("\rDecode warmup processing:   1%|          | 1/143 [00:00<00:15]\n", "stderr")
    assert seen == [("prompt", 0, 63), ("prompt", 57, 63), ("decode", 1, 143)]


def test_tqdm_on_stderr_does_not_break_a_list_on_stdout() -> None:
    parser = LogParser()
    text = generated("decode", SEEDS)
    half = len(text) // 2
    parser.feed(text[:half], "stdout")
    parser.feed("\rDecode warmup processing:  40%|####| 57/143 [00:10<00:15]", "stderr")
    parser.feed(text[half:], "stdout")
    parser.close()
    assert parser.state.lists["decode"] == SEEDS
    assert parser.state.progress["decode"] == (57, 143)


def test_developer_mode_lines_report_progress() -> None:
    line = "[Warmup][Decode][57/143] batch_size:8 query_len:1 num_blocks:64 free_mem:10.2 GiB\n"
    assert parse(line).state.progress == {"decode": (57, 143)}


def test_unwarmed_configs_are_deduplicated_and_timed() -> None:
    warn = "WARNING 11-29 19:40:04 [hpu_model_runner.py:1] Configuration: {} was not warmed-up!\n"
    state = parse(
        warn.format("('prompt', 1, 128, 0)"),
        "INFO 11-29 [x] Warmup finished in 3 secs, allocated 1 GiB of device memory\n",
        warn.format("('decode', 24, 1, 768)"),
        warn.format("('decode',24,1,768)"),
    ).state
    assert [(u.text, u.after_warmup) for u in state.unwarmed] == [
        ("('prompt', 1, 128, 0)", False),
        ("('decode', 24, 1, 768)", True),
    ]


def test_not_prepared_prompt_and_decode_buckets() -> None:
    state = parse(
        "INFO [common.py:1] Decode bucket for (65, 1, 10) was not prepared. "
        "Adding new bucket: (64, 1, 96)\n",
        "INFO [common.py:1] Prompt bucket for (2, 128, 0) was not prepared. "
        "Adding new bucket: (4, 192, 0)\n",
    ).state
    assert [(n.phase, n.requested, n.added) for n in state.not_prepared] == [
        ("decode", "(65, 1, 10)", "(64, 1, 96)"),
        ("prompt", "(2, 128, 0)", "(4, 192, 0)"),
    ]


def test_kv_blocks_capture_flags_and_omitted_file_buckets() -> None:
    state = parse(
        "INFO [hpu_worker.py:1] Usable num_blocks: 7593, actual allocated num_blocks: 7594 "
        "(_PAD_BLOCK_ID=7593, _PAD_SLOT_ID=0)\n",
        "INFO [hpu_model_runner.py:1] Graph/Decode captured:105 used_mem:1.5 GiB\n",
        "INFO [hpu_model_runner.py:1] Skipping warmup...\n",
        "INFO [hpu_model_runner.py:1] Bucketing is OFF.\n",
        "WARNING [common.py:1] The following decode buckets from custom bucketing file "
        "(VLLM_BUCKETING_FROM_FILE) were omitted during warmup: [(2, 1, 1), (4, 1, 2)]\n",
    ).state
    assert state.kv_blocks == 7593
    assert state.captured == {"decode": 105}
    assert state.flags == {"skipped_warmup", "bucketing_off"}
    assert state.omitted == {"decode": [(2, 1, 1), (4, 1, 2)]}


def test_declared_count_differing_from_parsed_rows_is_a_problem() -> None:
    line = f"{PREFIX}Generated 4 prompt buckets [bs, query, num_blocks]: [(1, 128, 0)]\n"
    assert parse(line).state.list_problems == {
        "prompt": ["prompt bucket list declares 4 buckets, 1 were parsed"]
    }


def test_unclosed_list_is_ended_by_the_next_log_record() -> None:
    state = parse(
        f"{PREFIX}Generated 2 decode buckets [bs, query, num_blocks]: [(1, 1, 1),\n",
        "WARNING 11-29 19:40:05 [x] Configuration: ('decode', 2, 1, 64) was not warmed-up!\n",
    ).state
    assert state.lists["decode"] == [(1, 1, 1)]
    assert "decode bucket list ended before its closing ']'" in state.list_problems["decode"]
    assert [u.text for u in state.unwarmed] == ["('decode', 2, 1, 64)"]


def test_partial_last_line_is_parsed_at_close() -> None:
    state = parse("INFO [x] Warmup finished in 7 secs, allocated 0 B of device memory").state
    assert state.warmup_secs == 7.0


def test_endless_line_is_dropped_not_kept() -> None:
    parser = LogParser()
    chunk = "x" * (1024 * 1024)
    for _ in range(MAX_LINE_CHARS // len(chunk) + 1):
        parser.feed(chunk)
    parser.feed("\nINFO [x] Usable num_blocks: 5, actual allocated num_blocks: 6\n")
    assert parser.state.problems == [f"stdout: dropped a line longer than {MAX_LINE_CHARS}"]
    assert parser.state.kv_blocks == 5


def test_percent_s_formatted_configurations_normalise_to_the_repr_form() -> None:
    # Some vllm-gaudi versions format the tuple with %s (no quotes); the v0 fork had 3 fields.
    state = parse(
        "WARNING 04-28 07:43:17 [hpu_model_runner.py:1013] "
        "Configuration: (decode, 24, 1, 768) was not warmed-up!\n",
        "WARNING [x] Configuration: ('decode', 24, 1, 768) was not warmed-up!\n",
        "WARNING [x] Configuration: (prompt, 1, 36864) was not warmed-up!\n",
    ).state
    assert [u.text for u in state.unwarmed] == ["('decode', 24, 1, 768)", "('prompt', 1, 36864)"]


def test_clean_copy_from_another_worker_wins_over_a_garbled_one() -> None:
    # Two TP workers writing one long line each to the same pipe may interleave.
    good = generated("decode", SEEDS)
    garbled = good[: len(good) - 30] + "\n"  # the rest of it went elsewhere
    assert parse(garbled).state.list_problems != {}
    state = parse(garbled, good).state
    assert state.lists["decode"] == SEEDS
    assert state.list_problems == {}
    later_garbled = parse(good, garbled).state
    assert later_garbled.lists["decode"] == SEEDS
    assert later_garbled.list_problems == {}
