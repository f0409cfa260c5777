"""Other load testers' option names that mean something else here, or take another form: an
unknown option that is one of them is refused with the flag that does the job, not click's
nearest spelling (``--num-prompts`` suggested ``--prompt-salt``). The names that mean the same
are accepted as they are: they are spellings of the spec's own options (specs/run.py, groups.py).
"""

from __future__ import annotations

_ROOT_URL = ("is the server's root; here give the API's base URL: --url http://HOST:PORT/v1 "
             "(or --url ROOT --endpoint /v1/completions for the completions API)")

# flag -> (whose, what to use here); "{cmd}" is the command being run
FOREIGN: dict[str, tuple[str, str]] = {
    "--base-url": ("vLLM's", _ROOT_URL),
    "--host": ("vLLM's and Locust's", "names the server: here --url http://HOST:PORT/v1"),
    "--port": ("vLLM's", "is part of the URL here: --url http://HOST:PORT/v1"),
    "--target": ("GuideLLM's", _ROOT_URL),
    "--dataset-name": ("vLLM's", "is --dataset here: --dataset random (vLLM's random dataset, "
                                 "with --random-input-len/--random-output-len), synthetic, "
                                 "words, or a ShareGPT/JSONL/CSV file's path"),
    "--dataset-path": ("vLLM's", "is --dataset FILE here (ShareGPT .json, .jsonl, .csv, "
                                 ".parquet, or hf:NAME)"),
    "--data": ("GuideLLM's", "is --dataset here (synthetic, random, words, FILE or hf:NAME)"),
    "--processor": ("GuideLLM's", "is --tokenizer here (ORG/NAME, DIR, tokenizer.json)"),
    "--rate-type": ("GuideLLM's", "is said by the options here: --rate R with --arrival "
                                  "poisson|constant|gamma (open loop), --concurrency N "
                                  "(closed loop), or `llmbench ramp --find` to sweep for the "
                                  "limit"),
    "--users": ("Locust's", "is --concurrency N for `llmbench run` (N users, each waiting for "
                            "its reply); `llmbench ramp --users 1,2,4` steps through users"),
    "--spawn-rate": ("Locust's", "is --ramp-in DURATION on `llmbench ramp` (each step's new "
                                 "users join over it)"),
    "--stages": ("k6's", "is `llmbench ramp --users 1,2,4 --hold 60s` here (steps of users)"),
    "--max-requests": ("GuideLLM's", "is --requests N here"),
    "--iterations": ("k6's", "is --requests N here"),
    "--run-time": ("Locust's", "is --duration here (e.g. 90s, 5m)"),
}

# accepted on `run` (its spec's spellings): another command refuses them with this
RUN_ONLY = {"--num-prompts": "--requests", "--request-rate": "--rate",
            "--vus": "--concurrency", "--max-seconds": "--duration",
            "--requests": "--requests", "--rate": "--rate", "--concurrency": "--concurrency",
            "--duration": "--duration"}


def hint(option: str, command: str) -> str | None:
    """The one line for an unknown ``option`` given to ``command`` (e.g. "llmbench ramp"),
    when it is another tool's name; None: click's own message stands."""
    flag = option.split("=", 1)[0]
    if flag in FOREIGN:
        whose, what = FOREIGN[flag]
        return f"{flag} is {whose} option: it {what} (see '{command} --help')"
    if flag in RUN_ONLY and not command.endswith(" run"):
        ours = RUN_ONLY[flag]
        if command.endswith(" ramp") or command.endswith(" sweep"):
            return (f"{flag}: a ramp's load is its steps of users (--users 1,2,4 or --find), "
                    f"each held for --hold; `llmbench run {ours} ...` runs one load level "
                    f"(see '{command} --help')")
        return f"{flag} is an option of `llmbench run` ({ours}), not of `{command}`"
    return None
