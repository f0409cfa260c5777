"""``llmbench mock``'s options, declared once (they are the mock's): the command line spreads
them into ``llmbench mock``, the Python API takes them as ``llmbench.mock(**options)``.

``prepare`` checks them and builds the MockConfig (or fits and saves a profile, --save-profile);
``serve`` runs the mock in this process until Ctrl-C, as ``llmbench mock`` does.
"""

import dataclasses
import math
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

from llmbench import options as opt
from llmbench.options import Layout, OptionGroup, UsageError, _opt


@dataclasses.dataclass(eq=False)
class MockOptions(OptionGroup):
    """Every option of ``llmbench mock``; None: the profile's (or the engine's) value."""

    ttft_ms: Annotated[Optional[float], _opt("Time to first token when idle (ms).", "Timing")] = None
    itl_ms: Annotated[Optional[float], _opt("Gap between tokens (ms).", "Timing")] = None
    tokens_per_s: Annotated[Optional[float], _opt("Alternative to --itl-ms.", "Timing")] = None
    tokens: Annotated[Optional[int], _opt("Reply length when the request sets none.", "Timing")] = None
    natural_tokens: Annotated[Optional[int], _opt("Stop early here (EOS) unless ignore_eos.", "Timing")] = None
    chunk_tokens: Annotated[Optional[int], _opt("Tokens per streamed event.", "Timing")] = None
    jitter: Annotated[Optional[float], _opt("+- fraction of randomness on each delay.", "Timing")] = None
    models: Annotated[Optional[str], _opt("Model names served, comma-separated.", "Server")] = None
    seed: Annotated[Optional[int], _opt("Seed for jitter and faults.", "Timing")] = None
    parallel: Annotated[Optional[int], _opt("Slots served at once (0 = unlimited).", "Capacity")] = None
    max_queue: Annotated[Optional[int], _opt("Waiting requests before rejecting (0 = unlimited).", "Capacity")] = None
    prefill_ms_per_token: Annotated[Optional[float], _opt("Prefill time per uncached prompt token.", "Prefill", metavar="MS")] = None
    prefix_cache: Annotated[Optional[bool], _opt("Block-hashed LRU prefix cache.", "Prefix cache", "--prefix-cache/--no-prefix-cache")] = None
    cache_blocks: Annotated[Optional[int], _opt("Prefix cache capacity in 16-token blocks.", "Prefix cache")] = None
    kv_tokens: Annotated[Optional[int], _opt("KV budget in tokens shared by all sessions: each conversation's prefix (prompt and reply) stays cached until the least recently used are evicted to fit, so a session that comes back after others filled it re-prefills its whole context; cached tokens in every API's usage (0 = off; replaces --prefix-cache).", "Prefix cache", metavar="N")] = None
    batch_slowdown: Annotated[Optional[float], _opt("k in step = itl * (1 + k * (running - 1)).", "Capacity")] = None
    fault_500: Annotated[Optional[float], _opt("Probability of HTTP 500.", "Faults")] = None
    fault_429: Annotated[Optional[float], _opt("Probability of HTTP 429.", "Faults")] = None
    fault_cut: Annotated[Optional[float], _opt("Probability of a stream cut part-way.", "Faults")] = None
    fault_malformed: Annotated[Optional[float], _opt("Probability of a malformed event.", "Faults")] = None
    fault_error_event: Annotated[Optional[float], _opt("Probability of an error event in the stream.", "Faults")] = None
    fault_stall: Annotated[Optional[float], _opt("Probability of a mid-stream stall.", "Faults")] = None
    stall_ms: Annotated[Optional[float], _opt("Length of a stall.", "Faults")] = None
    fault_slow_first_byte: Annotated[Optional[float], _opt("Probability of a slow first byte.", "Faults")] = None
    slow_first_byte_ms: Annotated[Optional[float], _opt("Length of a slow first byte.", "Faults")] = None
    profile: Annotated[Optional[str], _opt("ollama | vllm | llamacpp presets, or a profile FILE (.json/.toml, from --save-profile).", "Timing")] = None
    replicas: Annotated[int, _opt("Independent servers on consecutive ports.", "Server")] = 1
    workers: Annotated[int, _opt("Worker processes sharing each port (SO_REUSEPORT, Linux), for more streams than one process serves. Each is a whole server: N replicas behind one port, each with its own --parallel slots, queue and caches.", "Server", metavar="N")] = 1
    host: Annotated[str, _opt("Address to bind.", "Server")] = "127.0.0.1"
    port: Annotated[int, _opt("First port (0 = any free).", "Server")] = 8000
    record: Annotated[Optional[Path], _opt("Log every request's real event send times here.", "Server")] = None
    record_prompts: Annotated[bool, _opt("Also log the request messages.", "Server", "--record-prompts")] = False
    like: Annotated[Optional[Path], _opt("Fit the mock to the real server of this run folder (a server twin).", "Twin")] = None
    save_profile: Annotated[Optional[Path], _opt("With --like: write the fitted profile (JSON) here and exit.", "Twin")] = None
    kv_capacity_tokens: Annotated[Optional[int], _opt("KV cache size in tokens: admission by blocks, preemption by recompute when full (0 = unlimited).", "Capacity")] = None
    block_tokens: Annotated[Optional[int], _opt("Tokens per KV / prefix-cache block.", "Capacity")] = None
    decode_ms_curve: Annotated[Optional[str], _opt("Decode step ms with 1,2,... sequences running, e.g. 12.6,42,58,65.", "Timing", metavar="MS,MS,...")] = None
    prefill_in_step: Annotated[Optional[bool], _opt("Prefill inside the shared steps, stalling running decodes (or apart).", "Prefill", "--prefill-in-step/--prefill-apart")] = None
    step_token_budget: Annotated[Optional[int], _opt("Tokens computed per step (chunked prefill; 0 = no limit).", "Prefill", metavar="N")] = None
    prefill_last_step: Annotated[Optional[bool], _opt("With --prefill-in-step: the last prompt tokens in a step of their own, as llama.cpp does for SWA models (fitted by --like).", "Prefill", "--prefill-last-step")] = None
    reasoning_tokens: Annotated[Optional[int], _opt("A reasoning model: N reasoning tokens before each answer, in the API's own field (reasoning_content; reasoning for the ollama profile's /v1; thinking on /api/chat).", "Timing", metavar="N")] = None
    image_tokens: Annotated[Optional[int], _opt("Prefill tokens each image part costs (default 256).", "Agents and RAG", metavar="N")] = None
    tool_call_share: Annotated[Optional[float], _opt("Of the requests that offer tools, the share that get a tool call (default 1).", "Agents and RAG")] = None
    invalid_json_share: Annotated[Optional[float], _opt("Of the structured-output replies, the share cut invalid (default 0).", "Agents and RAG")] = None
    embedding_dim: Annotated[Optional[int], _opt("/v1/embeddings: floats per vector (default 384).", "Agents and RAG", metavar="N")] = None
    embed_ms: Annotated[Optional[float], _opt("/v1/embeddings: fixed cost of a request (default 5).", "Agents and RAG", metavar="MS")] = None
    embed_ms_per_token: Annotated[Optional[float], _opt("/v1/embeddings: cost per input token of the batch (default 0.02).", "Agents and RAG", metavar="MS")] = None
    embed_shares_slots: Annotated[Optional[bool], _opt("Embeddings wait for the generation slots (one model, the default) or run beside them.", "Agents and RAG", "--embed-shares-slots/--embed-apart")] = None
    api_key: Annotated[Optional[str], _opt("Refuse requests without this key (Authorization: Bearer KEY or x-api-key: KEY, as llama.cpp's --api-key), with a 401 as each API words it.", "Server", "--api-key")] = None


MOCK = Layout((("options", MockOptions, None),))


@dataclasses.dataclass
class Prepared:
    """The mock's options, checked: its config and how to serve it; ``saved`` is the profile
    written by --like --save-profile (then there is nothing to serve)."""

    config: Any
    options: MockOptions
    saved: Optional[Path] = None


def prepare(o: MockOptions) -> Prepared:
    """Check every option (one UsageError line each) and build the MockConfig."""
    from llmbench.mock_server import PROFILES, make_config
    from llmbench.mock_server.fit import ProfileError, describe, fit_run, load_profile
    from llmbench.mock_server.fit import save_profile as write_profile

    for flag, v in (("--ttft-ms", o.ttft_ms), ("--itl-ms", o.itl_ms), ("--jitter", o.jitter),
                    ("--prefill-ms-per-token", o.prefill_ms_per_token),
                    ("--batch-slowdown", o.batch_slowdown), ("--stall-ms", o.stall_ms),
                    ("--slow-first-byte-ms", o.slow_first_byte_ms)):
        opt.number(v, flag, lo=0)
    for flag, v in (("--fault-500", o.fault_500), ("--fault-429", o.fault_429),
                    ("--fault-cut", o.fault_cut), ("--fault-malformed", o.fault_malformed),
                    ("--fault-error-event", o.fault_error_event), ("--fault-stall", o.fault_stall),
                    ("--fault-slow-first-byte", o.fault_slow_first_byte)):
        opt.number(v, flag, lo=0, hi=1)
    for flag, v in (("--tool-call-share", o.tool_call_share),
                    ("--invalid-json-share", o.invalid_json_share)):
        opt.number(v, flag, lo=0, hi=1)
    for flag, v in (("--embed-ms", o.embed_ms), ("--embed-ms-per-token", o.embed_ms_per_token)):
        opt.number(v, flag, lo=0)
    for flag, n, lo in (("--image-tokens", o.image_tokens, 0), ("--embedding-dim", o.embedding_dim, 1)):
        opt.count(n, flag, lo=lo, hi=100_000)
    for flag, n, lo in (("--tokens", o.tokens, 1), ("--natural-tokens", o.natural_tokens, 1),
                        ("--chunk-tokens", o.chunk_tokens, 1), ("--parallel", o.parallel, 0),
                        ("--max-queue", o.max_queue, 0), ("--cache-blocks", o.cache_blocks, 0),
                        ("--kv-tokens", o.kv_tokens, 0), ("--block-tokens", o.block_tokens, 1),
                        ("--reasoning-tokens", o.reasoning_tokens, 0)):
        opt.count(n, flag, lo=lo)
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
        cfg = make_config(profile, ttft_ms=o.ttft_ms, itl_ms=itl_ms, tokens=o.tokens,
                          natural_tokens=o.natural_tokens, chunk_tokens=o.chunk_tokens,
                          jitter=o.jitter, models=o.models, seed=o.seed, parallel=o.parallel,
                          max_queue=o.max_queue, prefill_ms_per_token=o.prefill_ms_per_token,
                          prefix_cache=o.prefix_cache, cache_blocks=o.cache_blocks,
                          batch_slowdown=o.batch_slowdown, fault_500=o.fault_500,
                          fault_429=o.fault_429, fault_cut=o.fault_cut,
                          fault_malformed=o.fault_malformed,
                          fault_error_event=o.fault_error_event, fault_stall=o.fault_stall,
                          stall_ms=o.stall_ms, fault_slow_first_byte=o.fault_slow_first_byte,
                          slow_first_byte_ms=o.slow_first_byte_ms, _learned=learned,
                          kv_capacity_tokens=o.kv_capacity_tokens, block_tokens=o.block_tokens,
                          decode_ms_curve=o.decode_ms_curve, prefill_in_step=o.prefill_in_step,
                          step_token_budget=o.step_token_budget,
                          prefill_last_step=o.prefill_last_step,
                          reasoning_tokens=o.reasoning_tokens, image_tokens=o.image_tokens,
                          tool_call_share=o.tool_call_share, invalid_json_share=o.invalid_json_share,
                          embedding_dim=o.embedding_dim, embed_ms=o.embed_ms,
                          embed_ms_per_token=o.embed_ms_per_token,
                          embed_shares_slots=o.embed_shares_slots, api_key=o.api_key,
                          kv_tokens=o.kv_tokens)
    except ValueError as exc:
        raise UsageError(str(exc))
    total = sum(getattr(cfg, f) for f in ("fault_500", "fault_429", "fault_cut", "fault_malformed",
                                          "fault_error_event", "fault_stall", "fault_slow_first_byte"))
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
