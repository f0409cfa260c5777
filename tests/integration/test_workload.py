"""Workloads: every source shape, vLLM's sampling rules, prefixes, multi-turn, fingerprints."""

import asyncio
import json
import random
import time
from pathlib import Path

import pytest

from llmbench.load.shapes.fixed import run_closed
from llmbench.load.session import Session
from llmbench.client.request import Client
from llmbench.client.target import make_target
from llmbench.workload import DatasetError, WorkloadSpec, build_workload, load_tokenizer, messages_for
from llmbench.workload.files import iter_json_array, sharegpt_single_turn
from llmbench.workload.tokenizer import TokenizerError, approx_tokenizer, from_tiktoken
from llmbench.mock_server.recorder import read_log

from tests.helpers import ROOT  # noqa: E402
SAMPLE = str(ROOT / "datasets" / "sharegpt_sample.json")
MIXED = str(ROOT / "datasets" / "mixed_shapes.jsonl")
TOK = approx_tokenizer()


def spec(**kw):
    return WorkloadSpec(**kw)


def test_sharegpt_vllm_single_turn_sampling():
    convs, warnings = sharegpt_single_turn(SAMPLE, TOK, 10, seed=0)
    assert len(convs) == 10 and not warnings
    data = json.loads(Path(SAMPLE).read_text())
    eligible = [d for d in data if len(d["conversations"]) >= 2]
    random.seed(0)
    random.shuffle(eligible)
    expected = []
    for d in eligible:
        p, c = d["conversations"][0]["value"], d["conversations"][1]["value"]
        pl, cl = TOK.count(p), TOK.count(c)
        if pl < 4 or cl < 4 or pl > 1024 or pl + cl > 2048:
            continue
        expected.append((p, cl))
        if len(expected) == 10:
            break
    assert [(c.turns[0].user, c.turns[0].max_tokens) for c in convs] == expected
    assert all(c.turns[0].prompt_tokens >= 4 for c in convs)
    # "Hi" (1 token) is never sampled
    assert all(c.turns[0].user != "Hi" for c in convs)


def test_sharegpt_oversamples_and_fixed_output_len():
    convs, warnings = sharegpt_single_turn(SAMPLE, TOK, 100, seed=1, output_len=33)
    assert len(convs) == 100 and warnings and "oversampling" in warnings[0]
    assert {c.turns[0].max_tokens for c in convs} == {33}


def test_sharegpt_filters_reported_when_nothing_left(tmp_path):
    f = tmp_path / "tiny.json"
    f.write_text(json.dumps([{"conversations": [{"from": "human", "value": "Hi"},
                                                {"from": "gpt", "value": "Hello there friend"}]}]))
    with pytest.raises(DatasetError, match=r"prompt under 4 tokens: 1"):
        sharegpt_single_turn(str(f), TOK, 5, seed=0)


def test_sharegpt_whole_conversations_keep_user_turns_and_system():
    wl = build_workload(spec(dataset=SAMPLE, multi_turn=True, turns=10, count=100), TOK)
    by_id = {c.id: c for c in wl.conversations}
    infl = by_id["sharegpt-sample-004"]
    assert [t.user for t in infl.turns][:2] == ["What causes inflation?",
                                                "How do higher interest rates slow it down?"]
    assert len(infl.turns) == 4
    assert by_id["sharegpt-sample-system"].system == "You are a terse assistant."
    capped = build_workload(spec(dataset=SAMPLE, multi_turn=True, turns=2), TOK)
    assert max(len(c.turns) for c in capped.conversations) == 2


def test_jsonl_each_shape():
    wl = build_workload(spec(dataset=MIXED, multi_turn=True, turns=5, output_tokens=None), TOK)
    c = {x.id: x for x in wl.conversations}
    assert c["msg-1"].system == "Answer briefly." and c["msg-1"].turns[0].max_tokens == 64
    assert len(c["msg-2"].turns) == 2            # the file's assistant reply is not sent
    assert c["conv-1"].turns[0].max_tokens == 96 and len(c["conv-1"].turns) == 2
    assert c["prompt-1"].turns[0].user.startswith("What is the halting")
    assert c["prompt-2"].turns[0].max_tokens is None
    limited = build_workload(spec(dataset=MIXED, limit=2), TOK)
    assert len(limited.conversations) == 2


@pytest.mark.parametrize("content,needle", [
    ('{"messages": [{"role": "user", "content": "hi"}]}\n{"prompt": "x"\n', "mixed.jsonl:2: invalid JSON"),
    ('{"prompt": "fine"}\n{"text": "no shape"}\n', "mixed.jsonl:2: none of the known shapes"),
    ('{"prompt": "x", "max_tokens": 0}\n', "mixed.jsonl:1: max_tokens"),
])
def test_jsonl_bad_lines_name_file_and_line(tmp_path, content, needle):
    f = tmp_path / "mixed.jsonl"
    f.write_text(content)
    with pytest.raises(DatasetError) as e:
        build_workload(spec(dataset=str(f)), TOK)
    assert needle in str(e.value)
    if "known shapes" in needle:
        assert "'messages'" in str(e.value) and "'prompt'" in str(e.value)


def test_missing_file_and_invalid_sharegpt(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        build_workload(spec(dataset=str(tmp_path / "nope.json")), TOK)
    bad = tmp_path / "bad.json"
    bad.write_text('[{"conversations": []},\n{"conversations": [}\n]')
    with pytest.raises(DatasetError, match=r"bad.json:2: invalid JSON"):
        build_workload(spec(dataset=str(bad), multi_turn=True), TOK)


def test_streaming_json_array_offsets(tmp_path):
    f = tmp_path / "a.json"
    items = [{"k": "é" * i} for i in range(50)]
    f.write_text(json.dumps(items, ensure_ascii=False))
    got = list(iter_json_array(str(f), chunk_size=64))
    assert [o for _, o in got] == items
    raw = f.read_bytes()
    for off, obj in got:
        assert json.loads(raw[off:].decode()[: len(json.dumps(obj, ensure_ascii=False))]) == obj


def test_hf_local_files(tmp_path):
    csv = tmp_path / "p.csv"
    csv.write_text("question,max_tokens\nwhat is up,12\nhow are you,7\n")
    wl = build_workload(spec(dataset=str(csv), output_tokens=None,
                             hf_columns={"prompt": "question"}), TOK)
    assert [c.turns[0].user for c in wl.conversations] == ["what is up", "how are you"]
    assert [c.turns[0].max_tokens for c in wl.conversations] == [12, 7]
    pq = tmp_path / "p.parquet"
    import datasets
    datasets.Dataset.from_dict({"prompt": ["a b c", "d e f"]}).to_parquet(str(pq))
    wl = build_workload(spec(dataset=str(pq)), TOK)
    assert len(wl.conversations) == 2
    with pytest.raises(DatasetError, match="no column 'question'"):
        build_workload(spec(dataset=str(pq), hf_columns={"prompt": "question"}), TOK)


def test_hf_hub_offline_is_one_clear_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetError, match="could not load it from the Hugging Face hub"):
        build_workload(spec(dataset="hf:someone/does-not-exist-here"), TOK)


def test_synthetic_exact_lengths_and_unique_prefixes():
    wl = build_workload(spec(count=20, prompt_tokens=(50, 50), output_tokens=(16, 16)), TOK)
    assert all(TOK.count(c.turns[0].user) == 50 for c in wl.conversations)
    heads = {c.turns[0].user[:12] for c in wl.conversations}
    assert len(heads) == 20
    ranged = build_workload(spec(count=50, prompt_tokens=(20, 80)), TOK)
    lengths = {TOK.count(c.turns[0].user) for c in ranged.conversations}
    assert min(lengths) >= 20 and max(lengths) <= 80 and len(lengths) > 5


def test_shared_prefixes_repeat_on_purpose():
    wl = build_workload(spec(count=30, prompt_tokens=(100, 100), shared_prefix_tokens=40,
                             prefixes=3), TOK)
    prefixes = {" ".join(c.turns[0].user.split()[:40]) for c in wl.conversations}
    assert len(prefixes) == 3


def test_vllm_random_dataset():
    wl = build_workload(spec(dataset="random", count=30, random_input_len=60, random_output_len=20,
                             random_range_ratio=0.5, random_prefix_len=10), TOK)
    ins = [TOK.count(c.turns[0].user) for c in wl.conversations]
    outs = [c.turns[0].max_tokens for c in wl.conversations]
    assert min(ins) >= 30 and max(ins) <= 90 + 10
    assert min(outs) >= 10 and max(outs) <= 30
    assert len({c.turns[0].user.split()[:10].__str__() for c in wl.conversations}) == 1


def test_fingerprint_stable_and_sensitive():
    a = build_workload(spec(count=10, seed=1), TOK).fingerprint
    assert a == build_workload(spec(count=10, seed=1), TOK).fingerprint
    assert a != build_workload(spec(count=10, seed=2), TOK).fingerprint
    assert a != build_workload(spec(count=10, seed=1, output_tokens=(64, 64)), TOK).fingerprint
    assert a != build_workload(spec(count=11, seed=1), TOK).fingerprint


def test_messages_for_carries_history():
    wl = build_workload(spec(count=1, turns=3, prompt_tokens=(5, 5)), TOK)
    conv = wl.conversations[0]
    msgs = messages_for(conv, 2, ["r0", "r1"])
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[1]["content"] == "r0" and msgs[3]["content"] == "r1"


def test_tokenizer_fallback_and_local_tokenizer_json(tmp_path, monkeypatch):
    # a tokenizer the user named must load or be an error; only auto falls back (with a note)
    with pytest.raises(TokenizerError, match="tiktoken:definitely_not_an_encoding"):
        load_tokenizer("tiktoken:definitely_not_an_encoding")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    t = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.train_from_iterator(["hello world the model"] * 3,
                          trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path = tmp_path / "tokenizer.json"
    t.save(str(path))
    hf = load_tokenizer(str(path))
    assert hf.count("hello world unknown") == 3 and not hf.approximate
    with pytest.raises(TokenizerError, match="no such file or folder"):
        load_tokenizer(str(tmp_path / "missing.json"))


def test_tiktoken_path_with_a_local_encoding():
    import tiktoken
    ranks = {bytes([i]): i for i in range(256)}
    enc = tiktoken.Encoding("bytes", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    tok = from_tiktoken(enc)
    assert tok.name == "tiktoken:bytes" and tok.count("abc") == 3
    wl = build_workload(spec(count=3, prompt_tokens=(40, 40)), tok)
    assert all(tok.count(c.turns[0].user) == 40 for c in wl.conversations)
    assert wl.tokenizer == "tiktoken:bytes"


def _drive(url, wl, concurrency, think=(0.0, 0.0)):
    async def go():
        t = make_target(url + "/v1", "mock")
        async with Client(t) as c:
            s = Session(c, None)
            await run_closed(s, wl.conversations, concurrency, None, None, think=think)
            return list(s.records)
    return asyncio.run(go())


def test_multi_turn_sends_the_real_previous_replies(mock_factory, tmp_path):
    log = tmp_path / "mock.jsonl"
    m = mock_factory(ttft_ms=1, itl_ms=1, record=str(log), record_prompts=True)
    wl = build_workload(spec(count=2, turns=3, prompt_tokens=(10, 10), output_tokens=(5, 5)), TOK)
    records = _drive(m.url, wl, 1)
    m.__exit__(None, None, None)
    assert len(records) == 6 and all(r.ok for r in records)
    entries = read_log(log)
    by_conv = {}
    for e in entries:
        by_conv.setdefault(len(e["messages"]), []).append(e)
    # a 3rd turn carries 5 messages: u, a, u, a, u; the assistant texts are what the mock sent
    third = by_conv[5][0]
    first = [e for e in by_conv[1] if e["messages"][0] == third["messages"][0]][0]
    second = [e for e in by_conv[3] if e["messages"][0] == third["messages"][0]][0]
    from llmbench.mock_server.engine import reply_words
    assert third["messages"][1]["content"] == "".join(reply_words(first["request_id"], 5))
    assert third["messages"][3]["content"] == "".join(reply_words(second["request_id"], 5))
    assert [r.turn for r in records if r.conversation == records[0].conversation] == [0, 1, 2]


def test_unique_prefixes_checked_on_the_bytes_sent(mock_factory, tmp_path):
    log = tmp_path / "mock.jsonl"
    m = mock_factory(ttft_ms=1, itl_ms=1, record=str(log), record_prompts=True)
    wl = build_workload(spec(count=8, prompt_tokens=(30, 30), output_tokens=(2, 2)), TOK)
    _drive(m.url, wl, 2)
    wl2 = build_workload(spec(count=8, prompt_tokens=(60, 60), output_tokens=(2, 2), seed=5,
                              shared_prefix_tokens=40, prefixes=2), TOK)
    _drive(m.url, wl2, 2)
    m.__exit__(None, None, None)
    sent = [e["messages"][0]["content"] for e in read_log(log)]
    unique, shared = sent[:8], sent[8:]
    assert len({s[:16] for s in unique}) == 8
    assert len({" ".join(s.split()[:40]) for s in shared}) == 2


def test_think_time_respected(mock_factory):
    m = mock_factory(ttft_ms=1, itl_ms=1)
    wl = build_workload(spec(count=1, turns=3, prompt_tokens=(5, 5), output_tokens=(2, 2)), TOK)
    recs = _drive(m.url, wl, 1, think=(0.3, 0.4))
    recs.sort(key=lambda r: r.start)
    gaps = [b.start - a.done for a, b in zip(recs, recs[1:])]
    assert all(0.29 <= g <= 0.45 for g in gaps), gaps
