"""Point llmbench at nothing: the LLM servers listening on this machine's usual ports.

Every port is tried at once (a refused connection answers at once on loopback; a port that
holds the connection open is given up after ``CONNECT_S``), and each that accepts is asked its
identity pages (servers/identity.py) at once too, within ``DEADLINE_S`` for the whole look,
so nothing answering costs well under a second and a slow server no more than the deadline.
A server is what its own pages say it is, never what its port suggests; the port only orders
them. Which model is picked, and ``LLMBENCH_LOCAL_PORTS``: docs/commands.md, "Your own server"
(the tests point that variable at servers of their own on free ports, so nothing on this
machine's real ports can change what they find).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

from llmbench.servers import identity as identity_mod

# (port, the servers that usually listen there), in the order a first one is taken
USUAL_PORTS: tuple[tuple[int, str], ...] = (
    (11434, "Ollama"),
    (8080, "llama.cpp, LocalAI"),
    (1234, "LM Studio"),
    (8000, "vLLM"),
    (30000, "SGLang"),
    (3000, "TGI"),
    (5001, "KoboldCpp"),
)
ORDER_TEXT = "Ollama, llama.cpp, LM Studio, vLLM, SGLang, TGI, KoboldCpp (by port)"
PORTS_ENV = "LLMBENCH_LOCAL_PORTS"
CONNECT_S = 0.5
DEADLINE_S = 1.2
# what discovery shows, by identity kind
NAMES = {"llama.cpp": "llama.cpp", "vllm": "vLLM", "ollama": "Ollama", "sglang": "SGLang",
         "tgi": "TGI", "mock": "the llmbench mock", "llama-cpp-python": "llama-cpp-python",
         "lmstudio": "LM Studio", "koboldcpp": "KoboldCpp"}
_EMBED_FAMILIES = ("bert", "nomic-bert", "xlm-roberta", "jina-bert")


class PortsError(ValueError):
    """LLMBENCH_LOCAL_PORTS that cannot be read (one line naming it)."""


@dataclass
class Found:
    """One server that answered on this machine."""
    host: str
    port: int
    kind: str | None                     # identity's kind; None: answers HTTP, unknown kind
    version: str | None = None
    models: list[str] = field(default_factory=list)        # every model it lists
    chat_models: list[str] = field(default_factory=list)   # the ones that chat (no embedders)
    loaded: list[str] = field(default_factory=list)        # loaded now, when it says
    model: str | None = None             # the one llmbench would measure
    slots: int | None = None             # requests it serves at once, when it says
    context: int | None = None           # tokens of context per request, when it says
    context_max: int | None = None       # the model's largest (LM Studio), not what is loaded
    flavour: str | None = None           # the mock: which server it pretends to be
    note: str | None = None              # why it cannot be measured (no HTTP answer)
    identity: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """Where llmbench sends its requests: every one of these serves OpenAI's API at /v1."""
        return self.root + "/v1"

    @property
    def name(self) -> str:
        base = NAMES.get(self.kind or "", self.kind or "an OpenAI-style server")
        if self.kind == "mock" and self.flavour:
            base += f" ({self.flavour} flavour)"
        return base + (f" {self.version}" if self.version and self.kind != "mock" else "")

    def brief(self) -> str:
        """"llama.cpp b6123 on :8080, model gemma-3-270m, 1 slot, context 2048"."""
        if self.note:
            return f"port {self.port} ({self.note})"
        parts = [f"{self.name} on :{self.port}"]
        if self.model:
            parts.append(f"model {self.model}")
        if self.slots:
            parts.append(f"{self.slots} slot{'s' if self.slots != 1 else ''}")
        if self.context:
            parts.append(f"context {self.context}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "kind": self.kind, "note": self.note, "version": self.version,
                "models": self.models, "chat_models": self.chat_models, "loaded": self.loaded,
                "model": self.model, "slots": self.slots, "context": self.context,
                "context_max": self.context_max}


def ports() -> list[tuple[str, int]]:
    """(host, port) to look at: LLMBENCH_LOCAL_PORTS, else the usual ones on 127.0.0.1."""
    text = os.environ.get(PORTS_ENV, "").strip()
    if not text:
        return [("127.0.0.1", p) for p, _ in USUAL_PORTS]
    if text.lower() == "none":
        return []
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        host, _, port = item.rpartition(":")
        try:
            n = int(port)
        except ValueError:
            n = -1
        if not 0 < n < 65536:
            raise PortsError(f"{PORTS_ENV}={text!r}: {item!r} is not a port (1-65535) or "
                             "host:port; give e.g. 11434,8080")
        out.append((host.strip("[]") or "127.0.0.1", n))
    return out


# -- the look -------------------------------------------------------------------------------
async def _listening(host: str, port: int) -> bool:
    try:
        _, w = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_S)
    except (OSError, asyncio.TimeoutError):
        return False
    w.close()
    return True


async def pages(session: Any, root: str, deadline: float,
                headers: dict[str, str] | None = None) -> dict[str, tuple[int, str] | None]:
    """Every identity page of the server at ``root`` at once, by ``deadline`` (monotonic);
    a page that did not answer is None."""
    import aiohttp

    async def get(path: str) -> tuple[int, str]:
        left = max(deadline - time.monotonic(), 0.05)
        async with session.get(root + path, timeout=aiohttp.ClientTimeout(total=left),
                               allow_redirects=False, headers=headers) as r:
            body = await r.content.read(1 << 20)
            return r.status, body.decode("utf-8", "replace")
    return await identity_mod.ask(get)


async def identify_root(session: Any, root: str, within_s: float,
                        headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The identity (servers/identity.py) of the server at ``root``, any address."""
    got = await pages(session, root, time.monotonic() + within_s, headers)
    return identity_mod.from_docs(got)


async def _identify(session: Any, host: str, port: int, deadline: float) -> Found:
    """The server on host:port from its pages (a note when it answers none of them)."""
    got = await pages(session, f"http://{host}:{port}", deadline)
    if all(v is None for v in got.values()):
        return Found(host=host, port=port, kind=None,
                     note=f"open, but no HTTP answer within {DEADLINE_S:g} s")
    ident = identity_mod.from_docs(got)
    return describe(host, port, ident, got,
                    _mock_flavour(got) if ident.get("kind") == "mock" else None)


def _mock_flavour(docs: dict[str, tuple[int, str] | None]) -> str | None:
    """Which server the mock pretends to be (its /props says)."""
    props = _doc(docs, "/props")
    flavour = props.get("flavour") if isinstance(props, dict) else None
    return str(flavour) if flavour else None


def describe(host: str, port: int, ident: dict[str, Any],
             docs: dict[str, tuple[int, str] | None], flavour: str | None = None) -> Found:
    """A Found from a server's identity and its pages (pure: the tests feed it pages)."""
    kind = ident.get("kind")
    models = _listed(docs)
    embed = _embedders(docs, models)
    chat = [m for m in models if m not in embed]
    loaded = [m for m in ident.get("models_loaded") or [] if isinstance(m, str)]
    model = (next((m for m in loaded if m in chat or m not in embed), None)
             or (ident.get("model") if ident.get("model") in chat else None)
             or (chat[0] if chat else None))
    par = ident.get("parallel") or {}
    slots = par.get("slots") or par.get("max_running_requests") or par.get(
        "max_concurrent_requests")
    ctx = (ident.get("context_per_slot") or ident.get("max_model_len")
           or ident.get("context_length"))
    return Found(host=host, port=port, kind=kind, version=ident.get("version"), models=models,
                 chat_models=chat, loaded=loaded, model=model,
                 slots=int(slots) if isinstance(slots, (int, float)) else None,
                 context=int(ctx) if isinstance(ctx, (int, float)) else None,
                 context_max=cmax if isinstance(cmax := ident.get("max_context_length"), int)
                 else None,
                 flavour=flavour, identity=ident)


def _doc(docs: dict[str, tuple[int, str] | None], path: str) -> Any:
    return identity_mod._json(docs.get(path))


def _listed(docs: dict[str, tuple[int, str] | None]) -> list[str]:
    """Every model the server lists: its OpenAI list, else Ollama's tags, else LM Studio's."""
    names: list[str] = []
    doc = _doc(docs, "/v1/models")
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        names = [str(m["id"]) for m in doc["data"] if isinstance(m, dict) and m.get("id")]
    tags = _doc(docs, "/api/tags")
    if not names and isinstance(tags, dict) and isinstance(tags.get("models"), list):
        names = [str(m.get("name") or m.get("model")) for m in tags["models"]
                 if isinstance(m, dict) and (m.get("name") or m.get("model"))]
    if not names:
        names = [e["id"] for e in identity_mod._lmstudio_entries(
            _doc(docs, "/api/v0/models"), _doc(docs, "/api/v1/models"))]
    return list(dict.fromkeys(names))


def _embedders(docs: dict[str, tuple[int, str] | None], models: list[str]) -> set[str]:
    """The listed models that only embed: as the server says (LM Studio's type, Ollama's
    family), else by name."""
    out = {m for m in models if "embed" in m.lower()}
    for e in identity_mod._lmstudio_entries(_doc(docs, "/api/v0/models"),
                                            _doc(docs, "/api/v1/models")):
        if not e["chat"]:
            out.add(e["id"])
    tags = _doc(docs, "/api/tags")
    for m in (tags.get("models") if isinstance(tags, dict) else None) or []:
        if not isinstance(m, dict):
            continue
        details = m.get("details")
        d: dict[str, Any] = details if isinstance(details, dict) else {}
        fams = [d.get("family"), *(d.get("families") or [])]
        if any(str(f).lower() in _EMBED_FAMILIES for f in fams if f):
            out.add(str(m.get("name") or m.get("model")))
    return out


async def _look(where: list[tuple[str, int]]) -> list[Found]:
    open_ = await asyncio.gather(*(_listening(h, p) for h, p in where))
    up = [hp for hp, ok in zip(where, open_) if ok]
    if not up:
        return []
    import aiohttp                  # only when something listens: its import is most of the cost
    deadline = time.monotonic() + DEADLINE_S
    conn = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=conn, trust_env=False) as session:
        return list(await asyncio.gather(*(_identify(session, h, p, deadline)
                                           for h, p in up)))


def find() -> list[Found]:
    """The servers answering on this machine's usual ports (LLMBENCH_LOCAL_PORTS), in order."""
    where = ports()
    if not where:
        return []
    return asyncio.run(_look(where))


def first_line(found: list[Found], flag: str = "--url") -> str:
    """The one measured, in one line (``flag``: the option it stands for)."""
    return f"no {flag}: measuring {found[0].brief()}"


def others_line(found: list[Found]) -> str | None:
    if len(found) < 2:
        return None
    return (f"also found: {'; '.join(f.brief() for f in found[1:])} (measured: the first "
            f"serving a chat model, in the order {ORDER_TEXT}; --url picks one, --demo runs "
            "the built-in mock)")
