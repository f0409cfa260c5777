"""Whether a search's step is already settled, so that its hold can end early (``ramp --find``).

A percentile threshold ``ttft.p95<500ms`` holds when at most 5 % of requests take 500 ms or
more. The step is judged, at the end of its hold, on the requests that started in the hold
window. Asked during the hold, this says whether that verdict is already settled at the stated
confidence (95 %), reading only what is known without bias:

- **Censoring.** A request still in flight is known to be over the limit once it has waited
  longer than the limit, and known to be under only once its first token came; reading the
  finished ones alone would favour the quick. So only the requests that started at least the
  limit before now count (``known``): each of them has its verdict, finished or not (one still
  waiting for its first token is over).
- **Clusters.** Requests over the limit come in bursts (a queue that forms makes several wait
  at once), so they are not independent draws. The requests over the limit are grouped into
  episodes (their waits overlap in time); the counts are divided by the mean episode size
  before the binomial test (a design effect), so a single burst is not taken for many
  independent misses.
- **Warm-up.** Queues build over a step, and users joined in a ramp-in start in step: a step
  is said to hold early only once every user of the step has at least ``MIN_TURNS`` requests
  known in the window (each has cycled through its think time and reply at least that often).
  A step that breaks early is not held to this: queues that are still growing only make the
  rest of the hold worse.

Then a threshold is

- **broken beyond doubt** when so many are over the limit that a share of 5 % or less is not
  credible (P(Binomial(n, 0.05) >= m) < 5 %, on the episode-adjusted counts);
- **held beyond doubt** when so few are over that a share of 5 % or more is not credible
  (P(Binomial(n, 0.05) <= m) < 5 %: 59 requests none over at 95 %), every user past its
  warm-up turns;
- **held so far** (only a step that grows the load, which the search checks again from above:
  a wrong "held" there is found out by the steps above and by the limit's confirmation, which
  never settles so): none over, every user past its warm-up turns, the judge's minimum of
  requests. A step aimed at the limit (narrowing) or confirming it ends early held only beyond
  doubt; else it holds in full, as it would without settling.

A count that must stay zero (``errors==0``) is broken beyond doubt by one error in the window
(it can only grow). A percentile of token gaps (``itl.p95<=200ms``) may end a growing step as
held so far once every gap of each user's first turns is within its limit (gaps come in runs
from one reply, so no bound is claimed on them). Any other threshold (means, throughput,
rates, sessions) keeps the step from settling as held: it then holds in full, or ends early
only when a threshold above breaks.

A step whose hold runs out unsettled is asked once more (``final``): it then ended ``full``,
and says what its checks stood at ("2 of 40 TTFTs over 500 ms: neither over nor under 5 %
beyond doubt at 95 %"), so every step says why its hold ended when it did.

Pure: records in, a ``Settled`` (or None: not settled yet) out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from llmbench.records.definitions import is_measured
from llmbench.records.record import Record
from llmbench.specs.thresholds import Threshold

CONFIDENCE = 0.95
MIN_TURNS = 2                      # known requests of each user before a step may hold early
# the metrics whose verdict on one request is known once the limit has passed since its start
_TIMED = ("ttft", "ttfo", "e2el")
_BELOW = ("<", "<=")
# why a step's hold ended (results.search.Trial.ended)
HELD, HELD_SO_FAR, BROKE, FULL = "held", "held_so_far", "broke", "full"


@dataclass(frozen=True)
class Settled:
    """How a step's hold ended: settled before its end (``ended``: ``held``, ``held_so_far``
    or ``broke``) or not (``full``: it held in full), ``after_s`` into its hold, and why in
    one line (for ``full``, what the checks stood at when the hold ran out)."""

    ended: str
    after_s: float
    why: str

    @property
    def text(self) -> str:
        if self.ended == FULL:
            return f"held the full {self.after_s:.1f} s: {self.why}"
        return f"settled after {self.after_s:.1f} s: {self.why}"


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), summed in log space (n is a step's requests: thousands at most)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    lgn = math.lgamma(n + 1)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(lgn - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                          + i * lp + (n - i) * lq)
    return min(total, 1.0)


def share_test(over: int, n: int, share: float, confidence: float = CONFIDENCE) -> bool | None:
    """Of ``n`` independent requests ``over`` were over the limit and the threshold allows a
    share ``share`` (0.05 for a p95). True: under that share beyond doubt; False: over it
    beyond doubt; None: not yet."""
    if n <= 0:
        return None
    alpha = 1.0 - confidence
    if binom_cdf(over, n, share) < alpha:
        return True
    if over > 0 and 1.0 - binom_cdf(over - 1, n, share) < alpha:
        return False
    return None


def episodes(spans: Sequence[tuple[float, float]], turnover_s: float) -> int:
    """How many independent bursts the (start, end) waits of the requests over the limit make:
    waits that overlap in time are one episode, counted once per ``turnover_s`` it lasts (a
    request's time in service: a queue's state is renewed about that often, so a server
    overloaded throughout is many bursts, not one)."""
    count = 0
    first = reach = -math.inf
    for start, end in sorted(spans):
        if start > reach:
            if reach > -math.inf:
                count += max(1, math.ceil((reach - first) / turnover_s))
            first = start
        reach = max(reach, end)
    if reach > -math.inf:
        count += max(1, math.ceil((reach - first) / turnover_s))
    return count


@dataclass(frozen=True)
class Known:
    """One percentile threshold's known requests in the window so far: ``n`` of them, ``over``
    the limit in ``bursts`` episodes, and the fewest known requests of any of the step's
    users (0 when a user has none)."""

    n: int
    over: int
    bursts: int
    least_turns: int

    @property
    def design(self) -> float:
        """The mean requests per burst: how many requests over the limit count as one."""
        return self.over / self.bursts if self.bursts else 1.0


def known(g: Threshold, done: Sequence[Record], flying: Sequence[Record], now: float,
          users: int) -> Known:
    """The requests whose verdict on ``g`` is known ``now`` (the module's censoring rule)."""
    limit_s = g.value / 1000.0
    strict = g.op == "<"
    all_ = (g.stat or "").endswith("_all")
    cutoff = now - limit_s
    n = over = 0
    spans: list[tuple[float, float]] = []
    per_user: dict[Any, int] = {}

    def count(r: Record, v: float | None, end: float) -> None:
        nonlocal n, over
        n += 1
        per_user[r.user] = per_user.get(r.user, 0) + 1
        if v is None or ((v >= limit_s) if strict else (v > limit_s)):
            over += 1
            spans.append((r.start, end))

    for r in done:
        if r.start > cutoff:
            continue
        v = getattr(r, g.metric) if r.ok else None
        if v is None and not all_ and not r.ok:
            continue                    # a failed request is not in a non-_all statistic
        count(r, v, r.start + v if v is not None else r.done or now)
    for r in flying:
        if r.start > cutoff:
            continue
        v = getattr(r, g.metric) if g.metric != "e2el" and r.token_times else None
        count(r, v, r.start + v if v is not None else now)
    least = min(per_user.values()) if len(per_user) >= users else 0
    # a request's time in service, the median of the window's finished ones
    took = sorted(r.e2el for r in done if r.ok and r.e2el is not None)
    turnover = max(took[len(took) // 2], limit_s) if took else limit_s
    return Known(n, over, episodes(spans, turnover), least)


def _ms(x_s: float) -> str:
    return f"{x_s * 1000:.0f} ms" if x_s < 1 else f"{x_s:.2g} s"


def _percentile(stat: str | None) -> float | None:
    base = (stat or "").removesuffix("_all")
    if not base.startswith("p"):
        return None
    try:
        q = float(base[1:]) / 100.0
    except ValueError:
        return None
    return q if 0.0 < q < 1.0 else None


def judge_one(g: Threshold, k: Known, q: float, provisional: bool,
              confidence: float = CONFIDENCE) -> tuple[str, str] | None:
    """(how, why) once ``g`` is settled on what is known, else None."""
    share = 1.0 - q
    need = max(math.ceil(0.25 / share - 1e-9), 1)       # metrics.min_samples
    if k.n < need:
        return None
    d = max(k.design, 1.0)
    name, limit, pct = _words(g, confidence)
    # broken: the fewest independent misses the counts can mean (n rounded up)
    if k.over / k.n > share and share_test(math.floor(k.over / d), math.ceil(k.n / d), share,
                                           confidence) is False:
        bursts = f" ({k.bursts} bursts)" if k.bursts < k.over else ""
        return BROKE, (f"{k.over} of {k.n} {name} over {limit}{bursts}: > "
                       f"{share * 100:g} % at {pct}")
    if k.least_turns < MIN_TURNS:
        return None
    # held: the most the misses can mean, against the fewest independent requests
    if share_test(math.ceil(k.over / d), math.floor(k.n / d), share, confidence) is True:
        return HELD, (f"{k.n - k.over} of {k.n} {name} under {limit}: < "
                      f"{share * 100:g} % over at {pct}")
    if provisional and k.over == 0:
        return HELD_SO_FAR, (f"{k.n} of {k.n} {name} under {limit}, each user "
                             f"{MIN_TURNS}+ in (held so far)")
    return None


def _words(g: Threshold, confidence: float) -> tuple[str, str, str]:
    return g.metric.upper() + "s", _ms(g.value / 1000.0), f"{confidence * 100:g} %"


def standing(g: Threshold, k: Known, q: float, provisional: bool,
             confidence: float = CONFIDENCE) -> str:
    """Why ``g`` is not settled on what is known (``judge_one`` said None): too few requests
    known, a user not yet past its warm-up turns, or a share over the limit that is neither
    over nor under the threshold's beyond doubt."""
    share = 1.0 - q
    need = max(math.ceil(0.25 / share - 1e-9), 1)
    name, limit, pct = _words(g, confidence)
    if k.n < need:
        return f"{k.n} {name} known, under the {need} a p{q * 100:g} needs"
    bursts = f" ({k.bursts} bursts)" if 0 < k.bursts < k.over else ""
    counts = f"{k.over} of {k.n} {name} over {limit}{bursts}"
    if k.least_turns < MIN_TURNS and k.over / k.n <= share:
        return f"{counts}, a user with under {MIN_TURNS} turns in"
    if k.over == 0 and not provisional:
        # none over: how many it takes to rule out the share at this confidence
        rule_out = math.ceil(math.log(1.0 - confidence) / math.log1p(-share) - 1e-9)
        return f"{counts}: under the {rule_out} that rule out {share * 100:g} % at {pct}"
    return f"{counts}: neither over nor under {share * 100:g} % beyond doubt at {pct}"


def _itl_so_far(g: Threshold, q: float, done: Sequence[Record], users: int) -> str | None:
    """Held so far on a token-gap threshold (the module says when and why no bound): the
    judge's minimum of finished replies, each user's ``MIN_TURNS`` of them, every gap within."""
    limit_s = g.value / 1000.0
    ok = [r for r in done if r.ok and len(r.token_times) > 1]
    per_user: dict[Any, int] = {}
    for r in ok:
        per_user[r.user] = per_user.get(r.user, 0) + 1
    need = max(math.ceil(0.25 / (1.0 - q) - 1e-9), 1)
    if len(ok) < need or len(per_user) < users or min(per_user.values()) < MIN_TURNS:
        return None
    for r in ok:
        if any((gap >= limit_s) if g.op == "<" else (gap > limit_s) for gap in r.itls):
            return None
    return f"every token gap of {len(ok)} replies within {_ms(limit_s)}"


# how one check stands during a hold, besides HELD, HELD_SO_FAR and BROKE: not settled (the
# step holds on), or settled neither way but no bar to holding early (errors==0 none failed)
_OPEN, _QUIET = "open", "quiet"


def _check(g: Threshold, done: Sequence[Record], flying: Sequence[Record], now: float, users: int,
           provisional: bool, confidence: float) -> tuple[str, str]:
    """How one threshold stands on the window so far, and why in words."""
    # a share within T or an agent-session metric cannot be bounded here: it keeps a step
    # from holding early
    settles = not g.on_sessions and g.within_ms is None
    if settles and g.metric == "errors" and g.op == "==" and g.value == 0 and g.stat is None:
        bad = sum(1 for r in done if not r.ok)
        if bad:
            return BROKE, f"{bad} request{'s' * (bad != 1)} failed ({g.text})"
        return _QUIET, f"none failed ({g.text})"
    q = _percentile(g.stat)
    if settles and g.metric == "itl" and g.op in _BELOW and q is not None and provisional:
        gaps = _itl_so_far(g, q, done, users)
        if gaps is None:
            return _OPEN, f"{g.text}: a gap over its limit, or too few replies"
        return HELD_SO_FAR, gaps
    if not settles or g.metric not in _TIMED or g.op not in _BELOW or q is None:
        return _OPEN, f"{g.text} is judged on the whole hold only"
    k = known(g, done, flying, now, users)
    got = judge_one(g, k, q, provisional, confidence)
    if got is None:
        return _OPEN, standing(g, k, q, provisional, confidence)
    return got


def settle(gates: Sequence[Threshold], records: Iterable[Record], active: Iterable[Record],
           index: int, users: int, hold_start: float, now: float, why: str,
           confidence: float = CONFIDENCE, final: bool = False) -> Settled | None:
    """Whether step ``index`` (``users`` users, run by the search for ``why``: pace.WHYS) is
    settled ``now``, from its hold window's requests so far (``records`` finished, ``active``
    in flight); ``final``: the hold ran out."""
    after = now - hold_start
    done = [r for r in records if r.step == index and r.start >= hold_start
            and is_measured(r.warmup, r.error_kind)]
    flying = [r for r in active if r.step == index and r.start >= hold_start and not r.warmup]
    stood: list[tuple[str, str]] = []
    for g in gates:
        how, words = _check(g, done, flying, now, users, why == "grow", confidence)
        if how == BROKE:
            return Settled(BROKE, after, words)
        stood.append((how, words))
    held = [(h, w) for h, w in stood if h in (HELD, HELD_SO_FAR)]
    if not held or any(h == _OPEN for h, _ in stood):
        if not final:
            return None
        open_ = [w for h, w in stood if h in (_OPEN, _QUIET)]
        return Settled(FULL, after, "; ".join(open_) or "no threshold to settle it sooner")
    how = HELD_SO_FAR if any(h == HELD_SO_FAR for h, _ in held) else HELD
    return Settled(how, after, "; ".join(w for _, w in held))


def settler(thresholds: Iterable[Any]) -> Any:
    """The ramp shape's ``settle`` for a search's steps (load.shapes.ramp.Ramp.settle): asked
    during a hold with the window so far and why the step runs."""
    gates = list(thresholds)

    def ask(w: Any, why: str, final: bool = False) -> Settled | None:
        return settle(gates, w.records, w.active, w.index, int(w.load), w.hold_start,
                      w.hold_end, why, final=final)
    return ask
