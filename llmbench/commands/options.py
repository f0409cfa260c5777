"""Every option of run, ramp, sweep and probe, declared once, with no Typer in it; and the
checks for their values. The machinery (``Opt``, ``OptionGroup``, ``Layout``, the value parsers
``duration``, ``count``, ``number`` ...) is llmbench/options.py, a bottom layer the mock's options
(llmbench/mock/cli.py) use too; it is re-exported here, so ``opt.duration`` still reads.

The declarations (``Opt`` in a dataclass field's annotation) are read by two clients: the
command line (llmbench/cli/options.py turns each into a typer option) and the Python API
(llmbench/api.py takes each as a keyword argument), so both have the same names, defaults and
checks.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any, List, Optional

from llmbench.errors import UsageError  # noqa: F401  (re-exported: opt.UsageError)
from llmbench.options import (  # noqa: F401  (re-exported: the machinery's old home)
    MAX_COUNT, MAX_DURATION_S, MAX_NUMBER, Field, GroupDefaults, Layout, Opt, OptionGroup, _opt,
    coerce, count, duration, group_defaults, hints, number, parse_labels, parse_think, seconds,
    whole)


# -- option groups --------------------------------------------------------------------------------
# Each group is declared once (a dataclass whose fields carry their typer declaration) and used
# by every command through ``with_groups``; each validates itself and builds what the plan
# needs. Help panels: grouped the same way in every command, each narrow enough that rich never
# cuts an option name at 80 columns (tests/e2e/test_cli_help.py).

P_TARGET, P_LOAD, P_STEPS, P_GATES = "Target", "Load", "Steps", "Pass/fail"
P_WORKLOAD, P_REQUEST, P_OUTPUT, P_VLLM = "Workload", "Request", "Output", "vLLM result JSON"
P_NET = "Network"


def check_server_probe(kind: str) -> str:
    from llmbench.servers.scrape import KINDS
    if kind not in KINDS:
        raise UsageError(f"--server-probe {kind!r}: choose one of {', '.join(KINDS)}")
    return kind


def _api_help() -> str:
    from llmbench.client.target import api_help
    return api_help()


def _server_probe_help() -> str:
    from llmbench.servers import KINDS
    return "Poll the server's own state: " + " | ".join(KINDS) + "."


@dataclasses.dataclass
class TargetOpts(OptionGroup):
    """Where the server is (run, ramp). ``probe`` has --router/--direct instead of --url."""

    url: Annotated[Optional[str], _opt("Server base URL: .../v1 for OpenAI-style APIs (e.g. localhost:11434/v1), the bare root for Ollama's native API.", P_TARGET)] = None
    model: Annotated[Optional[str], _opt("Model name as the server knows it.", P_TARGET)] = None
    wait_ready: Annotated[Optional[str], _opt("Wait up to this long for a starting server to answer, e.g. 120 or 5m.", P_TARGET, metavar="DURATION")] = None

    def wait_ready_s(self) -> float | None:
        return duration(self.wait_ready, "--wait-ready", zero_ok=False) if self.wait_ready else None


@dataclasses.dataclass
class ServerOpts(OptionGroup):
    """How to talk to the server(s) and watch them (run, ramp, probe)."""

    api: Annotated[Optional[str], _opt(_api_help(), P_TARGET)] = None     # from the wire registry
    api_key: Annotated[Optional[str], _opt("API key, sent as a Bearer token (default: $OPENAI_API_KEY; --api anthropic: x-api-key, default $ANTHROPIC_API_KEY). Never saved. Azure wants --header 'api-key: KEY' instead.", P_TARGET, "--api-key")] = None
    header: Annotated[Optional[List[str]], _opt("Extra request header (repeatable). Values are never saved.", P_TARGET, "--header", metavar="K=V")] = None
    endpoint: Annotated[Optional[str], _opt("Path requests go to, from the server root (vLLM's --endpoint), e.g. /v1/completions; default: --url's path + the API's.", P_TARGET, metavar="PATH")] = None
    redact: Annotated[Optional[List[str]], _opt("Hide this --url query parameter's value (or this text) in all output (repeatable); key, token, sig... are hidden already.", P_TARGET, "--redact", metavar="NAME")] = None
    served_by_header: Annotated[Optional[str], _opt("Response header naming the backend.", P_TARGET)] = None
    server_probe: Annotated[str, _opt(_server_probe_help(), P_TARGET)] = "auto"   # adapter registry
    proxy: Annotated[Optional[str], _opt("Forward proxy for every request and probe (default: $HTTPS_PROXY, $HTTP_PROXY, $ALL_PROXY, minus $NO_PROXY); none: go direct.", P_NET, metavar="URL|none")] = None
    ca_cert: Annotated[Optional[Path], _opt("Trust this CA bundle (PEM) instead of the system's (default: $SSL_CERT_FILE or $REQUESTS_CA_BUNDLE).", P_NET, metavar="FILE")] = None
    insecure: Annotated[bool, _opt("Do not check the server's TLS certificate (recorded in run.json).", P_NET, "--insecure")] = False
    cert: Annotated[Optional[Path], _opt("Client certificate (PEM) for mutual TLS.", P_NET, metavar="FILE")] = None
    key: Annotated[Optional[Path], _opt("The client certificate's key (PEM).", P_NET, metavar="FILE")] = None

    def validate(self) -> "ServerOpts":
        check_server_probe(self.server_probe)
        self.net()
        return self

    def net(self) -> Any:
        """The network options (netconfig.NetOptions), checked, and made this process's own
        (netconfig.configure), so every target of this command line goes the same way."""
        from llmbench.client import netconfig
        opts = netconfig.NetOptions(
            proxy=self.proxy, ca_cert=str(self.ca_cert) if self.ca_cert else None,
            insecure=self.insecure, cert=str(self.cert) if self.cert else None,
            key=str(self.key) if self.key else None)
        if netconfig.configured() != opts:
            try:
                opts.validate()
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
    if "://" not in v:
        v = "http://" + v
    parts = urlsplit(v)
    try:
        parts.port
    except ValueError:
        raise UsageError(f"{flag} {value!r}: the port is not a number; e.g. {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag} {value!r}: expected an http(s) URL such as {example}")
    return v


@dataclasses.dataclass
class TelemetryOpts(OptionGroup):
    """What the server's machine did during the run, and what the server was (issue 39)."""

    server_pid: Annotated[str, _opt("The server's process on this machine, sampled each second (CPU, memory, threads): a PID, auto (the process listening on a loopback --url's port, or the one sweep --serve started) or off.", P_TELEMETRY, metavar="PID|auto|off")] = "auto"
    host_metrics: Annotated[Optional[str], _opt("A Prometheus node exporter on the server's machine, scraped each second: CPU busy per mode, memory, load, network.", P_TELEMETRY, metavar="URL")] = None
    gpu_metrics: Annotated[str, _opt("The server's GPUs: a DCGM exporter's URL, nvml (this machine; the gpu extra), amd (amdsmi), auto (nvml or amdsmi if present, else a note in run.json) or off. Gives energy per output token.", P_TELEMETRY, metavar="URL|nvml|auto")] = "auto"

    def pid(self) -> int | str:
        """--server-pid as a PID, "auto" or "off"."""
        v = str(self.server_pid or "auto").strip().lower()
        if v in ("auto", "off"):
            return v
        try:
            pid = int(v)
        except ValueError:
            raise UsageError(f"--server-pid {self.server_pid!r}: expected a process id (e.g. "
                             "12345), auto or off") from None
        if pid < 1:
            raise UsageError(f"--server-pid {pid}: a process id is a positive number")
        return pid

    def host_url(self) -> str | None:
        if not self.host_metrics:
            return None
        return _exporter_url(self.host_metrics, "--host-metrics", "http://gpu-box:9100/metrics")

    def gpu(self) -> str:
        from llmbench.servers.telemetry import GPU_SOURCES
        v = (self.gpu_metrics or "auto").strip()
        if v.lower() in GPU_SOURCES:
            return v.lower()
        if "://" not in v and not any(c in v for c in ":./"):
            raise UsageError(f"--gpu-metrics {v!r}: choose a DCGM exporter's URL (e.g. "
                             "http://gpu-box:9400/metrics), nvml, amd, auto or off")
        return _exporter_url(v, "--gpu-metrics", "http://gpu-box:9400/metrics")

    def validate(self) -> "TelemetryOpts":
        self.pid()
        self.host_url()
        self.gpu()
        return self

    def spec(self, target: Any, server_probe: str = "auto", pid: int | None = None,
             pid_from: str | None = None) -> Any:
        """What the harness samples for this target (servers.telemetry.TelemetrySpec):
        ``pid`` is the process the command started itself (sweep --serve)."""
        from urllib.parse import urlsplit
        from llmbench.servers.discover import models_url
        from llmbench.servers.telemetry import TelemetrySpec, is_loopback
        self.validate()
        chosen = self.pid()
        parts = urlsplit(target.server_root)
        loopback = is_loopback(parts.hostname or "")
        spec = TelemetrySpec(host_url=self.host_url(), gpu=self.gpu(), model=target.model,
                             net=target.net)
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


@dataclasses.dataclass
class WorkloadOpts(OptionGroup):
    """What is sent: a dataset or synthetic prompts, lengths, turns, tokenizer, seed."""

    dataset: Annotated[str, _opt("synthetic | random | words | FILE (.json ShareGPT, .jsonl, .csv, .parquet) | hf:NAME", P_WORKLOAD)] = "synthetic"
    dataset_format: Annotated[Optional[str], _opt("sharegpt | jsonl | hf (default: from the file name).", P_WORKLOAD)] = None
    prompt_tokens: Annotated[Optional[str], _opt("Synthetic prompt length in tokens: N or LO-HI.", P_WORKLOAD)] = "256"
    output_tokens: Annotated[Optional[str], _opt("Reply length asked for (sent as max tokens).", P_WORKLOAD, "--output-tokens", "--max-tokens", metavar="N|LO-HI")] = "128"
    turns: Annotated[Optional[int], _opt("User turns per conversation (cap for files; count for synthetic).", P_WORKLOAD)] = 1
    multi_turn: Annotated[bool, _opt("ShareGPT: whole conversations instead of vLLM's single-turn sampling.", P_WORKLOAD, "--multi-turn")] = False
    sharegpt_output_len: Annotated[Optional[int], _opt("ShareGPT: fixed output length.", P_WORKLOAD)] = None
    limit: Annotated[Optional[int], _opt("Use at most N entries of a file.", P_WORKLOAD)] = None
    shared_prefix_tokens: Annotated[int, _opt("Synthetic: start prompts with one of --prefixes shared prefixes of this many tokens (tests prefix caching on purpose).", P_WORKLOAD)] = 0
    prefixes: Annotated[int, _opt("Synthetic: how many distinct shared prefixes.", P_WORKLOAD)] = 1
    words: Annotated[int, _opt("--dataset words: prompt length in words.", P_WORKLOAD)] = 100
    random_input_len: Annotated[int, _opt("--dataset random: input length (vLLM's random dataset).", P_WORKLOAD)] = 1024
    random_output_len: Annotated[int, _opt("--dataset random: output length.", P_WORKLOAD)] = 128
    random_range_ratio: Annotated[float, _opt("--dataset random: lengths uniform in len*(1-r)..len*(1+r).", P_WORKLOAD)] = 0.0
    random_prefix_len: Annotated[int, _opt("--dataset random: common prefix length.", P_WORKLOAD)] = 0
    hf_split: Annotated[str, _opt("hf:NAME split.", P_WORKLOAD)] = "train"
    hf_column: Annotated[Optional[List[str]], _opt("Map a column: prompt=NAME, max_tokens=NAME or image=NAME (images sent with the prompt; repeatable).", P_WORKLOAD, "--hf-column", metavar="K=COL")] = None
    tokenizer: Annotated[Optional[str], _opt("auto (default, or $LLMBENCH_TOKENIZER: the server's /tokenize if it has one, else the model's from the HF cache, else approximate), server, ORG/NAME (Hugging Face id), DIR, tokenizer.json, tiktoken[:ENCODING] or approx.", P_WORKLOAD)] = None
    seed: Annotated[int, _opt("Seed for sampling, schedules and think times.", P_WORKLOAD)] = 0
    prefix_hit_ratio: Annotated[Optional[float], _opt("Synthetic or a --trace of lengths: aim at this fraction of prompt tokens served from the prefix cache (shared system prompts, block-aligned, warmed first), then check what the server achieved.", P_WORKLOAD, metavar="R")] = None
    cache_block_tokens: Annotated[int, _opt("--prefix-hit-ratio: the server's cache block in tokens (vLLM 16).", P_WORKLOAD)] = 16
    images: Annotated[Optional[str], _opt("Images with every user turn: N synthetic ones, or a folder of image files (one per turn). Chat, responses and ollama APIs.", P_WORKLOAD, metavar="N|DIR")] = None
    image_size: Annotated[str, _opt("--images N: size in pixels, WxH or a range WxH-WxH.", P_WORKLOAD, metavar="WxH")] = "512x512"
    image_format: Annotated[str, _opt("--images N: png (no extra package) or jpeg (needs Pillow).", P_WORKLOAD)] = "png"
    batch_size: Annotated[int, _opt("--api embeddings: prompts per request (one request embeds a batch).", P_WORKLOAD)] = 1
    same_prompts: Annotated[bool, _opt("Send the very prompts the seed makes, with no per-run salt: a second run then finds the first one's prompts in the server's prefix cache (cache experiments; the numbers include those hits).", P_WORKLOAD, "--same-prompts")] = False
    prompt_salt: Annotated[Optional[str], _opt("Begin every conversation with these words instead of a new random salt (replay an earlier run's exact prompts: its run.json names its salt).", P_WORKLOAD, metavar="TEXT")] = None

    def validate(self) -> "WorkloadOpts":
        """Every value in range, before anything is loaded or sent."""
        if not 0 <= self.random_range_ratio < 1:
            raise UsageError("--random-range-ratio must be in [0, 1)")
        if self.shared_prefix_tokens < 0 or self.prefixes < 1:
            raise UsageError("--shared-prefix-tokens must be >= 0 and --prefixes >= 1")
        count(self.words, "--words")
        count(self.random_input_len, "--random-input-len")
        count(self.random_output_len, "--random-output-len")
        count(self.random_prefix_len, "--random-prefix-len", lo=0)
        count(self.limit, "--limit")
        count(self.turns, "--turns")
        count(self.sharegpt_output_len, "--sharegpt-output-len")
        self.hf_columns()
        if self.prefix_hit_ratio is not None:
            if not 0 <= self.prefix_hit_ratio < 1:
                raise UsageError(f"--prefix-hit-ratio {self.prefix_hit_ratio:g}: must be in [0, 1), e.g. 0.5")
            if self.shared_prefix_tokens:
                raise UsageError("--prefix-hit-ratio sets the shared prefix itself: drop --shared-prefix-tokens")
        count(self.cache_block_tokens, "--cache-block-tokens")
        count(self.batch_size, "--batch-size", hi=4096)
        self.image_spec()
        if self.prompt_salt is not None:
            from llmbench.workload.salt import check_text
            if self.same_prompts:
                raise UsageError("--prompt-salt and --same-prompts: give one (--same-prompts "
                                 "sends no salt at all)")
            why = check_text(self.prompt_salt)
            if why:
                raise UsageError(f"--prompt-salt {self.prompt_salt[:40]!r}: {why}")
        return self

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
            n, folder = parse_images(self.images)
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

    def build(self, n: int, target: Any = None, multi_turn: bool | None = None,
              targets: tuple[str, ...] = ("main",)) -> tuple[Any, Any]:
        """(Workload, tokenizer) of ``n`` conversations, with a salt for each of ``targets``
        (the harness's target names). The target's /tokenize (vLLM, llama.cpp) counts
        exactly; it is asked here, before any load."""
        from llmbench.workload import ServerRef, WorkloadSpec, build_workload, load_tokenizer, parse_range
        self.validate()
        count(n, "--count")
        ref = None if target is None else ServerRef(
            target.server_root, target.model,
            {k: v for k, v in target.request_headers().items() if k != "content-type"},
            target.net)
        tok = load_tokenizer(self.tokenizer, server=ref)
        salts = self.salts(tok, targets)
        spec = WorkloadSpec(
            dataset=self.dataset, dataset_format=self.dataset_format, count=n * self.batch_size,
            seed=self.seed, images=self.image_spec(), batch_size=self.batch_size,
            prompt_tokens=parse_range(self.prompt_tokens or "256", "--prompt-tokens"),
            output_tokens=(parse_range(self.output_tokens, "--output-tokens")
                           if self.output_tokens else None),
            turns=self.turns or 1, multi_turn=self.multi_turn if multi_turn is None else multi_turn,
            limit=self.limit, tokenizer=self.tokenizer,
            shared_prefix_tokens=self.shared_prefix_tokens, prefixes=self.prefixes,
            words=self.words, random_input_len=self.random_input_len,
            random_output_len=self.random_output_len, random_range_ratio=self.random_range_ratio,
            random_prefix_len=self.random_prefix_len, hf_split=self.hf_split,
            hf_columns=self.hf_columns(), sharegpt_output_len=self.sharegpt_output_len,
            prefix_hit_ratio=self.prefix_hit_ratio, cache_block_tokens=self.cache_block_tokens,
            salt_tokens=max(s.tokens for s in salts.values()))
        wl = build_workload(spec, tok)
        wl.salts = salts
        # the client may count replies when a server reports no usage: that must stay in-process
        return wl, (tok.local or tok)


@dataclasses.dataclass
class RequestOpts(OptionGroup):
    """How each request is asked: sampling, body, streaming, and the four timeouts."""

    ignore_eos: Annotated[bool, _opt("Ask the server to ignore EOS (vLLM, SGLang).", P_REQUEST, "--ignore-eos")] = False
    temperature: Annotated[Optional[float], _opt("Sampling temperature (default: the server's).", P_REQUEST)] = None
    extra_body: Annotated[Optional[str], _opt("JSON merged into every request body.", P_REQUEST, metavar="JSON")] = None
    max_tokens_field: Annotated[str, _opt("Body field for the reply length on OpenAI chat: auto (both, or max_completion_tokens for api.openai.com) | both | max_tokens | max_completion_tokens | none.", P_REQUEST, metavar="FIELD")] = "auto"
    stream: Annotated[bool, _opt("Stream replies (--no-stream: TTFT equals E2EL).", P_REQUEST, "--stream/--no-stream")] = True
    timeout_connect: Annotated[float, _opt("Seconds to connect.", P_REQUEST)] = 10.0
    timeout_first_token: Annotated[float, _opt("Seconds to the first token.", P_REQUEST)] = 300.0
    timeout_idle: Annotated[float, _opt("Seconds between two events.", P_REQUEST)] = 60.0
    timeout_total: Annotated[float, _opt("Seconds for a whole request.", P_REQUEST)] = 900.0
    tools: Annotated[Optional[Path], _opt("Send these tools (a JSON list of OpenAI tool definitions) with every request; measures how often and how soon a tool is called.", P_REQUEST, metavar="FILE")] = None
    tool_choice: Annotated[Optional[str], _opt("--tools: auto | required | none (default: the server's).", P_REQUEST)] = None
    responses_state: Annotated[str, _opt("--api responses: client (send each conversation's history) or server (the server stores replies; later turns send previous_response_id and the new turn only).", P_REQUEST, metavar="client|server")] = "client"
    response_format: Annotated[Optional[Path], _opt("Ask for JSON following this JSON schema (a file); measures the share of replies that parse and validate.", P_REQUEST, metavar="FILE")] = None

    def extra(self) -> dict[str, Any]:
        if not self.extra_body:
            return {}
        try:
            extra = json.loads(self.extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON ({exc.msg} at column {exc.colno})")
        if not isinstance(extra, dict):
            raise UsageError("--extra-body must be a JSON object, e.g. '{\"top_p\": 0.9}'")
        return extra

    def validate(self) -> "RequestOpts":
        number(self.temperature, "--temperature", lo=0)
        for flag in ("connect", "first_token", "idle", "total"):
            seconds(getattr(self, f"timeout_{flag}"), "--timeout-" + flag.replace("_", "-"))
        if self.max_tokens_field != "auto":
            from llmbench.wire.openai import MAX_TOKENS_FIELDS
            if self.max_tokens_field not in MAX_TOKENS_FIELDS:
                raise UsageError(f"--max-tokens-field {self.max_tokens_field!r}: choose auto, "
                                 f"{', '.join(MAX_TOKENS_FIELDS)}")
        self.extra()
        self.agents()
        return self

    def agents(self) -> tuple[Any, Any]:
        """(tools, schema) from --tools and --response-format, read and checked."""
        from llmbench.wire.agents import TOOL_CHOICES, AgentSpecError, load_schema, load_tools
        if self.responses_state not in ("client", "server"):
            raise UsageError(f"--responses-state {self.responses_state!r}: choose client or server")
        if self.tool_choice is not None and self.tool_choice not in TOOL_CHOICES:
            raise UsageError(f"--tool-choice {self.tool_choice!r}: choose {', '.join(TOOL_CHOICES)}")
        if self.tool_choice is not None and self.tools is None:
            raise UsageError("--tool-choice needs --tools FILE")
        try:
            tools = load_tools(str(self.tools)) if self.tools is not None else None
            schema = load_schema(str(self.response_format)) if self.response_format is not None else None
        except AgentSpecError as exc:
            raise UsageError(str(exc)) from None
        return tools, schema

    def build(self, api: str | None = None) -> tuple[Any, Any]:
        """(RequestParams, Timeouts); ``api``: the target's, for the tools' and format's fields."""
        from llmbench.client.request import RequestParams, Timeouts
        from llmbench.wire.agents import request_fields
        self.validate()
        tools, schema = self.agents()
        body = {**request_fields(api or "openai-chat", tools, self.tool_choice, schema), **self.extra()}
        return (RequestParams(stream=self.stream, temperature=self.temperature,
                              ignore_eos=self.ignore_eos, extra_body=body,
                              max_tokens_field=self.max_tokens_field, structured=schema,
                              responses_state=self.responses_state),
                Timeouts(self.timeout_connect, self.timeout_first_token, self.timeout_idle,
                         self.timeout_total))


@dataclasses.dataclass
class OutputOpts(OptionGroup):
    """Where the run folder goes and what is shown while it runs."""

    label: Annotated[Optional[List[str]], _opt("KEY=VALUE stored with the run (repeatable).", P_OUTPUT, "--label", metavar="K=V")] = None
    out: Annotated[Path, _opt("Folder for run folders.", P_OUTPUT)] = Path("results")
    progress: Annotated[Optional[bool], _opt("Live view (default: on a terminal).", P_OUTPUT, "--progress/--no-progress")] = None
    metrics_port: Annotated[Optional[int], _opt("Serve Prometheus metrics at /metrics on this port while the run lasts (0: any free port, printed).", P_OUTPUT, metavar="PORT")] = None
    metrics_host: Annotated[str, _opt("--metrics-port: the address to listen on.", P_OUTPUT, metavar="ADDR")] = "127.0.0.1"
    quiet: Annotated[bool, _opt("Errors and the final answer only.", P_OUTPUT, "--quiet", "-q")] = False
    verbose: Annotated[bool, _opt("Also say what llmbench decides: tokenizer, transport, workers, resends.", P_OUTPUT, "--verbose", "-v")] = False

    def labels(self) -> dict[str, str]:
        return parse_labels(self.label)

    def validate(self) -> "OutputOpts":
        count(self.metrics_port, "--metrics-port", lo=0, hi=65535)
        if self.quiet and self.verbose:
            raise UsageError("--quiet and --verbose ask for opposite things: give one")
        self.labels()
        return self
