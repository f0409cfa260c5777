"""``llmbench mock``'s options, declared once (they are the mock's): the command line spreads
them into ``llmbench mock``, the Python API takes them as ``llmbench.mock(**options)``.
"""

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any, Optional

from llmbench import options as opt
from llmbench.options import FLAG, FLOAT, INT, PATH, Spec, UsageError, option


@dataclasses.dataclass(kw_only=True, eq=False)
class MockOptions(Spec):
    """Every option of ``llmbench mock``; None: the profile's (or the engine's) value."""

    command = "mock"

    ttft_ms: float | None = option("Time to first token when idle (ms).", "Timing", kind=FLOAT)
    itl_ms: float | None = option("Gap between tokens (ms).", "Timing", kind=FLOAT)
    tokens_per_s: float | None = option("Alternative to --itl-ms.", "Timing", kind=FLOAT)
    tokens: int | None = option("Reply length when the request sets none.", "Timing", kind=INT)
    natural_tokens: int | None = option("Stop early here (EOS) unless ignore_eos.", "Timing", kind=INT)
    chunk_tokens: int | None = option("Tokens per streamed event.", "Timing", kind=INT)
    jitter: float | None = option("+- fraction of randomness on each delay.", "Timing", kind=FLOAT)
    models: str | None = option("Model names served, comma-separated.", "Server")
    seed: int | None = option("Seed for jitter and faults.", "Timing", kind=INT)
    parallel: int | None = option("Slots served at once (0 = unlimited).", "Capacity", kind=INT)
    max_queue: int | None = option("Waiting requests before rejecting (0 = unlimited).", "Capacity", kind=INT)
    prefill_ms_per_token: float | None = option("Prefill time per uncached prompt token.", "Prefill", kind=FLOAT, metavar="MS")
    prefix_cache: bool | None = option("Block-hashed LRU prefix cache.", "Prefix cache", "--prefix-cache/--no-prefix-cache", kind=FLAG)
    cache_blocks: int | None = option("Prefix cache capacity in 16-token blocks.", "Prefix cache", kind=INT)
    kv_tokens: int | None = option("KV budget in tokens shared by all sessions: each conversation's prefix (prompt and reply) stays cached until the least recently used are evicted to fit, so a session that comes back after others filled it re-prefills its whole context; cached tokens in every API's usage (0 = off; replaces --prefix-cache).", "Prefix cache", kind=INT, metavar="N")
    cache_report: str | None = option("What chat and Ollama replies say of cached prompt tokens: usage (the count in usage, as vLLM; on /api too with --kv-tokens), none (no count: Ollama's /v1 before 0.34), evaluated (none, and /api's prompt eval count holds only the tokens evaluated: Ollama 0.30-0.33).", "Prefix cache", metavar="MODE")
    batch_slowdown: float | None = option("k in step = itl * (1 + k * (running - 1)).", "Capacity", kind=FLOAT)
    decode_after_close: bool | None = option("Go on decoding a request whose client closed the connection, holding its slot, as a server that does not watch its connections does (default: drop it at once, freeing its slot, as vLLM does).", "Capacity", "--decode-after-close/--drop-on-close", kind=FLAG)
    fault_500: float | None = option("Probability of HTTP 500.", "Faults", kind=FLOAT)
    fault_429: float | None = option("Probability of HTTP 429.", "Faults", kind=FLOAT)
    fault_cut: float | None = option("Probability of a stream cut part-way.", "Faults", kind=FLOAT)
    fault_malformed: float | None = option("Probability of a malformed event.", "Faults", kind=FLOAT)
    fault_error_event: float | None = option("Probability of an error event in the stream.", "Faults", kind=FLOAT)
    fault_stall: float | None = option("Probability of a mid-stream stall.", "Faults", kind=FLOAT)
    stall_ms: float | None = option("Length of a stall.", "Faults", kind=FLOAT)
    fault_slow_first_byte: float | None = option("Probability of a slow first byte.", "Faults", kind=FLOAT)
    slow_first_byte_ms: float | None = option("Length of a slow first byte.", "Faults", kind=FLOAT)
    profile: str | None = option("ollama | vllm | llamacpp presets, or a profile FILE (.json/.toml, from --save-profile).", "Timing")
    replicas: int = option("Independent servers on consecutive ports.", "Server", kind=INT, default=1)
    workers: int = option("Worker processes sharing each port (SO_REUSEPORT, Linux), for more streams than one process serves. Each is a whole server: N replicas behind one port, each with its own --parallel slots, queue and caches.", "Server", kind=INT, default=1, metavar="N")
    host: str = option("Address to bind.", "Server", default="127.0.0.1")
    port: int = option("First port (0 = any free).", "Server", kind=INT, default=8000)
    record: Path | str | None = option("Log every request's real event send times here.", "Server", kind=PATH)
    record_prompts: bool = option("Also log the request messages.", "Server", "--record-prompts", kind=FLAG, default=False)
    like: Path | str | None = option("Fit the mock to the real server of this run folder (a server twin).", "Twin", kind=PATH)
    save_profile: Path | str | None = option("With --like: write the fitted profile (JSON) here and exit.", "Twin", kind=PATH)
    kv_capacity_tokens: int | None = option("KV cache size in tokens: admission by blocks, preemption by recompute when full (0 = unlimited).", "Capacity", kind=INT)
    block_tokens: int | None = option("Tokens per KV / prefix-cache block.", "Capacity", kind=INT)
    decode_ms_curve: str | None = option("Decode step ms with 1,2,... sequences running, e.g. 12.6,42,58,65.", "Timing", metavar="MS,MS,...")
    prefill_in_step: bool | None = option("Prefill inside the shared steps, stalling running decodes (or apart).", "Prefill", "--prefill-in-step/--prefill-apart", kind=FLAG)
    step_token_budget: int | None = option("Tokens computed per step (chunked prefill; 0 = no limit).", "Prefill", kind=INT, metavar="N")
    prefill_last_step: bool | None = option("With --prefill-in-step: the last prompt tokens in a step of their own, as llama.cpp does for SWA models (fitted by --like).", "Prefill", "--prefill-last-step", kind=FLAG)
    reasoning_tokens: int | None = option("A reasoning model: N reasoning tokens before each answer, in the API's own field (reasoning_content; reasoning for the ollama profile's /v1; thinking on /api/chat).", "Timing", kind=INT, metavar="N")
    image_tokens: int | None = option("Prefill tokens each image part costs (default 256).", "Agents and RAG", kind=INT, metavar="N")
    tool_call_share: float | None = option("Of the requests that offer tools, the share that get a tool call (default 1).", "Agents and RAG", kind=FLOAT)
    invalid_json_share: float | None = option("Of the structured-output replies, the share cut invalid (default 0).", "Agents and RAG", kind=FLOAT)
    embedding_dim: int | None = option("/v1/embeddings: floats per vector (default 384).", "Agents and RAG", kind=INT, metavar="N")
    embed_ms: float | None = option("/v1/embeddings: fixed cost of a request (default 5).", "Agents and RAG", kind=FLOAT, metavar="MS")
    embed_ms_per_token: float | None = option("/v1/embeddings: cost per input token of the batch (default 0.02).", "Agents and RAG", kind=FLOAT, metavar="MS")
    embed_shares_slots: bool | None = option("Embeddings wait for the generation slots (one model, the default) or run beside them.", "Agents and RAG", "--embed-shares-slots/--embed-apart", kind=FLAG)
    context: int | None = option("Context window in tokens: a prompt of this many tokens or more is refused with a 400, as llama.cpp refuses one that fills n_ctx (0 = no limit).", "Capacity", kind=INT, metavar="N")
    reset_fails: bool | None = option("POST /admin/reset_cache answers success but keeps the cache (a reset that did not take).", "Faults", "--reset-fails", kind=FLAG)
    api_key: str | None = option("Refuse requests without this key (Authorization: Bearer KEY or x-api-key: KEY, as llama.cpp's --api-key), with a 401 as each API words it.", "Server", "--api-key")


MOCK = MockOptions          # the mock's spec, by its old name

# the options that say how to serve (or what to fit), not how the mock behaves
NOT_CONFIG = frozenset({"itl_ms", "tokens_per_s", "profile", "replicas", "workers", "host",
                        "port", "record", "record_prompts", "like", "save_profile"})
# the counts prepare checks at least 1 (the others at least 0), and those it leaves to others:
# the seed is any int, --replicas, --workers and --port have their own words, the KV capacity
# and the step budget MockConfig's
_INT_AT_LEAST_1 = frozenset({"tokens", "natural_tokens", "chunk_tokens", "block_tokens",
                             "embedding_dim"})
_INT_UNCHECKED = frozenset({"seed", "replicas", "workers", "port", "kv_capacity_tokens",
                            "step_token_budget"})


@dataclasses.dataclass
class Prepared:
    """The mock's options, checked: its config and how to serve it; ``saved`` is the profile
    written by --like --save-profile (then there is nothing to serve)."""

    config: Any
    options: MockOptions
    saved: Optional[Path] = None


def _check_numbers(o: MockOptions) -> None:
    """Every float at least 0 (a probability or a share at most 1; --tokens-per-s apart),
    every count in its range: one UsageError line naming the flag."""
    for f in dataclasses.fields(o):
        spec, v = opt.opt_of(f), getattr(o, f.name)
        if spec.kind is FLOAT and f.name != "tokens_per_s":
            share = f.name.startswith("fault_") or f.name.endswith("_share")
            opt.number(v, spec.flag(f.name), lo=0, hi=1 if share else None)
        elif spec.kind is INT and f.name not in _INT_UNCHECKED:
            opt.count(v, spec.flag(f.name), lo=1 if f.name in _INT_AT_LEAST_1 else 0,
                      hi=100_000 if f.name in ("image_tokens", "embedding_dim") else None)


def prepare(o: MockOptions) -> Prepared:
    """Check every option (one UsageError line each) and build the MockConfig."""
    from llmbench.mock_server import PROFILES, make_config
    from llmbench.mock_server.fit import ProfileError, describe, fit_run, load_profile
    from llmbench.mock_server.fit import save_profile as write_profile

    _check_numbers(o)
    if o.replicas < 1:
        raise UsageError("--replicas must be at least 1")
    opt.count(o.workers, "--workers", lo=1)
    if o.workers > 1:
        from llmbench.mock_server.server import REUSEPORT
        if not REUSEPORT:
            raise UsageError("--workers needs SO_REUSEPORT as Linux has it; use --workers 1 "
                             "or --replicas N (one port each)")
    opt.count(o.port, "--port", lo=0, hi=65536 - o.replicas)
    itl_ms = o.itl_ms
    if o.tokens_per_s is not None:
        if not o.tokens_per_s > 0 or not math.isfinite(o.tokens_per_s):
            raise UsageError("--tokens-per-s must be a finite number above 0")
        itl_ms = 1000.0 / o.tokens_per_s
    if o.save_profile is not None and o.like is None:
        raise UsageError("--save-profile needs --like RUN_DIR (the run to fit)")
    from llmbench.mock_server.engine import CACHE_REPORTS
    if o.cache_report is not None and o.cache_report not in CACHE_REPORTS:
        raise UsageError(f"--cache-report {o.cache_report[:40]!r}: choose one of "
                         + ", ".join(CACHE_REPORTS))
    learned: dict = {}
    profile = o.profile
    try:
        if profile and profile not in PROFILES and (Path(profile).suffix.lower() in (".json", ".toml")
                                                    or Path(profile).exists()):
            learned.update(load_profile(Path(profile)))
            profile = None
        if o.like is not None:
            fitted = fit_run(o.like)
            print(describe(fitted), file=sys.stderr)
            if o.save_profile is not None:
                write_profile(fitted, o.save_profile)
                return Prepared(None, o, Path(o.save_profile))
            learned.update(fitted.mock)
    except ProfileError as exc:
        raise UsageError(f"{exc} (--profile/--like)")
    try:
        # every option not about serving (or fitting) is the MockConfig field of its name
        settings = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)
                    if f.name not in NOT_CONFIG}
        cfg = make_config(profile, _learned=learned, **settings, itl_ms=itl_ms)
    except ValueError as exc:
        raise UsageError(str(exc))
    total = sum(getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name.startswith("fault_"))
    if total > 1:
        raise UsageError("fault probabilities add up to more than 1")
    if o.workers > 1 and (cfg.parallel or cfg.max_queue or cfg.kv_capacity_tokens or
                          cfg.batch_slowdown or cfg.decode_ms_curve or cfg.prefix_cache or
                          cfg.kv_tokens):
        print(f"note: --workers {o.workers}: each worker is a whole server with its own "
              "slots, queue, KV budget and prefix cache, and the kernel spreads connections over "
              f"them: {o.workers} replicas behind one port, not one bigger server", file=sys.stderr)
    return Prepared(cfg, o)


def serve(o: MockOptions) -> None:
    """``llmbench mock``: serve in this process until Ctrl-C (a UsageError or CommandFailed
    line when it cannot)."""
    import asyncio
    from llmbench.errors import failure, EXIT_USAGE
    from llmbench.mock_server.server import WorkerFailed, serve_forever
    p = prepare(o)
    if p.saved is not None:
        print(str(p.saved))
        return
    try:
        asyncio.run(serve_forever(p.config, o.replicas, o.host, o.port,
                                  str(o.record) if o.record else None, o.record_prompts,
                                  announce=False, workers=o.workers))
    except KeyboardInterrupt:
        pass
    except WorkerFailed as exc:
        raise failure(str(exc), EXIT_USAGE)
    except OSError as exc:
        raise failure(f"cannot listen on {o.host}:{o.port} ({exc.strerror or exc}); pick "
                      "another --port", EXIT_USAGE)
