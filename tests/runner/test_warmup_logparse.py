"""The streaming log parser against the exact line formats of the shared bucketing doc."""

from __future__ import annotations

from warmgate.contract.order import bucket_digest
from warmgate.warmup.engine.parse import MAX_LINE_CHARS, LogParser

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
    assert {k: c.declared for k, c in state.copies.items()} == {
        "prompt": {"EngineCore_DP0 pid=4242": 3},
        "decode": {"EngineCore_DP0 pid=4242": 5},
        "spec_decode": {"EngineCore_DP0 pid=4242": 3},
    }
    assert state.problems == []


def test_doc_example_line_without_process_prefix() -> None:
    line = (
        "INFO 07-07 19:27:37 [common.py:85] Generated 2 prompt buckets "
        "[bs, query, num_blocks]: [(1, 128, 0), (1, 128, 1)]\n"
    )
    assert parse(line).state.lists["prompt"] == [(1, 128, 0), (1, 128, 1)]


def test_a_list_cut_over_two_lines_is_garbled_never_a_shorter_list() -> None:
    # vllm-gaudi logs a list as one record and its repr holds no newline (common.py:242-245),
    # so a list split over lines was cut by another process's write.
    text = generated("decode", SEEDS)
    cut = text.index("(2, 1, 64)")
    state = parse(text[:cut] + "\n" + text[cut:]).state
    assert state.lists == {}
    assert state.copies["decode"].garbled == [
        "unreadable copy from EngineCore_DP0 pid=4242 (declares 5)"
    ]
    assert state.list_fragments == 1


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


def test_not_prepared_prompt_and_decode_buckets_once_per_shape() -> None:
    miss = (
        "WARNING 11-29 19:40:04 [common.py:313] Decode bucket for (65, 1, 10) was not prepared. "
        "Adding new bucket: (64, 1, 96)\n"
    )
    state = parse(
        f"(Worker_TP0 pid=1) {miss}",
        f"(Worker_TP1 pid=2) {miss}",  # every TP rank logs its own miss
        "WARNING [common.py:287] Prompt bucket for (2, 128, 0) was not prepared. "
        "Adding new bucket: (4, 192, 0)\n",
    ).state
    assert [(n.phase, n.requested, n.added) for n in state.not_prepared] == [
        ("decode", "(65, 1, 10)", "(64, 1, 96)"),
        ("prompt", "(2, 128, 0)", "(4, 192, 0)"),
    ]


def test_kv_blocks_capture_and_flags() -> None:
    state = parse(
        "INFO 11-29 19:40:04 [hpu_worker.py:546] Usable num_blocks: 7593, actual allocated "
        "num_blocks (max across layers): 7594 (_PAD_BLOCK_ID=7593, _PAD_SLOT_ID=971904)\n",
        "INFO [hpu_model_runner.py:5174] Graph/Decode captured:105 used_mem:1.5 GiB\n",
        "INFO [hpu_model_runner.py:6142] Skipping warmup...\n",
        "INFO [hpu_model_runner.py:1535] Bucketing is OFF.\n",
    ).state
    assert state.kv_blocks == 7593
    assert state.captured == {"decode": 105}
    assert state.flags == {"skipped_warmup", "bucketing_off"}
    assert state.info_records == 1  # only the first line has vLLM's full record header


def test_omitted_seeds_are_read_from_their_records() -> None:
    header = (
        "(EngineCore pid=7) WARNING 11-29 19:40:04 [common.py:520] The following {} buckets "
        "from custom bucketing file (VLLM_BUCKETING_FROM_FILE) were omitted during warmup:\n"
    )
    record = "(EngineCore pid=7) WARNING 11-29 19:40:04 [common.py:524]   {}\n"
    state = parse(
        header.format("prompt"),
        record.format(
            "('condition: bs * query <= max_num_batched_tokens', '-> bs, query, ctx: ', 1, 4096, 0)"
        ),
        header.format("decode"),
        record.format("('condition: bs <= ctx, ', '-> bs, query, ctx: ', 64, 1, 32)"),
        record.format("('condition: bs <= ctx, ', '-> bs, query, ctx: ', 64, 1, 32)"),
    ).state
    assert state.omitted_headers == {"prompt", "decode"}
    assert [(s.phase, s.bucket, s.condition) for s in state.omitted] == [
        ("prompt", (1, 4096, 0), "condition: bs * query <= max_num_batched_tokens"),
        ("decode", (64, 1, 32), "condition: bs <= ctx,"),
    ]


def test_an_inline_list_after_the_omitted_header_is_no_seed_record() -> None:
    # No pinned release logs "[...]" after the header; guessing would hide format drift.
    line = (
        "WARNING [common.py:1] The following decode buckets from custom bucketing file "
        "(VLLM_BUCKETING_FROM_FILE) were omitted during warmup: [(2, 1, 1), (4, 1, 2)]\n"
    )
    state = parse(line).state
    assert (state.omitted_headers, state.omitted) == ({"decode"}, [])


def test_declared_count_differing_from_parsed_rows_is_a_garbled_copy() -> None:
    line = f"{PREFIX}Generated 4 prompt buckets [bs, query, num_blocks]: [(1, 128, 0)]\n"
    state = parse(line).state
    assert state.lists == {}
    assert state.copies["prompt"].garbled == [
        "unreadable copy from EngineCore_DP0 pid=4242 (declares 4)"
    ]


def test_unclosed_list_does_not_hide_the_next_record() -> None:
    state = parse(
        f"{PREFIX}Generated 2 decode buckets [bs, query, num_blocks]: [(1, 1, 1),\n",
        "WARNING 11-29 19:40:05 [x] Configuration: ('decode', 2, 1, 64) was not warmed-up!\n",
    ).state
    assert "decode" not in state.lists
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
    assert parse(garbled).state.lists == {}
    for order in ((garbled, good), (good, garbled)):
        state = parse(*order).state
        assert state.lists["decode"] == SEEDS
        assert len(state.copies["decode"].garbled) == 1


def test_a_whole_record_after_a_cut_one_on_the_same_line_is_read() -> None:
    # Rank 0 wrote half its line, then rank 1's prefix and whole record landed behind it.
    rank0 = generated("decode", SEEDS).replace("EngineCore_DP0 pid=4242", "Worker_TP0 pid=8")
    rank1 = generated("decode", SEEDS).replace("EngineCore_DP0 pid=4242", "Worker_TP1 pid=9")
    line = rank0[: rank0.index("(2, 1, 64)")] + rank1
    state = parse(line).state
    assert state.copies["decode"].clean == {"Worker_TP1 pid=9": SEEDS}
    assert state.copies["decode"].garbled == ["unreadable copy from Worker_TP0 pid=8 (declares 5)"]


def test_colour_and_stacked_process_prefixes_are_ignored() -> None:
    cyan, plain = "\x1b[0;36m", "\x1b[0;0m"
    coloured = (
        f"{cyan}(Worker_TP0 pid=8){plain} {cyan}(Worker_TP1 pid=9){plain} "
        "\x1b[32mINFO\x1b[0m \x1b[90m11-29 19:40:04\x1b[0m \x1b[90m[common.py:245]\x1b[0m "
        "Generated 5 decode buckets [bs, query, num_blocks]: "
        f"{SEEDS!r}\n"
    )
    state = parse(coloured).state
    assert state.copies["decode"].clean == {"Worker_TP1 pid=9": SEEDS}
    assert state.info_records == 1


def test_ranks_that_log_different_lists_disagree() -> None:
    other = [*SEEDS, (8, 1, 64)]
    state = parse(
        generated("decode", SEEDS).replace("EngineCore_DP0", "Worker_TP0"),
        generated("decode", other).replace("EngineCore_DP0", "Worker_TP1"),
    ).state
    assert state.copies["decode"].disagree()
    assert "decode" not in state.lists


def test_a_process_logging_a_list_again_replaces_its_copy() -> None:
    # PT_HPU_SDPA_QKV_SLICE_MODE_FWD filters the prompt list and logs it again (common.py:176-182).
    first = [(1, 128, 0), (1, 8192, 0), (1, 9000, 0)]
    state = parse(generated("prompt", first), generated("prompt", first[:2])).state
    assert state.lists["prompt"] == first[:2]


def test_progress_of_several_ranks_never_steps_back() -> None:
    seen: list[tuple[str, int, int]] = []
    parser = LogParser(on_progress=lambda *p: seen.append(p))
    bar = "\rDecode warmup processing:  {}%|#| {}/7 [00:00<?, ?item/s, {}/7]"
    for done in (1, 2):  # rank 0
        parser.feed(bar.format(done * 14, done, done - 1), "stderr")
    parser.feed(bar.format(14, 1, 0), "stderr")  # rank 1 is behind
    parser.feed(bar.format(43, 3, 2) + "\n", "stderr")
    assert seen == [("decode", 1, 7), ("decode", 2, 7), ("decode", 3, 7)]
