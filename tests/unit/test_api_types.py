"""The API is typed for its users: the package ships py.typed, and ``mypy --strict`` passes on
the README's Python API example as the README shows it, and fails on the same example with a
misspelt keyword (in the keyword shortcut and in a spec), or a value of the wrong type."""

import subprocess
import sys

import pytest

from tests.helpers import ENV, ROOT
from tests.helpers.readme import python_example

# the checked file is the example alone; the API's modules (llmbench.api, the specs, the
# results contract) are read for their types but not judged (follow_imports silent), and the
# packages behind them are not read at all (the example's types do not come from them): a
# second of CPU instead of three
SKIP = ("numpy scipy typer aiohttp datasets pandas orjson tiktoken tokenizers ray matplotlib "
        "uvloop yaml pyarrow click rich jsonschema mock_server llmbench.client llmbench.load "
        "llmbench.workers llmbench.wire llmbench.workload llmbench.servers llmbench.report "
        "llmbench.records llmbench.cli").split()
CONFIG = ("[mypy]\nfollow_imports = silent\n[mypy-" + ",".join(f"{m}.*" for m in SKIP)
          + ",llmbench.analysis.metrics,llmbench.analysis.stats,llmbench.analysis.percentile"
          ",llmbench.analysis.compare,llmbench.analysis.recover]\nfollow_imports = skip\n")
PRELUDE = "from pathlib import Path\nout = Path('results')\n"


def mypy(tmp_path, name: str, code: str) -> subprocess.CompletedProcess:
    (tmp_path / "mypy.ini").write_text(CONFIG)
    (tmp_path / name).write_text(PRELUDE + code)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(tmp_path / "mypy.ini"),
         "--cache-dir", str(tmp_path.parent / "mypy-cache"), "--no-error-summary", name],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**ENV, "MYPYPATH": str(ROOT)})


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return tmp_path_factory.mktemp("types")


def test_the_readme_example_type_checks(shared):
    r = mypy(shared, "example.py", python_example())
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("right, wrong, says", [
    ("concurrency=2", "concurency=2", '"concurency"'),           # the keyword shortcut
    ("users=[1, 2]", "usres=[1, 2]", '"usres"'),                 # a spec
    ("requests=20", "requests=[20]", "requests"),                # a value of the wrong type
])
def test_a_misspelt_keyword_or_a_wrong_type_fails_it(shared, right, wrong, says):
    code = python_example()
    assert right in code, right
    # a file of its own per case (mypy's cache knows a file by its size and time)
    r = mypy(shared, f"wrong_{''.join(ch for ch in wrong if ch.isalnum())}.py",
             code.replace(right, wrong, 1))
    assert r.returncode != 0 and "error" in r.stdout, r.stdout + r.stderr
    assert says in r.stdout, r.stdout


def test_py_typed_ships_with_the_package():
    assert (ROOT / "llmbench" / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '[tool.setuptools.package-data]\n' in pyproject and 'llmbench = ["py.typed"]' in pyproject


GROUPED = """\
import llmbench
from llmbench import Output, Request, RunLoad, Target

spec = llmbench.RunSpec(target=Target(url="http://localhost:8000/v1", model="M"),
                        load=RunLoad(concurrency=8, duration=60.0),
                        request=Request(temperature=0.0, timeout_idle=30.0),
                        output=Output(out=out, label={"name": "a"}),
                        thresholds=["ttft.p95<=2s"])
grouped = llmbench.run(target=Target(url="http://localhost:8000/v1"),
                       load=RunLoad(rate=4.0, requests=100))
ramp = llmbench.RampSpec(target=Target(url="http://localhost:8000/v1"),
                         ramp=llmbench.RampSteps(users=[1, 2, 4]))
"""


def test_the_option_groups_passed_as_objects_type_check(shared):
    r = mypy(shared, "grouped.py", GROUPED)
    assert r.returncode == 0, r.stdout + r.stderr


GROUPED_CASES = [
    ("Request(temperature=0.0", "Request(temprature=0.0", '"temprature"'),   # in a group
    ("load=RunLoad(concurrency=8", "load=Request(concurrency=8", "load"),   # the wrong group
    ("target=Target(url=\"http://localhost:8000/v1\"),\n                       load",
     "traget=Target(url=\"http://localhost:8000/v1\"),\n                       load",
     '"traget"'),                                                          # a group's keyword
]


@pytest.mark.parametrize("right, wrong, says", GROUPED_CASES)
def test_a_misspelt_group_or_option_in_a_group_fails_it(shared, right, wrong, says):
    assert right in GROUPED, right
    # a file of its own per case: mypy's cache knows a file by its size and time, and two
    # cases of the same size written in the same second would read the other's result
    name = f"grouped_wrong_{sorted(GROUPED_CASES).index((right, wrong, says))}.py"
    r = mypy(shared, name, GROUPED.replace(right, wrong, 1))
    assert r.returncode != 0 and "error" in r.stdout, r.stdout + r.stderr
    assert says in r.stdout, r.stdout
# issue 44: a run always has a summary, a ramp's steps are typed Steps, so the common case
# type-checks with no None check and no cast
RESULTS = """import llmbench

def read() -> None:
    run = llmbench.run(url="http://127.0.0.1:9/v1", model="m", concurrency=2, requests=20)
    p50: float | None = run.summary.ttft.p50
    ramp = llmbench.ramp(url="http://127.0.0.1:9/v1", model="m", users=[1, 2])
    last = ramp.steps[-1]          # a Step, not Any: a misspelt field fails
    held: bool = last.held
    workers = run.findings.workers
    print(p50, held, last.summary.itl.p95, workers, run.state.started_at)
"""


def test_a_runs_summary_and_a_ramps_last_step_type_check(shared):
    r = mypy(shared, "results.py", RESULTS)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("right, wrong, says", [
    ("run.summary.ttft.p50", "run.summary.ttft.p51", '"p51"'),     # a statistic misspelt
    ("last.held", "last.hold", '"hold"'),                           # a Step's field misspelt
    ("p50: float | None", "p50: float", "float | None"),            # a p50 may have no data
])
def test_a_misread_result_fails_it(shared, right, wrong, says):
    assert right in RESULTS, right
    # a file of its own per case (mypy's cache knows a file by its size and time)
    r = mypy(shared, f"misread_{wrong.replace('.', '_').replace(' ', '_').replace(':', '')}.py",
             RESULTS.replace(right, wrong, 1))
    assert r.returncode != 0 and says in r.stdout, r.stdout + r.stderr
