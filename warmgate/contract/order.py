"""The versioned warmup plan: load the operator's JSON, validate it clearly, digest bucket lists."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warmgate.contract.drafterwarm import DrafterWarmupSpec, parse_drafter_warmup
from warmgate.contract.schema import Fields, PlanError, fields_json
from warmgate.contract.shardspec import SHARD, ShardSpec, parse_shard
from warmgate.contract.sweepplan import (
    Graph,
    HookSpec,
    SweepSpec,
    graphs,
    parse_hook,
    parse_sweep,
)

PLAN_FORMAT_VERSION = 1
DEFAULT_SWEEP_S = 1800.0
# The cache section's optional keys: who uses the entries, the namespace they were listed in.
CACHE_USERS = "users"
CACHE_NAMESPACE = "namespace"
DIGEST_ALGORITHM = "sha256-canonical-json-v1"
# A cache key names one folder on the shared volume, so it must never traverse or hide.
KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
LIST_NAMES = ("prompt", "seed_decode", "decode")

__all__ = ["DIGEST_ALGORITHM", "PLAN_FORMAT_VERSION", "PlanError", "WarmupOrder", "bucket_digest"]


def bucket_digest(buckets: Iterable[Sequence[int]]) -> str:
    """Digest a bucket list: sha256 over the compact JSON of the rows sorted as int tuples.

    Example: [(1, 128, 0), (1, 1, 1)] -> sha256(b"[[1,1,1],[1,128,0]]") -> "sha256:<64 hex>".
    The operator reproduces this with the same two lines (docs/runner.md, "Digests").
    """
    rows = sorted(tuple(int(v) for v in row) for row in buckets)
    text = json.dumps([list(row) for row in rows], separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class ListExpectation:
    """The expected length and digest of one generated bucket list."""

    count: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "digest": self.digest}


@dataclass(frozen=True)
class EngineLaunch:
    """How to start the engine: argv prefix, model, flags and environment."""

    command: tuple[str, ...]
    model: str
    served_model_name: str
    host: str
    port: int
    tensor_parallel_size: int
    max_model_len: int | None
    speculative_config: dict[str, Any] | None
    num_gpu_blocks_override: int | None
    args: tuple[str, ...]
    env: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        """The plan's ``engine`` object, field for field (tuples as lists)."""
        return {
            "command": list(self.command),
            "model": self.model,
            "served_model_name": self.served_model_name,
            "host": self.host,
            "port": self.port,
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "speculative_config": self.speculative_config,
            "num_gpu_blocks_override": self.num_gpu_blocks_override,
            "args": list(self.args),
            "env": self.env,
        }


@dataclass(frozen=True)
class BucketSpec:
    """The seed bucket file and the lists the engine is expected to generate from it."""

    seed_file_text: str
    expected: dict[str, ListExpectation]
    abort_on_mismatch: bool
    # Shapes no bucket the engine's warmup compiles can serve (the operator's UnwarmableShapes):
    # the engine logging them is a known gap, not an unwarmed shape (docs/runner.md).
    known_unwarmable: tuple[Graph, ...] = ()

    @property
    def known_configs(self) -> frozenset[str]:
        """The known-unwarmable shapes as the engine logs them: "('prompt', 1, 8192, 1)"."""
        return frozenset(repr(g) for g in self.known_unwarmable)

    def to_json(self) -> dict[str, Any]:
        """``known_unwarmable`` only when there are some: other plans keep their text."""
        doc: dict[str, Any] = {
            "seed_file_text": self.seed_file_text,
            "expected": {name: e.to_json() for name, e in self.expected.items()},
            "abort_on_mismatch": self.abort_on_mismatch,
        }
        if self.known_unwarmable:
            doc["known_unwarmable"] = [list(g) for g in self.known_unwarmable]
        return doc


@dataclass(frozen=True)
class CacheUsers:
    """Who uses recipe-cache entries in the namespace (plan.json cache.users), as the operator
    read it at ``as_of_unix`` (its clock): the UIDs of the SpecDecodeDeployments that exist
    (``owners``) and the cache keys any of them warms or serves (``keys``: status.warmup.cacheKey,
    the serving Deployments' cache-key annotation). The runner deletes an entry only when its
    owner is not among them, no live object references its key, and it was published well
    before ``as_of_unix`` (docs/runner.md, "Cache"). One type for both sides: the operator
    builds it (`listed`), writes it (`to_json`), the runner reads it (`parse_plan`)."""

    owners: frozenset[str]
    keys: frozenset[str]
    as_of_unix: int

    @classmethod
    def listed(
        cls, owners: Iterable[object], keys: Iterable[object], as_of_unix: int
    ) -> CacheUsers:
        """From what a listing found, which anyone who may write those objects may have written:
        only non-empty text counts, and a key only when it can name a cache entry (KEY_RE). A
        key that cannot is dropped, not passed on: no entry is ever published under it, so
        keeping it protects nothing, while the runner refuses a plan that carries one."""
        return cls(
            owners=frozenset(o for o in owners if isinstance(o, str) and o),
            keys=frozenset(k for k in keys if isinstance(k, str) and KEY_RE.match(k)),
            as_of_unix=as_of_unix,
        )

    def with_user(self, owner: str | None, key: str) -> CacheUsers:
        """These users and one more (a listing may be older than the object that reads it)."""
        return CacheUsers.listed((*self.owners, owner), (*self.keys, key), self.as_of_unix)

    def to_json(self) -> dict[str, Any]:
        """cache.users as plan.json carries it (sorted: one set of users, one text)."""
        return {
            "owners": sorted(self.owners),
            "keys": sorted(self.keys),
            "as_of_unix": self.as_of_unix,
        }


@dataclass(frozen=True)
class CacheSpec:
    """Where the recipe cache lives locally and on the shared volume."""

    volume_dir: Path
    key: str
    local_dir: Path
    size_mb: int
    reuse_existing: bool
    # Entries this owner keeps after publishing (0: prune nothing); see cache.prune.
    owner: str | None = None
    retain: int = 0
    # The live users (None: the operator read none, so no entry of another owner is pruned),
    # and the namespace they were listed in (written into the manifests this runner publishes).
    users: CacheUsers | None = None
    namespace: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``namespace`` and ``users`` only when known (neither names the Job: OUTSIDE_CONTENT)."""
        doc: dict[str, Any] = {
            "volume_dir": str(self.volume_dir),
            "key": self.key,
            "local_dir": str(self.local_dir),
            "size_mb": self.size_mb,
            "reuse_existing": self.reuse_existing,
            "owner": self.owner,
            "retain": self.retain,
        }
        if self.namespace:
            doc[CACHE_NAMESPACE] = self.namespace
        if self.users is not None:
            doc[CACHE_USERS] = self.users.to_json()
        return doc


@dataclass(frozen=True)
class ProbeStep:
    """One burst of concurrent completions designed to hit a decode batch size and context."""

    name: str
    concurrency: int
    prompt_tokens: int
    max_tokens: int
    token_pattern: str

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class ProbeSpec:
    """The bounded probe workload."""

    steps: tuple[ProbeStep, ...]
    max_requests: int
    request_timeout_s: float
    token_id_min: int
    token_id_max: int

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": [step.to_json() for step in self.steps],
            "max_requests": self.max_requests,
            "request_timeout_s": self.request_timeout_s,
            "token_id_min": self.token_id_min,
            "token_id_max": self.token_id_max,
        }


@dataclass(frozen=True)
class Timeouts:
    """Deadlines in seconds; total bounds the whole run."""

    total_s: float
    facts_s: float
    startup_s: float
    probe_s: float
    stop_grace_s: float
    # The drafter sweep's deadline; None: none given (a plan without a sweep), DEFAULT_SWEEP_S.
    sweep_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "total_s": self.total_s,
            "facts_s": self.facts_s,
            "stop_grace_s": self.stop_grace_s,
        }
        if self.sweep_s is not None:
            doc["sweep_s"] = self.sweep_s
        return {**doc, "probe_s": self.probe_s, "startup_s": self.startup_s}


@dataclass(frozen=True)
class WarmupOrder:
    """A validated plan; ``plan_hash`` is the digest of the plan file's canonical JSON."""

    plan_id: str
    engine: EngineLaunch
    buckets: BucketSpec
    kv_blocks_expected: int | None
    cache: CacheSpec
    probe: ProbeSpec
    timeouts: Timeouts
    report_dir: Path
    termination_log: Path
    work_dir: Path
    require_device: bool
    plan_hash: str
    drafter_sweep: SweepSpec | None = None
    drafter_hook: HookSpec = field(default_factory=HookSpec)
    # Every drafter shape the engine plugin warms directly (issue 33); None: no direct warmup.
    drafter_warmup: DrafterWarmupSpec | None = None
    # Run a CPU build of vLLM to the cpu_engine outcome instead of refusing it (docs/runner.md,
    # "A CPU engine"); a Gaudi engine's run is the same either way.
    accept_cpu_engine: bool = False
    # One engine of a sharded warmup, or the merge after it (issue 38; contract/shardspec.py).
    shard: ShardSpec | None = None

    def to_json(self) -> dict[str, Any]:
        """The plan document as the operator writes it (plan.json; `plan_hash` is the
        reader's digest of it, not a field). Optional fields only when set, so a plan that
        does not use them keeps its text, and the name of its Job."""
        doc: dict[str, Any] = {
            "format_version": PLAN_FORMAT_VERSION,
            "plan_id": self.plan_id,
            "engine": self.engine.to_json(),
            "buckets": self.buckets.to_json(),
            "kv_blocks_expected": self.kv_blocks_expected,
            "cache": self.cache.to_json(),
            "probe": self.probe.to_json(),
            "timeouts": self.timeouts.to_json(),
            "report": {"dir": str(self.report_dir), "termination_log": str(self.termination_log)},
            "work_dir": str(self.work_dir),
            "require_device": self.require_device,
            "drafter_hook": self.drafter_hook.to_json(),
        }
        if self.drafter_sweep is not None:
            doc["drafter_sweep"] = self.drafter_sweep.to_json()
        if self.drafter_warmup is not None:
            doc["drafter_warmup"] = self.drafter_warmup.to_json()
        if self.accept_cpu_engine:
            doc["accept_cpu_engine"] = True
        if self.shard is not None:
            doc[SHARD] = self.shard.to_json()
        return doc


def load_plan(path: Path) -> WarmupOrder:
    """Read and validate a plan file, raising PlanError with every problem found."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError([f"cannot read plan {path}: {exc.strerror or exc}"]) from exc
    except ValueError as exc:
        raise PlanError([f"plan {path} is not valid JSON: {exc}"]) from exc
    return parse_plan(raw)


def parse_plan(raw: object) -> WarmupOrder:
    """Validate a decoded plan document; unknown format versions are refused first."""
    _check_version(raw)
    errors: list[str] = []
    top = Fields(raw, "plan", errors)
    top.integer("format_version")
    plan = _build(top, _canonical_hash(raw))
    top.finish()
    if errors:
        raise PlanError(errors)
    return plan


def _check_version(raw: object) -> None:
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if version != PLAN_FORMAT_VERSION:
        raise PlanError(
            [
                f"plan.format_version: this runner reads format {PLAN_FORMAT_VERSION}, "
                f"the plan says {version!r}; use a runner built for that format"
            ]
        )


def _canonical_hash(raw: object) -> str:
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def _build(top: Fields, plan_hash: str) -> WarmupOrder:
    engine = _engine(top.obj("engine"))
    cache = _cache(top.obj("cache"))
    work_dir = Path(top.text("work_dir", "/tmp/warmgate"))
    report = top.obj("report", required=False)
    plan = WarmupOrder(
        plan_id=top.text("plan_id"),
        engine=engine,
        buckets=_buckets(top.obj("buckets")),
        kv_blocks_expected=top.opt_integer("kv_blocks_expected", lo=1),
        cache=cache,
        probe=_probe(top.obj("probe"), engine.max_model_len),
        timeouts=_timeouts(top.obj("timeouts", required=False)),
        report_dir=Path(report.text("dir", str(cache.volume_dir / "reports"))),
        termination_log=Path(report.text("termination_log", "/dev/termination-log")),
        work_dir=work_dir,
        require_device=top.boolean("require_device", True),
        plan_hash=plan_hash,
        drafter_sweep=parse_sweep(top.obj("drafter_sweep", required=False), engine.max_model_len),
        drafter_hook=parse_hook(top.obj("drafter_hook", required=False)),
        drafter_warmup=parse_drafter_warmup(top.obj("drafter_warmup", required=False)),
        accept_cpu_engine=top.boolean("accept_cpu_engine", False),
        shard=parse_shard(top.obj(SHARD, required=False)),
    )
    report.finish()
    return plan


def _engine(f: Fields) -> EngineLaunch:
    command = f.text_list("command", min_len=1)
    model = f.text("model")
    env = f.text_map("env", {})
    _refuse_env(f, env)
    spec = f.opt_object("speculative_config")
    result = EngineLaunch(
        command=tuple(command),
        model=model,
        served_model_name=f.text("served_model_name", model),
        host=f.text("host", "127.0.0.1"),
        port=f.integer("port", 8000, lo=1, hi=65535),
        tensor_parallel_size=f.integer("tensor_parallel_size", 1, lo=1),
        max_model_len=f.opt_integer("max_model_len", lo=1),
        speculative_config=spec,
        num_gpu_blocks_override=f.opt_integer("num_gpu_blocks_override", lo=1),
        args=tuple(f.text_list("args", default=[])),
        env=env,
    )
    _refuse_args(f, result.args)
    f.finish()
    return result


# The runner owns these: warmup must run (§2.2 VLLM_SKIP_WARMUP), the seed file and the recipe
# cache location are set from the plan's own fields (§2.6, §4.6), and vLLM's logging must print
# the lines the verdict reads (engine.LOGGING_ENV).
RUNNER_OWNED_ENV = (
    "VLLM_SKIP_WARMUP",
    "VLLM_BUCKETING_FROM_FILE",
    "PT_HPU_RECIPE_CACHE_CONFIG",
    "VLLM_CONFIGURE_LOGGING",
    "VLLM_LOGGING_LEVEL",
    "VLLM_LOGGING_PREFIX",
    "VLLM_LOGGING_STREAM",
    "VLLM_LOGGING_COLOR",
    "VLLM_LOGGING_CONFIG_PATH",
    "NO_COLOR",
)
# vllm-gaudi skips graph warmup under --enforce-eager yet logs "Warmup finished" (G26
# hpu_model_runner.py:6171, 6231 / Gmain:6246, 6306): nothing would be warmed.
_REFUSED_ARGS = ("--enforce-eager",)


def _refuse_env(f: Fields, env: dict[str, str]) -> None:
    for name in RUNNER_OWNED_ENV:
        if name in env:
            f.error(f"env.{name}: set by the runner; remove it from engine.env")


def _refuse_args(f: Fields, args: Sequence[str]) -> None:
    for arg in args:
        flag = arg.replace("_", "-")
        if any(flag == r or flag.startswith(r + "=") for r in _REFUSED_ARGS):
            f.error(f"args: {arg} skips graph warmup, so nothing would be warmed; remove it")


def _buckets(f: Fields) -> BucketSpec:
    expected_fields = f.obj("expected")
    expected: dict[str, ListExpectation] = {}
    for name in LIST_NAMES:
        sub = expected_fields.obj(name, required=False)
        if sub.present:
            expected[name] = _expectation(sub)
    expected_fields.finish()
    known = graphs(f, "known_unwarmable")
    result = BucketSpec(
        seed_file_text=f.text("seed_file_text"),
        expected=expected,
        abort_on_mismatch=f.boolean("abort_on_mismatch", True),
        known_unwarmable=known,
    )
    f.finish()
    return result


def _expectation(f: Fields) -> ListExpectation:
    digest = f.text("digest")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        f.error(f"digest: expected 'sha256:' and 64 lowercase hex digits, got {digest!r}")
    result = ListExpectation(count=f.integer("count", lo=0), digest=digest)
    f.finish()
    return result


def _owned_dir(f: Fields, key: str, default: str | None = None) -> Path:
    """An absolute folder at least two levels deep: the runner empties local_dir before use."""
    path = Path(f.text(key) if default is None else f.text(key, default))
    if not path.is_absolute() or len(path.parts) < 3:
        f.error(f"{key}: expected an absolute path at least two levels deep, got '{path}'")
    return path


def _cache(f: Fields) -> CacheSpec:
    key = f.text("key")
    if not KEY_RE.match(key):
        f.error(f"key: {key!r} must match {KEY_RE.pattern}")
    result = CacheSpec(
        volume_dir=_owned_dir(f, "volume_dir"),
        key=key,
        local_dir=_owned_dir(f, "local_dir", "/tmp/warmgate/recipe_cache"),
        size_mb=f.integer("size_mb", 8192, lo=1),
        reuse_existing=f.boolean("reuse_existing", True),
        owner=f.text("owner", None) or None,
        retain=f.integer("retain", 0, lo=0, hi=1024),
        users=_users(f.obj(CACHE_USERS, required=False)),
        namespace=f.text(CACHE_NAMESPACE, None) or None,
    )
    f.finish()
    return result


def _users(f: Fields) -> CacheUsers | None:
    if not f.present:
        return None
    keys = f.text_list("keys")
    for key in keys:
        if not KEY_RE.match(key):
            f.error(f"keys: {key!r} must match {KEY_RE.pattern}")
    users = CacheUsers(
        owners=frozenset(f.text_list("owners")),
        keys=frozenset(keys),
        as_of_unix=f.integer("as_of_unix", lo=0),
    )
    f.finish()
    return users


def _probe(f: Fields, max_model_len: int | None) -> ProbeSpec:
    steps = tuple(_step(s, max_model_len) for s in f.obj_list("steps"))
    spec = ProbeSpec(
        steps=steps,
        max_requests=f.integer("max_requests", 512, lo=0),
        request_timeout_s=f.number("request_timeout_s", 300.0, lo=0.1),
        token_id_min=f.integer("token_id_min", 100, lo=0),
        token_id_max=f.integer("token_id_max", 20000, lo=1),
    )
    total = sum(s.concurrency for s in steps)
    if total > spec.max_requests:
        f.error(f"steps: {total} requests in all exceed max_requests {spec.max_requests}")
    if spec.token_id_min > spec.token_id_max:
        f.error("token_id_min: must not exceed token_id_max")
    f.finish()
    return spec


def _step(f: Fields, max_model_len: int | None) -> ProbeStep:
    step = ProbeStep(
        name=f.text("name"),
        concurrency=f.integer("concurrency", lo=1, hi=1024),
        prompt_tokens=f.integer("prompt_tokens", lo=1),
        max_tokens=f.integer("max_tokens", lo=1),
        token_pattern=f.choice("token_pattern", ("varied", "repeat"), "varied"),
    )
    if max_model_len is not None and step.prompt_tokens + step.max_tokens > max_model_len:
        f.error(f"prompt_tokens + max_tokens exceed engine.max_model_len {max_model_len}")
    f.finish()
    return step


def _timeouts(f: Fields) -> Timeouts:
    result = Timeouts(
        total_s=f.number("total_s", 4 * 3600.0, lo=1.0),
        facts_s=f.number("facts_s", 300.0, lo=1.0),
        startup_s=f.number("startup_s", 3 * 3600.0, lo=1.0),
        probe_s=f.number("probe_s", 1800.0, lo=1.0),
        stop_grace_s=f.number("stop_grace_s", 60.0, lo=0.1),
        sweep_s=f.number("sweep_s", lo=1.0) if f.value("sweep_s", None) is not None else None,
    )
    f.finish()
    return result
