"""A sweep's judgement (pure): which setting held the most, whether the evidence separates
the best from the rest (each tied pair compared at the common load, ``compare.at_load``), and
the stated answer: ``commands/sweep.py`` runs the ramps and reads their folders, this decides.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from llmbench.results.schema import NO_DATA, Step, SweepSetting, amount


NOT_JUDGED = "not_judged"      # a setting's ramp ran, but no step had enough data to judge


def judged(steps: Sequence[Step]) -> bool:
    """Whether any step held or broke (rather than having too few requests for both)."""
    return any(st.state != NO_DATA for st in steps)


def _fmt_held(r: SweepSetting) -> str:
    """'6 [5, 7]' over repeats; '2' when every repeat held the same (an interval of no width
    is none)."""
    iv = r.held_interval
    if iv and iv.low is not None and iv.high is not None and iv.low != iv.high:
        return f"{r.held:g} [{iv.low:g}, {iv.high:g}]"
    if r.search is not None and r.search.broke_at is not None and r.held is not None:
        return f"{r.held:g} ({r.search.broke_at:g} broke)"     # a searched limit
    return f"{r.held:g}"


Pairs = dict[tuple[str, str], dict[str, Any]]     # (base, other) -> metric -> compare.AtLoad


def _unranked(failed: list[SweepSetting], died: list[SweepSetting],
              unjudged: list[SweepSetting], cut: list[SweepSetting]) -> list[str]:
    """The sentences of the settings the answer does not rank, and why."""
    out = []
    if failed:
        out.append("; ".join(
            f"{r.name} failed to start" if r.status == "server_failed"
            else f"{r.name}: the ramp could not start" for r in failed) + " (see the logs).")
    if died:
        out.append("; ".join(f"{r.name}'s server died during the ramp" for r in died)
                   + " (its log is in the sweep folder).")
    if cut:
        out.append(", ".join(r.name for r in cut) + " was interrupted before any step held: "
                   "no answer for " + ("it" if len(cut) == 1 else "them") + ".")
    if unjudged:
        out.append(", ".join(r.name for r in unjudged)
                   + " could not be judged: every step had too few requests to measure (not "
                   "enough data), even held 4 times as long, so " + ("it is" if len(unjudged) == 1 else "they are")
                   + " not ranked; hold each step longer (--hold) or think less (--think).")
    return out


def _one_best(best: SweepSetting, unit: str, top: float, measured: int,
              unjudged: bool) -> str:
    """One setting held the most: the sentence, and whether its limit lies higher."""
    if measured == 1:
        word = "user" if unit == "users" and best.held == 1 else unit
        text = (f"Only {best.name} could be {'judged' if unjudged else 'measured'}: it "
                f"held {_fmt_held(best)} {word}")
    else:
        text = f"{best.name} held the most {unit} ({_fmt_held(best)})"
    if best.search is not None and best.search.stopped == "ceiling":
        text += (f" and never broke up to the search's ceiling, so its limit lies higher "
                 f"(raise --up-to above {top:g})")
    elif best.verdict_kind == "held" and best.search is None:
        text += f" and never broke, so its limit lies higher (add steps above {top:g})"
    return text


def _noise(tied: list[SweepSetting], fewer: list[SweepSetting],
           short: Callable[[SweepSetting], str], measured: int) -> str:
    """Whether the difference in users held may be noise (the repeats' intervals overlap)."""
    first = tied[0].held_interval
    lo = first.low if first is not None else None
    close = [r for r in fewer if lo is not None and r.held_interval is not None
             and r.held_interval.high is not None and r.held_interval.high >= lo]
    if close:
        return (f" The intervals of {', '.join(r.name for r in tied)} and "
                f"{', '.join(short(r) for r in close)} overlap: that difference may be noise "
                "(more --repeat would tell).")
    if lo is None and measured > 1 and fewer:
        return " One ramp per setting, so no interval on users held (--repeat 3 gives one)."
    return ""


def answer(results: Sequence[SweepSetting], unit: str, pairs: Pairs | None = None,
           load: float | None = None) -> tuple[str, SweepSetting | None]:
    """The stated answer, and the best setting's result (None when there is none or when the
    evidence cannot separate the best), in the order docs/commands.md ("llmbench sweep") gives:
    users held, then the knee, then the table's numbers at ``load`` (the highest load every
    setting ran; ``pairs[(a, b)]``: ``compare.at_load`` with a as base), else a tie. The
    sentence names the statistic it used and its interval."""
    measured = [r for r in results if r.held is not None]
    failed = [r for r in results if r.status in ("server_failed", "ramp_failed")]
    died = [r for r in results if r.status == "server_died"]
    unjudged = [r for r in results if r.status == NOT_JUDGED]
    cut = [r for r in results if r.status == "interrupted" and r.held is None]
    single = len(results[0].setting) == 1 if results else True

    def short(r: SweepSetting) -> str:       # "8" after "OLLAMA_NUM_PARALLEL=4"
        return next(iter(r.setting.values())) if single else r.name
    tail_parts = _unranked(failed, died, unjudged, cut)
    if not measured:
        head = "No setting could be judged." if unjudged and not failed and not died \
            else "No setting could be measured."
        return " ".join([head] + tail_parts), None
    top = max(r.held for r in measured if r.held is not None)
    if top == 0:
        return " ".join(["No setting held the first step under the thresholds; each ramp's "
                         "verdict says why."] + tail_parts), None
    order = {id(r): i for i, r in enumerate(results)}
    tied = sorted((r for r in measured if r.held == top), key=lambda r: order[id(r)])
    fewer = [r for r in measured if r.held is not None and r.held < top]
    best: SweepSetting | None = tied[0]
    if len(tied) == 1:
        text = _one_best(tied[0], unit, top, len(measured), bool(unjudged))
    else:
        best, text = _break_tie(tied, unit, top, short, pairs or {}, load)
    if fewer:
        text += "; " + ", ".join(f"{short(r)} held {_fmt_held(r)}" for r in fewer)
    text += "."
    text += _noise(tied, fewer, short, len(measured))
    return " ".join([text] + tail_parts), best


def _knee_count(k: Any, unit: str) -> tuple[float, float, float] | None:
    """(estimate, low, high) a knee (``results.schema.Knee``) ranks a setting by: whole users
    (``users``, ``users_ci``; from the fraction for knees saved before those existed), or the
    rate as interpolated."""
    if k is None or k.estimate is None or not k.ci:
        return None
    if unit != "users":
        return float(k.estimate), float(k.ci[0]), float(k.ci[1])
    import math
    if k.users is not None and k.users_ci:
        return float(k.users), float(k.users_ci[0]), float(k.users_ci[1])
    return (float(math.floor(k.estimate + 1e-9)), float(math.floor(k.ci[0] + 1e-9)),
            float(math.floor(k.ci[1] + 1e-9)))


def _knee_text(k: tuple[float, float, float], unit: str) -> str:
    """'3 [2, 4]', '3' (an interval of no width is none), '2.4 [2.1, 2.6] req/s'."""
    if unit == "users":
        n, lo, hi = (f"{v:.0f}" for v in k)
        return n if lo == hi else f"{n} [{lo}, {hi}]"
    n, lo, hi = (f"{v:.1f}" for v in k)
    return f"{n} {unit}" if lo == hi else f"{n} [{lo}, {hi}] {unit}"


def _pct(x: float | None) -> str:
    return "unbounded" if x is None else f"{x * 100:+.0f} %"


def _inverse(change: float | None) -> float | None:
    """b's change against a from a's against b (a/b - 1 from b/a - 1); None when a's was
    -100 % (b measured 0: no finite change the other way)."""
    if change is None or 1 + change <= 0:
        return None
    return 1 / (1 + change) - 1


def _ms(v: float) -> str:
    """A latency as the sweep's table writes it (report.console.fmt_ms, which analysis may not
    import)."""
    if v != v:
        return "–"
    if v == float("inf"):
        return "∞"
    return f"{v / 1000:.2f}s" if v >= 1000 else f"{v:.0f}ms" if v >= 100 else f"{v:.1f}ms"


def _value(metric: str, v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return f"{v:.1f} tok/s" if metric == "output_throughput" else _ms(float(v))


_LABEL = {"ttft.p95": "TTFT p95", "itl.p50": "ITL p50", "output_throughput": "output"}


def _by_knee(tied: Sequence[SweepSetting], unit: str,
             head: str) -> tuple[SweepSetting, str] | None:
    """2. the knee, when every tied setting has one with an interval and the best one's
    interval is clear of the others'."""
    knees = {r.name: _knee_count(r.knee, unit) for r in tied}
    counted = {name: k for name, k in knees.items() if k is not None}
    if len(counted) != len(knees):
        return None
    ranked = sorted(tied, key=lambda r: -counted[r.name][0])
    first, rest = ranked[0], ranked[1:]
    k1 = counted[first.name]
    if not all(k1[1] > counted[r.name][2] for r in rest):
        return None
    others = ", ".join(f"{_knee_text(counted[r.name], unit)} for {r.name}" for r in rest)
    what = "the most users under" if unit == "users" else "the load where"
    threshold = (first.knee.threshold if first.knee is not None else None) or "the threshold"
    return first, (f"{head}; {first.name} holds more by the knee ({what} "
                   f"{threshold}{'' if unit == 'users' else ' is crossed'}, "
                   f"interpolated between the steps, 95 % interval): "
                   f"{_knee_text(k1, unit)} against {others}")


def _view(pairs: Pairs, a: SweepSetting, b: SweepSetting) -> dict[str, Any] | None:
    """metric -> compare.AtLoad with a as base; flipped when only (b, a) was computed."""
    got = pairs.get((a.name, b.name))
    if got is not None:
        return got
    rev = pairs.get((b.name, a.name))
    if rev is None:
        return None
    flip = {"base": "other", "other": "base", None: None}
    out = {}
    for m, e in rev.items():
        ch, ci = e.change, e.ci
        # a bound at -100 % (a bootstrap draw of 0) is no bound the other way
        out[m] = replace(e, base=e.other, other=e.base, better=flip[e.better],
                         change=_inverse(ch),
                         ci=None if not ci else [_inverse(ci[1]), _inverse(ci[0])])
    return out


def _beats(pairs: Pairs, a: SweepSetting, b: SweepSetting) -> list[str] | None:
    """The metrics a is better on beyond the noise, when it is worse on none."""
    v = _view(pairs, a, b)
    if not v:
        return None
    wins = [m for m, e in v.items() if e.better == "base"]
    losses = [m for m, e in v.items() if e.better == "other"]
    return wins if wins and not losses else None


def _won(a: SweepSetting, tied: Sequence[SweepSetting], wins: dict[str, list[str] | None],
         pairs: Pairs, short: Callable[[SweepSetting], str]) -> str:
    """What a did better than each other tied setting, each with its interval."""
    parts = []
    for b in tied:
        if b is a:
            continue
        v = _view(pairs, a, b) or {}
        for m in wins[b.name] or []:
            e = v[m]
            # the change of b against a, as the table reads: a's value vs b's; whose change
            # against whose, said: a bare "+700 %" after a's win read as a's
            ch, ci = e.change, e.ci or [0.0, 0.0]
            parts.append(f"{_LABEL.get(m, m)} {_value(m, e.base)} vs {_value(m, e.other)} for "
                         f"{short(b)} ({_pct(ch or 0.0)} against {short(a)}, 95 % interval "
                         f"{_pct(ci[0])} to {_pct(ci[1])})")
    from llmbench.analysis.compare import AT_LOAD_METRICS
    same = [_LABEL.get(m, m) for m in AT_LOAD_METRICS
            if all(m not in (wins[n] or []) for n in wins)]
    return "; ".join(parts) + (f"; {', '.join(same)} the same within the noise" if same else "")


def _trade_offs(tied: Sequence[SweepSetting], pairs: Pairs) -> list[str]:
    out = []
    for i, a in enumerate(tied):
        for b in tied[i + 1:]:
            v = _view(pairs, a, b) or {}
            wa = [_LABEL.get(m, m) for m, e in v.items() if e.better == "base"]
            wb = [_LABEL.get(m, m) for m, e in v.items() if e.better == "other"]
            if wa and wb:
                out.append(f"{a.name} has the better {', '.join(wa)}, {b.name} the "
                           f"better {', '.join(wb)}")
    return out


def _break_tie(tied: Sequence[SweepSetting], unit: str, top: float,
               short: Callable[[SweepSetting], str], pairs: Pairs,
               load: float | None) -> tuple[SweepSetting | None, str]:
    names = " and ".join(r.name for r in tied) if len(tied) == 2 else \
        ", ".join(r.name for r in tied)
    head = f"{names} {'both' if len(tied) == 2 else 'all'} held {amount(top, unit)}"
    by_knee = _by_knee(tied, unit, head)
    if by_knee is not None:
        return by_knee
    # 3. the table's numbers at the highest common load, each with its interval
    at = f"at {amount(load, unit)}" if load is not None else "at a common load"
    if not any(_view(pairs, a, b) for a in tied for b in tied if a is not b):
        return None, (f"{head}; no common load with enough requests to compare them further, so "
                      f"they tie on this evidence. To separate them: finer steps, --repeat 3, "
                      f"or a longer --hold")
    for a in tied:
        wins = {b.name: _beats(pairs, a, b) for b in tied if b is not a}
        if all(wins.values()):
            return a, (f"{head}; {at}, the highest load all ran, {a.name} did better: "
                       + _won(a, tied, wins, pairs, short))
    # no setting beats every other: a trade-off, or a tie
    trade = _trade_offs(tied, pairs)
    if trade:
        return None, (f"{head}; {at} neither is better on every count: " + "; ".join(trade)
                      + " (95 % intervals); choose by what matters more to your users")
    return None, (f"{head}, and {at} their TTFT p95, ITL p50 and output tok/s differ within "
                  f"the noise (each 95 % interval of the change includes none): they tie on this "
                  f"evidence. To separate them: finer steps between {top:g} and the next, "
                  f"--repeat 3, or a longer --hold")


def common_load(results: Sequence[SweepSetting]) -> float | None:
    """The highest load every measured setting ran (held or not): where they compare."""
    sets = [{st.load for st in r.steps or []} for r in results if r.held is not None]
    sets = [s for s in sets if s]
    both = set.intersection(*sets) if sets else set()
    return max(both) if both else None
