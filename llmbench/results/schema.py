"""The results contract: what a run is, as the typed objects the pipeline builds, and the table
of its summary's keys (docs/results.md: the folder, and reading it from Python).

The pipeline builds these objects (``metrics.summarize`` a ``Summary``, the ramp's judge a
``Step`` with its ``Check``s and ``Steady`` state, ``verdict.explain`` a ``Verdict``, each
command a ``Run``) and writes them with ``to_dict()``: run.json's keys as they have always been
(a summary is vLLM's flat dict, so that a run folder compares key by key with ``vllm bench
serve --save-result``); how every folder written so far reads back: ``results.contract``.

Reading a statistic by name (a threshold's ``ttft.p95``): ``Summary.value("ttft", "p95")``;
its on-disk name: ``key("ttft", "p95")``. Nothing is computed here.

Schema versions: 1 is the only one written so far (``SCHEMA_VERSION``); ``Run.from_dict``
reads it, and folders written before ``schema_version`` existed, which are version 1 too.

The contract's modules (``summary``, ``step``, ``verdict``, ``run``, ``sweep``) are all named
here, so ``llmbench.results.schema`` imports keep working.
"""

from llmbench.results.contract import JSONObject, JSONValue  # noqa: F401
from llmbench.results.summary import (  # noqa: F401
    SCHEMA_VERSION, READABLE_SCHEMAS, LATENCY, EXTRA_LATENCY, CENSORED, REASONING, COUNTS,
    OTHER_LATENCY, AGENTS, METRICS, SCALARS, SHARES, HIGHER_IS_BETTER, pct_word, key,
    within_key, STATS, stat_key, Metric, Within, ErrorSample, Summary)
from llmbench.results.step import (  # noqa: F401
    RepeatOf, OutageSpan, HeldInterval, RepeatRun, Repeats, StepState, HELD, OVER, NO_DATA, Check,
    Steady, ClassStep, Step, last_held, deciding_step, amount, held_load, ramp_code, ladder,
    search_code)
from llmbench.results.verdict import (  # noqa: F401
    VerdictKind, Knee, ClassVerdict, Compared, IsolatedClass, Isolation, Verdict)
from llmbench.results.run import (  # noqa: F401
    InFlight, RouterCounters, Affinity, Backend, Backends, LostWorker, OutputLength, RouterBound,
    Workers, Overhead, ProbeStep, ServerProbe, RunKind, RunState, Router, Findings, RUN_KEYS, Run,
    RunResult)
from llmbench.results.sweep import (  # noqa: F401
    ServerDifference, StepBrief, ServerState, SweepSetting, Sweep, load_result)
