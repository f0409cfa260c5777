"""Token counting with the tokenizer a user names, or the best one we can find.

``--tokenizer`` (default ``auto``, or ``$LLMBENCH_TOKENIZER``): ``auto``, ``server``, a Hugging
Face id, a directory, a ``tokenizer.json``, ``tiktoken[:ENCODING]`` or ``approx``;
docs/commands.md ("Token counts") says what each is and the order ``auto`` tries them in.

A named tokenizer that cannot be loaded is an error (exit 2), never a silent fallback: the user
asked for it. Only ``auto`` falls back, with one note stored in the run.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from llmbench.workload.tokenize_error import ServerTokenizeError

_PIECE_RE = re.compile(r"\w+|[^\w\s]")
_HF_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRUE = {"1", "on", "yes", "true", "y"}

EXACT_SERVER = "exact (server tokenizer)"
EXACT_MODEL = "exact (the model's tokenizer, local copy)"
GIVEN = "by the tokenizer given"
APPROXIMATE = "approximate"

HUB_CONNECT_TIMEOUT_S = 3.0
HUB_DOWNLOAD_TIMEOUT_S = 60.0
TIKTOKEN_DOWNLOAD_TIMEOUT_S = 20.0


class TokenizerError(ValueError):
    pass



@dataclass
class Tokenizer:
    """Counts and cuts text in tokens: encode, decode, and how exact that count is."""
    name: str
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    approximate: bool = False
    counting: str = GIVEN            # how its counts relate to the served model
    source: str = ""                 # where it came from (file, cache, server URL)
    note: str | None = None          # the one line to show when counts are approximate
    unit_words: tuple[str, ...] = ()  # words that are one token anywhere (server tokenizers)
    server: Any = None               # ServerTokenizer when counting goes over HTTP
    fallback: "Tokenizer | None" = None   # auto only: what to use if the server fails
    local: "Tokenizer | None" = None      # counts on the hot path (a server call cannot)
    verified: dict[str, int] = field(default_factory=dict)   # how many prompts the server counted
    # counts without encoding, when encoding costs memory (approx: its ids are a growing table)
    counter: Callable[[str], int] | None = None

    def count(self, text: str) -> int:
        if self.counter is not None:
            return self.counter(text)
        if self.server is not None and self.local is not None:
            # one call that failed (after its retries) is counted locally; the rest stay exact
            n = self.server.count_or_none(text)
            return self.local.count(text) if n is None else n
        return len(self.encode(text))

    def count_many(self, texts: list[str]) -> list[int]:
        if self.server is not None:
            if self.local is None:
                return self.server.count_many(texts)
            got = self.server.count_many(texts, lenient=True)
            return [self.local.count(t) if n is None else n for t, n in zip(texts, got)]
        return [self.count(t) for t in texts]

    def missed_note(self) -> str | None:
        """One line when the server's /tokenize could not count some texts (they were counted
        locally), naming how many it counted exactly; None when it counted them all."""
        st = self.server
        if st is None or not getattr(st, "missed", 0):
            return None
        from llmbench.workload.server_tokenizer import RETRIES
        local = self.local.name if self.local is not None else "the local tokenizer"
        return (f"the server's /tokenize counted {st.counted} of {st.counted + st.missed} texts "
                f"exactly; {st.missed} failed {1 + RETRIES} times ({st.last_error}) and were "
                f"counted by {local} instead")

    def describe(self) -> dict[str, Any]:
        d = {"name": self.name, "counting": self.counting, "approximate": self.approximate,
             "source": self.source, "note": self.note}
        if self.verified:
            d["verified"] = dict(self.verified)
        if self.server is not None:
            d["server_counted"] = getattr(self.server, "counted", None)
            d["server_missed"] = getattr(self.server, "missed", None)
        return d


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

    def count(text: str) -> int:
        # no table: every prompt's unique opening and every reply's words would stay in it (a
        # million-request run: about 150 MB)
        return len(_PIECE_RE.findall(text))

    return Tokenizer("approx-words", encode, decode, approximate=True, counting=APPROXIMATE,
                     source="words and punctuation", counter=count)


def from_tiktoken(enc: Any, name: str | None = None) -> Tokenizer:
    return Tokenizer(f"tiktoken:{name or enc.name}",
                     lambda t: enc.encode(t, disallowed_special=()), enc.decode,
                     source="tiktoken")


def _from_hf(tok: Any, name: str, source: str, counting: str = GIVEN) -> Tokenizer:
    return Tokenizer(name, lambda t: tok.encode(t, add_special_tokens=False).ids,
                     lambda ids: tok.decode(ids), counting=counting, source=source)


# -- Hugging Face: files, directories, hub ids ------------------------------------------------
def _load_dir(path: str, spec: str) -> Any:
    """A ``tokenizers.Tokenizer`` from a directory the way transformers saves one."""
    from tokenizers import Tokenizer as HFTokenizer
    tj = os.path.join(path, "tokenizer.json")
    if os.path.isfile(tj):
        return _load_json(tj, spec)
    vocab, merges = os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt")
    if os.path.isfile(vocab) and os.path.isfile(merges):
        # GPT-2 style byte-level BPE: the layout of most BPE models without a tokenizer.json
        from tokenizers import decoders, models, pre_tokenizers
        try:
            tok = HFTokenizer(models.BPE.from_file(vocab, merges))
        except Exception as exc:  # noqa: BLE001 - a broken file is the user's to fix
            raise TokenizerError(f"--tokenizer {spec!r}: cannot read vocab.json/merges.txt "
                                 f"({type(exc).__name__}: {exc})")
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        return tok
    has = sorted(f for f in os.listdir(path) if f.startswith(("tokenizer", "vocab", "spm")))
    raise TokenizerError(
        f"--tokenizer {spec!r}: no tokenizer.json (or vocab.json + merges.txt) in that folder"
        + (f" (found {', '.join(has)})" if has else "")
        + "; save one with transformers: AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR)")


# the largest tokenizer.json files are tens of MB (a 256k vocabulary: ~35 MB); one over this is
# not one, and the library reads it whole
MAX_TOKENIZER_JSON_BYTES = 512 << 20


def _load_json(path: str, spec: str) -> Any:
    from tokenizers import Tokenizer as HFTokenizer
    size = os.path.getsize(path)
    if size > MAX_TOKENIZER_JSON_BYTES:
        raise TokenizerError(f"--tokenizer {spec!r}: {size / 1e6:,.0f} MB, larger than the "
                             f"{MAX_TOKENIZER_JSON_BYTES >> 20} MB a tokenizer.json can be")
    try:
        return HFTokenizer.from_file(path)
    except Exception as exc:  # noqa: BLE001
        raise TokenizerError(f"--tokenizer {spec!r}: not a Hugging Face tokenizer.json "
                             f"({str(exc)[:120]})")


def hf_cache_dir() -> str:
    """The hub cache as huggingface_hub resolves it, read now (its constants are fixed at import)."""
    env = os.environ
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")


def hf_offline() -> bool:
    return any(os.environ.get(k, "").strip().lower() in _TRUE
               for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def cached_snapshot(repo_id: str, revision: str | None = None) -> str | None:
    """The local snapshot folder of a model in the hub cache, without any network call."""
    base = os.path.join(hf_cache_dir(), "models--" + repo_id.replace("/", "--"))
    if not os.path.isdir(base):
        return None
    rev = revision or "main"
    ref = os.path.join(base, "refs", rev)
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as fh:
            rev = fh.read().strip()
    snap = os.path.join(base, "snapshots", rev)
    if os.path.isdir(snap):
        return snap
    snaps = os.path.join(base, "snapshots")   # no ref: the only (or newest) snapshot there is
    if revision is None and os.path.isdir(snaps):
        found = sorted((os.path.join(snaps, s) for s in os.listdir(snaps)),
                       key=os.path.getmtime, reverse=True)
        return found[0] if found else None
    return None


def _reachable(url: str) -> str | None:
    """None when the host answers a TCP connect quickly; else why not (no 20 s of retries)."""
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "",
                                  parts.port or (443 if parts.scheme == "https" else 80)),
                                 timeout=HUB_CONNECT_TIMEOUT_S).close()
        return None
    except OSError as exc:
        return f"{parts.hostname} is unreachable ({type(exc).__name__})"


def _download(repo_id: str, revision: str | None) -> str:
    """Fetch the tokenizer files of a hub model into the usual cache; bounded in time."""
    why = _reachable(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    if why:
        raise TokenizerError(f"--tokenizer {repo_id!r}: not in the local Hugging Face cache "
                             f"({hf_cache_dir()}) and {why}; download it once online, or pass a "
                             "tokenizer.json path")
    def work() -> str:
        from huggingface_hub import hf_hub_download
        return hf_hub_download(repo_id, "tokenizer.json", revision=revision,
                               cache_dir=hf_cache_dir(), etag_timeout=5)
    path, why = _bounded(work, HUB_DOWNLOAD_TIMEOUT_S, 160)
    if path is not None:
        return os.path.dirname(path)
    raise TokenizerError(f"--tokenizer {repo_id!r}: could not download its tokenizer.json ({why}); "
                         "gated models need HF_TOKEN; or pass a local tokenizer.json")


def _bounded(work: Callable[[], Any], timeout_s: float, width: int) -> tuple[Any, str]:
    """(what ``work`` returned, "") when it ends within ``timeout_s`` on a thread of its own (a
    download that hangs is left behind, not waited for); else (None, why not, in a phrase
    of at most ``width`` characters of the error)."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = work()
        except Exception as exc:  # noqa: BLE001 - reported as one line
            result["error"] = exc
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    if "value" in result:
        return result["value"], ""
    exc = result.get("error")
    return None, (f"{type(exc).__name__}: {str(exc).splitlines()[0][:width]}" if exc
                  else f"no answer within {timeout_s:g} s")


def from_hub(spec: str, allow_download: bool = True, counting: str = GIVEN) -> Tokenizer | None:
    """``org/name[@revision]`` from the local cache, else (online) downloaded. With
    ``allow_download=False`` a model missing from the cache gives None."""
    repo_id, _, revision = spec.partition("@")
    snap = cached_snapshot(repo_id, revision or None)
    if snap is not None and not (os.path.isfile(os.path.join(snap, "tokenizer.json")) or
                                 os.path.isfile(os.path.join(snap, "vocab.json"))):
        snap = None     # the cache holds other files of this model, not its tokenizer
    if snap is None:
        if not allow_download:
            return None
        if hf_offline():
            raise TokenizerError(f"--tokenizer {spec!r}: not in the local Hugging Face cache "
                                 f"({hf_cache_dir()}) and HF_HUB_OFFLINE is set; download it once "
                                 "online, or pass a tokenizer.json path")
        snap = _download(repo_id, revision or None)
    return _from_hf(_load_dir(snap, spec), f"hf:{spec}", f"Hugging Face cache {snap}", counting)


# -- tiktoken ---------------------------------------------------------------------------------
def _tiktoken(encoding: str, allow_download: bool) -> Tokenizer:
    """Raises TokenizerError. tiktoken's own download has no timeout, so it runs bounded, and
    only after the host answered a quick connect."""
    import tiktoken
    if not _tiktoken_cached(encoding):
        why = "offline" if not allow_download else _reachable(_TIKTOKEN_URL)
        if why:
            raise TokenizerError(f"--tokenizer tiktoken:{encoding}: the encoding is not cached "
                                 f"and cannot be downloaded ({why}); set TIKTOKEN_CACHE_DIR to a "
                                 "folder holding it, or pass a Hugging Face id or a tokenizer.json")
    enc, why = _bounded(lambda: tiktoken.get_encoding(encoding), TIKTOKEN_DOWNLOAD_TIMEOUT_S, 120)
    if enc is not None:
        return from_tiktoken(enc, encoding)
    raise TokenizerError(f"--tokenizer tiktoken:{encoding}: the encoding is not available ({why}); "
                         "offline it must be in TIKTOKEN_CACHE_DIR; or pass a Hugging Face id or "
                         "a tokenizer.json")


_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/"


def _tiktoken_cached(encoding: str) -> bool:
    """Is the encoding's file in tiktoken's cache (so loading it makes no network call)?"""
    import hashlib
    try:
        import tiktoken_ext.openai_public as pub
        ctor = pub.ENCODING_CONSTRUCTORS.get(encoding)
    except Exception:  # noqa: BLE001
        return False
    if ctor is None:
        return True     # a plugin encoding: let tiktoken decide
    import tempfile
    env = os.environ
    cache = env.get("TIKTOKEN_CACHE_DIR", env.get("DATA_GYM_CACHE_DIR"))
    if cache is None:
        cache = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    src = "p50k_base" if encoding == "p50k_edit" else encoding     # p50k_edit reads p50k_base's
    if src not in ("o200k_base", "cl100k_base", "p50k_base", "r50k_base"):
        return False
    url = _TIKTOKEN_URL + src + ".tiktoken"
    return os.path.isfile(os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()))


# -- the entry point --------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerRef:
    """Where a server tokenizer may be asked: the target's root URL, model and headers, and
    the way there (netconfig.Net; None: resolved from the root and the command line)."""
    root: str
    model: str
    headers: dict[str, str] = field(default_factory=dict)
    net: Any = None


def _named(spec: str) -> Tokenizer:
    if spec == "approx":
        t = approx_tokenizer()
        t.source = "words and punctuation (--tokenizer approx)"
        return t
    if spec.startswith("tiktoken"):
        return _tiktoken(spec.split(":", 1)[1] if ":" in spec else "o200k_base", True)
    if os.path.isdir(spec):
        return _from_hf(_load_dir(spec, spec), f"hf:{os.path.basename(os.path.abspath(spec))}",
                        f"folder {os.path.abspath(spec)}")
    if os.path.isfile(spec):
        name = os.path.basename(os.path.dirname(os.path.abspath(spec))) or spec
        return _from_hf(_load_json(spec, spec), f"hf:{name}", f"file {os.path.abspath(spec)}")
    if _HF_ID_RE.match(spec.split("@", 1)[0]) and not spec.endswith(".json"):
        tok = from_hub(spec)
        assert tok is not None
        return tok
    raise TokenizerError(f"--tokenizer {spec!r}: no such file or folder, and not a Hugging Face "
                         "id (org/name); give auto, server, ORG/NAME, DIR, tokenizer.json, "
                         "tiktoken[:ENCODING] or approx")


def local_auto(model: str | None = None) -> Tokenizer:
    """``auto``'s choice without asking the server (docs/commands.md, "Token counts")."""
    if model and _HF_ID_RE.match(model):
        try:
            tok = from_hub(model, allow_download=False, counting=EXACT_MODEL)
        except TokenizerError:
            tok = None
        if tok is not None:
            return tok
    try:
        tok = _tiktoken("o200k_base", allow_download=not hf_offline())
        tok.approximate, tok.counting = True, APPROXIMATE + " (tiktoken o200k_base)"
        return tok
    except TokenizerError:
        return approx_tokenizer()


class _LaterLocal:
    """The local tokenizer a server's tokenizer falls back on, made when first used: a server
    that counts every prompt (and reports usage) never needs it, and making it imports
    tiktoken, looks for its cached encoding or asks the network, and loads o200k_base's
    200,000 merges (without a cached encoding, 0.06 s of CPU measured here to learn that it
    has none). It answers as the Tokenizer it makes."""

    def __init__(self, model: str | None) -> None:
        self._model = model
        self._tok: Tokenizer | None = None
        self._lock = threading.Lock()

    def made(self) -> Tokenizer:
        with self._lock:
            if self._tok is None:
                self._tok = local_auto(self._model)
            return self._tok

    def count(self, text: str) -> int:
        # its own method, so that taking ``local.count`` (the record's count_tokens) makes
        # nothing: through __getattr__ it would load a tokenizer library at start
        return self.made().count(text)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)      # copy, pickle: not through the made tokenizer
        return getattr(self.made(), name)


def _server_tokenizer(ref: ServerRef) -> Tokenizer:
    from llmbench.workload.server_tokenizer import detect
    st = detect(ref.root, ref.model, ref.headers, net=ref.net)
    return Tokenizer(f"server:{ref.model}", st.encode, st.decode, counting=EXACT_SERVER,
                     source=st.label, server=st)


def rebuild_spec(tok: Any) -> str | None:
    """A --tokenizer spec that ``load_tokenizer`` turns into a tokenizer counting as ``tok``
    does, without a server (a Tokenizer holds functions, which do not pickle: a worker process
    rebuilds it by name); None when it cannot be rebuilt."""
    name, source = getattr(tok, "name", None), getattr(tok, "source", None) or ""
    if not isinstance(name, str):
        return None
    if source.startswith(("folder ", "file ")):
        return source.split(" ", 1)[1]         # a tokenizer.json or a folder, by path
    if name.startswith("hf:"):
        return name[3:]                         # a Hugging Face id, from the local cache
    if name.startswith("tiktoken:"):
        return name                             # cached where it was loaded first
    if name == "approx-words":
        return "approx"
    return None


def load_tokenizer(spec: str | None = None, server: ServerRef | None = None) -> Tokenizer:
    """Resolve ``--tokenizer`` (see the module doc). Raises TokenizerError, one line."""
    spec = (spec or os.environ.get("LLMBENCH_TOKENIZER") or "auto").strip()
    if spec == "server":
        if server is None:
            raise TokenizerError("--tokenizer server needs a server to ask (--url)")
        try:
            tok = _server_tokenizer(server)
        except ServerTokenizeError as exc:
            raise TokenizerError(f"--tokenizer server: {exc}; pass --tokenizer ORG/NAME, DIR or "
                                 "tokenizer.json to count locally")
        tok.local = _LaterLocal(server.model)  # type: ignore[assignment]  # a Tokenizer when used
        return tok
    if spec != "auto":
        return _named(spec)
    why_not_server = None
    if server is not None:
        try:
            tok = _server_tokenizer(server)
            tok.fallback = tok.local = _LaterLocal(server.model)  # type: ignore[assignment]
            return tok
        except ServerTokenizeError as exc:
            why_not_server = str(exc)
    tok = local_auto(server.model if server else None)
    if tok.approximate:
        tok.note = approximate_note(tok, why_not_server)
    return tok


def approximate_note(tok: Tokenizer, why_not_server: str | None) -> str:
    what = ("tiktoken o200k_base, not the served model's tokenizer"
            if tok.name.startswith("tiktoken") else "words and punctuation; no tokenizer found locally")
    server = f"; the server cannot count: {why_not_server}" if why_not_server else ""
    return (f"prompt token counts are approximate ({what}){server}. For exact counts pass "
            "--tokenizer ORG/NAME (a Hugging Face id), DIR or tokenizer.json")
