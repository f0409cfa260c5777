"""Workloads: where prompts come from and how they become conversations.

``build_workload(spec)`` is the one entry point; the CLI fills a ``WorkloadSpec`` from flags.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from llmbench.workload.files import DatasetError, hf_conversations, jsonl_conversations, sharegpt_conversations, sharegpt_single_turn
from llmbench.workload.images import ImageSpec
from llmbench.workload.model import Conversation, Turn, Workload, draw, messages_for
from llmbench.workload.synthetic import synthetic, vllm_random
from llmbench.workload.tokenize_error import ServerTokenizeError
from llmbench.workload.tokenizer import ServerRef, Tokenizer, TokenizerError, approximate_note, load_tokenizer

__all__ = ["Conversation", "DatasetError", "ImageSpec", "ServerRef", "Tokenizer", "TokenizerError", "Turn",
           "Workload", "WorkloadSpec", "build_workload", "draw", "load_tokenizer", "messages_for",
           "parse_range"]


def parse_range(text: str, flag: str) -> tuple[int, int]:
    """'256' -> (256, 256); '128-512' -> (128, 512)."""
    try:
        if "-" in text.strip("-"):
            lo, hi = (int(x) for x in text.split("-", 1))
        else:
            lo = hi = int(text)
    except ValueError:
        raise DatasetError(f"{flag} {text!r}: expected N or LO-HI, e.g. 256 or 128-512")
    if lo < 1 or hi < lo:
        raise DatasetError(f"{flag} {text!r}: need 1 <= LO <= HI")
    return lo, hi


@dataclass
class WorkloadSpec:
    """What to send: the dataset, its format, lengths and tokenizer."""
    dataset: str = "synthetic"       # synthetic | random | words | PATH | hf:NAME
    dataset_format: str | None = None  # sharegpt | jsonl | hf (default: from the file)
    count: int = 1000
    seed: int = 0
    prompt_tokens: tuple[int, int] = (256, 256)
    output_tokens: tuple[int, int] | None = (128, 128)
    turns: int = 1
    multi_turn: bool = False         # ShareGPT: whole conversations instead of vLLM's sampling
    shared_prefix_tokens: int = 0
    prefixes: int = 1
    words: int = 0
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_prefix_len: int = 0
    sharegpt_output_len: int | None = None
    limit: int | None = None
    hf_split: str = "train"
    hf_columns: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None
    prefix_hit_ratio: float | None = None   # aim the workload at this prefix-cache hit ratio
    cache_block_tokens: int = 16            # the server's cache block (vLLM: 16)
    images: "ImageSpec | None" = None       # --images: images on every user turn
    batch_size: int = 1                     # --batch-size: prompts per request (embeddings)
    # tokens of the run's salt, which prompts written to a length leave room for (workload.salt)
    salt_tokens: int = 0


def _format_of(spec: WorkloadSpec) -> str:
    if spec.dataset_format:
        return spec.dataset_format
    d = spec.dataset
    if d.startswith("hf:"):
        return "hf"
    fmt = {".json": "sharegpt", ".jsonl": "jsonl", ".csv": "hf", ".parquet": "hf"}.get(
        os.path.splitext(d)[1].lower())
    if fmt is not None:
        return fmt
    if not os.path.exists(d):
        raise DatasetError(f"--dataset {d}: no such file, and not one of synthetic, random, "
                           "words, or hf:NAME")
    return "jsonl"


def build_workload(spec: WorkloadSpec, tokenizer: Tokenizer | None = None) -> Workload:
    """The workload, counted by ``tokenizer``. When a server tokenizer fails or is too slow for
    this workload, ``auto`` rebuilds it with the local fallback (one note says why); a tokenizer
    the user named as ``server`` makes it an error instead."""
    tok = tokenizer or load_tokenizer(spec.tokenizer)
    try:
        return _build(spec, tok)
    except ServerTokenizeError as exc:
        if tok.fallback is None:
            raise TokenizerError(f"--tokenizer server: {exc}; pass --tokenizer ORG/NAME, DIR or "
                                 "tokenizer.json to count locally")
        fb = tok.fallback
        if fb.approximate:
            fb.note = approximate_note(fb, str(exc))
        return _build(spec, fb)


def _build(spec: WorkloadSpec, tok: Tokenizer) -> Workload:
    warnings: list[str] = []
    params: dict[str, object] = {"dataset": spec.dataset, "count": spec.count}
    kind = spec.dataset
    warm: list[Conversation] = []
    prefix = None
    shared: float | None = None          # files: what they share is theirs, not known here
    if spec.prefix_hit_ratio is not None:
        if kind != "synthetic":
            raise DatasetError(f"--prefix-hit-ratio: works with --dataset synthetic, not {kind}")
        from llmbench.workload.prefix import prefix_hit_workload
        convs, warm, plan = prefix_hit_workload(
            tok, spec.count, spec.prompt_tokens, spec.output_tokens, spec.seed,
            spec.prefix_hit_ratio, spec.cache_block_tokens, spec.prefixes, spec.salt_tokens)
        prefix = plan.to_dict()
        shared = spec.prefix_hit_ratio
        params.update(prompt_tokens=spec.prompt_tokens, output_tokens=spec.output_tokens,
                      prefix_hit=prefix)
    elif kind == "synthetic":
        params.update(prompt_tokens=spec.prompt_tokens, output_tokens=spec.output_tokens,
                      turns=spec.turns, shared_prefix_tokens=spec.shared_prefix_tokens,
                      prefixes=spec.prefixes)
        convs = synthetic(tok, spec.count, spec.prompt_tokens, spec.output_tokens, spec.seed,
                          turns=spec.turns, shared_prefix_tokens=spec.shared_prefix_tokens,
                          prefixes=spec.prefixes, reserve=spec.salt_tokens)
        mid = sum(spec.prompt_tokens) / 2
        shared = min(spec.shared_prefix_tokens / mid, 1.0) if spec.shared_prefix_tokens else 0.0
    elif kind == "words":
        params.update(words=spec.words or 100, output_tokens=spec.output_tokens, turns=spec.turns)
        convs = synthetic(tok, spec.count, (1, 1), spec.output_tokens, spec.seed, turns=spec.turns,
                          words=spec.words or 100)
        shared = 0.0
    elif kind == "random":
        params.update(input_len=spec.random_input_len, output_len=spec.random_output_len,
                      range_ratio=spec.random_range_ratio, prefix_len=spec.random_prefix_len)
        convs = vllm_random(tok, spec.count, spec.random_input_len, spec.random_output_len,
                            spec.random_range_ratio, spec.random_prefix_len, spec.seed,
                            spec.salt_tokens)
        shared = spec.random_prefix_len / (spec.random_prefix_len + spec.random_input_len)
    else:
        convs, warnings = _from_file(spec, tok, params)
    convs = _batched_and_images(spec, convs, params, warnings)
    if tok.note:
        warnings.append(tok.note)
    missed = tok.missed_note()
    if missed:
        warnings.append(missed)
    info = tok.describe()
    if tok.server is not None:
        info["server_calls"] = tok.server.calls
    return Workload(convs, source=spec.dataset, tokenizer=tok.name, seed=spec.seed, params=params,
                    warnings=warnings, tokenizer_info=info, warmup=warm, prefix=prefix,
                    shared_share=shared)


def _from_file(spec: WorkloadSpec, tok: Tokenizer, params: dict[str, object]
               ) -> tuple[list[Conversation], list[str]]:
    """A dataset file's (or a Hugging Face dataset's) conversations, cut to --turns, with
    --output-tokens where the file gives no length; its format's settings into ``params``."""
    warnings: list[str] = []
    fmt = _format_of(spec)
    params.update(format=fmt, limit=spec.limit, turns=spec.turns, multi_turn=spec.multi_turn)
    if fmt == "sharegpt" and not spec.multi_turn:
        params["sharegpt_output_len"] = spec.sharegpt_output_len
        convs, warnings = sharegpt_single_turn(spec.dataset, tok, spec.limit or spec.count,
                                               spec.seed, spec.sharegpt_output_len)
    elif fmt == "sharegpt":
        # a run uses at most ``count`` conversations (each one request or more), in order:
        # more are neither drawn nor tokenized (--limit asks for a number itself)
        convs, warnings = sharegpt_conversations(spec.dataset, tok, spec.limit or spec.count,
                                                 spec.seed,
                                                 spec.turns if spec.turns > 1 else None)
    elif fmt == "jsonl":
        convs, warnings = jsonl_conversations(spec.dataset, tok, spec.limit or spec.count)
    elif fmt == "hf":
        name = spec.dataset[3:] if spec.dataset.startswith("hf:") else spec.dataset
        params.update(split=spec.hf_split, columns=spec.hf_columns)
        convs = hf_conversations(name, tok, spec.limit, spec.hf_split, spec.hf_columns)
    else:
        raise DatasetError(f"--dataset-format {fmt!r}: choose sharegpt, jsonl or hf")
    # one turn unless more are asked for; a ShareGPT sample is cut as it is read
    keep = 1 if not spec.multi_turn and spec.turns <= 1 else (
        spec.turns if spec.turns >= 1 and fmt != "sharegpt" else None)
    if keep:
        convs = [Conversation(c.id, c.turns[:keep], c.system) for c in convs]
    if spec.output_tokens and not any(t.max_tokens for c in convs for t in c.turns):
        convs = [Conversation(c.id, tuple(replace(t, max_tokens=spec.output_tokens[1])
                                          for t in c.turns), c.system) for c in convs]
    return convs, warnings


def _batched_and_images(spec: WorkloadSpec, convs: Any, params: dict[str, object],
                        warnings: list[str]) -> Any:
    """--batch-size and --images around the conversations (their settings into ``params``,
    a note into ``warnings``)."""
    if spec.batch_size > 1:
        from llmbench.workload.batch import Batched
        if len(convs) < spec.batch_size:
            raise DatasetError(f"--batch-size {spec.batch_size}: the workload has only "
                               f"{len(convs)} prompts; ask for more (--requests) or a smaller batch")
        convs = Batched(convs, spec.batch_size)
        params["batch_size"] = spec.batch_size
    if spec.images is not None:
        from llmbench.workload.images import ImagePool, WithImages
        # the most turns a conversation has: the synthetic ones all have spec.turns (and may
        # be regenerated on access: not walked), a file's are in memory
        stride = (max((len(c.turns) for c in convs), default=1) if isinstance(convs, list)
                  else max(spec.turns, 1))
        pool = ImagePool(spec.images, needed=len(convs) * stride * spec.images.count)
        convs = WithImages(convs, pool, stride)
        params["images"] = {**spec.images.describe(), "distinct": len(pool.uris),
                            "bytes": pool.bytes} if not spec.images.folder else \
            spec.images.describe()
        if pool.note:
            warnings.append(pool.note)
    return convs
