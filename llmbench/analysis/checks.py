"""Checks of what the client saw that change what a run means. Pure functions of records.

- Reply lengths: a server that ignores the length field (Ollama's /v1 reads only
  ``max_tokens``), or replies that end at EOS, change the workload silently: throughput and
  E2E latency then mean something else.
- Replies sent whole although a stream was asked for (TTFT is then E2E latency).
- Requests sent again because a kept-alive connection had been closed by the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmbench.results.schema import Run

from typing import Any, Iterable, TypeVar

from llmbench.records.record import Record
from llmbench.records.store import RecordStore
from llmbench.results.cache import CacheCounts, PromptCache
from llmbench.results.run import OutputLength

C = TypeVar("C", bound=CacheCounts)

# Most requests must differ before it is worth saying: a few early EOS are normal.
MOST = 0.5


def check(st: RecordStore, ignore_eos: bool = False, api: str | None = None
          ) -> OutputLength | None:
    """Whether the replies were as long as asked, on the store's columns (nothing per request;
    run.json's "output_length"; None: nothing to check)."""
    import numpy as np
    asked_all, asked_ok = st.ints("max_tokens")
    out_all, out_ok = st.ints("output_tokens")
    use = st.col("ok") & ~st.col("warmup") & asked_ok & (asked_all != 0) & out_ok
    del asked_ok, out_ok
    # a tool call ends where its arguments do, not at the asked length (a sparse field)
    called = [i for i, e in st.extras().items() if e.get("first_tool") is not None]
    if called:
        use[np.asarray(called, dtype=np.int64)] = False
    server, stop = st.str_id("server"), st.str_id("stop")
    source, finish = st.view_strs("output_tokens_source"), st.view_strs("finish_reason")
    n = asked_sum = out_sum = longer_n = shorter_n = stopped_n = 0
    approximate = False
    # a block of records at a time: a million-record run's per-request temporaries would be
    # 8 MB each
    for c in range(0, len(use), 1 << 16):
        rows = np.nonzero(use[c:c + (1 << 16)])[0] + c
        if not len(rows):
            continue
        asked, out = asked_all[rows], out_all[rows]
        approx = source[rows] != server
        # a client-side count of the reply text is only close to the server's: 10 % (>= 2)
        tol = np.where(approx, np.maximum(2.0, 0.1 * asked), 0.0)
        longer = out > asked + tol
        shorter = ~longer & (out < asked - tol)
        n += len(rows)
        asked_sum += int(asked.sum())
        out_sum += int(out.sum())
        longer_n += int(longer.sum())
        shorter_n += int(shorter.sum())
        if stop >= 0:
            stopped_n += int((shorter & (finish[rows] == stop)).sum())
        approximate = approximate or bool(approx.any())
    if not n:
        return None
    return _length_check(n, asked_sum, out_sum, longer_n, shorter_n, stopped_n, approximate,
                         ignore_eos, api)


def _length_check(n: int, asked_sum: int, got_sum: int, longer: int, shorter: int,
                  stopped: int, approximate: bool, ignore_eos: bool,
                  api: str | None) -> OutputLength:
    asked = asked_sum / n
    got = got_sum / n
    message = None
    if longer > MOST * n:
        message = (f"{longer} of {n} replies were longer than asked ({got:.0f} tokens on average "
                   f"for {asked:.0f} asked): the server ignores the length field. Ollama's /v1 and "
                   "LM Studio read only max_tokens (--max-tokens-field max_tokens); check what "
                   "your server reads.")
    elif shorter > MOST * n:
        message = (f"{shorter} of {n} replies were shorter than asked ({got:.0f} tokens on "
                   f"average for {asked:.0f} asked)")
        if api == "ollama" or ignore_eos:
            message += (": the model stopped at its end-of-sequence token. Ollama has no "
                        "ignore_eos, so reply lengths vary there by nature; compare runs by "
                        "tokens/s, not by requests/s." if api == "ollama" else
                        " although --ignore-eos was given: the server does not honour it.")
        elif stopped > MOST * n:
            message += (": the model stopped at its end-of-sequence token. Pass --ignore-eos "
                        "(vLLM, SGLang, llama.cpp) for exact lengths; Ollama has no ignore_eos.")
        else:
            message += "."
    return OutputLength(checked=n, asked_mean=round(asked, 2), received_mean=round(got, 2),
                       longer=longer, shorter=shorter, approximate=approximate, message=message)


def notes(run: "Run") -> list[str]:
    """Sentences to print after a run (a ``results.schema.Run``)."""
    c = run.findings.output_length
    out = [c.message] if c is not None and c.message else []
    n = run.findings.not_streamed or 0
    if n:
        out.append(f"{n} replies were not streamed: the server ignored stream=true (TTFT equals "
                   "E2E latency for them); use --no-stream for such a server.")
    n = run.findings.connection_resends or 0
    if n:
        out.append(f"{n} requests were sent again on a new connection: the server had closed a "
                   "kept-alive connection before they reached it (not counted as errors; their "
                   "latency includes the lost attempt).")
    tel = run.findings.run_telemetry
    if tel is not None:
        out.extend(str(n) for n in tel.notes)    # a source that did not answer...
    return out


def not_streamed(st: RecordStore, asked_stream: bool) -> int:
    """Replies the server sent whole although a stream was asked for."""
    _, status = st.ints("status")
    return int((~st.col("stream") & status).sum()) if asked_stream else 0


def resends(st: RecordStore) -> int:
    """Requests sent again after a kept-alive connection turned out closed."""
    return int(st.ints("retries")[0].sum())


# -- the server's prefix cache ---------------------------------------------------------------
# First turns with more of their prompt tokens cached than this (and more than the workload
# shares on purpose, plus CACHE_MARGIN) flatter TTFT: the prompts were not new to the server.
CACHE_HIGH = 0.3
CACHE_MARGIN = 0.2
# --same-prompts or a given salt: say the numbers include cache hits from this share on
CACHE_SAY = 0.1
# probe paths whose cached shares differ by more than this are not like for like
CACHE_PATHS_DIFFER = 0.1


def _cache_counts(st: RecordStore, mask: Any, of: type[C] = CacheCounts) -> C:  # type: ignore[assignment]
    """Cached against prompt tokens of the successful requests ``mask`` keeps that reported both
    (``of``: the part to make, the counts of a path or the whole run's)."""
    import numpy as np
    cached, c_ok = st.ints("cached_tokens")
    prompt, p_ok = st.ints("prompt_tokens")
    told = mask & c_ok & p_ok
    total = int(prompt[told].sum())
    hit = int(cached[told].sum())
    return of(requests=int(np.count_nonzero(told)), cached_tokens=hit, prompt_tokens=total,
              share=min(hit / total, 1.0) if total else None)


# Ollama's OpenAI-compatible /v1 said nothing of its cache before 0.34 (usage has no
# cached_tokens), though it keeps each slot's prompt and reuses its prefix
OLLAMA_V1_NOTE = ("Ollama's OpenAI-compatible /v1 does not report cached prompt tokens, so "
                  "its cache hits are not seen here: the per-run salt is what keeps earlier "
                  "runs' prompts out of its cache (--api ollama reads its native counts)")
# its native /api before 0.34: no prompt_eval_cached_count; prompt_eval_count counts only what
# it evaluated on 0.30-0.33 (the client's count minus it: a lower bound, session._ollama_cached)
OLLAMA_NATIVE_NOTE = ("Ollama's native API gave no prompt_eval_cached_count: cached tokens are "
                      "inferred from first turns whose prompt_eval_count was under half the "
                      "prompt (a lower bound)")
OLLAMA_NONE_SHORT = ("; none came back short, so either nothing was cached or this Ollama "
                     "counts the whole prompt and its hits are not seen: the per-run salt is what "
                     "keeps earlier runs' prompts out of its cache")


def _ollama_counted(st: RecordStore) -> bool:
    """Some reply of Ollama's native API counted its cached prompt tokens itself."""
    return any("prompt_eval_cached_count" in (e.get("server_timing") or {})
               for e in st.extras().values())


def prompt_cache(records: Iterable[Record], salt: dict[str, Any] | None = None,
                 shared_share: float | None = None, server_kind: str | None = None,
                 api: str | None = None) -> PromptCache | None:
    """How much of the prompts the server said it took from its prefix cache (run.json's
    "prompt_cache", results.cache.PromptCache), over successful measured requests that reported
    it, overall, on first turns (whose prompts a run makes new: later turns resend their
    history, which a cache rightly holds) and per probe path; and the one line to print when
    it flatters the run. ``shared_share``: the share of each prompt the workload shares on
    purpose (None: unknown, as for files). None: no request reported cached tokens, unless the
    server is Ollama (``server_kind``, or the native ``api``): then ``note`` says so."""
    st = records if isinstance(records, RecordStore) else RecordStore.of(records)
    if not len(st):
        return None
    ok = st.col("ok") & ~st.col("warmup")
    out = _cache_counts(st, ok, PromptCache)
    native = str(api or "").startswith("ollama")
    # what Ollama's /v1 does not report concerns its OpenAI routes only: a --api tgi run against
    # a server that also answers Ollama's routes did not use them
    v1 = api is None or str(api) in ("openai-chat", "openai", "embeddings")
    if not out.requests:
        if (server_kind != "ollama" or not v1) and not native:
            return None
        return _ollama_unreported(out, salt)
    turn, _ = st.ints("turn")
    first = _cache_counts(st, ok & (turn == 0))
    out.first_turns = first
    paths = st.view_strs("path")
    table = st.table()
    for pid in sorted(set(paths.tolist())):     # not np.unique: it imports numpy.ma
        name = table[int(pid)]
        if name:
            out.by_path[name] = _cache_counts(st, ok & (paths == pid) & (turn == 0))
    source = (salt or {}).get("source") or "none"
    reuse = source != "per run"
    out.salt = source
    share = out.share or 0.0
    f_share = first.share
    what = (f"{share * 100:.0f}% of prompt tokens came from the server's prefix cache "
            f"({out.cached_tokens} of {out.prompt_tokens}, {out.requests} requests "
            "reported it)")
    if reuse and share >= CACHE_SAY:
        why = ("--same-prompts" if "same-prompts" in source else
               "--prompt-salt" if source == "--prompt-salt" else "no per-run salt")
        out.message = (f"{what}: with {why} these numbers include cache hits by request "
                       "(their prefill skipped); TTFT is not what new prompts would see")
    elif not reuse and f_share is not None and f_share >= CACHE_HIGH and \
            f_share > (shared_share or 0.0) + CACHE_MARGIN:
        known = "" if shared_share is None else \
            f", the workload shares {shared_share * 100:.0f}% on purpose"
        out.message = (f"{f_share * 100:.0f}% of first-turn prompt tokens came from the "
                       "server's prefix cache although this run's prompts were new to it"
                       f"{known}: TTFT is flattered (repeated rows in the dataset, another "
                       "client sending the same prompts, or a server cache that ignores the "
                       "salt)")
    if native and not _ollama_counted(st):
        out.note = OLLAMA_NATIVE_NOTE + ("" if first.cached_tokens else OLLAMA_NONE_SHORT)
    if len(out.by_path) > 1:
        shares = {k: v.share for k, v in out.by_path.items() if v.share is not None}
        if len(shares) > 1 and max(shares.values()) - min(shares.values()) > CACHE_PATHS_DIFFER:
            out.paths_differ = (
                "the paths differ in prompt-cache hits on first turns ("
                + ", ".join(f"{k} {v * 100:.0f}%" for k, v in shares.items())
                + "): their TTFT compares cached against computed prefill, not the router's "
                "overhead")
    return out


def _ollama_unreported(out: PromptCache, salt: dict[str, Any] | None) -> PromptCache:
    """Ollama's /v1 (or a native API that counted nothing): no share, the note, and with
    prompts that may repeat on purpose the warning that their hits go unseen."""
    source = (salt or {}).get("source") or "none"
    out.share, out.salt, out.server, out.note, out.message = None, source, "ollama", \
        OLLAMA_V1_NOTE, None
    if source != "per run":
        why = ("--same-prompts" if "same-prompts" in source else
               "--prompt-salt" if source == "--prompt-salt" else "no per-run salt")
        out.message = (f"with {why} the prompts may repeat an earlier run's, and Ollama's "
                       "/v1 does not say how many it found cached: TTFT may include cache "
                       "hits that nothing here measured")
    return out


def cache_lines(run: "Run") -> list[str]:
    """The console's lines about the prefix cache of a run (``results.schema.Run``): the share
    when a server reported one, then the warning when it flatters the numbers."""
    c = run.findings.prompt_cache
    if c is None:
        return []
    out = []
    if c.share is not None:
        parts = [f"{c.requests} requests reported it"]
        first = c.first_turns
        if first is not None and first.share is not None and first.requests < c.requests:
            parts.append(f"first turns {first.share * 100:.0f}%")
        if len(c.by_path) > 1:
            parts.append("first turns by path: " + ", ".join(
                f"{k} {v.share * 100:.0f}%" for k, v in c.by_path.items()
                if v.share is not None))
        out.append(f"Prompt cache: {c.share * 100:.0f}% of prompt tokens served from the "
                   f"server's cache ({'; '.join(parts)})")
    if c.note:
        out.append(f"Prompt cache: {c.note}")
    if c.message:
        out.append(f"WARNING: {c.message}")
    return out                          # a probe says paths_differ with its own verdict


def record_checks(records: Iterable[Record], params: object, api: str | None,
                  workload: Any = None, server_kind: str | None = None) -> dict:
    """What every run.json carries about the client's view, the same for run, ramp and probe
    (``workload``: the run's, for its salt and shared prefix; ``server_kind``: as
    ``prompt_cache`` reads it)."""
    st = RecordStore.of(records)          # read several times below, on its columns
    salt = workload.describe_salt() if workload is not None else None
    return {"output_length": check(st, getattr(params, "ignore_eos", False), api),
            "not_streamed": not_streamed(st, getattr(params, "stream", True)),
            "connection_resends": resends(st),
            "prompt_cache": prompt_cache(st, salt,
                                         getattr(workload, "shared_share", None),
                                         server_kind, api)}
