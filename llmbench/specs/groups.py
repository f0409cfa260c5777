"""The options every load command shares, declared once as typed groups of a spec: where the
server is (``TargetOpts``), how to talk to it (``ServerOpts``), what its machine did
(``TelemetryOpts``), what is sent (``WorkloadOpts``), how each request is asked
(``RequestOpts``) and where results go (``OutputOpts``).

Each group checks its own values (``check``: pure) and builds what the plan needs from them
(the workload, the request parameters, the network options); how a command's spec is made of
groups: llmbench/specs/__init__.py. A command's own defaults for a group's option are
``command_defaults`` on its spec (ramp asks for the first token within 120 s, not 300 s).
"""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar
from datetime import timedelta
from pathlib import Path
from typing import Iterator, Any, Callable, Literal, TypeVar

from llmbench.specs.options import (ABANDON, FLAG, FLOAT, INT, PAIRS, PATH, P_NET, P_OUTPUT,
                                    P_REQUEST, P_TARGET, P_WORKLOAD, SECONDS, SECONDS_ABOVE_0,
                                    SPAN, TEXT, TEXTS, TOKENS, Kind, Spec, UsageError, count,
                                    number, opt_of, option, problem,
                                    seconds)

Tokens = int | tuple[int, int] | str            # N or LO-HI: 16, (64, 256), "64-256"
Seconds = float | timedelta | str               # 30.0, timedelta(minutes=2), "2m"
MAX_SEED = 2**63 - 1            # numpy's and random's seeds alike; --repeat adds up to 1000
MAX_PID = 2**31 - 1             # pid_t's largest (Linux's pid_max is at most 2**22)


def _json_object(v: Any, flag: str) -> dict[str, Any]:
    """--extra-body: a dict, or its JSON text."""
    if isinstance(v, dict):
        return v
    import json
    from llmbench.records.safejson import JsonLimitError, loads
    try:
        extra = loads(v, flag)                  # nested 64 levels at most
    except (TypeError, json.JSONDecodeError) as exc:
        where = f" ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise UsageError(f"{flag} is not valid JSON{where}")
    except JsonLimitError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(extra, dict):
        raise UsageError(f"{flag} must be a JSON object, e.g. '{{\"top_p\": 0.9}}'")
    return extra


def _timeout(v: Any, flag: str) -> float:
    if isinstance(v, timedelta):
        return v.total_seconds()
    return FLOAT.parse(v, flag)  # type: ignore[no-any-return]


def _dashboard(v: Any, flag: str) -> str:
    """--dashboard: [HOST:]PORT as text, checked ("auto", or True in Python: any free port on
    127.0.0.1; a bare --dashboard on the command line is "auto", cli.app._bare_dashboard)."""
    from llmbench.specs.address import parse_address
    if v is False:
        raise UsageError(f"{flag} False: give [HOST:]PORT (True or 0: any free port), or leave it out")
    text = "auto" if v is True else TEXT.parse(v, flag)
    parse_address(text, flag)
    return text  # type: ignore[no-any-return]


def _progress(v: Any, flag: str) -> bool | str:
    """progress=: on or off, or "notebook" (Python only: the live view in a Jupyter cell,
    llmbench.api; the command line's --progress/--no-progress is a flag)."""
    return "notebook" if v == "notebook" else FLAG.parse(v, flag)  # type: ignore[no-any-return]


PROGRESS = Kind(bool, _progress, doc='bool | Literal["notebook"]')
DASHBOARD = Kind(str, _dashboard, doc="str ([HOST:]PORT) | int (the port; 0: any) | bool")
JSON = Kind(str, _json_object, lambda v: __import__("json").dumps(v), doc="dict | str (JSON)")
TIMEOUT = Kind(float, _timeout, doc="float | timedelta (seconds)")

S = TypeVar("S", bound=type)


def command_defaults(help: dict[str, str] | None = None,
                     opts: dict[str, dict[str, Any]] | None = None, **values: Any
                     ) -> Callable[[S], S]:
    """A command's own defaults for options its groups declare (``help``: text added;
    ``opts``: other declarations, such as an argument for an option), applied to the spec class
    before it is made a dataclass: the declaration stays the group's."""
    def apply(cls: S) -> S:
        own = dict(cls.__dict__.get("__annotations__", {}))
        for name in {*values, *(help or {}), *(opts or {})}:
            base = next(b.__dataclass_fields__[name] for b in cls.__mro__[1:]
                        if name in getattr(b, "__dataclass_fields__", {}))
            o = dataclasses.replace(opt_of(base), **(opts or {}).get(name, {}))
            extra = (help or {}).get(name)
            if extra:
                o = dataclasses.replace(o, help=f"{o.help} {extra}")
            own[name] = base.type
            setattr(cls, name, dataclasses.field(default=values.get(name, base.default),
                                                 metadata={"opt": o}))
        cls.__annotations__ = own
        return cls
    return apply


def _api_help() -> str:
    from llmbench.client.target import api_help
    return api_help()


def _server_probe_help() -> str:
    from llmbench.servers import KINDS
    return "Poll the server's own state: " + " | ".join(KINDS) + "."


@dataclasses.dataclass(kw_only=True)
class UrlOpts(Spec):
    """--url: the server to load."""
    url: str | None = option("Server base URL: .../v1 for OpenAI-style APIs (e.g. localhost:11434/v1), the bare root for Ollama's native API.", P_TARGET)


@dataclasses.dataclass(kw_only=True)
class ModelOpts(Spec):
    """--model: the model as the server names it."""
    model: str | None = option("Model name as the server knows it.", P_TARGET)


@dataclasses.dataclass(kw_only=True)
class TargetOpts(ModelOpts, UrlOpts):
    """Where the server is (run, ramp). ``probe`` has --router/--direct instead of --url."""

    wait_ready: Seconds | None = option("Wait up to this long for a starting server to answer, e.g. 120 or 5m.", P_TARGET, kind=SECONDS_ABOVE_0, metavar="DURATION")
    demo: bool = option("No --url: run the built-in mock even when a server answers on this machine's usual ports (without it, the first found is measured).", P_TARGET, "--demo", kind=FLAG, default=False)

    def _check(self) -> Iterator[str]:
        if self.demo and self.url:
            yield "--demo runs the built-in mock: drop --url (or --demo)"


@dataclasses.dataclass(kw_only=True)
class ServerOpts(Spec):
    """How to talk to the server(s) and watch them (run, ramp, probe)."""

    api: str | None = option(_api_help(), P_TARGET)     # from the wire registry
    api_key: str | None = option("API key, sent as a Bearer token (default: $OPENAI_API_KEY; --api anthropic: x-api-key, default $ANTHROPIC_API_KEY). Never saved. Azure wants --header 'api-key: KEY' instead.", P_TARGET, "--api-key")
    header: list[str] | None = option("Extra request header (repeatable). Values are never saved.", P_TARGET, "--header", kind=TEXTS, metavar="K=V")
    endpoint: str | None = option("Path requests go to, from the server root (vLLM's --endpoint), e.g. /v1/completions; default: --url's path + the API's.", P_TARGET, metavar="PATH")
    redact: list[str] | None = option("Hide this --url query parameter's value (or this text) in all output (repeatable); key, token, sig... are hidden already.", P_TARGET, "--redact", kind=TEXTS, metavar="NAME")
    served_by_header: str | None = option("Response header naming the backend.", P_TARGET)
    server_probe: str = option(_server_probe_help(), P_TARGET, default="auto")   # adapter registry
    proxy: str | None = option("Forward proxy for every request and probe (default: $HTTPS_PROXY, $HTTP_PROXY, $ALL_PROXY, minus $NO_PROXY); none: go direct.", P_NET, metavar="URL|none")
    ca_cert: Path | str | None = option("Trust this CA bundle (PEM) instead of the system's (default: $SSL_CERT_FILE or $REQUESTS_CA_BUNDLE).", P_NET, kind=PATH, metavar="FILE")
    insecure: bool = option("Do not check the server's TLS certificate (recorded in run.json).", P_NET, "--insecure", kind=FLAG, default=False)
    cert: Path | str | None = option("Client certificate (PEM) for mutual TLS.", P_NET, kind=PATH, metavar="FILE")
    key: Path | str | None = option("The client certificate's key (PEM).", P_NET, kind=PATH, metavar="FILE")
    network_floor: str = option("Measure the network's round trip apart from the server (GET /health) before and after the load, so the verdict can name the network's share of TTFT: on, off, or auto (not for a loopback address).", P_NET, default="auto", metavar="auto|on|off")

    def _check(self) -> Iterator[str]:
        from llmbench.servers import KINDS
        if self.network_floor not in ("auto", "on", "off"):
            yield f"--network-floor {self.network_floor!r}: choose auto, on or off"
        if self.server_probe not in KINDS:
            yield f"--server-probe {self.server_probe!r}: choose one of {', '.join(KINDS)}"

    def _may_use_tls(self) -> bool:
        """False only when --url is http:// and no other option names an https:// address
        (a probe's, a metrics URL): then the environment's CA bundles need no check."""
        url = getattr(self, "url", None)
        if not url or not str(url).lower().startswith("http://"):
            return True                 # no --url (a server found, the mock): not known yet
        return any("https:" in str(v).lower() for v in vars(self).values() if v)

    def net(self) -> Any:
        """The network options (netconfig.NetOptions), checked (the files exist), and made this
        process's own (netconfig.configure), so every target of this command goes the same way."""
        from llmbench.client import netconfig
        opts = netconfig.NetOptions(
            proxy=self.proxy, ca_cert=str(self.ca_cert) if self.ca_cert else None,
            insecure=self.insecure, cert=str(self.cert) if self.cert else None,
            key=str(self.key) if self.key else None)
        if netconfig.configured() != opts:
            try:
                opts.validate(tls=self._may_use_tls())
            except netconfig.NetError as exc:
                raise UsageError(str(exc)) from None
            netconfig.configure(opts)
            if opts.insecure:
                import sys
                print("warning: --insecure: the server's TLS certificate is not checked; anyone "
                      "between here and the server could read and change the traffic "
                      "(run.json records tls_verify: false)", file=sys.stderr)
        return opts

    def target_options(self) -> dict[str, Any]:
        """make_target's keyword arguments from these options."""
        return {"endpoint": self.endpoint, "net": self.net(), "redact": self.redact}


P_TELEMETRY = "Server telemetry"


def _exporter_url(value: str, flag: str, example: str) -> str:
    """An exporter's URL: http(s)://host:port[/path] (a bare host:port is taken as http)."""
    from urllib.parse import urlsplit
    v = value.strip()
    if any(c.isspace() for c in v):     # 'not a url' made http://not a url, accepted
        raise UsageError(f"{flag} {value[:200]!r}: not a URL (it has spaces); e.g. {example}")
    if "://" not in v:
        v = "http://" + v
    try:
        parts = urlsplit(v)
    except ValueError as exc:           # "http://[zz/metrics": Invalid IPv6 URL
        raise UsageError(f"{flag} {value[:200]!r}: not a valid URL ({exc}); e.g. {example}") from None
    try:
        parts.port
    except ValueError:
        raise UsageError(f"{flag} {value!r}: the port is not a number; e.g. {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag} {value!r}: expected an http(s) URL such as {example}")
    from llmbench.client.netconfig import host_problem
    why = host_problem(parts.hostname)
    if why:                             # gpu-box..local: no resolver takes it
        raise UsageError(f"{flag} {value[:200]!r}: the host name {why}; e.g. {example}")
    return v


def _server_pid(v: Any, flag: str) -> int | str:
    """--server-pid: 12345 (or its text), auto or off -> 12345, "auto" or "off"."""
    if isinstance(v, int) and not isinstance(v, bool):
        pid = v
    else:
        text = (TEXT.parse(v, flag) or "auto").strip().lower()
        if text in ("auto", "off"):
            return text
        try:
            pid = int(text)
        except ValueError:
            raise UsageError(f"{flag} {v!r}: expected a process id (e.g. 12345), auto or "
                             "off") from None
    if pid < 1:
        raise UsageError(f"{flag} {pid}: a process id is a positive number")
    if pid > MAX_PID:                   # pid_t is 32 bits: no process has a larger id
        raise UsageError(f"{flag} {pid}: no process id is above {MAX_PID}")
    return pid


def _host_metrics(v: Any, flag: str) -> str | None:
    """--host-metrics: a node exporter's URL (host:port is http://host:port); '' is none."""
    text = TEXT.parse(v, flag)
    return _exporter_url(text, flag, "http://gpu-box:9100/metrics") if text else None


def _gpu_metrics(v: Any, flag: str) -> str:
    """--gpu-metrics: auto | nvml | amd | off, or a DCGM exporter's URL."""
    from llmbench.servers.telemetry import GPU_SOURCES
    text = (TEXT.parse(v, flag) or "auto").strip()
    if text.lower() in GPU_SOURCES:
        return text.lower()
    if "://" not in text and not any(c in text for c in ":./"):
        raise UsageError(f"{flag} {text!r}: choose a DCGM exporter's URL (e.g. "
                         "http://gpu-box:9400/metrics), nvml, amd, auto or off")
    return _exporter_url(text, flag, "http://gpu-box:9400/metrics")


SERVER_PID = Kind(str, _server_pid, str, doc='int | Literal["auto", "off"]')
HOST_METRICS = Kind(str, _host_metrics, doc="str (URL)")
GPU_METRICS = Kind(str, _gpu_metrics, doc='str (URL) | Literal["auto", "nvml", "amd", "off"]')


@dataclasses.dataclass(kw_only=True)
class TelemetryOpts(Spec):
    """What the server's machine did during the run, and what the server was (issue 39): run,
    ramp, sweep and probe."""

    server_pid: int | str = option("The server's process on this machine, sampled each second (CPU, memory, threads): a PID, auto (the process listening on a loopback --url's port, or the one sweep --serve started) or off.", P_TELEMETRY, kind=SERVER_PID, default="auto", metavar="PID|auto|off")
    host_metrics: str | None = option("A Prometheus node exporter on the server's machine, scraped each second: CPU busy per mode, memory, load, network.", P_TELEMETRY, kind=HOST_METRICS, metavar="URL")
    gpu_metrics: str = option("The server's GPUs: a DCGM exporter's URL, nvml (this machine; the gpu extra), amd (amdsmi), auto (nvml or amdsmi if present, else a note in run.json) or off. Gives energy per output token.", P_TELEMETRY, kind=GPU_METRICS, default="auto", metavar="URL|nvml|auto")

    def telemetry_spec(self, target: Any, server_probe: str = "auto", pid: int | None = None,
                       pid_from: str | None = None) -> Any:
        """What the harness samples for this target (servers.telemetry.TelemetrySpec):
        ``pid`` is the process the command started itself (sweep --serve)."""
        from urllib.parse import urlsplit
        from llmbench.servers.discover import models_url
        from llmbench.servers.telemetry import TelemetrySpec, is_loopback
        chosen = self.server_pid
        parts = urlsplit(target.server_root)
        loopback = is_loopback(parts.hostname or "")
        spec = TelemetrySpec(host_url=self.host_metrics, gpu=self.gpu_metrics,
                             model=target.model, net=target.net)
        if chosen == "off":
            pass
        elif isinstance(chosen, int):
            spec.server_pid, spec.pid_from, spec.local = chosen, "--server-pid", True
        elif pid is not None:
            spec.server_pid, spec.pid_from, spec.local = pid, pid_from or "--serve", True
        elif loopback:
            spec.find_port = parts.port or (443 if parts.scheme == "https" else 80)
            spec.local = True
        if server_probe != "off":
            # what the server is: asked once, as the server probe asks its pages
            spec.root = target.server_root
            spec.headers = {k: v for k, v in target.request_headers().items()
                            if k != "content-type"}
            spec.models_path = urlsplit(models_url(target)).path or "/v1/models"
        return spec


def tokenizer_for(name: str | None, target: Any) -> Any:
    """--tokenizer's tokenizer; ``target``'s /tokenize (vLLM, llama.cpp) counts exactly."""
    from llmbench.workload import ServerRef, load_tokenizer
    ref = None if target is None else ServerRef(
        target.server_root, target.model,
        {k: v for k, v in target.request_headers().items() if k != "content-type"},
        target.net)
    return load_tokenizer(name, server=ref)


@dataclasses.dataclass(kw_only=True)
class WorkloadHead(Spec):
    """What is sent, first part: the dataset, the lengths and turns (then run's ShareGPT
    options, then WorkloadOpts' own)."""

    dataset: str = option("synthetic | random | words | FILE (.json ShareGPT, .jsonl, .csv, .parquet) | hf:NAME", P_WORKLOAD, default="synthetic")
    dataset_format: str | None = option("sharegpt | jsonl | hf (default: from the file name).", P_WORKLOAD)
    prompt_tokens: Tokens | None = option("Synthetic prompt length in tokens: N or LO-HI.", P_WORKLOAD, kind=TOKENS, default="256")
    output_tokens: Tokens | None = option("Reply length asked for (sent as max tokens).", P_WORKLOAD, "--output-tokens", "--max-tokens", kind=TOKENS, default="128", metavar="N|LO-HI")
    max_tokens: InitVar[Tokens | None] = None          # --max-tokens: output_tokens
    turns: int | None = option("User turns per conversation (cap for files; count for synthetic).", P_WORKLOAD, kind=INT, default=1)


@dataclasses.dataclass(kw_only=True)
class WorkloadOpts(WorkloadHead):
    """What is sent: a dataset or synthetic prompts, lengths, turns, tokenizer, seed."""

    limit: int | None = option("Use at most N entries of a file.", P_WORKLOAD, kind=INT)
    shared_prefix_tokens: int = option("Synthetic: start prompts with one of --prefixes shared prefixes of this many tokens (tests prefix caching on purpose).", P_WORKLOAD, kind=INT, default=0)
    prefixes: int = option("Synthetic: how many distinct shared prefixes.", P_WORKLOAD, kind=INT, default=1)
    words: int = option("--dataset words: prompt length in words.", P_WORKLOAD, kind=INT, default=100)
    random_input_len: int = option("--dataset random: input length (vLLM's random dataset).", P_WORKLOAD, kind=INT, default=1024)
    random_output_len: int = option("--dataset random: output length.", P_WORKLOAD, kind=INT, default=128)
    random_range_ratio: float = option("--dataset random: lengths uniform in len*(1-r)..len*(1+r).", P_WORKLOAD, kind=FLOAT, default=0.0)
    random_prefix_len: int = option("--dataset random: common prefix length.", P_WORKLOAD, kind=INT, default=0)
    hf_split: str = option("hf:NAME split.", P_WORKLOAD, default="train")
    hf_column: list[str] | dict[str, str] | None = option("Map a column: prompt=NAME, max_tokens=NAME or image=NAME (images sent with the prompt; repeatable).", P_WORKLOAD, "--hf-column", kind=TEXTS, metavar="K=COL")
    tokenizer: str | None = option("auto (default, or $LLMBENCH_TOKENIZER: the server's /tokenize if it has one, else the model's from the HF cache, else approximate), server, ORG/NAME (Hugging Face id), DIR, tokenizer.json, tiktoken[:ENCODING] or approx.", P_WORKLOAD)
    seed: int = option("Seed for sampling, schedules and think times.", P_WORKLOAD, kind=INT, default=0)
    prefix_hit_ratio: float | None = option("Synthetic or a --trace of lengths: aim at this fraction of prompt tokens served from the prefix cache (shared system prompts, block-aligned, warmed first), then check what the server achieved.", P_WORKLOAD, kind=FLOAT, metavar="R")
    cache_block_tokens: int = option("--prefix-hit-ratio: the server's cache block in tokens (vLLM 16).", P_WORKLOAD, kind=INT, default=16)
    images: int | str | Path | None = option("Images with every user turn: N synthetic ones, or a folder of image files (one per turn). Chat, responses and ollama APIs.", P_WORKLOAD, metavar="N|DIR")
    image_size: str = option("--images N: size in pixels, WxH or a range WxH-WxH.", P_WORKLOAD, default="512x512", metavar="WxH")
    image_format: str = option("--images N: png (no extra package) or jpeg (needs Pillow).", P_WORKLOAD, default="png")
    batch_size: int = option("--api embeddings: prompts per request (one request embeds a batch).", P_WORKLOAD, kind=INT, default=1)
    same_prompts: bool = option("Send the very prompts the seed makes, with no per-run salt: a second run then finds the first one's prompts in the server's prefix cache (cache experiments; the numbers include those hits).", P_WORKLOAD, "--same-prompts", kind=FLAG, default=False)
    prompt_salt: str | None = option("Begin every conversation with these words instead of a new random salt (replay an earlier run's exact prompts: its run.json names its salt).", P_WORKLOAD, metavar="TEXT")

    def _check(self) -> Iterator[str]:
        """Every value in range, before anything is loaded or sent."""
        if not 0 <= self.random_range_ratio < 1:
            yield "--random-range-ratio must be in [0, 1)"
        if self.shared_prefix_tokens < 0 or self.prefixes < 1:
            yield "--shared-prefix-tokens must be >= 0 and --prefixes >= 1"
        yield from problem(count, self.words, "--words")
        yield from problem(count, self.random_input_len, "--random-input-len")
        yield from problem(count, self.random_output_len, "--random-output-len")
        yield from problem(count, self.random_prefix_len, "--random-prefix-len", lo=0)
        yield from problem(count, self.limit, "--limit")
        yield from problem(count, self.turns, "--turns")
        yield from problem(count, getattr(self, "sharegpt_output_len", None), "--sharegpt-output-len")
        # a negative seed looped for ever building the prompts' openings (digits of a negative
        # number never reach 0) and numpy's generators refuse one: 0 and up, as vLLM's
        yield from problem(count, self.seed, "--seed", lo=0, hi=MAX_SEED)
        self.hf_columns()
        if self.prefix_hit_ratio is not None:
            if not 0 <= self.prefix_hit_ratio < 1:
                yield f"--prefix-hit-ratio {self.prefix_hit_ratio:g}: must be in [0, 1), e.g. 0.5"
            if self.shared_prefix_tokens:
                yield "--prefix-hit-ratio sets the shared prefix itself: drop --shared-prefix-tokens"
        yield from problem(count, self.cache_block_tokens, "--cache-block-tokens")
        yield from problem(count, self.batch_size, "--batch-size", hi=4096)
        if self.prompt_salt is not None:
            from llmbench.workload.salt import check_text
            if self.same_prompts:
                yield ("--prompt-salt and --same-prompts: give one (--same-prompts "
                       "sends no salt at all)")
            why = check_text(self.prompt_salt)
            if why:
                yield f"--prompt-salt {self.prompt_salt[:40]!r}: {why}"

    def salts(self, tok: Any, targets: tuple[str, ...] = ("main",)) -> dict[str, Any]:
        """The salt each target's conversations begin with (workload.salt): a new one per run,
        the given one, or none (--same-prompts). Several targets (the probe's paths) each get
        their own: the run's salt with a word of their own in front."""
        from llmbench.workload.salt import Salt, given_salt, new_salt, path_words
        from llmbench.workload.synthetic import prepare_unit_words
        if self.same_prompts:
            none = Salt(source="none (--same-prompts)")
            return {t: none for t in targets}
        try:
            prepare_unit_words(tok)             # one-token words for the salt, when it can tell
        except Exception:                       # noqa: BLE001 - the workload's build says why
            pass
        base = given_salt(tok, self.prompt_salt) if self.prompt_salt else new_salt(tok)
        if len(targets) == 1:
            return {targets[0]: base}
        return {t: base.with_word(w) for t, w in zip(targets, path_words(tok, len(targets), base))}

    def image_spec(self) -> Any:
        """--images as a workload.ImageSpec (None without it); every value checked."""
        if self.images is None:
            return None
        from llmbench.workload.files import DatasetError
        from llmbench.workload.images import FORMATS, ImageSpec, parse_images, parse_size
        if self.image_format not in FORMATS:
            raise UsageError(f"--image-format {self.image_format!r}: choose {' or '.join(FORMATS)}")
        try:
            n, folder = parse_images(str(self.images))
            lo, hi = parse_size(self.image_size)
        except DatasetError as exc:
            raise UsageError(str(exc)) from None
        return ImageSpec(count=n, min_size=lo, max_size=hi, fmt=self.image_format, folder=folder,
                         seed=self.seed)

    def hf_columns(self) -> dict[str, str]:
        cols = {}
        for item in self.hf_column or []:
            k, sep, v = item.partition("=")
            if not sep or k not in ("prompt", "max_tokens", "image") or not v:
                raise UsageError(f"--hf-column {item!r}: expected prompt=NAME, max_tokens=NAME "
                                 "or image=NAME")
            cols[k] = v
        return cols

    def check_agent(self) -> None:
        """What agent sessions cannot take, refused before anything is built (one line)."""
        for flag, bad in (("--images", self.images is not None),
                          ("--batch-size", self.batch_size > 1),
                          ("--prefix-hit-ratio", self.prefix_hit_ratio is not None),
                          ("--shared-prefix-tokens", self.shared_prefix_tokens > 0)):
            if bad:
                raise UsageError(f"{flag}: not with --workload agent (its sessions share their "
                                 "system prompt and grow their own context; see --agent-* "
                                 "options)")
        if self.dataset in ("random", "words") or self.dataset.startswith("hf:"):
            raise UsageError(f"--dataset {self.dataset}: --workload agent makes synthetic sessions "
                             "(--dataset synthetic) or replays an agent trace (--dataset FILE)")
        from llmbench.workload.agent_traces import FORMATS
        if self.dataset_format is not None and self.dataset_format not in FORMATS:
            raise UsageError(f"--dataset-format {self.dataset_format!r}: agent traces are "
                             + ", ".join(FORMATS))

    def build(self, n: int, target: Any = None, multi_turn: bool | None = None,
              targets: tuple[str, ...] = ("main",), agent: "AgentOpts | None" = None,
              tools: Any = None) -> tuple[Any, Any]:
        """(Workload, tokenizer) of ``n`` conversations, with a salt for each of ``targets``
        (the harness's target names); the target's /tokenize is asked here, before any load.
        ``agent`` (--workload agent): ``n`` agent sessions instead, offering ``tools``
        (--tools FILE's) or synthetic ones."""
        from llmbench.workload import WorkloadSpec, build_workload
        self.image_spec()
        count(n, "--count")
        if agent is not None and agent.agents_on:
            self.check_agent()
        tok = tokenizer_for(self.tokenizer, target)
        salts = self.salts(tok, targets)
        if agent is not None and agent.agents_on:
            return self._agents(agent, n, tok, salts, tools), (tok.local or tok)

        def span(v: Any, default: tuple[int, int] | None) -> tuple[int, int] | None:
            return default if v is None else (v, v) if isinstance(v, int) else tuple(v)
        spec = WorkloadSpec(
            dataset=self.dataset, dataset_format=self.dataset_format, count=n * self.batch_size,
            seed=self.seed, images=self.image_spec(), batch_size=self.batch_size,
            prompt_tokens=span(self.prompt_tokens, (256, 256)),
            output_tokens=span(self.output_tokens, None),
            turns=self.turns or 1,
            multi_turn=getattr(self, "multi_turn", False) if multi_turn is None else multi_turn,
            limit=self.limit, tokenizer=self.tokenizer,
            shared_prefix_tokens=self.shared_prefix_tokens, prefixes=self.prefixes,
            words=self.words, random_input_len=self.random_input_len,
            random_output_len=self.random_output_len, random_range_ratio=self.random_range_ratio,
            random_prefix_len=self.random_prefix_len, hf_split=self.hf_split,
            hf_columns=self.hf_columns(),
            sharegpt_output_len=getattr(self, "sharegpt_output_len", None),
            prefix_hit_ratio=self.prefix_hit_ratio, cache_block_tokens=self.cache_block_tokens,
            salt_tokens=max(s.tokens for s in salts.values()))
        wl = build_workload(spec, tok)
        wl.salts = salts
        # the client may count replies when a server reports no usage: that must stay in-process
        return wl, (tok.local or tok)

    def _agents(self, agent: "AgentOpts", n: int, tok: Any, salts: dict[str, Any],
                tools: Any) -> Any:
        """The agent sessions: synthetic (AgentSpec from the --agent-* options) or replayed."""
        from llmbench.workload.agent_traces import read_sessions
        from llmbench.workload.agents import agent_workload, sessions_workload
        reserve = max(s.tokens for s in salts.values())
        if self.dataset == "synthetic":
            wl = agent_workload(agent.agent_spec(), tok, n, self.seed, tools, reserve)
        else:
            sessions, warnings, fmt = read_sessions(self.dataset, tok, self.seed,
                                                    self.dataset_format, self.limit, tools,
                                                    reserve)
            wl = sessions_workload(sessions, tok, self.seed, self.dataset,
                                   {"agent_trace": {"format": fmt, "path": self.dataset}},
                                   warnings)
        if tok.note:
            wl.warnings.append(tok.note)
        wl.salts = salts
        return wl


@dataclasses.dataclass(kw_only=True)
class MultiTurnOpts(Spec):
    """run's ShareGPT sampling (a ramp's and a probe's users always hold whole conversations)."""

    multi_turn: bool = option("ShareGPT: whole conversations instead of vLLM's single-turn sampling.", P_WORKLOAD, "--multi-turn", kind=FLAG, default=False)


@dataclasses.dataclass(kw_only=True)
class ShareGPTOpts(Spec):
    """The ShareGPT dataset's own options."""
    sharegpt_output_len: int | None = option("ShareGPT: fixed output length.", P_WORKLOAD, kind=INT)


@dataclasses.dataclass(kw_only=True)
class RunWorkloadOpts(WorkloadOpts, ShareGPTOpts, MultiTurnOpts, WorkloadHead):
    """run's workload: the ShareGPT options in their place, after the turns."""


@dataclasses.dataclass(kw_only=True)
class InspectWorkloadOpts(WorkloadOpts, MultiTurnOpts, WorkloadHead):
    """datasets inspect's workload: --multi-turn in its place."""


P_AGENTS = "Agents"
WORKLOADS = ("chat", "agent")


def _agent_top(flag: str) -> tuple[int, str]:
    """The ceiling of an agent knob and what it counts (workload.agents' MAX_AGENT_*): past
    it a run builds text for minutes or runs out of memory before any load (issue 49)."""
    from llmbench.workload.agents import MAX_AGENT_STEPS, MAX_AGENT_TOKENS, MAX_AGENT_WIDTH
    if flag.endswith("-steps"):
        return MAX_AGENT_STEPS, "calls"
    if flag.endswith("-width"):
        return MAX_AGENT_WIDTH, "sub-agents"
    return MAX_AGENT_TOKENS, "tokens"


def _agent_range(v: Any, flag: str) -> tuple[int, int]:
    """N or LO-HI tokens (or calls) of an agent knob -> (lo, hi), each at least 1 and at most
    the knob's ceiling."""
    got = TOKENS.parse(v, flag)
    lo, hi = (got, got) if isinstance(got, int) else got
    if lo < 1:
        raise UsageError(f"{flag} {v!r}: need at least 1")
    top, what = _agent_top(flag)
    if hi > top:
        raise UsageError(f"{flag} {v!r}: at most {top:,} {what}; give a smaller number")
    return lo, hi


AGENT_RANGE = Kind(str, _agent_range,
                   lambda v: str(v[0]) if v[0] == v[1] else f"{v[0]}-{v[1]}",
                   doc="int | tuple[int, int]")


@dataclasses.dataclass(kw_only=True)
class AgentOpts(Spec):
    """--workload agent: users that are agents (workload.agents). Every size is N or LO-HI,
    drawn per session or per call from --seed; --dataset FILE replays sessions instead. A class
    of users can be agents too: ``workload.agents.agent_workload(AgentSpec(...), ...)`` makes
    the same sessions from an AgentSpec, with no option."""

    # the field is not named "workload": the keyword is (--workload's spelling, names())
    workload_type: str = option("chat (people taking turns) | agent (agent sessions: a system + tools prompt, tool calls, tool gaps, sub-agents; --dataset FILE replays agent traces).", P_AGENTS, "--workload", default="chat", metavar="chat|agent")
    agent_system_tokens: tuple[int, int] | str = option("System prompt + tool definitions, in tokens.", P_AGENTS, kind=AGENT_RANGE, default="2000-4000", metavar="N|LO-HI")
    agent_task_tokens: tuple[int, int] | str = option("The user's task (the first user message), in tokens.", P_AGENTS, kind=AGENT_RANGE, default="50-200", metavar="N|LO-HI")
    agent_steps: tuple[int, int] | str = option("Model calls a session's main agent makes, its answer included.", P_AGENTS, kind=AGENT_RANGE, default="4-10", metavar="N|LO-HI")
    agent_result_tokens: tuple[int, int] | str = option("Tokens of each tool result appended to the history.", P_AGENTS, kind=AGENT_RANGE, default="200-1000", metavar="N|LO-HI")
    agent_tool_latency: tuple[float, float] | str = option("Each tool's time before the next call, e.g. 200ms-2s.", P_AGENTS, kind=SPAN, default="200ms-2s", metavar="LO-HI")
    agent_call_tokens: tuple[int, int] | str = option("Reply length asked of a tool-call step.", P_AGENTS, kind=AGENT_RANGE, default="32-128", metavar="N|LO-HI")
    agent_answer_tokens: tuple[int, int] | str = option("Reply length asked of the final answer.", P_AGENTS, kind=AGENT_RANGE, default="128-512", metavar="N|LO-HI")
    agent_fanout: float = option("Share of tool-call steps that start sub-agents (in parallel, joined before the next call).", P_AGENTS, kind=FLOAT, default=0.0, metavar="SHARE")
    agent_fanout_width: tuple[int, int] | str = option("Sub-agents such a step starts.", P_AGENTS, kind=AGENT_RANGE, default="2-3", metavar="N|LO-HI")
    agent_sub_steps: tuple[int, int] | str = option("Model calls of a sub-agent, its answer included.", P_AGENTS, kind=AGENT_RANGE, default="2-4", metavar="N|LO-HI")
    agent_systems: int = option("Distinct system prompts (1: every session is the same agent product).", P_AGENTS, kind=INT, default=1)
    agent_tools: int = option("Synthetic tool definitions sent (--tools FILE sends its own).", P_AGENTS, kind=INT, default=4)

    @property
    def agents_on(self) -> bool:
        return self.workload_type == "agent"

    def _check(self) -> Iterator[str]:
        if self.workload_type not in WORKLOADS:
            yield f"--workload {self.workload_type!r}: choose {' or '.join(WORKLOADS)}"
        yield from problem(number, self.agent_fanout, "--agent-fanout", lo=0, hi=1)
        yield from problem(count, self.agent_systems, "--agent-systems", hi=10_000)
        yield from problem(count, self.agent_tools, "--agent-tools", lo=1, hi=128)
        if self.agents_on:
            self.check_agent()  # type: ignore[attr-defined]  (WorkloadOpts, in every spec with agents)
        else:
            given = self.agent_options_given()
            if given:
                yield (f"{', '.join(given)}: {'these apply' if len(given) > 1 else 'it applies'}"
                       " to agent sessions only; add --workload agent, or leave "
                       f"{'them' if len(given) > 1 else 'it'} out")

    def agent_options_given(self) -> list[str]:
        """The --agent-* options set to other than their defaults (their flags)."""
        out = []
        for f in dataclasses.fields(AgentOpts):
            if not f.name.startswith("agent_"):
                continue
            o = opt_of(f)
            try:
                default = o.kind.parse(f.default, o.flag(f.name))
            except (UsageError, TypeError, ValueError):
                continue
            if getattr(self, f.name) != default:
                out.append(o.flag(f.name))
        return out

    def agent_spec(self) -> Any:
        """The synthetic sessions' AgentSpec (every range checked by its kind)."""
        from llmbench.workload.agents import AgentSpec
        return AgentSpec(
            system_tokens=tuple(self.agent_system_tokens), task_tokens=tuple(self.agent_task_tokens),
            steps=tuple(self.agent_steps), result_tokens=tuple(self.agent_result_tokens),
            tool_latency_s=tuple(self.agent_tool_latency), call_tokens=tuple(self.agent_call_tokens),
            answer_tokens=tuple(self.agent_answer_tokens), fanout_share=float(self.agent_fanout),
            fanout_width=tuple(self.agent_fanout_width), sub_steps=tuple(self.agent_sub_steps),
            systems=self.agent_systems, tools=self.agent_tools)  # type: ignore[arg-type]


@dataclasses.dataclass(kw_only=True)
class RequestOpts(Spec):
    """How each request is asked: sampling, body, streaming, and the four timeouts."""

    ignore_eos: bool = option("Ask the server to ignore EOS (vLLM, SGLang).", P_REQUEST, "--ignore-eos", kind=FLAG, default=False)
    temperature: float | None = option("Sampling temperature (default: the server's).", P_REQUEST, kind=FLOAT)
    extra_body: dict[str, Any] | str | None = option("JSON merged into every request body.", P_REQUEST, kind=JSON, metavar="JSON")
    max_tokens_field: str = option("Body field for the reply length on OpenAI chat: auto (both, or max_completion_tokens for api.openai.com) | both | max_tokens | max_completion_tokens | none.", P_REQUEST, default="auto", metavar="FIELD")
    stream: bool = option("Stream replies (--no-stream: TTFT equals E2EL).", P_REQUEST, "--stream/--no-stream", kind=FLAG, default=True)
    no_stream: InitVar[bool | None] = None             # --no-stream: stream=False
    timeout_connect: float | timedelta = option("Seconds to connect.", P_REQUEST, kind=TIMEOUT, default=10.0)
    timeout_first_token: float | timedelta = option("Seconds to the first token.", P_REQUEST, kind=TIMEOUT, default=300.0)
    timeout_idle: float | timedelta = option("Seconds between two events.", P_REQUEST, kind=TIMEOUT, default=60.0)
    timeout_total: float | timedelta = option("Seconds for a whole request.", P_REQUEST, kind=TIMEOUT, default=900.0)
    tools: Path | str | None = option("Send these tools (a JSON list of OpenAI tool definitions) with every request; measures how often and how soon a tool is called.", P_REQUEST, kind=PATH, metavar="FILE")
    tool_choice: str | None = option("--tools: auto | required | none (default: the server's).", P_REQUEST)
    responses_state: str = option("--api responses: client (send each conversation's history) or server (the server stores replies; later turns send previous_response_id and the new turn only).", P_REQUEST, default="client", metavar="client|server")
    response_format: Path | str | None = option("Ask for JSON following this JSON schema (a file); measures the share of replies that parse and validate.", P_REQUEST, kind=PATH, metavar="FILE")

    def _check(self) -> Iterator[str]:
        yield from problem(number, self.temperature, "--temperature", lo=0)
        for flag in ("connect", "first_token", "idle", "total"):
            yield from problem(seconds, getattr(self, f"timeout_{flag}"), "--timeout-" + flag.replace("_", "-"))
        if self.max_tokens_field != "auto":
            from llmbench.wire.openai import MAX_TOKENS_FIELDS
            if self.max_tokens_field not in MAX_TOKENS_FIELDS:
                yield (f"--max-tokens-field {self.max_tokens_field!r}: choose auto, "
                       f"{', '.join(MAX_TOKENS_FIELDS)}")
        from llmbench.wire.agents import TOOL_CHOICES
        if self.responses_state not in ("client", "server"):
            yield f"--responses-state {self.responses_state!r}: choose client or server"
        if self.tool_choice is not None and self.tool_choice not in TOOL_CHOICES:
            yield f"--tool-choice {self.tool_choice!r}: choose {', '.join(TOOL_CHOICES)}"
        if self.tool_choice is not None and self.tools is None \
                and getattr(self, "workload_type", "chat") != "agent":
            yield ("--tool-choice needs --tools FILE (or --workload agent, whose "
                   "sessions send tools)")

    def agents(self) -> tuple[Any, Any]:
        """(tools, schema) from --tools and --response-format, read and checked."""
        from llmbench.wire.agents import AgentSpecError, load_schema, load_tools
        try:
            tools = load_tools(str(self.tools)) if self.tools is not None else None
            schema = load_schema(str(self.response_format)) if self.response_format is not None else None
        except AgentSpecError as exc:
            raise UsageError(str(exc)) from None
        return tools, schema

    def build_request(self, api: str | None = None) -> tuple[Any, Any]:
        """(RequestParams, Timeouts); ``api``: the target's, for the tools' and format's fields."""
        from llmbench.client.request import RequestParams, Timeouts
        from llmbench.wire.agents import request_fields
        tools, schema = self.agents()
        body = {**request_fields(api or "openai-chat", tools, self.tool_choice, schema),
                **(self.extra_body or {})}
        return (RequestParams(stream=self.stream, temperature=self.temperature,
                              ignore_eos=self.ignore_eos, extra_body=body,
                              max_tokens_field=self.max_tokens_field, structured=schema,
                              responses_state=self.responses_state,
                              abandon=getattr(self, "abandon", None)),
                Timeouts(self.timeout_connect, self.timeout_first_token, self.timeout_idle,
                         self.timeout_total))


@dataclasses.dataclass(kw_only=True)
class AbandonOpts(Spec):
    """Users who give up (``run``, ``ramp``, ``sweep``: client.abandon): the requests they
    cancel are counted apart, and the run says whether the server let go of them."""

    abandon: Any = option("Users who give up: after=2s (no first token by then: close the connection); share=0.2 and after-tokens=20 (stop that share of replies after 20 tokens); comma-separated, with seed=N. Cancelled requests are counted apart and stay in the _all percentiles.", P_REQUEST, "--abandon", kind=ABANDON, metavar="POLICY")


@dataclasses.dataclass(kw_only=True)
class OutputOpts(Spec):
    """Where the run folder goes and what is shown while it runs."""

    label: dict[str, str] | list[str] | None = option("KEY=VALUE stored with the run (repeatable).", P_OUTPUT, "--label", kind=PAIRS, metavar="K=V")
    out: Path | str = option("Folder for run folders.", P_OUTPUT, kind=PATH, default=Path("results"))
    # the API is quiet unless asked; the command line shows the live view on a terminal
    progress: bool | Literal["notebook"] | None = option("Live view (default: on a terminal).", P_OUTPUT, "--progress/--no-progress", kind=PROGRESS, default=False, cli_default=None)
    no_progress: InitVar[bool | None] = None           # --no-progress: progress=False
    metrics_port: int | None = option("Serve Prometheus metrics at /metrics on this port while the run lasts (0: any free port, printed).", P_OUTPUT, kind=INT, metavar="PORT")
    metrics_host: str = option("--metrics-port: the address to listen on.", P_OUTPUT, default="127.0.0.1", metavar="ADDR")
    dashboard: str | int | bool | None = option("Serve a live page of the run at [HOST:]PORT (alone, or 0: a free port on 127.0.0.1; the URL is printed first); it shows the report when the run ends.", P_OUTPUT, kind=DASHBOARD, metavar="ADDR")
    dashboard_linger: Seconds | None = option("--dashboard: keep the page up this long after the end (default: until Ctrl-C).", P_OUTPUT, kind=SECONDS, metavar="DURATION")
    quiet: bool = option("Errors and the final answer only.", P_OUTPUT, "--quiet", "-q", kind=FLAG, default=False)
    verbose: bool = option("Also say what llmbench decides: tokenizer, transport, workers, resends.", P_OUTPUT, "--verbose", "-v", kind=FLAG, default=False)
    otlp: str | None = option("Send each request as an OpenTelemetry span (GenAI attributes, its phases as events) to this OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (env: the OTEL_EXPORTER_OTLP_* variables); needs pip install 'llmbench[otel]'.", P_OUTPUT, metavar="URL|env")
    mlflow: str | None = option("Log the run or ramp to this MLflow tracking server (spec as parameters, each step's summary as metrics, the verdict as a tag, the run folder as artifacts), e.g. http://127.0.0.1:5000; needs pip install 'llmbench[mlflow]'.", P_OUTPUT, metavar="URI")
    traceparent: str | None = option("Send a W3C traceparent header with each request, so the server's spans join its span: on or off (default: on with --otlp).", P_OUTPUT, metavar="on|off")

    def _check(self) -> Iterator[str]:
        yield from problem(count, self.metrics_port, "--metrics-port", lo=0, hi=65535)
        if self.traceparent not in (None, "on", "off"):
            yield f"--traceparent {self.traceparent!r}: choose on or off"
        if self.otlp is not None:
            if self.otlp != "env":
                self.otlp = _exporter_url(self.otlp, "--otlp", "http://127.0.0.1:4318")
            try:
                import opentelemetry.exporter.otlp.proto.http  # noqa: F401
                import opentelemetry.sdk  # noqa: F401
            except ImportError:
                yield ("--otlp needs OpenTelemetry, which is not installed: "
                       "pip install 'llmbench[otel]'")
        if self.mlflow is not None:
            if not self.mlflow.strip():
                yield "--mlflow needs a tracking URI, e.g. http://127.0.0.1:5000"
            import importlib.util
            if importlib.util.find_spec("mlflow") is None:
                yield ("--mlflow needs MLflow, which is not installed: "
                       "pip install 'llmbench[mlflow]'")
        if self.dashboard_linger is not None and self.dashboard is None:
            yield "--dashboard-linger goes with --dashboard [HOST:]PORT"
        if self.quiet and self.verbose:
            yield "--quiet and --verbose ask for opposite things: give one"

    def labels(self) -> dict[str, str]:
        return dict(self.label or {})

    def dashboard_at(self) -> tuple[str, int] | None:
        """--dashboard's (host, port), 0 for any free port; None without it."""
        if self.dashboard is None:
            return None
        from llmbench.specs.address import parse_address
        return parse_address(self.dashboard)

    def linger_s(self) -> float | None:
        """--dashboard-linger in seconds; None: until Ctrl-C."""
        return None if self.dashboard_linger is None else float(self.dashboard_linger)  # type: ignore[arg-type]
