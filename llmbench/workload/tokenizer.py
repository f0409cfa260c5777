"""Token counting: tiktoken by default, a local tokenizer.json, or an approximation offline.

tiktoken downloads its encoding the first time; without a network that fails, so we fall back
to an approximate count (words and punctuation) and say so, never crash.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

_PIECE_RE = re.compile(r"\w+|[^\w\s]")


class TokenizerError(ValueError):
    pass


@dataclass
class Tokenizer:
    name: str
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    approximate: bool = False

    def count(self, text: str) -> int:
        return len(self.encode(text))


def approx_tokenizer() -> Tokenizer:
    vocab: dict[str, int] = {}
    rev: list[str] = []

    def encode(text: str) -> list[int]:
        out = []
        for p in _PIECE_RE.findall(text):
            i = vocab.get(p)
            if i is None:
                i = vocab[p] = len(rev)
                rev.append(p)
            out.append(i)
        return out

    def decode(ids: list[int]) -> str:
        return " ".join(rev[i] for i in ids)

    return Tokenizer("approx-words", encode, decode, approximate=True)


def from_tiktoken(enc: Any, name: str | None = None) -> Tokenizer:
    return Tokenizer(f"tiktoken:{name or enc.name}",
                     lambda t: enc.encode(t, disallowed_special=()), enc.decode)


def load_tokenizer(spec: str | None = None, warn: Callable[[str], None] | None = None) -> Tokenizer:
    """``None``/"tiktoken[:encoding]", "approx", or a path to a Hugging Face tokenizer.json."""
    warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
    spec = spec or os.environ.get("LLMBENCH_TOKENIZER") or "tiktoken:o200k_base"
    if spec == "approx":
        return approx_tokenizer()
    if spec.startswith("tiktoken"):
        encoding = spec.split(":", 1)[1] if ":" in spec else "o200k_base"
        try:
            import tiktoken
            return from_tiktoken(tiktoken.get_encoding(encoding), encoding)
        except Exception as exc:  # noqa: BLE001 - offline, or a broken cache: fall back
            warn(f"tiktoken encoding {encoding!r} is not available ({type(exc).__name__}); "
                 "counting tokens approximately (words and punctuation). Pass --tokenizer "
                 "PATH/tokenizer.json for exact counts offline.")
            return approx_tokenizer()
    path = spec
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(path):
        raise TokenizerError(f"--tokenizer {spec!r}: no such file; give a tokenizer.json, "
                             "'tiktoken[:ENCODING]' or 'approx'")
    try:
        from tokenizers import Tokenizer as HFTokenizer
        tok = HFTokenizer.from_file(path)
    except Exception as exc:  # noqa: BLE001
        raise TokenizerError(f"--tokenizer {spec!r}: not a Hugging Face tokenizer.json ({exc})")
    return Tokenizer(f"hf:{os.path.basename(os.path.dirname(os.path.abspath(path))) or path}",
                     lambda t: tok.encode(t, add_special_tokens=False).ids,
                     lambda ids: tok.decode(ids))
