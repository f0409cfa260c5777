"""Cost of one server-probe scrape on a vLLM-sized /metrics page, inside the event loop.

  python scripts/bench_prometheus_parse.py            # ~2,900 lines, best of 7 x 20 parses
  python scripts/bench_prometheus_parse.py --lines 10000

Builds a page shaped like vLLM's (histogram families with ~20 buckets, two engines, a few
gauges and counters, one series whose label values hold `}` and an escaped quote) and times:
  full      parse every series (what a scrape cost before names were filtered)
  filtered  parse only the metrics the probe reads (what a scrape costs now)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmbench import servers  # noqa: E402
from llmbench.servers.prometheus import parse_prometheus  # noqa: E402

BUCKETS = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5",
           "0.75", "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "+Inf"]


def vllm_page(target_lines: int) -> str:
    model = 'model_name="Qwen/Qwen2.5-7B-Instruct"'
    # a few label values a naive parser gets wrong: `}` inside, an escaped quote
    out: list[str] = ['# HELP vllm:lora_requests_info Running stats on LoRA requests.',
                      'vllm:lora_requests_info{max_lora="1",running_lora_adapters="a}b",'
                      'waiting_lora_adapters="say \\"hi\\""} 1.7e9']
    for name, kind, value in (("vllm:num_requests_running", "gauge", 3),
                              ("vllm:num_requests_waiting", "gauge", 5),
                              ("vllm:kv_cache_usage_perc", "gauge", 0.42),
                              ("vllm:num_preemptions_total", "counter", 2),
                              ("vllm:prefix_cache_queries_total", "counter", 5000),
                              ("vllm:prefix_cache_hits_total", "counter", 1000)):
        out += [f"# HELP {name} help text", f"# TYPE {name} {kind}"]
        out += [f'{name}{{engine="{e}",{model}}} {value}' for e in (0, 1)]
    family = 0
    while len(out) < target_lines:
        name = f"vllm:histogram_family_{family}_seconds"
        if family == 0:
            name = "vllm:request_queue_time_seconds"
        out += [f"# HELP {name} help text", f"# TYPE {name} histogram"]
        for e in (0, 1):
            out += [f'{name}_bucket{{engine="{e}",le="{b}",{model}}} {i * 3.0}'
                    for i, b in enumerate(BUCKETS)]
            out += [f'{name}_sum{{engine="{e}",{model}}} 33.5',
                    f'{name}_count{{engine="{e}",{model}}} 120.0']
        family += 1
    return "\n".join(out[:target_lines]) + "\n"


def best_ms(fn, repeat: int, number: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2900)
    args = ap.parse_args()
    page = vllm_page(args.lines)
    vllm = next(a for a in servers.ADAPTERS if a.name == "vllm")
    names = vllm.metric_names
    full = vllm.extract(parse_prometheus(page)).to_dict()
    filtered = vllm.extract(parse_prometheus(page, names)).to_dict()
    assert full == filtered and full["running"] == 6, (full, filtered)
    print(f"page: {page.count(chr(10))} lines, {len(page) / 1024:.0f} KiB")
    print(f"full parse:     {best_ms(lambda: parse_prometheus(page), 7, 20):7.3f} ms per scrape")
    print(f"filtered parse: {best_ms(lambda: parse_prometheus(page, names), 7, 20):7.3f} ms per "
          f"scrape ({len(names)} metric names)")


if __name__ == "__main__":
    main()
