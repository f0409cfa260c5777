"""--mlflow URI: a finished run or ramp logged to an MLflow tracking server as an MLflow run.

What goes where (config as parameters, summary as metrics, verdict as tags, the folder as
artifacts): docs/whole-path.md ("MLflow"). A ramp step whose load is no whole number is logged
at its index, with ``load`` beside it. Read from the run folder once it is written: a pure
consumer of the result.

Never holds up the command: MLflow's own retries are turned off, each call has a deadline, and
the whole logging a deadline of LOG_DEADLINE_S in a background thread; a tracking server that
does not answer, answers HTML or drips is one line. Needs the extra: pip install
'llmbench[mlflow]'.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Any

INSTALL = "pip install 'llmbench[mlflow]'"
LOG_DEADLINE_S = 60.0
CALL_TIMEOUT_S = 10
EXPERIMENT = "llmbench"


def _flat(d: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
    elif d is not None:
        out[prefix.rstrip(".")] = str(d)[:500]
    return out


def _numbers(summary: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in summary.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _client(uri: str) -> tuple[Any, str]:
    """An MLflow client and the llmbench experiment's id (made on first use)."""
    # no retries (MLflow's default waits minutes on a server that is down), a deadline a call
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(CALL_TIMEOUT_S))
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    return client, exp.experiment_id if exp is not None else client.create_experiment(EXPERIMENT)


def _log_params(client: Any, run_id: str, params: dict[str, str]) -> None:
    from mlflow.entities import Param
    batch = [Param(k, v) for k, v in params.items()]
    for i in range(0, len(batch), 100):
        client.log_batch(run_id, params=batch[i:i + 100])


def _log(uri: str, run_dir: Path, data: dict[str, Any], parent_id: str | None) -> str:
    import time
    client, exp_id = _client(uri)       # sets mlflow's request settings before it is imported
    from mlflow.entities import Metric
    verdict = data.get("verdict") or {}
    tags = {"mlflow.runName": run_dir.name, "llmbench.kind": str(data.get("kind")),
            "llmbench.status": str(data.get("status"))}
    if verdict:
        tags["llmbench.verdict"] = str(verdict.get("result", ""))[:5000]
        tags["llmbench.verdict_kind"] = str(verdict.get("kind", ""))
    if parent_id is not None:
        tags["mlflow.parentRunId"] = parent_id
    run = client.create_run(exp_id, tags=tags)
    rid = run.info.run_id
    _log_params(client, rid, {**_flat(data.get("config") or {}), **{
        f"label.{k}": str(v)[:500] for k, v in (data.get("labels") or {}).items()}})
    now = int(time.time() * 1000)
    metrics: list[Any] = []
    if data.get("kind") == "ramp":
        for k, st in enumerate(data.get("steps") or []):
            load = st.get("load")
            step = int(load) if isinstance(load, (int, float)) and float(load).is_integer() \
                else k
            if isinstance(load, (int, float)):
                metrics.append(Metric("load", float(load), now, step))
            metrics += [Metric(key, v, now, step)
                        for key, v in _numbers(st.get("summary") or {}).items()]
    else:
        metrics = [Metric(key, v, now, 0) for key, v in _numbers(data.get("summary") or {}).items()]
    for i in range(0, len(metrics), 1000):
        client.log_batch(rid, metrics=metrics[i:i + 1000])
    client.log_artifacts(rid, str(run_dir))
    client.set_terminated(rid)
    return rid


# a sweep's parent run while its settings run (start_parent .. finish_parent): each setting's
# ramp logs itself as its child
PARENT: str | None = None


def _deadlined(uri: str, fn: Any) -> tuple[Any, str | None]:
    """fn() in a thread with LOG_DEADLINE_S; (its result, None) or (None, the line)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["id"] = fn()
        except Exception as exc:  # noqa: BLE001 - the tracker's fault, never the run's
            box["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    t = threading.Thread(target=work, name="llmbench-mlflow", daemon=True)
    t.start()
    t.join(LOG_DEADLINE_S)
    if t.is_alive():
        return None, (f"MLflow: not logged ({uri} did not finish within {LOG_DEADLINE_S:g} s); "
                      f"the run folder has everything")
    if "error" in box:
        return None, (f"MLflow: not logged ({uri}: {box['error']}); the run folder has "
                      "everything")
    return box["id"], None


def start_parent(uri: str, sweep_dir: Path) -> str | None:
    """A sweep's parent run (its settings as parameters); None, or the line saying why not."""
    import json
    global PARENT

    def make() -> str:
        data = json.loads((Path(sweep_dir) / "sweep.json").read_text(encoding="utf-8"))
        client, exp_id = _client(uri)
        run = client.create_run(exp_id, tags={"mlflow.runName": Path(sweep_dir).name,
                                              "llmbench.kind": "sweep"})
        _log_params(client, run.info.run_id, _flat({"settings": data.get("settings"),
                                                   **(data.get("config") or {})}))
        return str(run.info.run_id)
    PARENT, line = _deadlined(uri, make)
    return line


def finish_parent(uri: str, sweep_dir: Path) -> str:
    """The sweep's answer as a tag, its folder's own files as artifacts; the one line."""
    import json
    global PARENT
    parent, PARENT = PARENT, None
    if parent is None:
        return "MLflow: the sweep was not logged (its parent run could not be made)"

    def finish() -> str:
        from mlflow.tracking import MlflowClient
        data = json.loads((Path(sweep_dir) / "sweep.json").read_text(encoding="utf-8"))
        client = MlflowClient(tracking_uri=uri)
        client.set_tag(parent, "llmbench.answer", str(data.get("answer") or "")[:5000])
        for f in sorted(Path(sweep_dir).iterdir()):
            if f.is_file():
                client.log_artifact(parent, str(f))
        client.set_terminated(parent)
        return parent
    rid, line = _deadlined(uri, finish)
    return line or f"MLflow: the sweep logged as run {rid} at {uri}, a child run per setting"


def log_run(uri: str, run_dir: Path, parent_id: str | None = None) -> tuple[str | None, str]:
    """Log the run folder; (the MLflow run id or None, the one line to print)."""
    import json
    try:
        data = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"MLflow: not logged ({run_dir}/run.json unreadable: {exc})"
    parent = parent_id or PARENT
    run_id, line = _deadlined(uri, lambda: _log(uri, Path(run_dir), data, parent))
    return run_id, line or f"MLflow: logged as run {run_id} at {uri}"
