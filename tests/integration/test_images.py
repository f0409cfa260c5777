"""--images: synthetic pictures (PNG written without an imaging library) or files, made before
the load, sent as image parts in each API's own shape, and charged as prefill by the mock."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from llmbench import wire
from llmbench.client.request import RequestParams, Timeouts
from llmbench.client.target import make_target
from llmbench.load.harness import Harness, TargetSpec
from llmbench.load.shapes.fixed import ClosedLoop
from llmbench.workload import ImageSpec, WorkloadSpec, build_workload, load_tokenizer, messages_for
from llmbench.workload.files import DatasetError
from llmbench.workload.images import ImagePool, parse_images, parse_size, picture, png_bytes


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Decode our own PNG (filter 0 rows) back to its pixels: the file is a real PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        crc = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
        assert crc == zlib.crc32(kind + chunk) & 0xFFFFFFFF
        if kind == b"IHDR":
            w, h = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw = zlib.decompress(idat)
    assert len(raw) == h * (1 + 3 * w)
    return w, h, raw


def test_a_synthetic_png_decodes_and_is_deterministic():
    rgb = picture(40, 24, seed=7)
    data = png_bytes(rgb)
    w, h, raw = png_pixels(data)
    assert (w, h) == (40, 24)
    rows = [raw[r * 121 + 1:(r + 1) * 121] for r in range(24)]
    assert b"".join(rows) == rgb.tobytes()
    assert png_bytes(picture(40, 24, seed=7)) == data and png_bytes(picture(40, 24, seed=8)) != data
    from PIL import Image                # Pillow (with matplotlib) reads it too
    import io
    assert Image.open(io.BytesIO(data)).size == (40, 24)


def test_sizes_pool_and_folder(tmp_path):
    assert parse_size("512x512") == ((512, 512), (512, 512))
    assert parse_size("256x128-1024x768") == ((256, 128), (1024, 768))
    for bad in ("512", "0x10", "10x10-5x5", "9000x10", "1x1-2x2-3x3"):
        with pytest.raises(DatasetError) as e:
            parse_size(bad)
        assert "--image-size" in str(e.value) and "\n" not in str(e.value)
    pool = ImagePool(ImageSpec(count=2, min_size=(16, 16), max_size=(32, 24), pool=3, seed=1))
    assert len(pool.uris) == 3 and pool.for_turn(0) == (pool.uris[0], pool.uris[1])
    assert pool.for_turn(1) == (pool.uris[2], pool.uris[0])      # the pool, round the turns
    (tmp_path / "b.png").write_bytes(png_bytes(picture(8, 8, 1)))
    (tmp_path / "a.jpg").write_bytes(b"\xff\xd8jpegish")
    (tmp_path / "notes.txt").write_text("x")
    assert parse_images(str(tmp_path)) == (1, str(tmp_path)) and parse_images("3") == (3, None)
    files = ImagePool(ImageSpec(folder=str(tmp_path)))
    assert [u.split(";")[0] for u in files.uris] == ["data:image/jpeg", "data:image/png"]
    with pytest.raises(DatasetError):
        parse_images("not-a-folder")
    with pytest.raises(DatasetError):
        ImagePool(ImageSpec(folder=str(tmp_path / "notes.txt")))


def test_each_api_gets_images_in_its_own_shape():
    uri = "data:image/png;base64,QUJD"
    msgs = [{"role": "user", "content": [{"type": "text", "text": "what is it"},
                                         {"type": "image_url", "image_url": {"url": uri}}]}]
    chat = wire.get("openai-chat").body("m", msgs, 8, True, {})
    assert chat["messages"] == msgs
    resp = wire.get("responses").body("m", msgs, 8, True, {})
    assert resp["input"][0]["content"] == [{"type": "input_text", "text": "what is it"},
                                           {"type": "input_image", "image_url": uri}]
    olla = wire.get("ollama").body("m", msgs, 8, True, {})
    assert olla["messages"][0] == {"role": "user", "content": "what is it", "images": ["QUJD"]}
    ant = wire.get("anthropic").body("m", msgs, 8, True, {})
    assert ant["messages"][0]["content"] == [
        {"type": "text", "text": "what is it"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}}]
    assert msgs[0]["content"][1]["image_url"]["url"] == uri        # the turn is not changed
    assert [f.name for f in map(wire.get, wire.names()) if f.images] == \
        ["openai-chat", "ollama", "responses", "anthropic"]


def test_images_on_every_turn_with_history():
    wl = build_workload(WorkloadSpec(count=4, turns=2, prompt_tokens=(10, 10),
                                     images=ImageSpec(count=1, min_size=(8, 8), max_size=(8, 8), pool=2)),
                        load_tokenizer("approx"))
    conv = wl.conversations[1]
    second = messages_for(conv, 1, ["reply one"])
    parts = [m["content"] for m in second if m["role"] == "user"]
    assert all(isinstance(p, list) and p[1]["type"] == "image_url" for p in parts)
    assert {k: v for k, v in wl.params["images"].items() if k != "bytes"} == \
        {"per_turn": 1, "size": "8x8", "format": "png", "distinct": 2}
    assert wl.params["images"]["bytes"] == sum(len(u) for u in wl.conversations.pool.uris)
    plain = build_workload(WorkloadSpec(count=4, turns=2, prompt_tokens=(10, 10)),
                           load_tokenizer("approx"))
    assert plain.fingerprint != wl.fingerprint


@pytest.mark.parametrize("api, path", [("openai-chat", "/v1"), ("responses", "/v1"), ("ollama", "")])
def test_the_server_counts_the_images_as_prompt_tokens(mock_factory, api, path):
    m = mock_factory(ttft_ms=5, itl_ms=1, image_tokens=300, prefill_ms_per_token=0.01)
    tok = load_tokenizer("approx")
    wl = build_workload(WorkloadSpec(count=6, prompt_tokens=(20, 20), output_tokens=(4, 4),
                                     images=ImageSpec(count=2, min_size=(32, 32), max_size=(64, 64), pool=3)),
                        tok)
    shape = ClosedLoop(wl.conversations, concurrency=2, requests=6)
    h = Harness(RequestParams(), Timeouts(), None, progress=False)
    out = h.run(shape, [TargetSpec(make_target(m.url + path, "mock", api=api), server_probe="off")])
    recs = [r for r in out.records if not r.warmup]
    assert len(recs) == 6 and all(r.ok for r in recs), [r.error for r in recs]
    for r in recs:
        # the mock's usage: ~20 text tokens plus 2 x 300 image tokens
        assert r.prompt_tokens_source == "server" and 600 <= r.prompt_tokens <= 700, r.prompt_tokens


def test_a_dataset_with_image_parts_is_sent_as_it_is(tmp_path):
    from llmbench.workload import WorkloadSpec, build_workload
    f = tmp_path / "vision.jsonl"
    uri = "data:image/png;base64,QUJD"
    f.write_text(json.dumps({"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "what is "},
                                     {"type": "text", "text": "this?"},
                                     {"type": "image_url", "image_url": {"url": uri}}]}]}) + "\n"
                 + json.dumps({"messages": [{"role": "user", "content": [{"type": "audio"}]}]}) + "\n")
    wl = build_workload(WorkloadSpec(dataset=str(f), count=1, limit=1), load_tokenizer("approx"))
    msgs = messages_for(wl.conversations[0], 0, [])
    assert msgs[1]["content"] == [{"type": "text", "text": "what is this?"},
                                  {"type": "image_url", "image_url": {"url": uri}}]
    with pytest.raises(DatasetError) as e:
        build_workload(WorkloadSpec(dataset=str(f), count=2), load_tokenizer("approx"))
    assert ":2:" in str(e.value) and "text or image_url" in str(e.value)


def test_a_dataset_image_column_works_like_a_text_column(tmp_path):
    """--hf-column image=NAME: a Parquet file (read by datasets) with a column of image bytes,
    one of file paths, and one of PIL images as datasets' Image feature stores them."""
    import pandas as pd
    from llmbench.workload import WorkloadSpec, build_workload
    from llmbench.workload.images import picture
    png = png_bytes(picture(16, 16, 3))
    path = tmp_path / "pic.png"
    path.write_bytes(png)
    data = tmp_path / "vision.parquet"
    pd.DataFrame({"question": ["what is it?", "and this?"],
                  "img": [{"bytes": png, "path": None}, {"bytes": None, "path": str(path)}]}
                 ).to_parquet(data)
    wl = build_workload(WorkloadSpec(dataset=str(data), count=2,
                                     hf_columns={"prompt": "question", "image": "img"}),
                        load_tokenizer("approx"))
    for conv in wl.conversations:
        parts = messages_for(conv, 0, [])[-1]["content"]
        assert parts[1]["type"] == "image_url"
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    import base64
    url = messages_for(wl.conversations[1], 0, [])[-1]["content"][1]["image_url"]["url"]
    assert base64.b64decode(url.split(",", 1)[1]) == png
    with pytest.raises(DatasetError) as e:
        build_workload(WorkloadSpec(dataset=str(data), count=2,
                                    hf_columns={"prompt": "question", "image": "nope"}),
                       load_tokenizer("approx"))
    assert "no column 'nope'" in str(e.value)
