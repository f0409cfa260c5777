"""Server telemetry, the pure parts (issue 39): /proc's texts, a node exporter's and a DCGM
exporter's pages, the server's identity pages, and the figures per window computed from
samples: CPU cores, machine busy, GPU energy per output token, and the verdict's sentences."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from llmbench.analysis import telemetry as tm
from llmbench.records.record import Record
from llmbench.records.store import RecordStore
from llmbench.results.telemetry import Telemetry
from llmbench.servers import gpu, hostmetrics, identity, procfs
from tests.helpers import ROOT
from tests.helpers.telemetry import gpu_sample, local

FIX = ROOT / "tests" / "fixtures" / "telemetry"


def dcgm_page(**values: float) -> str:
    """The DCGM fixture with its @placeholders@ filled (defaults for those not given)."""
    fill = {"power0": 250.5, "power1": 198.25, "energy0": 31035686671, "energy1": 29000000000,
            "util0": 97, "util1": 88, "xid1": 0, "used0": 30000, "used1": 20000,
            "free0": 16068, "free1": 26068, **values}
    text = (FIX / "dcgm_exporter_template.prom").read_text()
    for k, v in fill.items():
        text = text.replace(f"@{k}@", str(v))
    return text


# -- /proc --------------------------------------------------------------------------------------

def test_a_process_stat_line_is_read_past_a_command_name_with_spaces_and_parentheses():
    line = ("4242 (tmux: server) x) S 1 4242 4242 0 -1 4194560 2150 0 0 0 "
            "1234 567 0 0 20 0 7 0 98765 123456789 4321 18446744073709551615 1 1 0 0 0 0 0 "
            "4096 134235650 0 0 0 17 1 0 0 0 0 0\n")
    st = procfs.parse_pid_stat(line)
    assert st is not None
    assert (st.pid, st.comm, st.state, st.ppid) == (4242, "tmux: server) x", "S", 1)
    assert (st.utime, st.stime, st.cpu_ticks, st.threads) == (1234, 567, 1801, 7)
    assert (st.starttime, st.rss_pages) == (98765, 4321)
    assert procfs.parse_pid_stat("garbage") is None
    assert procfs.parse_pid_stat("12 (x) S 1 2") is None


def test_this_process_own_stat_agrees_with_the_kernel_s_accounting():
    import os
    import time
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:
        pass
    st = procfs.read_stat(os.getpid())
    assert st is not None and st.pid == os.getpid() and st.threads >= 1
    # the ticks /proc gives are this process's CPU time (100 ticks a second)
    assert abs(st.cpu_ticks / procfs.CLK_TCK - time.process_time()) < 0.1
    assert st.rss_pages * procfs.PAGE_BYTES > 10 * 2**20


def test_proc_stat_and_meminfo_texts():
    cpu = procfs.parse_proc_stat("cpu  100 5 50 800 20 1 4 10 0 0\ncpu0 50 2 25 400 10 0 2 5 0 0\n"
                                 "cpu1 50 3 25 400 10 1 2 5 0 0\nintr 1 2 3\n")
    assert cpu is not None and cpu.cpus == 2
    assert (cpu.busy, cpu.idle, cpu.steal, cpu.total) == (160, 820, 10, 990)
    mem = procfs.parse_meminfo("MemTotal:       24683568 kB\nMemAvailable:   24176784 kB\n"
                               "HugePages_Total:       0\n")
    assert mem == {"MemTotal": 24683568 * 1024, "MemAvailable": 24176784 * 1024,
                   "HugePages_Total": 0}


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1078 1 0000 100 0 0 10 0
   1: 0100007F:48A8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000 100 0 0 10 0
   2: 0100007F:48A8 0100007F:8A9C 01 00000000:00000000 00:00000000 00000000     0        0 6666 1 0000 100 0 0 10 0
   3: 0A00020F:48A9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7777 1 0000 100 0 0 10 0
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:48A9 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 8888 1 0000 100 0 0 10 0
"""


def test_the_listening_socket_of_a_port_on_loopback_or_any_address():
    assert procfs.listening_inodes(TCP, 2024) == {1078}         # 0.0.0.0:2024
    # 127.0.0.1:18600 listening; the connected socket on the same port is not a listener
    assert procfs.listening_inodes(TCP, 18600) == {5555}
    # 10.0.2.15:18601 is not reachable on loopback; [::1]:18601 is
    assert procfs.listening_inodes(TCP, 18601) == set()
    assert procfs.listening_inodes(TCP6, 18601) == {8888}


def test_the_listener_of_a_real_socket_is_found_and_a_free_port_is_explained():
    import os
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        assert procfs.find_listener(port).pid == os.getpid()
    finally:
        s.close()
    found = procfs.find_listener(port)
    assert found.pid is None and f"port {port}" in (found.why or "")


def test_a_tree_counts_exited_children_and_brand_new_ones_whole():
    def st(pid, ticks, start=1000, ppid=1):
        return procfs.ProcStat(pid, "x", "S", ppid, ticks, 0, 1, start, 10)
    acc = procfs.TreeCpu()
    # at the first reading everything counts from zero: it was running before we looked
    assert acc.update([st(10, 500), st(11, 300)], uptime_s=100.0) == 0
    assert acc.update([st(10, 520), st(11, 310)], uptime_s=101.0) == 30
    # 11 exits (its 10 ticks stay counted); 12 started after the last reading: all of it
    started = int(101.0 * procfs.CLK_TCK) + 5
    assert acc.update([st(10, 540), st(12, 7, start=started)], uptime_s=102.0) == 57
    # a pid reused by a new process is a new process (its start time differs): all its ticks
    reused = int(102.0 * procfs.CLK_TCK) + 10
    assert acc.update([st(10, 560), st(12, 9, start=reused)], uptime_s=103.0) == 57 + 20 + 9


def test_a_process_tree_from_the_parent_links():
    stats = {p: procfs.ProcStat(p, "x", "S", pp, 0, 0, 1, 0, 0)
             for p, pp in ((1, 0), (10, 1), (11, 10), (12, 11), (13, 1))}
    assert sorted(procfs.tree_of(10, stats)) == [10, 11, 12]
    assert procfs.tree_of(99, stats) == []


def test_only_named_settings_come_out_of_a_command_line_or_an_environment():
    argv = ["/opt/llama-server", "-m", "/models/x.gguf", "--api-key", "sk-secret", "-np", "4",
            "-t", "2", "-tb=2", "--ctx-size", "8192", "-fa", "on", "--cont-batching"]
    s = identity.settings_from_argv(argv)
    assert s == {"--parallel": "4", "--threads": "2", "--threads-batch": "2",
                 "--ctx-size": "8192", "--flash-attn": "on", "--cont-batching": True}
    assert "sk-secret" not in json.dumps(s)
    assert identity.executable(argv) == "llama-server"
    assert identity.executable(["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
                                "--max-num-seqs", "64"]) == "vllm"
    # sweep --serve starts the command through a shell: its settings are the server's
    info = identity.process_info(["/bin/sh", "-c", "OLLAMA_X=1 exec /opt/llama-server -np 2 -t 1"],
                                 {}, 77)
    assert info == {"settings": {"--parallel": "2", "--threads": "1"},
                    "executable": "llama-server", "pid": 77}
    # python -m MODULE ARGS: the module's; python -c CODE: no settings (-c is not -c here)
    vllm = identity.process_info(["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
                                  "--max-num-seqs", "64", "-tp", "2"], {}, 5)
    assert vllm["settings"] == {"--max-num-seqs": "64", "--tensor-parallel-size": "2"}
    assert vllm["executable"] == "vllm"
    assert "settings" not in identity.process_info(["python", "-c", "import sys;exec(x)"], {}, 6)
    env = procfs.parse_environ(b"OLLAMA_NUM_PARALLEL=4\0OPENAI_API_KEY=sk-x\0HOME=/root\0",
                               identity.ENV_NAMES)
    assert env == {"OLLAMA_NUM_PARALLEL": "4"}


# -- pages ----------------------------------------------------------------------------------------

def test_a_page_that_begins_with_a_sample_line_is_read_once():
    from llmbench.servers.prometheus import parse_prometheus
    # (this looped forever, filling memory, when the page's first line was a wanted sample)
    assert parse_prometheus('a_b 1\nc 2\na_b{x="1"} 3', ["a_b", "zz"]) == \
        {"a_b": [({}, 1.0), ({"x": "1"}, 3.0)]}


def test_a_node_exporter_page_gives_cpu_seconds_per_mode_memory_load_and_network():
    got = hostmetrics.extract_node((FIX / "node_exporter_1.5.prom").read_text())
    assert got["cpus"] == 2
    assert got["cpu_s"]["user"] == pytest.approx(1069.02 + 1207.24)
    assert got["cpu_s"]["idle"] == pytest.approx(439.94 + 275.35)
    assert set(got["cpu_s"]) == {"idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"}
    assert got["mem_total_bytes"] == 2.5275973632e10 and got["load1"] == 4.65
    assert got["net_rx_bytes"] == pytest.approx(1.977525883e9)
    with pytest.raises(hostmetrics.NotNodeExporter):
        hostmetrics.extract_node("<html><body>Grafana</body></html>")


def test_a_dcgm_page_gives_one_reading_per_gpu_without_blank_fields():
    gpus = gpu.extract_dcgm(dcgm_page(xid1=79))
    assert [g["gpu"] for g in gpus] == ["0", "1"]
    g0, g1 = gpus
    assert g0["name"] == "NVIDIA L40S" and g0["driver"] == "580.126.09"
    assert g0["uuid"].startswith("GPU-a8affe7e")
    assert (g0["power_w"], g0["energy_mj"], g0["util_pct"]) == (250.5, 31035686671, 97)
    assert (g0["fb_used_mib"], g0["fb_free_mib"], g0["sm_clock_mhz"]) == (30000, 16068, 1980)
    assert g1["xid"] == 79 and g0["xid"] == 0
    assert "memory_temp" not in json.dumps(gpus)        # DCGM's blank: not a temperature
    with pytest.raises(gpu.NotDcgm):
        gpu.extract_dcgm((FIX / "node_exporter_1.5.prom").read_text())


def test_a_mig_split_gpu_counts_its_power_once():
    page = ('DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1",GPU_I_PROFILE="1g.10gb",GPU_I_ID="1"} 200\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1",GPU_I_PROFILE="1g.10gb",GPU_I_ID="2"} 200\n')
    assert gpu.extract_dcgm(page) == [{"gpu": "0", "uuid": "GPU-1", "power_w": 200.0}]


def test_identity_from_the_real_llama_cpp_pages():
    docs = {"/props": (200, (FIX / "llamacpp_props.json").read_text()),
            "/v1/models": (200, (FIX / "llamacpp_models.json").read_text()),
            "/version": (404, "{}"), "/api/version": (404, "")}
    ident = identity.from_docs(docs, "gemma-3-270m")
    assert ident["kind"] == "llama.cpp" and ident["version"] == "b1" and ident["commit"] == "0c1e570"
    assert ident["model"] == "gemma-3-270m" and ident["quantization"] == "Q4_K - Medium"
    assert ident["parallel"] == {"slots": 2} and ident["context_per_slot"] == 2048
    assert ident["parameters"] == 268098176 and ident["model_file"] == "gemma-3-270m-q4_k_m.gguf"


def test_identity_of_vllm_ollama_tgi_and_sglang():
    v = identity.from_docs({"/version": (200, '{"version": "0.6.3.post1"}'),
                            "/v1/models": (200, '{"data": [{"id": "q", "owned_by": "vllm", '
                                                '"max_model_len": 4096}]}')}, "q")
    assert (v["kind"], v["version"], v["max_model_len"]) == ("vllm", "0.6.3.post1", 4096)
    o = identity.from_docs({"/api/version": (200, '{"version": "0.5.7"}'),
                            "/api/tags": (200, '{"models": [{"name": "qwen2.5:0.5b", "details": '
                                               '{"quantization_level": "Q4_K_M", '
                                               '"parameter_size": "494.03M"}}]}')}, "qwen2.5:0.5b")
    assert (o["kind"], o["version"], o["quantization"]) == ("ollama", "0.5.7", "Q4_K_M")
    t = identity.from_docs({"/info": (200, '{"model_id": "m", "version": "3.0.1", "sha": "x", '
                                           '"max_concurrent_requests": 128}')})
    assert (t["kind"], t["parallel"]) == ("tgi", {"max_concurrent_requests": 128})
    s = identity.from_docs({"/get_server_info": (200, '{"version": "0.4.1", "tp_size": 2, '
                                                      '"max_running_requests": 64}')})
    assert (s["kind"], s["parallel"]["tp_size"]) == ("sglang", 2)
    assert identity.from_docs({"/props": (404, ""), "/version": None}) == {}


def test_what_differed_between_two_servers_reads_as_one_sentence():
    cand = {"kind": "llama.cpp", "version": "b4521", "settings": {"--parallel": "4"}}
    base = {"kind": "llama.cpp", "version": "b4480", "settings": {"--parallel": "2"}}
    assert tm.identity_diff(cand, base) == ("the candidate ran llama.cpp b4521 with -np 4; "
                                            "the baseline b4480 with -np 2")
    same = {**base, "version": "b4521"}
    assert tm.identity_diff(cand, same) == ("the candidate ran llama.cpp b4521 with -np 4; "
                                            "the baseline with -np 2")
    assert tm.identity_diff(cand, cand) is None
    assert tm.identity_diff(cand, None) is None
    gpus = {**cand, "gpus": {"count": 2, "name": "NVIDIA L40S"}}
    assert "on 2x NVIDIA L40S" in tm.identity_diff(gpus, cand)
    # slots from /props stand for -np when the command line is not known
    assert tm.settings_text({"kind": "llama.cpp", "parallel": {"slots": 4}}) == "-np 4"
    assert tm.identity_line({"kind": "vllm", "version": "0.6.3", "settings":
                             {"--max-num-seqs": "64"}, "model": "q"}) == \
        "vLLM 0.6.3 with --max-num-seqs 64, model q"


# -- figures over a window -------------------------------------------------------------------------

def test_a_window_s_cores_come_from_the_counter_interpolated_at_its_ends():
    # the server at 1.5 cores, llmbench at 0.25, the machine 1.9 of 2 busy, sampled each second
    samples = [local(t, 1.5 * t, 0.25 * t, 1.9 * t, 2.0 * t) for t in range(0, 11)]
    w = tm.window(samples, 2.3, 7.7)
    assert w.server.cores == pytest.approx(1.5) and w.server.cpu_s == pytest.approx(1.5 * 5.4)
    assert w.llmbench.cores == pytest.approx(0.25)
    assert w.machine.busy_cores == pytest.approx(1.9) and w.machine.cpus == 2
    assert w.machine.mem_used_bytes_max == 2 << 30
    assert w.server.covered_s == pytest.approx(5.4)
    # a window past the samples is cut to them, and says how much it covered
    part = tm.window(samples, 8.0, 14.0)
    assert part.server.covered_s == pytest.approx(2.0) and part.server.cores == pytest.approx(1.5)


def test_a_restarted_server_is_a_new_segment_not_a_negative_rate():
    samples = [local(t, 1.0 * t, 0, t, 2 * t) for t in range(0, 5)]
    samples += [local(t, 0.5 * (t - 5), 0, t, 2 * t, pid=200) for t in range(5, 10)]
    w = tm.window(samples, 0, 9)
    # 4 s at 1 core, then 4 s at 0.5 (the gap between the two processes is not covered)
    assert w.server.cpu_s == pytest.approx(4 + 2) and w.server.covered_s == pytest.approx(8)
    assert w.server.pid == 200


def test_node_exporter_modes_as_cores():
    def host(t):
        return {"source": "host", "t": t, "cpus": 4, "load1": 3.0 + t / 10,
                "cpu_s": {"user": 2.5 * t, "system": 0.5 * t, "idle": 0.8 * t, "iowait": 0.1 * t,
                          "steal": 0.1 * t},
                "mem_total_bytes": 16 << 30, "mem_available_bytes": 4 << 30,
                "net_rx_bytes": 1000.0 * t, "net_tx_bytes": 50.0 * t}
    h = tm.window([host(t) for t in range(0, 6)], 1, 5).host
    assert h.source == "node_exporter" and h.cpus == 4
    assert h.busy_cores == pytest.approx(3.0) and h.modes["user"] == pytest.approx(2.5)
    assert h.steal_cores == pytest.approx(0.1) and h.busy_share == pytest.approx(0.75)
    assert h.net_rx_bytes_s == pytest.approx(1000.0) and h.load1_max == pytest.approx(3.5)
    assert h.mem_used_bytes_max == 12 << 30


def rec(i, first, end, tokens, ok=True):
    return Record(f"r{i}", scheduled=first - 0.5, start=first - 0.5, first_token=first, end=end,
                  done=end, ok=ok, status=200, output_tokens=tokens)


def test_output_tokens_in_a_window_count_each_reply_for_its_part_in_it():
    recs = [rec(0, 1.0, 3.0, 21),      # first at 1.0, 20 more over 2 s
            rec(1, 4.0, 4.0, 1),       # one token at 4.0
            rec(2, 2.5, 6.5, 9),       # 8 more over 4 s
            rec(3, 2.0, 5.0, 50, ok=False)]   # a failure counts nothing
    # window [2, 5]: r0 has 10 of its 20 in it; r1 its 1; r2 its first + 8 * 2.5/4
    want = 10 + 1 + 1 + 8 * 2.5 / 4
    assert tm.output_tokens_between(recs, 2.0, 5.0) == pytest.approx(want)
    assert tm.output_tokens_between(RecordStore.of(recs), 2.0, 5.0) == pytest.approx(want)
    assert tm.output_tokens_between(recs, 0.0, 10.0) == pytest.approx(21 + 1 + 9)


def test_energy_per_token_from_the_counters_equals_the_hand_computation():
    recs = [rec(i, 1.0 + i, 3.0 + i, 41) for i in range(5)]     # 40 tokens over 2 s each
    g = tm.window([gpu_sample(t) for t in range(0, 11)], 2.0, 6.0, recs).gpu
    tokens = tm.output_tokens_between(recs, 2.0, 6.0)
    assert g.energy_source == "counter"
    assert g.energy_j == pytest.approx(400.0 * 4.0)             # 400 W for 4 s
    assert g.j_per_token == pytest.approx(1600.0 / tokens)
    assert g.tokens_per_j == pytest.approx(tokens / 1600.0)
    assert g.power_w_mean == pytest.approx(400.0) and g.count == 2
    assert g.util_pct_mean == pytest.approx(80.0) and g.fb_used_mib_max == 40000
    assert g.fb_total_mib == 92000 and g.xid == []


def test_energy_from_power_when_a_gpu_has_no_counter():
    samples = [gpu_sample(t, energy=False, power_w=300.0 + 10 * t) for t in range(0, 11)]
    g = tm.window(samples, 2.0, 6.0, [rec(0, 2.0, 6.0, 101)]).gpu
    assert g.energy_source == "power"
    # (300 + 10t + 100) integrated from 2 to 6: 400*4 + 5*(36 - 4)
    assert g.energy_j == pytest.approx(1600 + 160) and g.j_per_token == pytest.approx(1760 / 101)


def test_an_xid_error_is_kept():
    g = tm.window([gpu_sample(t, xid=79 if t == 3 else 0) for t in range(6)], 1, 5).gpu
    assert g.xid == [{"gpu": "0", "code": 79}]


def test_telemetry_round_trips_through_run_json():
    samples = [local(t, 1.5 * t, 0.25 * t, 1.9 * t, 2.0 * t) for t in range(0, 11)]
    samples += [gpu_sample(t) for t in range(0, 11)]
    w = tm.window(samples, 2, 8, [rec(0, 2, 8, 100)])
    back = Telemetry.from_dict(json.loads(json.dumps(w.to_dict())))
    assert back == w


# -- what the verdict says --------------------------------------------------------------------------

META = {"local": {"cpus": 2, "server_cpus": 2}}


def tel(server, machine=1.0, gen=0.2, cpus=2):
    return Telemetry(0, 10, server=tm.ProcessUse(cpu_s=server * 10, cores=server),
                     llmbench=tm.ProcessUse(cpu_s=gen * 10, cores=gen),
                     machine=tm.MachineUse(cpus=cpus, busy_cores=machine))


def test_cpu_saturated_at_the_server_s_thread_setting():
    cause, text = tm.cpu_reading(tel(0.9), tel(0.98), 1, 4, "users", 2.1, META,
                                 {"kind": "llama.cpp", "settings": {"--threads": "1"}})
    assert cause == "cpu"
    assert text == ("The server's process used 1.0 of the 1 core its thread setting (-t 1) "
                    "lets it use (2 on the machine) at 4 users (0.9 at 1 user), all it can use, "
                    "while the time between tokens grew 2.1x: the CPU is saturated.")


def test_the_servers_cpu_is_read_against_its_thread_setting_and_says_so():
    """Issue 45: a server that may use 2 threads on an 8-core machine, at 1.8 cores, used all
    it can (read against 8 cores it had "cores to spare"); llama-cpp-python's --n_threads
    counts as llama.cpp's -t; a setting as wide as the machine is named too."""
    eight = {"local": {"cpus": 8}}
    for ident, flag in (({"kind": "llama.cpp", "settings": {"--threads": "2"}}, "-t"),
                        ({"kind": "llama-cpp-python", "settings": {"--n_threads": "2"}},
                         "--n_threads")):
        cause, text = tm.cpu_reading(tel(1.0, cpus=8), tel(1.8, machine=2.2, cpus=8), 1, 4,
                                     "users", 2.0, eight, ident)
        assert cause == "cpu", text
        assert text.startswith(f"The server's process used 1.8 of the 2 cores its thread "
                               f"setting ({flag} 2) lets it use (8 on the machine) at 4 users")
    # unknown: the machine's cores, and the text says the setting is not known
    cause, text = tm.cpu_reading(tel(1.0, cpus=8), tel(1.8, machine=2.2, cpus=8), 1, 4, "users",
                                 2.0, eight, {})
    assert cause == "not_cpu" and "1.8 of the machine's 8 cores (its thread setting not known)" \
        in text
    text = tm.queue_cpu_sentence(tel(0.95), tel(1.0), 1, 4, "users", META,
                                 {"settings": {"--threads": "4"}})
    assert text.startswith("The server's process used 1.0 of 2 cores (its thread setting -t 4) ")


def test_a_machine_without_spare_cores_is_named_with_who_used_them():
    cause, text = tm.cpu_reading(tel(0.5), tel(1.2, machine=1.95, gen=0.4), 1, 8, "users", 1.8,
                                 META, {"kind": "llama.cpp", "settings": {"--threads": "2"}})
    assert cause == "machine_cpu"
    assert "1.9 of 2 cores busy, the server's process 1.2, llmbench 0.4, other processes 0.3" in text


def test_gaps_that_grew_with_cores_to_spare_are_not_compute():
    cause, text = tm.cpu_reading(tel(0.5, machine=0.8, cpus=8), tel(2.0, machine=2.6, cpus=8),
                                 1, 12, "users", 2.0, {"local": {"cpus": 8}}, {})
    assert cause == "not_cpu"
    assert text.startswith("The gaps grew but the server used 2.0 of the machine's 8 cores (its "
                           "thread setting not known) at 12 users (0.5 at 1 user): not CPU "
                           "compute; look at memory bandwidth or the server's thread setting (-t)")
    assert tm.cpu_reading(None, None, 1, 2, "users", 2.0, META, {}) == (None, None)


def test_a_queue_beside_a_flat_cpu_names_the_slots():
    text = tm.queue_cpu_sentence(tel(0.95), tel(1.0), 1, 4, "users", META, {})
    assert text == ("The server's process used 1.0 of the machine's 2 cores (its thread setting "
                    "not known) at 4 users (0.9 at 1 user): no more with more users waiting, so "
                    "its slots, not the CPU, set the limit.")


def test_the_share_of_a_shared_machine():
    text = tm.share_sentence(tel(1.1, machine=1.9, gen=0.5), 8, "users")
    assert text.startswith("On this machine (2 cores) at 8 users: the server used 1.1 cores, "
                           "llmbench 0.5, other processes 0.3 (95% busy in all); the machine was "
                           "saturated, most of it going to the server.")


def test_gpu_beside_the_kv_cache():
    t = Telemetry(0, 1, gpu=tm.GpuUse(count=1, util_pct_mean=97.0, fb_used_mib_max=22630,
                                      fb_total_mib=24576))
    cause, text = tm.gpu_sentence(None, t, 1, 16, "users", 0.96)
    assert cause == "gpu"
    assert text == ("The GPU was 97% busy, 22.1 of 24.0 GiB of memory used at 16 users, while "
                    "the server reported its KV cache 96% full: the GPU is saturated.")


# -- the verdict with and without telemetry --------------------------------------------------------

def _step(index, load, ttft95, itl50, held, t0, t1, failed=0, **summary):
    from llmbench.results.schema import Step
    s = {"p95_ttft_ms": ttft95, "median_ttft_ms": ttft95 / 2, "median_itl_ms": itl50,
         "p95_itl_ms": itl50 * 1.1, "failed": failed, "errors": {}, "error_statuses": {},
         "error_samples": [], **summary}
    return Step.from_dict({"index": index, "load": load, "summary": s, "held": held,
                           "hold_start": t0, "hold_end": t1, "ramp_start": t0,
                           "checks": [{"threshold": "ttft.p95<=2s", "ok": held, "actual": ttft95,
                                       "limit": 2000.0, "metric": "ttft", "stat": "p95"}],
                           "monitor": {"overloaded": False, "lag_p99_ms": 1.0, "cpu_pct": 5.0}})


def _with(step, server_cores, machine_busy=1.2, gen=0.1, cpus=2):
    t = tel(server_cores, machine=machine_busy, gen=gen, cpus=cpus)
    step.telemetry = Telemetry(step.hold_start, step.hold_end, t.server, t.llmbench, t.machine)
    return step


INFO = {"meta": {"local": {"cpus": 2, "server_cpus": 2}},
        "identity": {"kind": "llama.cpp", "settings": {"--threads": "1"}}}


def test_without_telemetry_the_verdict_reads_as_before():
    from llmbench.analysis.verdict import explain
    for itl in (8.2, 20.0):                     # queuing, then saturation
        steps = [_step(0, 1, 400, 8.0, True, 0, 10), _step(1, 4, 2500, itl, False, 10, 20)]
        assert explain(steps, [], "users") == explain(steps, [], "users", telemetry=INFO)
        assert explain(steps, [], "users").cause is None


def test_a_saturated_cpu_is_named_with_its_figures():
    from llmbench.analysis.verdict import explain
    steps = [_with(_step(0, 1, 400, 8.0, True, 0, 10), 0.93),
             _with(_step(1, 4, 2500, 20.0, False, 10, 20), 0.99)]
    v = explain(steps, [], "users", telemetry=INFO)
    assert v.kind == "saturation" and v.cause == "cpu"
    assert ("The server's process used 1.0 of the 1 core its thread setting (-t 1) lets it "
            "use (2 on the machine) at 4 users (0.9 at 1 user), all it can use, while the time "
            "between tokens grew 2.5x: the CPU is saturated.") in v.evidence
    assert v.advice[0].startswith("The CPU is the limit")
    # a second machine shared with llmbench on loopback: who used what
    assert any(e.startswith("On this machine (2 cores) at 4 users: the server used 1.0 cores, "
                            "llmbench 0.1") for e in v.evidence)


def test_gaps_that_grew_beside_idle_cores_correct_the_reading():
    from llmbench.analysis.verdict import explain
    info = {"meta": {"local": {"cpus": 8}}, "identity": {}}
    steps = [_with(_step(0, 1, 400, 8.0, True, 0, 10), 0.5, machine_busy=0.7, cpus=8),
             _with(_step(1, 12, 2500, 20.0, False, 10, 20), 2.0, machine_busy=2.3, cpus=8)]
    v = explain(steps, [], "users", telemetry=info)
    assert v.kind == "saturation" and v.cause == "not_cpu"
    assert any(e.startswith("The gaps grew but the server used 2.0 of the machine's 8 cores (its "
                            "thread setting not known) at 12 users (0.5 at 1 user): not "
                            "CPU compute; look at memory bandwidth or the server's thread setting")
               for e in v.evidence), v.evidence
    assert "memory bandwidth" in v.advice[0]


def test_a_queue_for_slots_does_not_name_the_cpu():
    from llmbench.analysis.verdict import explain
    steps = [_with(_step(0, 1, 400, 8.0, True, 0, 10), 0.97),
             _with(_step(1, 4, 2500, 8.2, False, 10, 20), 0.99)]
    v = explain(steps, [], "users", telemetry=INFO)
    assert v.kind == "queuing" and v.cause is None
    text = " ".join(v.evidence)
    assert "its slots, not the CPU, set the limit" in text and "CPU is saturated" not in text


def test_one_slot_on_a_machine_others_saturated_is_a_queue_not_the_cpu():
    from llmbench.analysis.verdict import explain
    steps = [_with(_step(0, 1, 400, 34.0, True, 0, 10), 0.3, machine_busy=1.9),
             _with(_step(1, 2, 4700, 61.0, False, 10, 20), 0.4, machine_busy=2.0)]
    samples = [{"t": t, "running": 1, "waiting": 1 if t > 10 else 0, "slots": 1}
               for t in range(0, 21)]
    v = explain(steps, [], "users", samples, telemetry=INFO)
    assert v.kind == "queuing" and v.cause is None
    text = " ".join(v.evidence)
    assert ("The gaps between tokens grew 1.8x too, but the server serves one request at a time "
            "(1 slot): other processes had the machine's cores (1.5 of 2, the server 0.4)") in text
    assert "CPU is saturated" not in text and "CPU was saturated" not in text
    # without telemetry the same steps read as before: saturation, from the latencies alone
    bare = [dataclasses.replace(st, telemetry=None) for st in steps]
    assert explain(bare, [], "users", samples).kind == "saturation"


def test_failures_still_outrank_the_machine():
    from llmbench.analysis.verdict import explain
    broke = _step(1, 4, 2500, 20.0, False, 10, 20, failed=3, errors={"http_status": 3},
                  error_statuses={"503": 3})
    steps = [_with(_step(0, 1, 400, 8.0, True, 0, 10), 0.9), _with(broke, 1.0)]
    v = explain(steps, [], "users", telemetry=INFO)
    assert v.kind == "errors" and v.cause is None
    assert not any("cores" in e for e in v.evidence)


def test_compare_says_what_differed_between_the_servers():
    from types import SimpleNamespace
    from llmbench.analysis.compare import server_differences
    from llmbench.results.schema import Run
    base = SimpleNamespace(name="np2", run=Run.from_dict({"server": {
        "kind": "llama.cpp", "version": "b4480", "settings": {"--parallel": "2"}}}))
    cand = SimpleNamespace(name="np4", run=Run.from_dict({"server": {
        "kind": "llama.cpp", "version": "b4521", "settings": {"--parallel": "4"}}}))
    old = SimpleNamespace(name="old", run=Run.from_dict({}))   # written before identity existed
    assert server_differences([base, cand]) == [
        {"run": "np4", "text": "The candidate ran llama.cpp b4521 with -np 4; the baseline "
                               "b4480 with -np 2."}]
    assert server_differences([base, old]) == []


def test_the_report_escapes_what_the_server_said(tmp_path):
    from llmbench.report.html import _server_machine
    run = {"kind": "run", "server": {"kind": "<b>x</b>", "model": "<script>alert(1)</script>"},
           "telemetry": {"window": tel(1.0).to_dict(), "notes": ["<img src=x>"],
                         "sources": {"local": {"cpus": 2}}}}
    from llmbench.results.schema import Run
    html = "\n".join(_server_machine(Run.from_dict(run), tmp_path))
    assert "<script>" not in html and "<img" not in html and "<b>x" not in html
    assert "&lt;script&gt;" in html and "whole run" in html


def test_the_server_machine_charts_keep_their_rules():
    from llmbench.report import charts
    steps = [_with(_step(i, load, 400, 8.0, h, 10 * i, 10 * i + 10), c)
             for i, (load, c, h) in enumerate(((1, 0.9, True), (2, 1.0, True), (4, 1.0, False)))]
    c = charts.ramp_server_chart(steps, "users", cpus=2)
    p = c.panels[0]
    assert p.labels() == ["server's process", "llmbench", "this machine, all processes"]
    assert p.ylim[0] == 0 and p.ylim[1] >= 2.0          # from zero, up to the machine's cores
    assert p.xticks == [1.0, 2.0, 4.0] and p.ylabel == "cores"
    series = tm.series([local(t, 0.9 * t, 0.1 * t, 1.5 * t, 2.0 * t) for t in range(6)], 0.0)
    assert [round(v, 6) for _, v in series["server_cores"]] == [0.9] * 5
    tc = charts.telemetry_chart(series, cpus=2)
    assert [q.title for q in tc.panels] == ["CPU cores busy", "Memory"]


def test_nvml_readings_in_the_units_of_the_dcgm_names(monkeypatch):
    """NvmlReader turns pynvml's units (mW, bytes, mJ) into the sample's (W, MiB, mJ), and a
    GPU without an energy counter (pre-Volta: NotSupported) is asked once, then not again.
    The module below answers as pynvml does (nvidia-ml-py's names and return types)."""
    import types

    class NotSupported(Exception):
        pass
    asked = {"energy": 0}
    nv = types.SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
        nvmlDeviceGetName=lambda h: b"NVIDIA A100-SXM4-80GB" if h == 0 else "Tesla P100",
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=93 if h == 0 else 40),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=40 * 2**30, free=40 * 2**30,
                                                                total=80 * 2**30),
        nvmlDeviceGetPowerUsage=lambda h: 287_500,                       # mW
        nvmlDeviceGetClockInfo=lambda h, which: 1410 if which == 1 else 1593,
        nvmlDeviceGetTemperature=lambda h, which: 61)

    def energy(h):
        asked["energy"] += 1
        if h == 1:
            raise NotSupported("Not Supported")
        return 123_456_789                                               # mJ
    nv.nvmlDeviceGetTotalEnergyConsumption = energy
    monkeypatch.setitem(__import__("sys").modules, "pynvml", nv)
    r = gpu.open_local("nvml")
    first, again = r.read(), r.read()
    assert r.via == "nvml" and len(first) == 2
    a100, p100 = first
    assert a100 == {"gpu": "0", "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-0",
                    "driver": "550.54.15", "util_pct": 93.0, "fb_used_mib": 40960.0,
                    "fb_free_mib": 40960.0, "power_w": 287.5, "energy_mj": 123456789,
                    "sm_clock_mhz": 1410.0, "mem_clock_mhz": 1593.0, "temp_c": 61.0}
    assert "energy_mj" not in p100 and p100["name"] == "Tesla P100"
    assert asked["energy"] == 2 + 1          # the P100 was asked once
    # a mix of GPUs with and without the counter: energy from power, said so
    samples = [{"source": "gpu", "t": float(t), "via": "nvml", "gpus": again} for t in range(3)]
    g = tm.gpu_use(samples, 0, 2)
    assert g.energy_source == "power" and g.energy_j == pytest.approx(2 * 287.5 * 2)


def test_no_gpu_library_is_one_reason_per_library(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pynvml", None)         # import pynvml fails
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    with pytest.raises(gpu.GpuUnavailable) as e:
        gpu.open_local("auto")
    assert str(e.value) == ("pynvml is not installed (pip install 'llmbench[gpu]'); amdsmi is "
                            "not installed (it comes with ROCm)")


def test_a_busy_machine_is_not_blamed_for_a_server_that_barely_uses_the_cpu():
    # the gaps grew, the machine was full, but the server used 0.05 of its 2 cores: it was not
    # waiting for cores (its slowdown is elsewhere: the GPU, memory, its own pacing)
    cause, text = tm.cpu_reading(tel(0.04), tel(0.05, machine=1.98), 1, 8, "users", 1.6, META, {})
    assert cause == "not_cpu" and text.startswith("The gaps grew but the server used 0.1 of the "
                                                  "machine's 2 cores")


def test_a_node_exporters_values_past_a_float_are_no_reading_not_inf():
    """Issue 49: `1e400` reads as inf; run.json held the string "inf" for it. A value that is
    no finite number is left out, as NaN is; the others stay."""
    import json

    from llmbench.servers.hostmetrics import extract_node
    page = ('node_cpu_seconds_total{cpu="0",mode="idle"} 1e400\n'
            'node_cpu_seconds_total{cpu="0",mode="user"} 5\n'
            'node_cpu_seconds_total{cpu="1",mode="user"} 7\n'
            "node_load1 1e400\nnode_load5 0.5\n"
            'node_network_receive_bytes_total{device="eth0"} -1e400\n')
    got = extract_node(page)
    assert got["cpu_s"] == {"user": 12.0} and got["cpus"] == 2
    assert "load1" not in got and got["load5"] == 0.5 and "net_rx_bytes" not in got
    json.dumps(got, allow_nan=False)         # nothing that run.json would write as "inf"


def test_netlink_finds_the_listeners_proc_net_tcp_lists():
    # the kernel's socket diagnostics (what find_listener asks first) and /proc/net/tcp{,6}
    # (its fall-back) agree on real listeners: IPv4 loopback, IPv4 any, IPv6 loopback; a
    # connected socket on the same port is no listener
    import socket
    made = []
    try:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"),
                             (socket.AF_INET6, "::1")):
            s = socket.socket(family)
            s.bind((host, 0))
            s.listen()
            made.append(s)
        c = socket.create_connection(("127.0.0.1", made[0].getsockname()[1]))
        made.append(c)
        for s in made[:3]:
            port = s.getsockname()[1]
            files = set()
            for name in ("tcp", "tcp6"):
                files |= procfs.listening_inodes(procfs._read(f"/proc/net/{name}") or "", port)
            got = procfs.listening_inodes_netlink(port)
            assert got is not None, "NETLINK_SOCK_DIAG cannot be asked here"
            assert got == files and len(got) == 1, (port, got, files)
    finally:
        for s in made:
            s.close()
