"""The command line: parse flags, build a plan, call one entry point, print.

Every user mistake becomes one line on stderr and exit code 2, never a traceback.
"""



import json
import math
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from typing import Annotated

from .exitcodes import EXIT_USAGE

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Load-test LLM chat servers: how many users hold, and why the next step broke.")
datasets_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="Look at a workload before you send it.")
app.add_typer(datasets_app, name="datasets")


class UsageError(Exception):
    pass


def fail(message: str, code: int = EXIT_USAGE) -> "typer.Exit":
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


# -- shared option types -------------------------------------------------------------------------
Url = Annotated[Optional[str], typer.Option(help="Server base URL, e.g. http://localhost:11434/v1 (OpenAI) or http://localhost:11434 (Ollama native).")]
Model = Annotated[Optional[str], typer.Option(help="Model name as the server knows it.")]
Api = Annotated[Optional[str], typer.Option(help="openai-chat | openai | ollama (default: from the URL).")]
ApiKey = Annotated[Optional[str], typer.Option("--api-key", help="Bearer key (default: $OPENAI_API_KEY). Never saved.")]
Header = Annotated[Optional[List[str]], typer.Option("--header", help="Extra request header K=V (repeatable). Values are never saved.")]
Dataset = Annotated[str, typer.Option(help="synthetic | random | words | FILE (.json ShareGPT, .jsonl, .csv, .parquet) | hf:NAME")]
DatasetFormat = Annotated[Optional[str], typer.Option(help="sharegpt | jsonl | hf (default: from the file name).")]
PromptTokens = Annotated[str, typer.Option(help="Synthetic prompt length in tokens: N or LO-HI.")]
OutputTokens = Annotated[Optional[str], typer.Option("--output-tokens", "--max-tokens", help="Reply length asked for: N or LO-HI (sent as max tokens).")]
Turns = Annotated[int, typer.Option(help="User turns per conversation (cap for files; count for synthetic).")]
Seed = Annotated[int, typer.Option(help="Seed for sampling, schedules and think times.")]
Tokenizer = Annotated[Optional[str], typer.Option(help="tiktoken[:ENCODING] (default o200k_base), approx, or a tokenizer.json path.")]
Limit = Annotated[Optional[int], typer.Option(help="Use at most N entries of a file.")]
SharedPrefix = Annotated[int, typer.Option(help="Synthetic: start prompts with one of --prefixes shared prefixes of this many tokens (tests prefix caching on purpose).")]
Prefixes = Annotated[int, typer.Option(help="Synthetic: how many distinct shared prefixes.")]
Words = Annotated[int, typer.Option(help="--dataset words: prompt length in words.")]
RandomIn = Annotated[int, typer.Option(help="--dataset random: input length (vLLM's random dataset).")]
RandomOut = Annotated[int, typer.Option(help="--dataset random: output length.")]
RandomRatio = Annotated[float, typer.Option(help="--dataset random: lengths uniform in len*(1-r)..len*(1+r).")]
RandomPrefix = Annotated[int, typer.Option(help="--dataset random: common prefix length.")]
HfSplit = Annotated[str, typer.Option(help="hf:NAME split.")]
HfColumn = Annotated[Optional[List[str]], typer.Option("--hf-column", help="Map a column: prompt=NAME or max_tokens=NAME (repeatable).")]
Label = Annotated[Optional[List[str]], typer.Option("--label", help="KEY=VALUE stored with the run (repeatable).")]
Out = Annotated[Path, typer.Option(help="Folder for run folders.")]
ServerProbeOpt = Annotated[str, typer.Option(help="Poll the server's own state: auto | vllm | sglang | llamacpp | ollama | tgi | mock | nomyo | off.")]


def _check_probe(kind: str) -> str:
    from .probe.scrape import KINDS
    if kind not in KINDS:
        raise UsageError(f"--server-probe {kind!r}: choose one of {', '.join(KINDS)}")
    return kind


def _parse_labels(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"--label {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _run_label(labels: dict[str, str]) -> str | None:
    """The run folder's suffix: the 'name' label, else all labels."""
    return labels.get("name") or "_".join(f"{k}={v}" for k, v in labels.items()) or None


def _parse_duration(text: str, flag: str) -> float:
    """'90', '90s', '500ms', '2m' -> seconds."""
    t = text.strip().lower()
    try:
        if t.endswith("ms"):
            return float(t[:-2]) / 1000.0
        if t.endswith("s"):
            return float(t[:-1])
        if t.endswith("m"):
            return float(t[:-1]) * 60.0
        if t.endswith("h"):
            return float(t[:-1]) * 3600.0
        return float(t)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a duration such as 30s, 500ms or 2m")


def _parse_think(text: str) -> tuple[float, float]:
    """'5s-10s', '3', '0' -> (lo, hi) seconds."""
    if "-" in text.strip().lstrip("-"):
        lo, hi = text.split("-", 1)
        a, b = _parse_duration(lo, "--think"), _parse_duration(hi, "--think")
    else:
        a = b = _parse_duration(text, "--think")
    if a < 0 or b < a:
        raise UsageError(f"--think {text!r}: need 0 <= LO <= HI, e.g. 5s-10s")
    return a, b


def _wl_extra(shared_prefix_tokens: int, prefixes: int, words: int, random_input_len: int,
              random_output_len: int, random_range_ratio: float, random_prefix_len: int,
              hf_split: str, hf_column: list[str] | None) -> dict:
    cols = {}
    for item in hf_column or []:
        k, sep, v = item.partition("=")
        if not sep or k not in ("prompt", "max_tokens") or not v:
            raise UsageError(f"--hf-column {item!r}: expected prompt=NAME or max_tokens=NAME")
        cols[k] = v
    if not 0 <= random_range_ratio < 1:
        raise UsageError("--random-range-ratio must be in [0, 1)")
    if shared_prefix_tokens < 0 or prefixes < 1:
        raise UsageError("--shared-prefix-tokens must be >= 0 and --prefixes >= 1")
    return {"shared_prefix_tokens": shared_prefix_tokens, "prefixes": prefixes, "words": words,
            "random_input_len": random_input_len, "random_output_len": random_output_len,
            "random_range_ratio": random_range_ratio, "random_prefix_len": random_prefix_len,
            "hf_split": hf_split, "hf_columns": cols}


def _workload(dataset: str, dataset_format: str | None, count: int, seed: int, prompt_tokens: str,
              output_tokens: str | None, turns: int, tokenizer: str | None, limit: int | None,
              multi_turn: bool, extra: dict | None = None):
    from .workload import WorkloadSpec, build_workload, load_tokenizer, parse_range
    extra = dict(extra or {})
    if dataset == "words":
        extra.setdefault("words", 100)
    tok = load_tokenizer(tokenizer)
    spec = WorkloadSpec(dataset=dataset, dataset_format=dataset_format, count=count, seed=seed,
                        prompt_tokens=parse_range(prompt_tokens, "--prompt-tokens"),
                        output_tokens=parse_range(output_tokens, "--output-tokens") if output_tokens else None,
                        turns=turns, multi_turn=multi_turn, limit=limit, tokenizer=tokenizer,
                        **extra)
    if turns < 1:
        raise UsageError("--turns must be at least 1")
    return build_workload(spec, tok), tok


def _target(url: str, model: str | None, api: str | None, api_key: str | None,
            header: list[str] | None):
    from .target import make_target
    if not model:
        raise UsageError("--model is required with --url (the name the server serves)")
    return make_target(url, model, api, api_key, header)


def _guard(fn):
    """Turn our own input errors into one line and exit 2."""
    from .results import RunFolderError
    from .slo import ThresholdError
    from .target import TargetError
    from .workload import DatasetError, TokenizerError

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (UsageError, TargetError, DatasetError, TokenizerError, ThresholdError,
                RunFolderError) as exc:
            raise fail(str(exc))
        except OSError as exc:
            if exc.filename is None:
                raise
            # a path the user gave (--out, --output, --html, --png, a dataset) is not usable
            raise fail(f"{exc.filename}: {exc.strerror}; check the path you gave")
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__signature__ = __import__("inspect").signature(fn)  # type: ignore[attr-defined]
    return wrapper


# -- run -----------------------------------------------------------------------------------------
@app.command()
@_guard
def run(
    url: Url = None,
    model: Model = None,
    api: Api = None,
    api_key: ApiKey = None,
    header: Header = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Closed loop: N requests in flight.")] = None,
    rate: Annotated[Optional[str], typer.Option(help="Open loop: requests per second (or inf).")] = None,
    burstiness: Annotated[float, typer.Option(help="Gamma shape of the gaps: 1 = Poisson, <1 burstier.")] = 1.0,
    arrival: Annotated[str, typer.Option(help="gamma | poisson | constant")] = "gamma",
    max_concurrency: Annotated[Optional[int], typer.Option(help="Open loop: cap on requests in flight.")] = None,
    requests: Annotated[Optional[int], typer.Option(help="How many requests (default 200 unless --duration).")] = None,
    duration: Annotated[Optional[str], typer.Option(help="Stop starting requests after this long, e.g. 60s.")] = None,
    warmup: Annotated[int, typer.Option(help="Requests sent first and not counted.")] = 0,
    dataset: Dataset = "synthetic",
    dataset_format: DatasetFormat = None,
    prompt_tokens: PromptTokens = "256",
    output_tokens: OutputTokens = "128",
    turns: Turns = 1,
    multi_turn: Annotated[bool, typer.Option(help="ShareGPT: whole conversations instead of vLLM's single-turn sampling.")] = False,
    think: Annotated[str, typer.Option(help="Pause between turns of a conversation, e.g. 5s-10s.")] = "0",
    sharegpt_output_len: Annotated[Optional[int], typer.Option(help="ShareGPT: fixed output length.")] = None,
    limit: Limit = None,
    shared_prefix_tokens: SharedPrefix = 0,
    prefixes: Prefixes = 1,
    words: Words = 100,
    random_input_len: RandomIn = 1024,
    random_output_len: RandomOut = 128,
    random_range_ratio: RandomRatio = 0.0,
    random_prefix_len: RandomPrefix = 0,
    hf_split: HfSplit = "train",
    hf_column: HfColumn = None,
    tokenizer: Tokenizer = None,
    seed: Seed = 0,
    ignore_eos: Annotated[bool, typer.Option(help="Ask the server to ignore EOS (vLLM, SGLang).")] = False,
    temperature: Annotated[Optional[float], typer.Option()] = None,
    extra_body: Annotated[Optional[str], typer.Option(help="JSON merged into every request body.")] = None,
    stream: Annotated[bool, typer.Option(help="Stream replies (--no-stream: TTFT equals E2EL).")] = True,
    timeout_connect: Annotated[float, typer.Option(help="Seconds to connect.")] = 10.0,
    timeout_first_token: Annotated[float, typer.Option(help="Seconds to the first token.")] = 300.0,
    timeout_idle: Annotated[float, typer.Option(help="Seconds between two events.")] = 60.0,
    timeout_total: Annotated[float, typer.Option(help="Seconds for a whole request.")] = 900.0,
    save_result: Annotated[Optional[Path], typer.Option(help="Also write vLLM's result JSON here.")] = None,
    percentile_metrics: Annotated[str, typer.Option(help="vLLM: metrics to print percentiles for.")] = "ttft,tpot,itl",
    metric_percentiles: Annotated[str, typer.Option(help="vLLM: percentiles to print, e.g. 50,99.")] = "99",
    goodput: Annotated[Optional[List[str]], typer.Option(help="vLLM SLO KEY:MS, e.g. ttft:500 (repeatable).")] = None,
    served_by_header: Annotated[Optional[str], typer.Option(help="Response header naming the backend.")] = None,
    server_probe: ServerProbeOpt = "auto",
    label: Label = None,
    out: Out = Path("results"),
    progress: Annotated[Optional[bool], typer.Option(help="Live line (default: on a terminal).")] = None,
) -> None:
    """One load level with vLLM-compatible numbers. With no --url, against the built-in mock."""
    from .bench import RunPlan, execute
    from .client import RequestParams, Timeouts

    if concurrency is not None and rate is not None:
        raise UsageError("give --concurrency (closed loop) or --rate (open loop), not both")
    if concurrency is not None and concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    rate_f = None
    if rate is not None:
        try:
            rate_f = float(rate)
        except ValueError:
            raise UsageError(f"--rate {rate!r}: expected a number of requests per second, or inf")
        if not rate_f > 0:
            raise UsageError("--rate must be > 0")
    if arrival not in ("gamma", "poisson", "constant"):
        raise UsageError(f"--arrival {arrival!r}: choose gamma, poisson or constant")
    if burstiness <= 0:
        raise UsageError("--burstiness must be > 0")
    duration_s = _parse_duration(duration, "--duration") if duration else None
    if duration_s is not None and duration_s <= 0:
        raise UsageError("--duration must be above 0")
    if rate_f is not None and math.isinf(rate_f) and requests is None:
        raise UsageError("--rate inf sends everything at once: give --requests N")
    if requests is None and duration_s is None:
        requests = 200
    if requests is not None and requests < 1:
        raise UsageError("--requests must be at least 1")
    extra = {}
    if extra_body:
        try:
            extra = json.loads(extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON ({exc.msg} at column {exc.colno})")
        if not isinstance(extra, dict):
            raise UsageError("--extra-body must be a JSON object, e.g. '{\"top_p\": 0.9}'")
    slo = {}
    for g in goodput or []:
        k, _, v = g.partition(":")
        if k not in ("ttft", "tpot", "e2el") or not v:
            raise UsageError(f"--goodput {g!r}: expected ttft:MS, tpot:MS or e2el:MS")
        try:
            slo[k] = float(v)
        except ValueError:
            raise UsageError(f"--goodput {g!r}: {v!r} is not a number of milliseconds")
    pm = tuple(m.strip() for m in percentile_metrics.split(",") if m.strip())
    for m in pm:
        if m not in ("ttft", "tpot", "itl", "e2el"):
            raise UsageError(f"--percentile-metrics: unknown metric {m!r}; use ttft,tpot,itl,e2el")
    try:
        mp = tuple(float(p) for p in metric_percentiles.split(","))
    except ValueError:
        raise UsageError(f"--metric-percentiles {metric_percentiles!r}: expected numbers like 50,90,99")
    if any(not 0 < p < 100 for p in mp):
        raise UsageError("--metric-percentiles must lie between 0 and 100")
    labels = _parse_labels(label)
    count = (requests or 1000) + warmup
    with _maybe_mock(url) as (url_, model_):
        tgt = _target(url_, model or model_, api, api_key, header)
        wl, tok = _workload(dataset, dataset_format, count, seed, prompt_tokens, output_tokens,
                            turns, tokenizer, limit, multi_turn,
                            {"sharegpt_output_len": sharegpt_output_len, **_wl_extra(shared_prefix_tokens, prefixes, words, random_input_len, random_output_len, random_range_ratio, random_prefix_len, hf_split, hf_column)})
        plan = RunPlan(target=tgt, workload=wl,
                       params=RequestParams(stream=stream, temperature=temperature,
                                            ignore_eos=ignore_eos, extra_body=extra),
                       timeouts=Timeouts(timeout_connect, timeout_first_token, timeout_idle,
                                         timeout_total),
                       concurrency=concurrency if rate_f is None else None,
                       rate=rate_f, burstiness=burstiness, arrival=arrival,
                       max_concurrency=max_concurrency, requests=requests, duration_s=duration_s,
                       warmup=warmup, think_s=_parse_think(think), seed=seed, out=out,
                       label=_run_label(labels),
                       labels=labels, save_result=save_result, percentile_metrics=pm,
                       metric_percentiles=mp, goodput_slo_ms=slo or None, progress=progress,
                       served_by_header=served_by_header, count_tokens=tok.count,
                       server_probe=_check_probe(server_probe))
        if plan.concurrency is None and plan.rate is None:
            plan.concurrency = 1
        code = execute(plan)
    raise typer.Exit(code)


class _maybe_mock:
    """No --url: start the built-in mock (Ollama-like queueing) in a child process."""

    def __init__(self, url: str | None, profile: str = "ollama", **overrides) -> None:
        self.url = url
        self.profile = profile
        self.overrides = overrides
        self.proc = None

    def __enter__(self):
        if self.url:
            return self.url, None
        from mock_server import MockProcess, make_config
        cfg = make_config(self.profile, **self.overrides)
        self.proc = MockProcess(cfg).__enter__()
        typer.echo(f"No --url given: using the built-in mock ({self.profile} profile) at "
                   f"{self.proc.url}", err=True)
        return self.proc.url + "/v1", cfg.models[0]

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.__exit__(*exc)


# -- ramp ----------------------------------------------------------------------------------------
# With no --url, a short demo against the built-in mock: about a minute, and it breaks.
DEMO = {"users": "2,4,6,8,10,12", "hold": "10s", "ramp_in": "2s", "think": "1s-3s",
        "output_tokens": "64", "prompt_tokens": "32-96", "turns": 3}
SERVER = {"hold": "60s", "ramp_in": "10s", "think": "5s-10s", "output_tokens": "128",
          "prompt_tokens": "64-256", "turns": 4}


def _steps(users: Optional[str], start: Optional[float], step: Optional[float],
           up_to: Optional[float], by: str) -> list:
    if users:
        try:
            steps = [float(x) for x in users.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--users {users!r}: expected numbers like 1,2,4,8")
        if not steps or any(s <= 0 for s in steps) or steps != sorted(steps):
            raise UsageError(f"--users {users!r}: need increasing numbers above 0")
        return steps
    start = 2 if start is None else start
    step = 2 if step is None else step
    up_to = 40 if up_to is None else up_to
    if start <= 0 or step <= 0:
        raise UsageError("--start and --step must be above 0")
    if start > up_to:
        raise UsageError(f"--start {start:g} is above --up-to {up_to:g}; lower --start or raise --up-to")
    out, v = [], start
    while v <= up_to + 1e-9:
        out.append(round(v, 6))
        v += step
    if by == "users" and any(abs(s - round(s)) > 1e-9 for s in out):
        raise UsageError("users come in whole numbers: check --start/--step/--up-to")
    return out


@app.command()
@_guard
def ramp(
    url: Url = None,
    model: Model = None,
    api: Api = None,
    api_key: ApiKey = None,
    header: Header = None,
    start: Annotated[Optional[float], typer.Option(help="Users at the first step (default 2).")] = None,
    step: Annotated[Optional[float], typer.Option(help="Users added per step (default 2).")] = None,
    up_to: Annotated[Optional[float], typer.Option(help="Last step (default 40).")] = None,
    users: Annotated[Optional[str], typer.Option(help="Explicit steps, e.g. 1,2,4,8 (overrides start/step/up-to).")] = None,
    by: Annotated[str, typer.Option(help="users (closed loop) | rate (steps are requests/s, open loop).")] = "users",
    ramp_in: Annotated[Optional[str], typer.Option(help="Time to bring a step's new users in (default 10s).")] = None,
    hold: Annotated[Optional[str], typer.Option(help="Time each step holds its load (default 60s).")] = None,
    think: Annotated[Optional[str], typer.Option(help="A user's pause between turns, e.g. 5s-10s (default), 0 allowed.")] = None,
    threshold: Annotated[Optional[List[str]], typer.Option("--threshold", help="e.g. 'ttft.p95<=2s' (repeatable). Default: ttft.p95<=2s, itl.p95<=200ms, errors==0.")] = None,
    keep_going: Annotated[bool, typer.Option(help="Run every step even after one fails.")] = False,
    generator_lag_limit: Annotated[str, typer.Option(help="Event-loop lag p99 past which llmbench calls its own numbers untrustworthy (exit 4).")] = "10ms",
    expect_users: Annotated[Optional[float], typer.Option(help="Exit 1 if fewer users (or req/s) held.")] = None,
    dataset: Dataset = "synthetic",
    dataset_format: DatasetFormat = None,
    prompt_tokens: Annotated[Optional[str], typer.Option(help="Synthetic user message length: N or LO-HI (default 64-256).")] = None,
    output_tokens: Annotated[Optional[str], typer.Option("--output-tokens", "--max-tokens", help="Reply length asked for (default 128).")] = None,
    turns: Annotated[Optional[int], typer.Option(help="Turns per conversation (default 4).")] = None,
    limit: Limit = None,
    shared_prefix_tokens: SharedPrefix = 0,
    prefixes: Prefixes = 1,
    words: Words = 100,
    random_input_len: RandomIn = 1024,
    random_output_len: RandomOut = 128,
    random_range_ratio: RandomRatio = 0.0,
    random_prefix_len: RandomPrefix = 0,
    hf_split: HfSplit = "train",
    hf_column: HfColumn = None,
    tokenizer: Tokenizer = None,
    seed: Seed = 0,
    ignore_eos: Annotated[bool, typer.Option(help="Ask the server to ignore EOS (vLLM, SGLang).")] = False,
    temperature: Annotated[Optional[float], typer.Option()] = None,
    extra_body: Annotated[Optional[str], typer.Option(help="JSON merged into every request body.")] = None,
    timeout_first_token: Annotated[float, typer.Option(help="Seconds to the first token.")] = 120.0,
    timeout_idle: Annotated[float, typer.Option(help="Seconds between two events.")] = 60.0,
    served_by_header: Annotated[Optional[str], typer.Option(help="Response header naming the backend.")] = None,
    server_probe: ServerProbeOpt = "auto",
    label: Label = None,
    out: Out = Path("results"),
    progress: Annotated[Optional[bool], typer.Option(help="Live line (default: on a terminal).")] = None,
) -> None:
    """Add users step by step until the thresholds break, and say why (no --url: a one-minute demo on the built-in mock)."""
    from .client import RequestParams, Timeouts
    from .load.users import RampPlan
    from .ramp import RampRun, execute
    from .slo import DEFAULT_THRESHOLDS, parse_threshold

    if by not in ("users", "rate"):
        raise UsageError(f"--by {by!r}: choose users or rate")
    d = DEMO if not url else SERVER
    if not url and users is None and start is None and step is None and up_to is None:
        users = DEMO["users"]
    steps = _steps(users, start, step, up_to, by)
    hold_s = _parse_duration(hold or d["hold"], "--hold")
    ramp_in_s = _parse_duration(ramp_in or d["ramp_in"], "--ramp-in")
    think_s = _parse_think(think or d["think"])
    if hold_s <= 0:
        raise UsageError("--hold must be above 0")
    thresholds = [parse_threshold(t) for t in (threshold or DEFAULT_THRESHOLDS)]
    extra = {}
    if extra_body:
        try:
            extra = json.loads(extra_body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--extra-body is not valid JSON ({exc.msg} at column {exc.colno})")
        if not isinstance(extra, dict):
            raise UsageError("--extra-body must be a JSON object")
    if think_s[1] > 0 and hold_s < think_s[1]:
        typer.echo(f"warning: --hold {hold_s:g}s is shorter than the longest think time "
                   f"({think_s[1]:g}s): some users send nothing in a hold window", err=True)
    labels = _parse_labels(label)
    n_turns = turns if turns is not None else d["turns"]
    if n_turns < 1:
        raise UsageError("--turns must be at least 1")
    with _maybe_mock(url) as (url_, model_):
        tgt = _target(url_, model or model_, api, api_key, header)
        wl, tok = _workload(dataset, dataset_format, 2000, seed, prompt_tokens or d["prompt_tokens"],
                            output_tokens or d["output_tokens"], n_turns, tokenizer, limit,
                            multi_turn=True, extra=_wl_extra(shared_prefix_tokens, prefixes, words, random_input_len, random_output_len, random_range_ratio, random_prefix_len, hf_split, hf_column))
        plan = RampPlan(steps=steps, by=by, ramp_in_s=ramp_in_s, hold_s=hold_s, think_s=think_s,
                        thresholds=thresholds, keep_going=keep_going, seed=seed,
                        drain_s=max(timeout_first_token, 30.0),
                        lag_limit_ms=_parse_duration(generator_lag_limit, "--generator-lag-limit") * 1000)
        r = RampRun(target=tgt, workload=wl, plan=plan,
                    params=RequestParams(stream=True, temperature=temperature,
                                         ignore_eos=ignore_eos, extra_body=extra),
                    timeouts=Timeouts(10.0, timeout_first_token, timeout_idle, 900.0),
                    expect=expect_users, out=out,
                    label=_run_label(labels), labels=labels,
                    progress=progress, served_by_header=served_by_header, count_tokens=tok.count,
                    mock=None if url else {"profile": "ollama"},
                    server_probe=_check_probe(server_probe))
        code = execute(r)
    raise typer.Exit(code)


# -- probe ---------------------------------------------------------------------------------------
@app.command()
@_guard
def probe(
    router: Annotated[str, typer.Option(help="The router's URL (as clients use it), e.g. http://localhost:12434/v1.")],
    direct: Annotated[str, typer.Option(help="A backend's own URL, e.g. http://localhost:11434/v1.")],
    model: Annotated[str, typer.Option(help="Model name through the router.")],
    direct_model: Annotated[Optional[str], typer.Option(help="Model name at the backend, if it differs.")] = None,
    api: Api = None,
    api_key: ApiKey = None,
    header: Header = None,
    users: Annotated[str, typer.Option(help="Steps of concurrent users, e.g. 1,4,16,64.")] = "1,4,16,64",
    slice_s: Annotated[str, typer.Option("--slice", help="Length of one slice on one path.")] = "5s",
    rounds: Annotated[int, typer.Option(help="Slices per path per step (alternating order).")] = 3,
    think: Annotated[str, typer.Option(help="Pause between a user's turns, e.g. 0 or 1s-3s.")] = "0",
    dataset: Dataset = "synthetic",
    dataset_format: DatasetFormat = None,
    prompt_tokens: PromptTokens = "128",
    output_tokens: OutputTokens = "64",
    turns: Turns = 3,
    limit: Limit = None,
    shared_prefix_tokens: SharedPrefix = 0,
    prefixes: Prefixes = 1,
    words: Words = 100,
    random_input_len: RandomIn = 1024,
    random_output_len: RandomOut = 128,
    random_range_ratio: RandomRatio = 0.0,
    random_prefix_len: RandomPrefix = 0,
    hf_split: HfSplit = "train",
    hf_column: HfColumn = None,
    tokenizer: Tokenizer = None,
    seed: Seed = 0,
    served_by_header: Annotated[Optional[str], typer.Option(help="Response header naming the backend.")] = None,
    server_probe: ServerProbeOpt = "auto",
    label: Label = None,
    out: Out = Path("results"),
) -> None:
    """Router overhead versus compute: the same workload through a router and straight to a backend, interleaved in time."""
    from .client import RequestParams, Timeouts
    from .probe.command import execute
    from .probe.router import ProbePlan
    from .target import make_target

    steps = _steps(users, None, None, None, "users")
    if rounds < 1:
        raise UsageError("--rounds must be at least 1")
    slice_seconds = _parse_duration(slice_s, "--slice")
    if slice_seconds <= 0:
        raise UsageError("--slice must be above 0")
    rt = make_target(router, model, api, api_key, header)
    dt = make_target(direct, direct_model or model, api, api_key, header)
    labels = _parse_labels(label)
    wl, tok = _workload(dataset, dataset_format, 4000, seed, prompt_tokens, output_tokens, turns,
                        tokenizer, limit, multi_turn=True, extra=_wl_extra(shared_prefix_tokens, prefixes, words, random_input_len, random_output_len, random_range_ratio, random_prefix_len, hf_split, hf_column))
    plan = ProbePlan(router=rt, direct=dt, steps=[int(s) for s in steps], slice_s=slice_seconds,
                     rounds=rounds, think_s=_parse_think(think), seed=seed,
                     served_by_header=served_by_header)
    code = execute(plan, wl, RequestParams(), Timeouts(), out,
                   _run_label(labels), labels,
                   _check_probe(server_probe))
    raise typer.Exit(code)


# -- mock ----------------------------------------------------------------------------------------
@app.command()
@_guard
def mock(
    ttft_ms: Annotated[Optional[float], typer.Option(help="Time to first token when idle (ms).")] = None,
    itl_ms: Annotated[Optional[float], typer.Option(help="Gap between tokens (ms).")] = None,
    tokens_per_s: Annotated[Optional[float], typer.Option(help="Alternative to --itl-ms.")] = None,
    tokens: Annotated[Optional[int], typer.Option(help="Reply length when the request sets none.")] = None,
    natural_tokens: Annotated[Optional[int], typer.Option(help="Stop early here (EOS) unless ignore_eos.")] = None,
    chunk_tokens: Annotated[Optional[int], typer.Option(help="Tokens per streamed event.")] = None,
    jitter: Annotated[Optional[float], typer.Option(help="+- fraction of randomness on each delay.")] = None,
    models: Annotated[Optional[str], typer.Option(help="Model names served, comma-separated.")] = None,
    seed: Annotated[Optional[int], typer.Option()] = None,
    parallel: Annotated[Optional[int], typer.Option(help="Slots served at once (0 = unlimited).")] = None,
    max_queue: Annotated[Optional[int], typer.Option(help="Waiting requests before rejecting (0 = unlimited).")] = None,
    prefill_ms_per_token: Annotated[Optional[float], typer.Option(help="Prefill time per uncached prompt token.")] = None,
    prefix_cache: Annotated[Optional[bool], typer.Option(help="Block-hashed LRU prefix cache.")] = None,
    cache_blocks: Annotated[Optional[int], typer.Option(help="Prefix cache capacity in 16-token blocks.")] = None,
    batch_slowdown: Annotated[Optional[float], typer.Option(help="k in step = itl * (1 + k * (running - 1)).")] = None,
    fault_500: Annotated[Optional[float], typer.Option(help="Probability of HTTP 500.")] = None,
    fault_429: Annotated[Optional[float], typer.Option(help="Probability of HTTP 429.")] = None,
    fault_cut: Annotated[Optional[float], typer.Option(help="Probability of a stream cut part-way.")] = None,
    fault_malformed: Annotated[Optional[float], typer.Option(help="Probability of a malformed event.")] = None,
    fault_error_event: Annotated[Optional[float], typer.Option(help="Probability of an error event in the stream.")] = None,
    fault_stall: Annotated[Optional[float], typer.Option(help="Probability of a mid-stream stall.")] = None,
    stall_ms: Annotated[Optional[float], typer.Option(help="Length of a stall.")] = None,
    fault_slow_first_byte: Annotated[Optional[float], typer.Option(help="Probability of a slow first byte.")] = None,
    slow_first_byte_ms: Annotated[Optional[float], typer.Option()] = None,
    profile: Annotated[Optional[str], typer.Option(help="ollama | vllm | llamacpp presets, or a profile FILE (.json/.toml, from --save-profile).")] = None,
    replicas: Annotated[int, typer.Option(help="Independent servers on consecutive ports.")] = 1,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="First port (0 = any free).")] = 8000,
    record: Annotated[Optional[Path], typer.Option(help="Log every request's real event send times here.")] = None,
    record_prompts: Annotated[bool, typer.Option(help="Also log the request messages.")] = False,
    like: Annotated[Optional[Path], typer.Option(help="Fit the mock to the real server of this run folder (a server twin).")] = None,
    save_profile: Annotated[Optional[Path], typer.Option(help="With --like: write the fitted profile (JSON) here and exit.")] = None,
    kv_capacity_tokens: Annotated[Optional[int], typer.Option(help="KV cache size in tokens: admission by blocks, preemption by recompute when full (0 = unlimited).")] = None,
    block_tokens: Annotated[Optional[int], typer.Option(help="Tokens per KV / prefix-cache block.")] = None,
    decode_ms_curve: Annotated[Optional[str], typer.Option(help="Decode step ms with 1,2,... sequences running, e.g. 12.6,42,58,65.")] = None,
    prefill_in_step: Annotated[Optional[bool], typer.Option(help="Prefill runs inside the shared steps, stalling running decodes.")] = None,
    step_token_budget: Annotated[Optional[int], typer.Option(help="Tokens computed per step (chunked prefill; 0 = no limit).")] = None,
) -> None:
    """A mock LLM server that behaves like a real one under load (OpenAI and Ollama routes)."""
    import asyncio
    from mock_server import PROFILES, make_config
    from mock_server.fit import ProfileError, describe, fit_run, load_profile
    from mock_server.fit import save_profile as write_profile
    from mock_server.server import serve_forever

    if tokens_per_s is not None:
        if tokens_per_s <= 0:
            raise UsageError("--tokens-per-s must be > 0")
        itl_ms = 1000.0 / tokens_per_s
    if replicas < 1:
        raise UsageError("--replicas must be at least 1")
    if save_profile is not None and like is None:
        raise UsageError("--save-profile needs --like RUN_DIR (the run to fit)")
    learned: dict = {}
    try:
        if profile and profile not in PROFILES and (Path(profile).suffix.lower() in (".json", ".toml")
                                                          or Path(profile).exists()):
            learned.update(load_profile(Path(profile)))
            profile = None
        if like is not None:
            fitted = fit_run(like)
            typer.echo(describe(fitted), err=True)
            if save_profile is not None:
                write_profile(fitted, save_profile)
                typer.echo(str(save_profile))
                return
            learned.update(fitted.mock)
    except ProfileError as exc:
        raise UsageError(f"{exc} (--profile/--like)")
    try:
        cfg = make_config(profile, ttft_ms=ttft_ms, itl_ms=itl_ms, tokens=tokens,
                          natural_tokens=natural_tokens, chunk_tokens=chunk_tokens, jitter=jitter,
                          models=models, seed=seed, parallel=parallel, max_queue=max_queue,
                          prefill_ms_per_token=prefill_ms_per_token, prefix_cache=prefix_cache,
                          cache_blocks=cache_blocks, batch_slowdown=batch_slowdown,
                          fault_500=fault_500, fault_429=fault_429, fault_cut=fault_cut,
                          fault_malformed=fault_malformed, fault_error_event=fault_error_event,
                          fault_stall=fault_stall, stall_ms=stall_ms,
                          fault_slow_first_byte=fault_slow_first_byte,
                          slow_first_byte_ms=slow_first_byte_ms, _learned=learned,
                          kv_capacity_tokens=kv_capacity_tokens, block_tokens=block_tokens,
                          decode_ms_curve=decode_ms_curve, prefill_in_step=prefill_in_step,
                          step_token_budget=step_token_budget)
    except ValueError as exc:
        raise UsageError(str(exc))
    total = sum(getattr(cfg, f) for f in ("fault_500", "fault_429", "fault_cut", "fault_malformed",
                                          "fault_error_event", "fault_stall", "fault_slow_first_byte"))
    if total > 1:
        raise UsageError("fault probabilities add up to more than 1")
    try:
        asyncio.run(serve_forever(cfg, replicas, host, port, str(record) if record else None,
                                  record_prompts, announce=False))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port")


# -- report, compare, runs -----------------------------------------------------------------------
@app.command()
@_guard
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (results/<date>-<kind>...).")],
    format: Annotated[str, typer.Option("--format", help="html | md | csv")] = "html",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Where to write (html default: RUN_DIR/report.html; md/csv: stdout).")] = None,
) -> None:
    """Write a run's report: one self-contained HTML file, markdown for a PR, or CSV."""
    if format not in ("html", "md", "csv"):
        raise UsageError(f"--format {format!r}: choose html, md or csv")
    from .results import load_run
    run = load_run(run_dir)       # says so if the folder or its schema is wrong
    if run.get("status") == "partial":
        typer.echo(f"note: {run_dir} is a partial run (interrupted); reporting what finished", err=True)
    if format == "html":
        from .report.html import write
        typer.echo(str(write(run_dir, output)))
        return
    from .report.text import to_csv, to_markdown
    text = to_markdown(run_dir) if format == "md" else to_csv(run_dir)
    if output:
        output.write_text(text, encoding="utf-8")
        typer.echo(str(output))
    else:
        typer.echo(text, nl=False)


@app.command()
@_guard
def compare(
    run_dirs: Annotated[List[Path], typer.Argument(help="Two or more run folders; the first is the baseline.")],
    max_regression: Annotated[Optional[str], typer.Option(help="Exit 1 when a metric got worse by more than this, e.g. 10%.")] = None,
    metric: Annotated[Optional[List[str]], typer.Option("--metric", help="held, ttft.p50, ttft.p95, ttft.p99, itl.p50, itl.p95, e2el.p50, e2el.p95, output_throughput (repeatable).")] = None,
    html_out: Annotated[Path, typer.Option("--html", help="Where to write the HTML comparison.")] = Path("compare.html"),
    png: Annotated[Optional[Path], typer.Option(help="Also write the overlay chart as a PNG.")] = None,
) -> None:
    """Runs side by side (e.g. OLLAMA_NUM_PARALLEL=1 vs 4), with a regression gate for CI."""
    from .compare import DEFAULT_METRICS, CompareError, compare as do_compare, load_runs
    from .report import compare_html
    limit = None
    if max_regression is not None:
        t = max_regression.strip().rstrip("%")
        try:
            limit = float(t) / (100.0 if max_regression.strip().endswith("%") or float(t) > 1 else 1.0)
        except ValueError:
            raise UsageError(f"--max-regression {max_regression!r}: expected a percentage such as 10%")
        if limit < 0:
            raise UsageError("--max-regression must be >= 0")
    try:
        runs = load_runs(run_dirs)
        result = do_compare(runs, tuple(metric or DEFAULT_METRICS), limit)
    except CompareError as exc:
        raise UsageError(str(exc))
    typer.echo(compare_html.console_text(result))
    path = compare_html.write(result, runs, html_out)
    typer.echo(f"HTML: {path}")
    if png is not None:
        from .report.charts import compare_png
        compare_png([(r.name, r.steps) for r in runs], "users", str(png))
        typer.echo(f"PNG: {png}")
    if result["regressions"]:
        raise typer.Exit(1)


@app.command()
@_guard
def runs(out: Annotated[Path, typer.Option(help="Folder of run folders.")] = Path("results")) -> None:
    """List run folders: date, command, labels, headline result."""
    from .results import list_runs
    rows = list_runs(out)
    if not rows:
        typer.echo(f"no runs under {out}")
        return
    for r in rows:
        if "error" in r:
            typer.echo(f"{r['folder']}  (unreadable: {r['error']})")
            continue
        labels = " ".join(f"{k}={v}" for k, v in r["labels"].items())
        status = "" if r["status"] == "complete" else f" [{r['status']}]"
        typer.echo(f"{r['date']}  {r['kind']:<5} {r['folder']}{status}\n    {r['command']}"
                   + (f"\n    labels: {labels}" if labels else "") + f"\n    {r['headline']}")


# -- datasets inspect ----------------------------------------------------------------------------
@datasets_app.command("inspect")
@_guard
def datasets_inspect(
    spec: Annotated[str, typer.Argument(help="synthetic | random | words | FILE | hf:NAME")],
    dataset_format: DatasetFormat = None,
    count: Annotated[int, typer.Option(help="Conversations to sample (synthetic/random/ShareGPT).")] = 1000,
    prompt_tokens: PromptTokens = "256",
    output_tokens: OutputTokens = None,
    turns: Turns = 1,
    multi_turn: Annotated[bool, typer.Option(help="ShareGPT: whole conversations.")] = False,
    limit: Limit = None,
    shared_prefix_tokens: SharedPrefix = 0,
    prefixes: Prefixes = 1,
    words: Words = 100,
    random_input_len: RandomIn = 1024,
    random_output_len: RandomOut = 128,
    random_range_ratio: RandomRatio = 0.0,
    random_prefix_len: RandomPrefix = 0,
    hf_split: HfSplit = "train",
    hf_column: HfColumn = None,
    tokenizer: Tokenizer = None,
    seed: Seed = 0,
) -> None:
    """Counts, length distributions and the fingerprint of a workload."""
    import numpy as np
    wl, tok = _workload(spec, dataset_format, count, seed, prompt_tokens, output_tokens, turns,
                        tokenizer, limit, multi_turn, _wl_extra(shared_prefix_tokens, prefixes, words, random_input_len, random_output_len, random_range_ratio, random_prefix_len, hf_split, hf_column))
    convs = wl.conversations
    p = np.array([t.prompt_tokens or 0 for c in convs for t in c.turns], dtype=float)
    o = np.array([t.max_tokens for c in convs for t in c.turns if t.max_tokens], dtype=float)
    n_turns = np.array([len(c.turns) for c in convs], dtype=float)

    def dist(a: "np.ndarray") -> str:
        if not len(a):
            return "-"
        return (f"min {a.min():.0f}  p50 {np.percentile(a, 50):.0f}  mean {a.mean():.1f}  "
                f"p90 {np.percentile(a, 90):.0f}  max {a.max():.0f}")
    typer.echo(f"source:         {wl.source}")
    typer.echo(f"tokenizer:      {wl.tokenizer}")
    typer.echo(f"conversations:  {len(convs)}")
    typer.echo(f"user turns:     {int(n_turns.sum())}  ({dist(n_turns)} per conversation)")
    typer.echo(f"prompt tokens:  {dist(p)}")
    typer.echo(f"output tokens:  {dist(o)}")
    typer.echo(f"fingerprint:    {wl.fingerprint}")
    for w in wl.warnings:
        typer.echo(f"note: {w}")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
