"""The mock's physics: slots with a FIFO queue, prefill, a prefix cache, shared decode steps,
and optionally a bounded KV cache (admission by blocks, preemption by recompute) and prefill
computed inside the shared steps with a per-step token budget (chunked prefill).

Independent of HTTP: a route holds one ``Seq`` per request and asks the engine for admission,
its first token and each next token; the engine keeps every counter. Everything is on one asyncio
loop; no locks.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field, fields
from typing import Any

from .histogram import Histogram
from .kvcache import Held, KvCache

perf_counter = time.perf_counter

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def mock_tokens(text: str) -> list[str]:
    """The mock's tokenizer: words and punctuation. Close enough to BPE counts for load shape."""
    return _TOKEN_RE.findall(text)


# MockConfig.cache_report's values
CACHE_REPORTS = ("usage", "none", "evaluated")


@dataclass
class MockConfig:
    """The mock server's behaviour: latencies, slots, queue, cache and faults. A field that is
    an option means what ``llmbench mock --help`` says of it; comments add the rest."""
    ttft_ms: float = 100.0
    itl_ms: float = 10.0
    tokens: int = 64                    # reply length when the request sets none
    natural_tokens: int = 0             # >0: stop early ("EOS") here unless ignore_eos
    chunk_tokens: int = 1               # tokens per streamed event
    jitter: float = 0.0                 # +- fraction applied to prefill and each decode step
    models: list[str] = field(default_factory=lambda: ["mock"])
    seed: int = 0
    parallel: int = 0                   # slots; 0 = unlimited
    max_queue: int = 0                  # waiting requests before rejecting; 0 = unlimited
    prefill_ms_per_token: float = 0.0
    prefix_cache: bool = False
    cache_blocks: int = 4096
    block_tokens: int = 16
    batch_slowdown: float = 0.0         # step = itl * (1 + k * (decoding - 1))
    kv_capacity_tokens: int = 0         # KV cache size; >0: admission by blocks, preemption
    kv_tokens: int = 0                  # shared KV budget (kvcache.py); >0 replaces prefix_cache
    fault_500: float = 0.0
    fault_429: float = 0.0
    fault_cut: float = 0.0
    fault_malformed: float = 0.0
    fault_error_event: float = 0.0
    fault_stall: float = 0.0
    stall_ms: float = 2000.0
    fault_slow_first_byte: float = 0.0
    slow_first_byte_ms: float = 1000.0
    flavour: str = "vllm"               # what the server pretends to be: vllm, ollama, llamacpp
    version: str = "0.12.6"             # reported by /api/version
    # -- a fitted server (fit.py); the defaults keep the simple model above --------
    decode_ms_curve: list[float] = field(default_factory=list)  # step ms at 1, 2, ... decoding
    prefill_in_step: bool = False       # prefill is computed in the shared steps (stalls decode)
    step_token_budget: int = 0          # tokens computed per step (chunked prefill); 0 = no limit
    # with prefill_in_step: a prompt's last tokens get a shared step of their own, which costs
    # ttft_ms (llama.cpp computes the last few prompt tokens in a separate batch to checkpoint
    # its sliding-window cache); a prompt that arrives meanwhile puts its bulk into that step, so
    # the earlier prompt's first token waits for it: prefills under load slow each other down
    prefill_last_step: bool = False
    natural_tokens_dist: list[int] = field(default_factory=list)  # EOS reply lengths to draw from
    # reasoning tokens come on top of the answer's length and count in completion_tokens, as
    # vLLM counts them
    reasoning_tokens: int = 0
    # -- what agents and RAG send (issue 26) -----------------------------------------------------
    image_tokens: int = 256             # prefill tokens an image part costs (a vision encoder's)
    tool_call_share: float = 1.0        # of the requests that offer tools, the share that call one
    invalid_json_share: float = 0.0     # of the structured-output replies, the share cut invalid
    embedding_dim: int = 384            # /v1/embeddings: floats per vector
    embed_ms: float = 5.0               # /v1/embeddings: fixed cost of a request
    embed_ms_per_token: float = 0.02    # /v1/embeddings: cost per input token of the batch
    embed_shares_slots: bool = True     # embeddings wait for the generation slots (one model)
    decode_after_close: bool = False    # False: dropped at once, as vLLM and llama.cpp do
    cache_report: str = "usage"         # one of CACHE_REPORTS
    api_key: str = ""                   # asked of generation and embeddings requests only
    context: int = 0                    # the context window (llama.cpp's n_ctx); 0 = no limit
    reset_fails: bool = False           # found only by checking the cache (a probe's cached tokens)

    def update(self, changes: dict[str, Any]) -> None:
        """Apply runtime changes with type checks; raise ValueError naming the bad key."""
        types = {f.name: f.type for f in fields(self)}
        for key, value in changes.items():
            if key not in types:
                raise ValueError(f"unknown setting {key!r}; known: {', '.join(sorted(types))}")
            current = getattr(self, key)
            try:
                if isinstance(current, bool):
                    if not isinstance(value, bool):
                        raise TypeError
                elif isinstance(current, int):
                    value = int(value)
                elif isinstance(current, float):
                    value = float(value)
                elif isinstance(current, list):
                    items = value.split(",") if isinstance(value, str) else list(value)
                    kind = {"list[float]": float, "list[int]": int}.get(str(types[key]), str)
                    value = [kind(v) for v in items if not isinstance(v, str) or v.strip()]
                    if kind is not str and any(v < 0 for v in value):
                        raise ValueError(f"setting {key!r} must hold numbers >= 0")
                elif isinstance(current, str):
                    value = str(value)
            except (TypeError, ValueError):
                raise ValueError(f"setting {key!r} wants a {type(current).__name__}, got {value!r}")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"setting {key!r} must be >= 0")
            if key == "cache_report" and value not in CACHE_REPORTS:
                raise ValueError(f"setting 'cache_report' is {value!r}; choose one of "
                                 + ", ".join(CACHE_REPORTS))
            setattr(self, key, value)


PROFILES: dict[str, dict[str, Any]] = {
    # Ollama's defaults: one request at a time, 512 waiting, Ollama routes.
    "ollama": {"parallel": 1, "max_queue": 512, "ttft_ms": 60.0, "itl_ms": 8.0,
               "prefill_ms_per_token": 0.3, "prefix_cache": True, "flavour": "ollama",
               "models": ["qwen2.5:0.5b"], "tokens": 128},
    # vLLM: continuous batching, many sequences share each decode step.
    "vllm": {"parallel": 256, "max_queue": 0, "ttft_ms": 40.0, "itl_ms": 15.0,
             "batch_slowdown": 0.02, "prefill_ms_per_token": 0.05, "prefix_cache": True,
             "flavour": "vllm", "models": ["Qwen/Qwen2.5-0.5B-Instruct"]},
    # llama.cpp server: -np slots (4 with a unified KV cache by default), shared compute.
    "llamacpp": {"parallel": 4, "max_queue": 0, "ttft_ms": 50.0, "itl_ms": 10.0,
                 "batch_slowdown": 0.5, "prefill_ms_per_token": 0.2, "prefix_cache": True,
                 "flavour": "llamacpp", "models": ["qwen2.5-0.5b-instruct-q4_k_m.gguf"]},
}


class QueueFull(Exception):
    pass


class PrefixCache:
    """Block-hashed, bounded, LRU: a prompt's leading full blocks that are cached prefill free."""

    def __init__(self, capacity_blocks: int, block_tokens: int) -> None:
        self.capacity = capacity_blocks
        self.block = block_tokens
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def lookup_and_insert(self, tokens: list[str]) -> int:
        """Return how many leading tokens were cached, then cache all full blocks."""
        b = self.block
        h = 0
        hit = 0
        still_hitting = True
        blocks = self._blocks
        for i in range(0, len(tokens) - b + 1, b):
            h = hash((h, tuple(tokens[i:i + b])))
            if still_hitting and h in blocks:
                hit += b
                blocks.move_to_end(h)
            else:
                still_hitting = False
                blocks[h] = None
                if len(blocks) > self.capacity:
                    blocks.popitem(last=False)
        return hit

    def __len__(self) -> int:
        return len(self._blocks)


@dataclass
class Stats:
    """The mock's live state: requests running, decoding and waiting, cache use."""
    running: int = 0          # admitted (holding a slot and its KV blocks): prefill or decode
    decoding: int = 0
    waiting: int = 0
    rejected_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    cache_queries_total: int = 0
    cache_hits_total: int = 0
    preemptions_total: int = 0
    kv_tokens: int = 0        # tokens held by running sequences
    kv_blocks: int = 0        # blocks held by running sequences
    success_total: dict[str, int] = field(default_factory=dict)
    # generation requests whose client closed the connection before the reply was over
    # (queued, prefilling or streaming): a test compares it with the requests llmbench cancelled
    closed_by_client_total: int = 0


@dataclass(eq=False)
class Seq:
    """One request inside the engine: the tokens whose KV it holds and where it is."""
    prompt_tokens: int = 0
    context: int = 0          # tokens whose KV is held (prompt + generated), set at admission
    generated: int = 0
    blocks: int = 0
    order: int = 0            # admission order: the newest running sequence is preempted first
    running: bool = False
    decoding: bool = False
    preempted: bool = False
    prefill_left: int = 0
    bulk_done: bool = False   # prefill_last_step: the bulk is computed, its last step is next
    fut: asyncio.Future[bool] | None = None
    held: Held | None = None  # --kv-tokens: the prompt's blocks it holds in the KV budget
    cached: int = 0           # prompt tokens found cached (for /slots)
    n_predict: int = 0        # reply tokens asked (for /slots)


class Engine:
    """One replica's server state."""

    def __init__(self, config: MockConfig, replica: str = "replica-0") -> None:
        self.config = config
        self.replica = replica
        self.rng = random.Random(config.seed)
        self.stats = Stats()
        self.cache = PrefixCache(config.cache_blocks, config.block_tokens)
        self.kv: KvCache | None = (KvCache(config.kv_tokens, config.block_tokens)
                                   if config.kv_tokens > 0 else None)
        self._slot_waiters: deque[tuple[asyncio.Future[None], Seq]] = deque()
        self._running: set[Seq] = set()
        self._prefilling: list[Seq] = []
        self._step_waiters: list[tuple[asyncio.Future[bool], Seq]] = []
        self._step_task: asyncio.Task[None] | None = None
        self._step_wake: asyncio.Event | None = None
        self._order = 0
        self.h_ttft = Histogram([0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0])
        self.h_itl = Histogram([0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
                                1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0])
        self.h_queue = Histogram([0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                                  40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0])
        self.h_e2e = Histogram([0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                                40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0])

    # -- KV blocks -----------------------------------------------------------------------------
    def kv_capacity_blocks(self) -> int:
        cfg = self.config
        return cfg.kv_capacity_tokens // max(cfg.block_tokens, 1) if cfg.kv_capacity_tokens > 0 else 0

    def _blocks(self, tokens: int) -> int:
        return math.ceil(tokens / max(self.config.block_tokens, 1))

    def _hold(self, seq: Seq, context: int) -> None:
        """Set the tokens (and blocks) a running sequence holds."""
        blocks = self._blocks(context)
        self.stats.kv_tokens += context - seq.context
        self.stats.kv_blocks += blocks - seq.blocks
        seq.context, seq.blocks = context, blocks

    def _fits(self, seq: Seq) -> bool:
        cap = self.kv_capacity_blocks()
        # a sequence alone on the server always runs, even when it is larger than the cache
        return cap <= 0 or not self._running or \
            self.stats.kv_blocks + self._blocks(seq.context) <= cap

    # -- admission ---------------------------------------------------------------------------
    def _has_free_slot(self) -> bool:
        p = self.config.parallel
        return p <= 0 or self.stats.running < p

    def admit(self) -> None:
        """Reject at once when the queue is full, the way the emulated server does."""
        cfg = self.config
        if not self._has_free_slot() and cfg.max_queue > 0 and self.stats.waiting >= cfg.max_queue:
            self.stats.rejected_total += 1
            raise QueueFull()

    def _start(self, seq: Seq) -> None:
        self.stats.running += 1
        self._order += 1
        seq.order = self._order
        seq.running = True
        seq.preempted = False
        context, seq.context = seq.context, 0
        self._hold(seq, context)
        self._running.add(seq)

    async def acquire_slot(self, seq: Seq, front: bool = False) -> Seq:
        """Wait for a slot and for KV blocks for the sequence's context (FIFO, no overtaking)."""
        if not seq.context:
            seq.context = seq.prompt_tokens
        if not front and not self._slot_waiters and self._has_free_slot() and self._fits(seq):
            self._start(seq)
            return seq
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (fut, seq)
        if front:
            self._slot_waiters.appendleft(entry)
        else:
            self._slot_waiters.append(entry)
        self.stats.waiting += 1
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release_slot(seq)      # the slot was handed over as we were cancelled
            elif entry in self._slot_waiters:
                self._slot_waiters.remove(entry)
            raise
        finally:
            self.stats.waiting -= 1
        return seq                       # _start ran on our behalf in _wake_waiters

    def _wake_waiters(self) -> None:
        while self._slot_waiters and self._has_free_slot():
            fut, seq = self._slot_waiters[0]
            if fut.done():
                self._slot_waiters.popleft()
                continue
            if not self._fits(seq):
                return
            self._slot_waiters.popleft()
            self._start(seq)
            fut.set_result(None)

    def _stop(self, seq: Seq) -> None:
        """Take a sequence off the running set and free its blocks."""
        if not seq.running:
            return
        seq.running = False
        self._running.discard(seq)
        if seq in self._prefilling:
            self._prefilling.remove(seq)
        if seq.decoding:
            seq.decoding = False
            self.stats.decoding -= 1
        self.stats.running -= 1
        self.stats.kv_tokens -= seq.context
        self.stats.kv_blocks -= seq.blocks
        seq.blocks = 0

    def release_slot(self, seq: Seq) -> None:
        if seq.running:
            self._stop(seq)
            seq.context = 0
        self._wake_waiters()

    def config_changed(self) -> None:
        self._wake_waiters()
        cfg = self.config
        if self.cache.capacity != cfg.cache_blocks:
            self.cache.capacity = cfg.cache_blocks
        if cfg.kv_tokens <= 0:
            self.kv = None
        elif self.kv is None or self.kv.block != max(cfg.block_tokens, 1):
            self.kv = KvCache(cfg.kv_tokens, cfg.block_tokens)     # a new block size: cold
        else:
            self.kv.resize(cfg.kv_tokens)

    # -- preemption (vLLM's recompute) --------------------------------------------------------
    def _preempt(self, seq: Seq) -> None:
        context = seq.context
        self._stop(seq)
        seq.context = context              # what it must recompute when readmitted
        seq.preempted = True
        self.stats.preemptions_total += 1
        if seq.fut is not None and not seq.fut.done():
            seq.fut.set_result(False)

    def _make_room(self) -> None:
        """Before a step: preempt the newest sequences until the next tokens' blocks fit."""
        cap = self.kv_capacity_blocks()
        if cap <= 0:
            return
        chunk = max(self.config.chunk_tokens, 1)
        while len(self._running) > 1:
            need = sum(self._blocks(s.context + chunk) - s.blocks for s in self._running
                       if s.decoding)
            if self.stats.kv_blocks + need <= cap:
                return
            self._preempt(max(self._running, key=lambda s: s.order))

    async def _recompute(self, seq: Seq) -> bool:
        """A preempted sequence waits at the head of the queue (until a running one finishes,
        so it cannot thrash straight back in), then prefills its whole context again."""
        await self.acquire_slot(seq, front=True)
        self.stats.prompt_tokens_total += seq.context
        return await self._prefill(seq, seq.context, perf_counter(), 0.0)

    # -- prefill -------------------------------------------------------------------------------
    def jitter(self) -> float:
        j = self.config.jitter
        return 1.0 + self.rng.uniform(-j, j) if j > 0 else 1.0

    def prefill(self, prompt_tokens: list[str], seq: Seq) -> tuple[float, int]:
        """(seconds of prefill, cached tokens) for a prompt; updates the cache and counters.
        With a KV budget (kv_tokens) ``seq`` holds the prompt's blocks until ``kv_end``."""
        cfg = self.config
        n = len(prompt_tokens)
        cached = 0
        kv = self.kv
        if kv is not None:
            keys = kv.keys(prompt_tokens)
            cached = kv.cached(keys, (n - 1) // kv.block) * kv.block
            kv.hold(keys)
            seq.held = Held(keys, prompt_tokens[len(keys) * kv.block:])
            self.stats.cache_queries_total += n
            self.stats.cache_hits_total += cached
        elif cfg.prefix_cache:
            if self.cache.block != cfg.block_tokens:
                self.cache = PrefixCache(cfg.cache_blocks, cfg.block_tokens)
            cached = self.cache.lookup_and_insert(prompt_tokens)
            self.stats.cache_queries_total += n
            self.stats.cache_hits_total += cached
        self.stats.prompt_tokens_total += n
        seconds = (cfg.ttft_ms + cfg.prefill_ms_per_token * (n - cached)) / 1000.0
        return max(seconds * self.jitter(), 0.0), cached

    def reset_cache(self) -> int:
        """Drop every cached prefix (the prefix cache and the KV budget's), as vLLM's
        /reset_prefix_cache does; the tokens dropped. Blocks held by running requests stay
        theirs until they end. With ``reset_fails`` nothing is dropped."""
        if self.config.reset_fails:
            return 0
        dropped = len(self.cache) * self.cache.block
        self.cache = PrefixCache(self.config.cache_blocks, self.config.block_tokens)
        if self.kv is not None:
            dropped += self.kv.clear()
        return dropped

    def slots(self) -> list[dict[str, Any]]:
        """llama.cpp's /slots: one entry per slot (per running request when slots are
        unlimited), the running ones first in admission order."""
        cfg = self.config
        running = sorted(self._running, key=lambda s: s.order)
        n = max(cfg.parallel, len(running), 1)
        n_ctx = (cfg.kv_tokens or cfg.kv_capacity_tokens) // max(cfg.parallel, 1)
        out = []
        for i in range(n):
            s = running[i] if i < len(running) else None
            out.append({
                "id": i, "n_ctx": n_ctx, "speculative": False, "is_processing": s is not None,
                "id_task": s.order if s is not None else -1,
                "n_prompt_tokens": s.prompt_tokens if s is not None else 0,
                "n_prompt_tokens_processed": s.prompt_tokens - s.cached if s is not None else 0,
                "n_prompt_tokens_cache": s.cached if s is not None else 0,
                "params": {"n_predict": s.n_predict if s is not None else -1,
                           "stream": True},
                "next_token": [{"has_next_token": s is not None,
                                "n_decoded": s.generated if s is not None else 0,
                                "n_remain": (max(s.n_predict - s.generated, 0)
                                             if s is not None else -1)}]})
        return out

    def kv_end(self, seq: Seq, reply_tokens: list[str]) -> None:
        """The request ended (whatever the outcome): its prompt and ``reply_tokens`` (the reply
        as the next turn sends it) stay cached, and it holds nothing any more."""
        held, seq.held = seq.held, None
        kv = self.kv
        if held is None or kv is None:
            return
        more = kv.keys(held.tail + reply_tokens, held.keys[-1] if held.keys else None)
        kv.release(held, more)

    async def _prefill(self, seq: Seq, uncached: int, start_s: float, fixed_ms: float) -> bool:
        """Compute ``uncached`` prompt tokens; False when preempted meanwhile."""
        cfg = self.config
        last_step = cfg.prefill_in_step and cfg.prefill_last_step
        if not last_step and (not cfg.prefill_in_step or uncached <= 0 or
                              cfg.prefill_ms_per_token <= 0):
            seconds = (fixed_ms + cfg.prefill_ms_per_token * uncached) / 1000.0 * self.jitter()
            await asyncio.sleep(max(start_s + seconds - perf_counter(), 0.0))
            return not seq.preempted
        if not last_step:
            # the fixed part (tokenising, scheduling) is the request's own; the tokens share steps
            await asyncio.sleep(max(start_s + fixed_ms / 1000.0 * self.jitter() - perf_counter(),
                                    0.0))
            if seq.preempted:
                return False
        # else the fixed part is the cost of the prompt's own last step, shared with the others
        seq.prefill_left = uncached
        seq.bulk_done = last_step and uncached <= 0   # nothing but the last step left
        seq.fut = asyncio.get_running_loop().create_future()
        self._prefilling.append(seq)
        self._kick()
        ok = await seq.fut
        seq.fut = None
        return ok

    async def first_token(self, seq: Seq, uncached: int, start_s: float) -> None:
        """Prefill (fixed part + uncached tokens, on the slot's clock ``start_s``); the first
        token is ready when this returns, after as many recomputes as preemptions demanded."""
        ok = await self._prefill(seq, uncached, start_s, self.config.ttft_ms)
        while not ok:
            ok = await self._recompute(seq)

    # -- shared decode steps ---------------------------------------------------------------------
    def decode_seconds(self, n: int) -> float:
        """One decode step with ``n`` sequences: the fitted curve when given (linear past its
        end, on its last segment's slope), else itl * (1 + k * (n - 1))."""
        cfg = self.config
        n = max(n, 1)
        c = cfg.decode_ms_curve
        if not c:
            return cfg.itl_ms / 1000.0 * (1.0 + cfg.batch_slowdown * (n - 1))
        if n <= len(c):
            return c[n - 1] / 1000.0
        slope = c[-1] - c[-2] if len(c) >= 2 else cfg.itl_ms * cfg.batch_slowdown
        return (c[-1] + max(slope, 0.0) * (n - len(c))) / 1000.0

    def _kick(self) -> None:
        if self._step_task is None or self._step_task.done():
            self._step_wake = asyncio.Event()
            self._step_task = asyncio.get_running_loop().create_task(self._step_loop())
        elif self._step_wake is not None:
            self._step_wake.set()

    async def next_step(self, seq: Seq, tokens: int) -> None:
        """Wait for the next decode step (which every decoding sequence shares) and take its
        ``tokens``; preempted meanwhile: recompute first."""
        ok = await self._decode(seq)
        while not ok:
            ok = await self._recompute(seq)
        self.emitted(seq, tokens)

    async def _decode(self, seq: Seq) -> bool:
        if seq.preempted:
            return False
        if not seq.decoding and seq.running:
            seq.decoding = True
            self.stats.decoding += 1
        if self.config.itl_ms <= 0 and not self.config.decode_ms_curve:
            await asyncio.sleep(0)
            return not seq.preempted
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        seq.fut = fut
        self._step_waiters.append((fut, seq))
        self._kick()
        ok = await fut
        seq.fut = None
        return ok

    def emitted(self, seq: Seq, tokens: int) -> None:
        """The route sent ``tokens`` more tokens of this sequence."""
        seq.generated += tokens
        self.stats.generation_tokens_total += tokens
        if seq.running:
            self._hold(seq, seq.context + tokens)

    async def _step_loop(self) -> None:
        next_t = perf_counter()
        assert self._step_wake is not None
        cfg = self.config
        while True:
            if not self._step_waiters and not self._prefilling:
                # right after a step the sequences have not re-registered yet; only a loop that
                # really was idle for a whole step starts a new schedule (else gaps stretch by
                # the time it takes the first sequence to come back)
                self._step_wake.clear()
                await self._step_wake.wait()
                now = perf_counter()
                if now - next_t > self.decode_seconds(self.stats.decoding):
                    next_t = now
            self._make_room()
            n_dec = self.stats.decoding
            # chunked prefill: decode tokens first, prompt chunks in what the budget leaves
            room = (cfg.step_token_budget - n_dec * max(cfg.chunk_tokens, 1)
                    if cfg.step_token_budget > 0 else 1 << 62)
            prefill_tokens = 0
            finished: list[Seq] = []
            last_step = cfg.prefill_last_step
            if last_step:                    # prompts whose bulk an earlier step computed
                finished = [s for s in self._prefilling if s.bulk_done]
            for seq in self._prefilling:
                if room <= 0:
                    break
                if seq.bulk_done:
                    continue
                take = min(seq.prefill_left, room)
                seq.prefill_left -= take
                room -= take
                prefill_tokens += take
                if seq.prefill_left <= 0:
                    if last_step:
                        seq.bulk_done = True     # its last tokens go in the next step
                    else:
                        finished.append(seq)
            step = (self.decode_seconds(n_dec) if n_dec else 0.0) + \
                prefill_tokens * cfg.prefill_ms_per_token / 1000.0
            if last_step and finished:       # the last tokens of every prompt ending here
                step += cfg.ttft_ms / 1000.0
            step *= self.jitter()
            next_t += step
            now = perf_counter()
            if next_t < now - step:          # fell far behind (machine busy): don't burst
                next_t = now
            if next_t > now:
                await asyncio.sleep(next_t - now)
            waiters, self._step_waiters = self._step_waiters, []
            for fut, _seq in waiters:
                if not fut.done():
                    fut.set_result(True)
            for seq in finished:
                if seq in self._prefilling:
                    self._prefilling.remove(seq)
                    if seq.fut is not None and not seq.fut.done():
                        seq.fut.set_result(True)

    def stop(self) -> None:
        if self._step_task is not None:
            self._step_task.cancel()

    # -- what the routes report ------------------------------------------------------------------
    def finished(self, reason: str) -> None:
        self.stats.success_total[reason] = self.stats.success_total.get(reason, 0) + 1

    def natural_tokens(self) -> int:
        """A reply length drawn from the fitted EOS lengths (0: none fitted)."""
        dist = self.config.natural_tokens_dist
        return self.rng.choice(dist) if dist else 0

    # -- faults ----------------------------------------------------------------------------------
    def draw_fault(self) -> str | None:
        cfg = self.config
        r = self.rng.random()
        for name in ("fault_500", "fault_429", "fault_cut", "fault_malformed", "fault_error_event",
                     "fault_stall", "fault_slow_first_byte"):
            p = getattr(cfg, name)
            if p > 0:
                if r < p:
                    return name[len("fault_"):]
                r -= p
        return None

    def kv_usage(self) -> float:
        cap = self.kv_capacity_blocks()
        if cap > 0:
            return min(self.stats.kv_blocks / cap, 1.0)
        if self.config.kv_tokens > 0:
            # as vLLM counts it: the KV of running requests (cached prefixes are reusable room)
            return min(self.stats.kv_tokens / self.config.kv_tokens, 1.0)
        # unbounded: usage against a nominal 64k-token cache
        return min(self.stats.kv_tokens / 65536, 1.0)


WORDS = ("the", "model", "server", "token", "stream", "answer", "request", "user", "time", "load",
         "first", "slot", "queue", "batch", "cache", "prompt", "reply", "fast", "slow", "steady",
         "number", "people", "chat", "wait", "step", "value", "measure", "again", "because", "which")


def reply_words(seed: str, n: int) -> list[str]:
    """Deterministic per request, different between requests: text a client can echo back."""
    rng = random.Random(seed)
    return [rng.choice(WORDS) + " " for _ in range(n)]
