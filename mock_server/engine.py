"""The mock's physics: slots with a FIFO queue, prefill, a prefix cache, shared decode steps.

Independent of HTTP: routes ask the engine for admission, prefill time and decode steps, and
report what they sent. Everything is on one asyncio loop; no locks.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import OrderedDict, deque
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .prometheus import Histogram

perf_counter = time.perf_counter

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def mock_tokens(text: str) -> list[str]:
    """The mock's tokenizer: words and punctuation. Close enough to BPE counts for load shape."""
    return _TOKEN_RE.findall(text)


@dataclass
class MockConfig:
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
    kv_capacity_tokens: int = 65536
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

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

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
                    value = [str(v) for v in (value.split(",") if isinstance(value, str) else value)]
                elif isinstance(current, str):
                    value = str(value)
            except (TypeError, ValueError):
                raise ValueError(f"setting {key!r} wants a {type(current).__name__}, got {value!r}")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"setting {key!r} must be >= 0")
            setattr(self, key, value)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    running: int = 0          # holding a slot (prefill or decode)
    decoding: int = 0
    waiting: int = 0
    requests_total: int = 0
    rejected_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    cache_queries_total: int = 0
    cache_hits_total: int = 0
    kv_tokens: int = 0        # tokens held by running sequences
    success_total: dict[str, int] = field(default_factory=dict)


class Engine:
    """One replica's server state."""

    def __init__(self, config: MockConfig, replica: str = "replica-0") -> None:
        self.config = config
        self.replica = replica
        self.rng = random.Random(config.seed)
        self.stats = Stats()
        self.cache = PrefixCache(config.cache_blocks, config.block_tokens)
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._step_waiters: list[asyncio.Future[None]] = []
        self._step_task: asyncio.Task[None] | None = None
        self._step_wake: asyncio.Event | None = None
        self.h_ttft = Histogram([0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0])
        self.h_itl = Histogram([0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
                                1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0])
        self.h_queue = Histogram([0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                                  40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0])
        self.h_e2e = Histogram([0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                                40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0])

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
        self.stats.requests_total += 1

    async def acquire_slot(self) -> None:
        if self._has_free_slot() and not self._slot_waiters:
            self.stats.running += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(fut)
        self.stats.waiting += 1
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release_slot()      # the slot was handed over as we were cancelled
            else:
                self._slot_waiters.remove(fut)
            raise
        finally:
            self.stats.waiting -= 1
        # running was incremented on our behalf by release_slot/_wake_waiters

    def _wake_waiters(self) -> None:
        while self._slot_waiters and self._has_free_slot():
            fut = self._slot_waiters.popleft()
            if not fut.done():
                self.stats.running += 1
                fut.set_result(None)

    def release_slot(self) -> None:
        self.stats.running -= 1
        self._wake_waiters()

    def config_changed(self) -> None:
        self._wake_waiters()
        if self.cache.capacity != self.config.cache_blocks:
            self.cache.capacity = self.config.cache_blocks

    # -- prefill -------------------------------------------------------------------------------
    def jitter(self) -> float:
        j = self.config.jitter
        return 1.0 + self.rng.uniform(-j, j) if j > 0 else 1.0

    def prefill(self, prompt_tokens: list[str]) -> tuple[float, int]:
        """(seconds of prefill, cached tokens) for a prompt; updates the cache and counters."""
        cfg = self.config
        n = len(prompt_tokens)
        cached = 0
        if cfg.prefix_cache:
            if self.cache.block != cfg.block_tokens:
                self.cache = PrefixCache(cfg.cache_blocks, cfg.block_tokens)
            cached = self.cache.lookup_and_insert(prompt_tokens)
            self.stats.cache_queries_total += n
            self.stats.cache_hits_total += cached
        self.stats.prompt_tokens_total += n
        seconds = (cfg.ttft_ms + cfg.prefill_ms_per_token * (n - cached)) / 1000.0
        return max(seconds * self.jitter(), 0.0), cached

    # -- shared decode steps ---------------------------------------------------------------------
    def step_seconds(self) -> float:
        cfg = self.config
        n = max(self.stats.decoding, 1)
        return cfg.itl_ms / 1000.0 * (1.0 + cfg.batch_slowdown * (n - 1)) * self.jitter()

    async def next_step(self) -> None:
        """Wait for the next decode step, which every decoding sequence shares."""
        if self.config.itl_ms <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._step_waiters.append(fut)
        if self._step_task is None or self._step_task.done():
            self._step_wake = asyncio.Event()
            self._step_task = loop.create_task(self._step_loop())
        elif self._step_wake is not None:
            self._step_wake.set()
        await fut

    async def _step_loop(self) -> None:
        next_t = perf_counter()
        assert self._step_wake is not None
        while True:
            if not self._step_waiters:
                # right after a step the sequences have not re-registered yet; only a loop that
                # really was idle for a whole step starts a new schedule (else gaps stretch by
                # the time it takes the first sequence to come back)
                self._step_wake.clear()
                await self._step_wake.wait()
                now = perf_counter()
                if now - next_t > self.step_seconds():
                    next_t = now
            step = self.step_seconds()
            next_t += step
            now = perf_counter()
            if next_t < now - step:          # fell far behind (machine busy): don't burst
                next_t = now
            if next_t > now:
                await asyncio.sleep(next_t - now)
            waiters, self._step_waiters = self._step_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def stop(self) -> None:
        if self._step_task is not None:
            self._step_task.cancel()

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
        return min(self.stats.kv_tokens / max(self.config.kv_capacity_tokens, 1), 1.0)


WORDS = ("the", "model", "server", "token", "stream", "answer", "request", "user", "time", "load",
         "first", "slot", "queue", "batch", "cache", "prompt", "reply", "fast", "slow", "steady",
         "number", "people", "chat", "wait", "step", "value", "measure", "again", "because", "which")


def reply_words(seed: str, n: int) -> list[str]:
    """Deterministic per request, different between requests: text a client can echo back."""
    rng = random.Random(seed)
    return [rng.choice(WORDS) + " " for _ in range(n)]
