#!/usr/bin/env python3
"""TEST DOUBLE, not vLLM: a stand-in for `vllm serve` on vllm-gaudi, for the warmup runner's tests.

It accepts `vllm serve`'s command line, reads VLLM_BUCKETING_FROM_FILE, prints the log lines the
real engine prints (formats from the shared doc vllm-gaudi-bucketing.md) for the buckets that
`warmgate.buckets` computes from that file, writes fake recipe files into
PT_HPU_RECIPE_CACHE_CONFIG's folder, and serves /health and /v1/completions with http.server.

Faults are injected with STANDIN_FAULTS, a comma list of:
  crash_at_start        exit 3 right after the banner, before /health
  hang                  stop after the bucket lines; never serve /health
  hang_ignore_term      like hang, and ignore SIGTERM (the runner must SIGKILL)
  unwarmed_on_probe     log an unwarmed configuration and a fallback bucket on the first request
  kv_blocks=N           report N usable KV blocks instead of the pinned count
  extra_decode_bucket   generate one decode bucket the plan does not have
  skip_warmup           log "Skipping warmup..." instead of warming
  wrap_lists            print each bucket list wrapped over many short lines
  logs_on_stderr        log records on stderr, glued to the end of the tqdm bars
  probe_http_500        answer every completion with HTTP 500
  exit_on_probe         exit 4 on the first completion request
STANDIN_RECORD=<path> writes the argv and the runner-owned env variables there as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HEADER = "[bs, query, num_blocks]"


def faults() -> dict[str, str]:
    """The injected faults: name -> value ("" when the fault has no value)."""
    found = {}
    for item in filter(None, os.environ.get("STANDIN_FAULTS", "").split(",")):
        name, _, value = item.partition("=")
        found[name.strip()] = value.strip()
    return found


def log(level: str, where: str, message: str) -> None:
    """One vLLM-style log record: 'INFO 11-29 19:40:04 [file.py:12] message' (stdout, or
    stderr with the logs_on_stderr fault, where it lands right after a tqdm bar)."""
    stamp = time.strftime("%m-%d %H:%M:%S")
    stream = sys.stderr if "logs_on_stderr" in faults() else sys.stdout
    stream.write(f"{level} {stamp} [{where}] {message}\n")
    stream.flush()


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
    args, _unknown = p.parse_known_args(argv)
    return args


def spec_tokens(args: argparse.Namespace) -> int:
    """k from --speculative-config (JSON), 0 without spec decode."""
    if not args.speculative_config:
        return 0
    return int(json.loads(args.speculative_config).get("num_speculative_tokens", 0))


def env_flag(name: str) -> bool:
    """The engine's boolean env rule (§2.2): true, t, 1, yes, y, on, any case."""
    return os.environ.get(name, "").strip().lower() in {"true", "t", "1", "yes", "y", "on"}


def compute_lists(args: argparse.Namespace, kv_blocks: int) -> dict[str, list[Any]]:
    """Bucket lists from the seed file via warmgate.buckets (the engine's file mode, §2.6)."""
    # Imported late so the process is up (and has written STANDIN_RECORD) within milliseconds.
    sys.path.insert(0, str(REPO))
    from warmgate.buckets import EngineShapeConfig, plan_buckets

    text = Path(os.environ["VLLM_BUCKETING_FROM_FILE"]).read_text()
    config = EngineShapeConfig(
        max_num_seqs=args.max_num_seqs,
        max_model_len=args.max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens,
        block_size=args.block_size,
        num_gpu_blocks=kv_blocks,
        num_speculative_tokens=spec_tokens(args),
        bucket_file=text,
        contiguous_pa=env_flag("VLLM_CONTIGUOUS_PA"),
        merged_prefill=env_flag("VLLM_MERGED_PREFILL"),
        prompt_bs_max=int(os.environ["VLLM_PROMPT_BS_BUCKET_MAX"])
        if os.environ.get("VLLM_PROMPT_BS_BUCKET_MAX")
        else None,
    )
    plan = plan_buckets(config)
    decode = plan.decode_buckets
    if "extra_decode_bucket" in faults():
        decode = sorted([*decode, (decode[-1][0] + 1, 1, decode[-1][2])])
    return {"prompt": plan.prompt_buckets, "seeds": plan.seed_decode_buckets, "decode": decode}


def print_list(kind: str, rows: list[Any]) -> None:
    """'Generated {n} {kind} buckets [bs, query, num_blocks]: [...]', optionally wrapped."""
    body = repr([tuple(r) for r in rows])
    if "wrap_lists" not in faults():
        log("INFO", "common.py:85", f"Generated {len(rows)} {kind} buckets {HEADER}: {body}")
        return
    log("INFO", "common.py:85", f"Generated {len(rows)} {kind} buckets {HEADER}: {body[:50]}")
    stream = sys.stderr if "logs_on_stderr" in faults() else sys.stdout
    for start in range(50, len(body), 50):
        stream.write(body[start : start + 50] + "\n")
    stream.flush()


def write_recipes() -> None:
    """Fake recipes where PT_HPU_RECIPE_CACHE_CONFIG=<dir>,<delete>,<MB> points (§4.6)."""
    folder, delete, _size = os.environ["PT_HPU_RECIPE_CACHE_CONFIG"].split(",")
    root = Path(folder)
    if delete == "True":
        shutil.rmtree(root, ignore_errors=True)
    (root / "graphs").mkdir(parents=True, exist_ok=True)
    for i in range(3):
        (root / f"recipe-{i}.bin").write_bytes(bytes([i]) * 4096)
    (root / "graphs" / "decode.bin").write_bytes(b"decode-graph" * 100)


def warm(lists: dict[str, list[Any]]) -> None:
    """tqdm-style progress on stderr with bare \\r, then the capture and finish lines (§4.1)."""
    if "skip_warmup" in faults():
        log("INFO", "hpu_model_runner.py:4001", "Skipping warmup...")
        return
    for phase, key in (("Prompt", "prompt"), ("Decode", "decode")):
        total = len(lists[key])
        for i in range(1, total + 1):
            pct = 100 * i // total
            sys.stderr.write(f"\r{phase} warmup processing: {pct:3d}%|#| {i}/{total} [00:00<00:00]")
            sys.stderr.flush()
        if "logs_on_stderr" not in faults():
            sys.stderr.write("\n")  # else the next record is glued to the bar, as on a tty
        log("INFO", "hpu_model_runner.py:4100", f"Graph/{phase} captured:{total} used_mem:0 B")
    log(
        "INFO",
        "hpu_model_runner.py:4200",
        "Warmup finished in 1 secs, allocated 0 B of device memory",
    )


class Handler(BaseHTTPRequestHandler):
    """/health and /v1/completions of the OpenAI-compatible server."""

    served_name = "model"
    lock = threading.Lock()
    requests_seen = 0

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

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
        if self.path != "/v1/completions" or body.get("model") != self.served_name:
            self._reply(404, {"error": "not found"})
            return
        with Handler.lock:
            Handler.requests_seen += 1
            first = Handler.requests_seen == 1
        self._on_request(first)
        if "probe_http_500" in faults():
            self._reply(500, {"error": "injected"})
            return
        text = " tok" * int(body.get("max_tokens", 1))
        self._reply(200, {"object": "text_completion", "choices": [{"index": 0, "text": text}]})

    def _on_request(self, first: bool) -> None:
        if first and "exit_on_probe" in faults():
            os._exit(4)
        if first and "unwarmed_on_probe" in faults():
            # §5.3: a partial-draft step (T=3 of k=3) runs a shape no bucket covers.
            log(
                "WARNING",
                "hpu_model_runner.py:2999",
                "Configuration: ('decode', 24, 1, 768) was not warmed-up!",
            )
            log(
                "INFO",
                "common.py:210",
                "Decode bucket for (24, 1, 800) was not prepared. Adding new bucket: (24, 1, 896)",
            )


def main(argv: list[str]) -> int:
    """Behave like `vllm serve` until SIGTERM."""
    args = parse_args(argv)
    record = os.environ.get("STANDIN_RECORD")
    if record:
        owned = ("VLLM_BUCKETING_FROM_FILE", "VLLM_SKIP_WARMUP", "PT_HPU_RECIPE_CACHE_CONFIG")
        env = {k: os.environ.get(k) for k in owned}
        Path(record).write_text(json.dumps({"argv": argv, "env": env, "pid": os.getpid()}))
    log("INFO", "api_server.py:1700", f"vLLM API server (TEST DOUBLE standin_vllm) args: {argv}")
    if "crash_at_start" in faults():
        log("ERROR", "core.py:700", "EngineCore failed to start (injected crash_at_start)")
        return 3
    kv = int(faults().get("kv_blocks") or args.num_gpu_blocks_override or 8192)
    usable = f"Usable num_blocks: {kv}, actual allocated num_blocks: {kv + 1}"
    log("INFO", "hpu_worker.py:240", f"{usable} (_PAD_BLOCK_ID={kv}, _PAD_SLOT_ID=0)")
    lists = compute_lists(args, kv)
    # Order and content as vllm-gaudi common.py: the spec line lists only the added buckets,
    # then the decode line lists the whole expanded list.
    print_list("prompt", lists["prompt"])
    if spec_tokens(args) > 0:
        seeds = set(lists["seeds"])
        print_list("spec decode", [b for b in lists["decode"] if b not in seeds])
    print_list("decode", lists["decode"])
    return serve_or_hang(args, lists)


def serve_or_hang(args: argparse.Namespace, lists: dict[str, list[Any]]) -> int:
    """Hang if asked to, else warm up and serve until SIGTERM."""
    if "hang_ignore_term" in faults():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "hang" in faults() or "hang_ignore_term" in faults():
        while True:
            time.sleep(3600)
    write_recipes()
    warm(lists)
    Handler.served_name = args.served_model_name or args.model
    # A backlog of 128, like uvicorn's default (2048 is vLLM's); http.server's 5 would reset the
    # probe's concurrent bursts before the handler threads accept them.
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever(poll_interval=0.05)
    server.server_close()
    log("INFO", "launcher.py:80", "Shutting down FastAPI HTTP server.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
