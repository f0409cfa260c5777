"""The results contract: what a run is, as the typed objects the pipeline builds, and the table
of its summary's keys.

The pipeline builds these objects (``metrics.summarize`` a ``Summary``, the ramp's judge a
``Step`` with its ``Check``s and ``Steady`` state, ``verdict.explain`` a ``Verdict``, each
command a ``Run``) and writes them with ``to_dict()``; every reader loads them with
``Run.load(folder)``. ``to_dict()`` writes run.json's keys as they have always been (a summary
is vLLM's flat dict, ``p95_ttft_ms``, ``output_throughput``..., so that a run folder compares key
by key with ``vllm bench serve --save-result``); how every folder written so far reads back
unchanged: ``llmbench.results.contract``.

Reading a statistic by name (a threshold's ``ttft.p95``): ``Summary.value("ttft", "p95")``;
its on-disk name: ``key("ttft", "p95")``. Nothing is computed here (the one summary function is
``llmbench.analysis.metrics.summarize``).

Schema versions: 1 is the only one written so far (``SCHEMA_VERSION``, the one constant);
``Run.from_dict`` reads it, and folders written before ``schema_version`` existed, which are
version 1 too.

The contract is split by what it holds: ``summary`` (the key table, ``Metric``, ``Summary``),
``step`` (``Step``, ``Check``...), ``verdict``, ``run`` (``Run`` and its parts) and ``sweep``;
this module names them all, so ``llmbench.results.schema`` imports keep working.
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
