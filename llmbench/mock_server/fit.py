"""Fit the mock to a real server from one of its run folders: a server twin.

From the records (and the server's own samples in ``server.jsonl`` when it was probed):

- the fixed part of TTFT and prefill time per uncached prompt token, by least squares on requests
  that had the server to themselves (TTFT against prompt tokens minus ``cached_tokens``);
- the decode step as a curve of the number of sequences decoding at once (the median gap between
  token events at each count, leaving out gaps that overlap another request's prefill);
- whether a new request's prefill stalls the running ones (gaps that overlap a prefill against
  clean gaps at the same count), and whether a prompt's last tokens take a step of their own
  (the running ones' gaps at a new first token: one long gap, or a long then a short one);
- the slots (the server's report, else the most requests seen streaming at once when others
  queued), a queue limit when requests were turned away, reply lengths when EOS ended replies,
  tokens per event, the API flavour and model names.

The profile is a small JSON (or TOML) file: ``{"mock": {settings}, "fit": {evidence}}``; only
``mock`` is read back. Pure: no network, no clock.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmbench.records import definitions
from llmbench.records.record import Record, json_lines, load_records

from .engine import MockConfig

PROFILE_VERSION = 1
MIN_GAPS = 20             # gaps at one decoding count before it earns a point on the curve
STALL_RATIO = 1.5         # stalled gaps this much above clean ones: prefill stalls decode
# per-step token budgets of the servers' defaults (cannot be seen in short prompts)
STEP_BUDGET = {"llamacpp": 2048, "ollama": 512, "vllm": 2048}
# prefix-cache granularity: llama.cpp reuses the whole common prefix, vLLM 16-token blocks
BLOCK_TOKENS = {"llamacpp": 4, "ollama": 4, "vllm": 16}


class ProfileError(Exception):
    """A run folder or profile file that cannot be used; the message says where and why."""


@dataclass
class Fit:
    """Mock settings fitted to a run, with the evidence each was read from."""
    mock: dict[str, Any]
    evidence: dict[str, Any] = field(default_factory=dict)

    def profile(self) -> dict[str, Any]:
        return {"llmbench_profile": PROFILE_VERSION, "mock": self.mock, "fit": self.evidence}


# -- reading a run folder ------------------------------------------------------------------------
def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    # a line cut by an interrupted run, or a damaged one, is skipped (records.json_lines)
    return [d for d in json_lines(path) if isinstance(d, dict)] if path.is_file() else []


def load_run_folder(run_dir: Path) -> tuple[dict[str, Any], list[Record], list[dict[str, Any]]]:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ProfileError(f"{run_dir}: not a folder; pass a run folder (results/<date>-...)")
    req = run_dir / "requests.jsonl"
    if not req.exists():
        raise ProfileError(f"{req}: missing; --like needs a run folder with its records")
    for f in (req, run_dir / "run.json", run_dir / "server.jsonl"):
        if f.exists() and not f.is_file():          # /dev/zero or a pipe never ends
            raise ProfileError(f"{f}: not a regular file; --like reads a run folder's files")
    run: dict[str, Any] = {}
    if (run_dir / "run.json").exists():
        try:
            run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{run_dir / 'run.json'}:{exc.lineno}: not valid JSON ({exc.msg})")
        except (UnicodeDecodeError, RecursionError):
            raise ProfileError(f"{run_dir / 'run.json'}: not a run.json llmbench wrote "
                               "(not UTF-8, or nested too deeply)") from None
    return run, load_records(req), _read_jsonl(run_dir / "server.jsonl")


# -- the fit -------------------------------------------------------------------------------------
def _uncached(r: Record) -> int:
    return max((r.prompt_tokens or 0) - (r.cached_tokens or 0), 0)


def fit_ttft(recs: list[Record]) -> tuple[float, float, dict[str, Any]]:
    """(fixed ms, ms per uncached token) from requests that had the server to themselves."""
    alone = []
    for r in recs:
        assert r.first_token is not None
        if not any(o is not r and o.start < r.first_token and (o.end or o.start) > r.start
                   for o in recs):
            alone.append(r)
    used = alone if len(alone) >= 3 else recs
    x = np.array([_uncached(r) for r in used], dtype=float)
    # TTFT by its definition, on the first token time this fit reasons with throughout
    y = np.array([definitions.ttft(r.start, r.first_token) * 1000.0 for r in used], dtype=float)  # type: ignore[operator]
    if len(used) >= 2 and np.ptp(x) > 0:
        # robust to the odd slow one: fit, drop residuals over 3 MADs, fit again
        b, a = np.polyfit(x, y, 1)
        res = y - (a + b * x)
        mad = float(np.median(np.abs(res - np.median(res)))) or 1.0
        keep = np.abs(res) <= 3 * 1.4826 * mad + 1e-9
        if keep.sum() >= 2 and np.ptp(x[keep]) > 0:
            b, a = np.polyfit(x[keep], y[keep], 1)
    else:
        a, b = (float(np.median(y)) if len(y) else 0.0), 0.0
    if b < 0:                          # prompt length explains nothing: all fixed
        a, b = float(np.median(y)), 0.0
    if a < 0:                          # through the origin
        b = float(np.sum(x * y) / max(np.sum(x * x), 1e-9))
        a = 0.0
    ev = {"requests": len(used), "alone": len(alone),
          "uncached_tokens": [int(x.min()), int(x.max())] if len(x) else None}
    return float(a), float(b), ev


def _prefill_windows(recs: list[Record], fixed_ms: float, per_tok_ms: float
                     ) -> list[tuple[float, float, Record]]:
    out = []
    for r in recs:
        assert r.first_token is not None
        span = (fixed_ms + per_tok_ms * _uncached(r)) / 1000.0
        out.append((max(r.first_token - span, r.start), r.first_token, r))
    return out


def fit_decode(recs: list[Record], windows: list[tuple[float, float, Record]]
               ) -> tuple[list[float], dict[str, Any]]:
    """Median gap by sequences decoding at once; and the gaps that overlapped a prefill."""
    spans = sorted((r.first_token, r.end) for r in recs)  # type: ignore[type-var]
    clean: dict[int, list[float]] = {}
    stalled: dict[int, list[float]] = {}
    for r in recs:
        t = r.token_times
        for a, b in zip(t, t[1:]):
            mid = (a + b) / 2
            n = sum(1 for s, e in spans if s <= mid <= e)
            hit = any(o is not r and w0 < b and w1 > a for w0, w1, o in windows)
            (stalled if hit else clean).setdefault(max(n, 1), []).append((b - a) * 1000.0)
    points = {n: float(np.median(v)) for n, v in clean.items() if len(v) >= MIN_GAPS}
    if not points and clean:          # too little data: one point from everything
        points = {1: float(np.median([g for v in clean.values() for g in v]))}
    curve: list[float] = []
    if points:
        top = max(points)
        xs = sorted(points)
        for n in range(1, top + 1):    # interpolate counts seen too rarely
            curve.append(float(np.interp(n, xs, [points[k] for k in xs])))
        curve = [round(v, 3) for v in np.maximum.accumulate(curve)]   # more never faster
    ev = {"gaps_by_decoding": {str(n): len(v) for n, v in sorted(clean.items())},
          "stalled_gaps_by_decoding": {str(n): len(v) for n, v in sorted(stalled.items())}}
    ratios = []
    for n, v in stalled.items():
        if curve:
            ratios += [g / curve[min(n, len(curve)) - 1] for g in v]
    ev["stalled_gap_ratio_median"] = round(float(np.median(ratios)), 2) if ratios else None
    return curve, ev


def fit_last_step(recs: list[Record]) -> dict[str, Any]:
    """Does a prompt end with a step of its own (MockConfig.prefill_last_step)? A request decoding
    when another's first token came has a token then, ending a gap: the long stall (the whole
    prompt) when prefill is one step; a short one, after the long stall, when the prompt's last
    tokens take a step of their own. Counts both patterns and the short steps' length."""
    split = single = 0
    short_ms: list[float] = []
    for r in recs:
        ft = r.first_token
        assert ft is not None
        for o in recs:
            if o is r or o.first_token is None or o.end is None:
                continue
            if not (o.first_token < r.start and o.end > ft + 0.001) or len(o.token_times) < 3:
                continue
            tt = o.token_times
            k = min(range(len(tt)), key=lambda i: abs(tt[i] - ft))
            if abs(tt[k] - ft) > 0.010 or k < 2:      # no token of o at r's first token
                continue
            g1, g0 = tt[k] - tt[k - 1], tt[k - 1] - tt[k - 2]
            if g1 >= g0:
                single += 1
            else:
                split += 1
                short_ms.append(g1 * 1000.0)
    return {"split": split, "single": single,
            "short_step_ms_median": round(float(np.median(short_ms)), 1) if short_ms else None}


def fit_slots(recs: list[Record], samples: list[dict[str, Any]], fixed_ms: float,
              per_tok_ms: float) -> tuple[int, str]:
    reported = [s.get("slots") for s in samples if s.get("slots")]
    if reported:
        return int(max(reported)), "server samples (slots)"
    streaming = 0
    queued = False
    for r in recs:
        assert r.first_token is not None
        n = sum(1 for o in recs if o.first_token <= r.first_token <= (o.end or 0))  # type: ignore[operator]
        streaming = max(streaming, n)
        expect_ms = fixed_ms + per_tok_ms * _uncached(r)
        if definitions.ttft(r.start, r.first_token) * 1000.0 > max(3 * expect_ms, expect_ms + 200.0):
            queued = True
    if queued and streaming:
        return streaming, f"records: requests queued while {streaming} streamed at once"
    return 0, "records: no queueing seen (slots unknown, left unlimited)"


def _server_of(run: dict[str, Any], samples: list[dict[str, Any]]
               ) -> tuple[dict[str, Any], str | None, str, str]:
    """(the run's target, the server kind its samples named, its API, the mock flavour)."""
    target = (run.get("config") or {}).get("target") or {}
    kinds = [s.get("kind") for s in samples if s.get("kind")]
    kind = kinds[-1] if kinds else None
    api = str(target.get("api") or "")
    flavour = "ollama" if kind == "ollama" or api.startswith("ollama") else \
        "llamacpp" if kind == "llamacpp" else "vllm"
    return target, kind, api, flavour


def _replies(ok: list[Record]) -> tuple[list[int], int, list[int]]:
    """(output lengths, tokens per event, the lengths of replies that ended by EOS: at most
    200 quantiles of them, so the file stays small)."""
    events = [len(r.token_times) for r in ok]
    outs = [r.output_tokens or len(r.token_times) for r in ok]
    chunk = max(int(round(float(np.median([o / e for o, e in zip(outs, events)])))), 1)
    eos = sorted(int(r.output_tokens or 0) for r in ok if r.finish_reason == "stop" and r.output_tokens)
    if len(eos) > 200:
        eos = [int(v) for v in np.quantile(eos, np.linspace(0, 1, 200), method="nearest")]
    return outs, chunk, eos


def _max_queue(rejected: list[Record], ok: list[Record], samples: list[dict[str, Any]]) -> int:
    """The queue a server that rejected requests held: the most waiting its samples saw, else
    a tenth of the requests; 0 (unlimited) when it rejected none."""
    if not rejected:
        return 0
    waits = [s.get("waiting") or 0 for s in samples]
    return int(max(waits)) if waits and max(waits) > 0 else max(len(ok) // 10, 1)


def fit_run(run_dir: Path) -> Fit:
    run, records, samples = load_run_folder(Path(run_dir))
    ok = [r for r in records if r.ok and r.first_token is not None and r.end is not None
          and not r.warmup and r.token_times]
    if len(ok) < 3:
        raise ProfileError(f"{run_dir}: {len(ok)} successful streamed requests; a fit needs at least 3")
    target, kind, api, flavour = _server_of(run, samples)

    fixed_ms, per_tok_ms, ttft_ev = fit_ttft(ok)
    windows = _prefill_windows(ok, fixed_ms, per_tok_ms)
    curve, dec_ev = fit_decode(ok, windows)
    ratio = dec_ev["stalled_gap_ratio_median"]
    stalls = ratio >= STALL_RATIO if ratio is not None else True
    slots, slots_from = fit_slots(ok, samples, fixed_ms, per_tok_ms)
    last = fit_last_step(ok)
    # a pattern seen at least 3 times and in most cases; unseen: one step, as before
    last_step = stalls and last["split"] >= 3 and last["split"] > 2 * last["single"]

    outs, chunk, eos = _replies(ok)
    rejected = [r for r in records if r.status in (429, 503)]
    max_queue = _max_queue(rejected, ok, samples)
    cached_any = any((r.cached_tokens or 0) > 0 for r in ok)
    model = target.get("model")

    mock: dict[str, Any] = {
        "flavour": flavour,
        "models": [model] if model else ["mock"],
        "ttft_ms": round(fixed_ms, 3),
        "prefill_ms_per_token": round(per_tok_ms, 4),
        "itl_ms": curve[0] if curve else 10.0,
        "decode_ms_curve": curve,
        "prefill_in_step": bool(stalls),
        "prefill_last_step": bool(last_step),
        "step_token_budget": STEP_BUDGET[flavour],
        "parallel": slots,
        "max_queue": max_queue,
        "tokens": int(max(outs)),
        "natural_tokens": 0,
        "natural_tokens_dist": eos,
        "chunk_tokens": chunk,
        "prefix_cache": cached_any,
        "block_tokens": BLOCK_TOKENS[flavour],
    }
    evidence = {
        "source": str(run_dir), "server_kind": kind, "api": api or None,
        "requests": len(ok), "failed": len(records) - len(ok),
        "ttft": {**ttft_ev, "fixed_ms": round(fixed_ms, 3),
                 "prefill_ms_per_token": round(per_tok_ms, 4)},
        "decode": dec_ev,
        "prefill_stalls_decode": ("yes" if stalls else "no") if ratio is not None else
        "not seen (no prefill overlapped a decode); assumed yes",
        "prompt_last_step": {**last, "separate": bool(last_step)},
        "slots_from": slots_from,
        "rejected": len(rejected),
        "eos_replies": len(eos),
        "step_token_budget_from": f"{flavour} default",
    }
    return Fit(mock=mock, evidence=evidence)


# -- profile files ------------------------------------------------------------------------------
def save_profile(fit: Fit, path: Path) -> None:
    Path(path).write_text(json.dumps(fit.profile(), indent=2) + "\n", encoding="utf-8")


def load_profile(path: Path) -> dict[str, Any]:
    """The ``mock`` settings of a profile file (JSON, or TOML with a ``[mock]`` table),
    checked against the mock's settings; ProfileError names the file and the problem."""
    path = Path(path)
    from llmbench.records import safejson
    try:
        # a regular file (not /dev/zero), at most 1 MB (a profile is ~1 kB), UTF-8
        text = safejson.read_file(path, "--profile", 1 << 20, what="profile file")
    except safejson.JsonLimitError as exc:
        raise ProfileError(str(exc).removeprefix("--profile ")) from None
    try:
        if path.suffix.lower() == ".toml":
            doc = tomllib.loads(text)
        else:
            doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})")
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML ({exc})")
    except RecursionError:
        raise ProfileError(f"{path}: nested too deeply to be a profile") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("mock"), dict):
        raise ProfileError(f"{path}: no 'mock' table of settings; write one with "
                           "llmbench mock --like RUN_DIR --save-profile FILE")
    settings = doc["mock"]
    probe = MockConfig()
    try:
        probe.update(settings)
    except ValueError as exc:
        raise ProfileError(f"{path}: {exc}")
    return {k: getattr(probe, k) for k in settings}


def describe(fit: Fit) -> str:
    m = fit.mock
    curve = ", ".join(f"{v:g}" for v in m["decode_ms_curve"]) or "-"
    slots = m["parallel"] or "unlimited"
    return (f"fitted from {fit.evidence['requests']} requests ({fit.evidence['server_kind'] or 'unknown'} "
            f"server): TTFT {m['ttft_ms']:.1f} ms + {m['prefill_ms_per_token']:.3f} ms/uncached token; "
            f"decode step ms at 1.. running: {curve}; slots {slots} ({fit.evidence['slots_from']}); "
            f"prefill stalls decode: {fit.evidence['prefill_stalls_decode']}"
            + ("; a prompt's last tokens take a shared step of their own"
               if m.get("prefill_last_step") else ""))

