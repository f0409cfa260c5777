"""Prompt files: ShareGPT JSON, JSONL of several shapes, and anything ``datasets`` loads.

Files are read as far as the run needs, never whole: JSONL line by line until enough
conversations are drawn (``need``: what the run can send, or --limit), a ShareGPT array as a
stream of entries whose byte offsets alone are kept. A random sample (vLLM's ShareGPT sampling,
whole conversations for a ramp) needs every entry it may draw from, so its scan stops at
``SAMPLE_SCAN_BYTES`` and a note says how much was read. Only regular files are opened: a
device (/dev/zero) or a pipe reads forever. A line, an entry or a nesting too deep to be a
prompt is one DatasetError naming file:line, not a RecursionError or a read without end.
"""

from __future__ import annotations

import codecs
import json
import os
import random
import sys
from contextlib import closing
from pathlib import Path
from typing import Any, Generator, Iterator

from llmbench.workload import progress
from llmbench.workload.model import Conversation, Turn
from llmbench.workload.tokenizer import Tokenizer

MAX_LINE_BYTES = 64 << 20       # one JSONL line: a 2M-token prompt is ~8 MB; 64 MB is no prompt
MAX_ENTRY_BYTES = 64 << 20      # one ShareGPT entry, the same bound
SAMPLE_SCAN_BYTES = 1 << 30     # a sample is drawn from at most the first 1 GiB (ShareGPT V3: 0.64)


class DatasetError(ValueError):
    """Bad input in a prompt file; the message is one line naming file, line and fix."""


def check_regular_file(path: str, flag: str = "--dataset") -> None:
    """The path names a regular file; a folder, device, pipe or socket is one line (module doc)."""
    if not os.path.exists(path):
        raise DatasetError(f"{flag} {path}: no such file")
    if os.path.isdir(path):
        raise DatasetError(f"{flag} {path}: is a folder; give a .json, .jsonl, .csv or .parquet file")
    if not os.path.isfile(path):
        raise DatasetError(f"{flag} {path}: not a regular file (a device, pipe or socket never "
                           "ends); copy what you need into a file and give that")


def too_deep(where: str) -> DatasetError:
    """json's decoder recurses once per level: a RecursionError past ~1000 levels."""
    return DatasetError(f"{where}: JSON nested too deeply (over {sys.getrecursionlimit()} "
                        "levels); a prompt file holds flat objects, fix or remove that entry")


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line that is not blank, checked as UTF-8 (a BOM on the first
    line is dropped), read one line at a time and each at most MAX_LINE_BYTES: a file of one
    endless line is refused at that line, not read whole."""
    with open(path, "rb") as fh:
        line_no = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            line_no += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise DatasetError(f"{path}:{line_no}: a line longer than {MAX_LINE_BYTES >> 20} "
                                   "MB is no prompt; is this a JSONL file?")
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path}:{line_no}: not UTF-8 text (byte {raw[exc.start]:#04x} at "
                                   f"column {exc.start + 1}); save the file as UTF-8")
            if line.strip():
                yield line_no, line


def json_line(line: str, where: str) -> Any:
    """One JSONL line decoded; invalid or too deeply nested JSON is one DatasetError."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: invalid JSON ({exc.msg}, column {exc.colno})")
    except RecursionError:
        raise too_deep(where) from None


def _line_of(path: str, offset: int) -> int:
    with open(path, "rb") as fh:
        return fh.read(offset).count(b"\n") + 1


def iter_json_array(path: str, chunk_size: int = 1 << 20) -> Iterator[tuple[int, Any]]:
    """Stream the elements of a top-level JSON array as (byte offset, value), in flat memory:
    the buffer holds one chunk and the entry being read, at most MAX_ENTRY_BYTES."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")("replace")
    with open(path, "rb") as fh:
        buf = utf8.decode(fh.read(chunk_size))
        pos = len(buf) - len(buf.lstrip())
        if buf[pos:pos + 1] != "[":
            raise DatasetError(f"{path}:1: expected a JSON array of conversations (ShareGPT format)")
        pos += 1
        mark, mark_bytes = 0, 0     # a character position in buf and its byte offset in the file
        eof = False
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos < len(buf) and buf[pos] == "]":
                return
            try:
                obj, end = decoder.raw_decode(buf, pos)
            except RecursionError:
                at = mark_bytes + len(buf[mark:pos].encode("utf-8"))
                raise too_deep(f"{path}:{_line_of(path, at)}") from None
            except json.JSONDecodeError as exc:
                at = mark_bytes + len(buf[mark:pos].encode("utf-8"))
                if eof:
                    bad = mark_bytes + len(buf[mark:exc.pos].encode("utf-8"))
                    raise DatasetError(f"{path}:{_line_of(path, bad)}: invalid JSON ({exc.msg})")
                if len(buf) - pos > MAX_ENTRY_BYTES:
                    raise DatasetError(f"{path}:{_line_of(path, at)}: an entry larger than "
                                       f"{MAX_ENTRY_BYTES >> 20} MB, or broken JSON ({exc.msg}); "
                                       "a ShareGPT entry is one conversation")
                # read at least as much again as is pending: an entry of n bytes is decoded
                # O(log n) times, not n / chunk_size times
                more = fh.read(max(chunk_size, len(buf) - pos))
                eof = not more
                mark_bytes = at
                buf = buf[pos:] + utf8.decode(more, final=eof)
                pos = mark = 0
                continue
            mark_bytes += len(buf[mark:pos].encode("utf-8"))
            mark = pos
            yield mark_bytes, obj
            pos = end


def _size(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10_000_000 else f"{n:,} bytes"


def scan_offsets(path: str, keep: Any) -> tuple[list[int], str | None]:
    """Byte offsets of the entries ``keep(offset, obj)`` accepts, from at most the first
    SAMPLE_SCAN_BYTES of the file, and a note when the scan stopped there."""
    offsets = []
    for off, obj in iter_json_array(path):
        if off >= SAMPLE_SCAN_BYTES:
            size = os.path.getsize(path)
            return offsets, (f"sampled from the first {_size(SAMPLE_SCAN_BYTES)} of {path} "
                             f"({SAMPLE_SCAN_BYTES / size:.0%} of its {_size(size)}): llmbench "
                             "reads at most that much to draw a sample")
        if keep(off, obj):
            offsets.append(off)
    return offsets, None


def _read_at(fh: Any, byte_offset: int, decoder: json.JSONDecoder) -> Any:
    """Decode the JSON value that starts at a byte offset, reading only as much as it needs."""
    fh.seek(byte_offset)
    data = b""
    size = 1 << 14
    while True:
        more = fh.read(size)
        data += more
        try:
            return decoder.raw_decode(data.decode("utf-8", "replace"))[0]
        except json.JSONDecodeError:
            if not more:
                raise
            size *= 2


def _entries_at(path: str, offsets: list[int], total: int
                ) -> Generator[tuple[int, Any], None, None]:
    """(offset, entry) of each offset in turn, parsed again from the file, with the reading
    stage's progress begun (``total`` conversations) and ended when the caller closes it (a
    stage left open would end a later one, a rebuild's, when it is collected)."""
    decoder = json.JSONDecoder()
    progress.begin(progress.READING, total, "conversations")
    with open(path, "rb") as fh, progress.stage():
        for off in offsets:
            yield off, _read_at(fh, off, decoder)


def _sharegpt_turns(conv: list[dict[str, Any]]) -> tuple[str | None, list[tuple[str, str | None]]]:
    """(system, [(user, following reply or None)]) from ShareGPT ``conversations``."""
    system = None
    pairs: list[tuple[str, str | None]] = []
    for m in conv:
        if not isinstance(m, dict):
            continue
        who = str(m.get("from", m.get("role", ""))).lower()
        text = m.get("value", m.get("content", ""))
        if not isinstance(text, str):
            continue
        if who == "system":
            system = text
        elif who in ("human", "user"):
            pairs.append((text, None))
        elif who in ("gpt", "assistant", "chatgpt", "bard", "model") and pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], text)
    return system, pairs


def sharegpt_single_turn(path: str, tok: Tokenizer, count: int, seed: int,
                         output_len: int | None = None) -> tuple[list[Conversation], list[str]]:
    """vLLM's ShareGPT sampling: turn 0 as prompt, turn 1's length as output length; drop prompts
    under 4 tokens, over 1024, and prompt+output over 2048; seeded shuffle; oversample if short."""
    check_regular_file(path)

    def keep(off: int, obj: Any) -> bool:
        conv = obj.get("conversations") if isinstance(obj, dict) else None
        if conv is not None and not isinstance(conv, list):
            raise DatasetError(f"{path}:{_line_of(path, off)}: 'conversations' is a "
                               f"{type(conv).__name__}; ShareGPT needs a list of "
                               "{\"from\": ..., \"value\": ...} turns")
        return conv is not None and len(conv) >= 2 and all(isinstance(m, dict) for m in conv[:2])
    offsets, scanned = scan_offsets(path, keep)
    if not offsets:
        raise DatasetError(f"--dataset {path}: no entry has a 'conversations' list of 2 or more turns")
    rng = random.Random(seed)
    rng.shuffle(offsets)
    out: list[Conversation] = []
    dropped = {"prompt under 4 tokens": 0, "output under 4 tokens": 0,
               "prompt over 1024 tokens": 0, "prompt+output over 2048 tokens": 0}
    with closing(_entries_at(path, offsets, count)) as entries:
        for off, obj in entries:
            if len(out) >= count:
                break
            progress.PROGRESS.done = len(out)
            conv = obj["conversations"]
            prompt, completion = conv[0].get("value", ""), conv[1].get("value", "")
            if not isinstance(prompt, str) or not isinstance(completion, str):
                raise DatasetError(f"{path}:{_line_of(path, off)}: a turn's 'value' is not a "
                                   "string (ShareGPT format)")
            p_len = tok.count(prompt)
            c_len = tok.count(completion)
            o_len = output_len if output_len is not None else c_len
            if p_len < 4:
                dropped["prompt under 4 tokens"] += 1
                continue
            if output_len is None and o_len < 4:
                dropped["output under 4 tokens"] += 1
                continue
            if p_len > 1024:
                dropped["prompt over 1024 tokens"] += 1
                continue
            if p_len + o_len > 2048:
                dropped["prompt+output over 2048 tokens"] += 1
                continue
            out.append(Conversation(f"sharegpt-{obj.get('id', off)}",
                                    (Turn(prompt, o_len, p_len),)))
    if not out:
        why = ", ".join(f"{k}: {v}" for k, v in dropped.items() if v)
        raise DatasetError(f"--dataset {path}: nothing left after vLLM's filters ({why})")
    warnings = [scanned] if scanned else []
    if len(out) < count:
        warnings.append(f"only {len(out)} ShareGPT prompts passed the filters; oversampling to {count}")
        out = out + rng.choices(out, k=count - len(out))
    return out, warnings


def sharegpt_conversations(path: str, tok: Tokenizer, limit: int | None, seed: int,
                           max_turns: int | None = None) -> tuple[list[Conversation], list[str]]:
    """Whole ShareGPT conversations for virtual users (their own user turns, in order) and
    notes; only those the seeded shuffle picks are parsed again and tokenized."""
    check_regular_file(path)

    def keep(off: int, obj: Any) -> bool:
        if not isinstance(obj, dict) or not isinstance(obj.get("conversations"), list):
            raise DatasetError(f"{path}:{_line_of(path, off)}: expected an object with a "
                               "'conversations' list (ShareGPT format)")
        return bool(_sharegpt_turns(obj["conversations"])[1])
    offsets, scanned = scan_offsets(path, keep)
    if not offsets:
        raise DatasetError(f"--dataset {path}: no conversation has a human/user turn with text "
                           "(ShareGPT format: {\"from\": \"human\", \"value\": \"...\"})")
    random.Random(seed).shuffle(offsets)
    if limit:
        offsets = offsets[:limit]
    out = []
    with closing(_entries_at(path, offsets, len(offsets))) as entries:
        for off, obj in entries:
            progress.tick()
            system, pairs = _sharegpt_turns(obj["conversations"])
            pairs = pairs[:max_turns] if max_turns else pairs
            turns = tuple(Turn(u, None, tok.count(u)) for u, _ in pairs)
            out.append(Conversation(f"sharegpt-{obj.get('id', off)}", turns, system))
    return out, [scanned] if scanned else []


def _content(content: Any, where: str) -> tuple[str, tuple[str, ...]]:
    """A message's content: a string, or OpenAI's content parts (text, image_url: sent as they
    are, the text counted by the tokenizer, the images by the server's usage)."""
    if isinstance(content, str):
        return content, ()
    if isinstance(content, list):
        texts, images = [], []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "image_url":
                url = part.get("image_url")
                url = url.get("url") if isinstance(url, dict) else url
                if not isinstance(url, str) or not url:
                    raise DatasetError(f"{where}: an image_url part needs a url")
                images.append(url)
            else:
                raise DatasetError(f"{where}: content parts may be text or image_url, not {kind!r}")
        return "".join(texts), tuple(images)
    raise DatasetError(f"{where}: each message needs 'role' and a 'content' string or list of parts")


def _jsonl_entry(obj: Any, path: str, line_no: int, tok: Tokenizer) -> Conversation:
    where = f"{path}:{line_no}"
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object with 'messages', 'conversations' or 'prompt'")
    out_tokens = obj.get("max_tokens", obj.get("output_tokens"))
    if out_tokens is not None and (not isinstance(out_tokens, int) or out_tokens < 1):
        raise DatasetError(f"{where}: max_tokens/output_tokens must be a whole number >= 1")
    cid = str(obj.get("id", f"line-{line_no}"))
    if isinstance(obj.get("messages"), list):
        system, users = None, []
        for m in obj["messages"]:
            if not isinstance(m, dict):
                raise DatasetError(f"{where}: each message needs 'role' and 'content'")
            text, images = _content(m.get("content", ""), where)
            if m.get("role") == "system":
                system = text
            elif m.get("role") == "user":
                users.append((text, images))
        if not users:
            raise DatasetError(f"{where}: 'messages' has no user message")
        return Conversation(cid, tuple(Turn(u, out_tokens, tok.count(u), images=im)
                                       for u, im in users), system)
    if isinstance(obj.get("conversations"), list):
        system, pairs = _sharegpt_turns(obj["conversations"])
        if not pairs:
            raise DatasetError(f"{where}: 'conversations' has no human/user turn")
        return Conversation(cid, tuple(Turn(u, out_tokens, tok.count(u)) for u, _ in pairs), system)
    if isinstance(obj.get("prompt"), str):
        p = obj["prompt"]
        return Conversation(cid, (Turn(p, out_tokens, tok.count(p)),))
    raise DatasetError(f"{where}: none of the known shapes; each line needs 'messages' "
                       "(OpenAI chat), 'conversations' (ShareGPT) or 'prompt' (a string)")


def jsonl_conversations(path: str, tok: Tokenizer, need: int | None
                        ) -> tuple[list[Conversation], list[str]]:
    """The first ``need`` entries of a JSONL file (all with None; the rest is not read), and a
    note when it holds more."""
    check_regular_file(path)
    out: list[Conversation] = []
    lines = read_lines(path)
    for line_no, line in lines:
        out.append(_jsonl_entry(json_line(line, f"{path}:{line_no}"), path, line_no, tok))
        if need and len(out) >= need:
            break
    if not out:
        raise DatasetError(f"--dataset {path}: the file has no entries")
    more = need is not None and len(out) >= need and next(lines, None) is not None
    lines.close()
    return out, ([f"read the first {len(out)} entries of {path}, as many as this run can use "
                  "(--limit N reads N); the rest of the file was not read"] if more else [])


def _image_uris(value: Any, where: str) -> tuple[str, ...]:
    """A dataset's image cell as data URIs: a decoded image (datasets' Image feature gives PIL
    images), {"bytes", "path"} as stored, raw bytes, a URL or path string, or a list of those."""
    import base64
    if isinstance(value, (list, tuple)):
        return tuple(u for v in value for u in _image_uris(v, where))
    if isinstance(value, dict):
        value = value.get("bytes") or value.get("path")
    if isinstance(value, str):
        if value.startswith(("http://", "https://", "data:")):
            return (value,)
        try:
            value = Path(value).read_bytes()
        except OSError as exc:
            raise DatasetError(f"{where}: image {value!r} cannot be read ({exc.strerror or exc})") from None
    if hasattr(value, "save"):                      # a PIL image
        import io
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        value = buf.getvalue()
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
        mime = ("image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else
                "image/jpeg" if data[:3] == b"\xff\xd8\xff" else
                "image/gif" if data[:4] == b"GIF8" else
                "image/webp" if data[8:12] == b"WEBP" else "application/octet-stream")
        return (f"data:{mime};base64,{base64.b64encode(data).decode()}",)
    raise DatasetError(f"{where}: the image column holds {type(value).__name__}; expected an "
                       "image, bytes, a URL or a file path")


def hf_conversations(spec: str, tok: Tokenizer, limit: int | None, split: str,
                     columns: dict[str, str]) -> list[Conversation]:
    """Through the ``datasets`` library: a local JSON/JSONL/CSV/Parquet path or a hub name."""
    import datasets  # heavy: imported only here

    local = os.path.exists(spec)
    if local:
        check_regular_file(spec)
    try:
        if local:
            ext = os.path.splitext(spec)[1].lower().lstrip(".")
            builder = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "parquet"}.get(ext)
            if builder is None:
                raise DatasetError(f"--dataset {spec}: unknown file type .{ext}; use json, jsonl, csv or parquet")
            ds = datasets.load_dataset(builder, data_files=spec, split="train")
        else:
            ds = datasets.load_dataset(spec, split=split)
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - the library raises many kinds
        if local:
            raise DatasetError(f"--dataset {spec}: datasets could not read it ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:150]})")
        raise DatasetError(f"--dataset hf:{spec}: could not load it from the Hugging Face hub "
                           f"(offline, or no such dataset/split {split!r}); download it where you "
                           "are online and pass the local file")
    prompt_col = columns.get("prompt", "prompt")
    image_col = columns.get("image")
    out = []
    names = set(ds.column_names)
    if image_col is not None and image_col not in names:
        raise DatasetError(f"--dataset {spec}: no column {image_col!r} for --hf-column "
                           f"image= (columns: {', '.join(sorted(names))})")
    for i, row in enumerate(ds):
        if limit and len(out) >= limit:
            break
        mt = row.get(columns.get("max_tokens", "max_tokens"))
        if "messages" in names and "prompt" not in columns:
            entry = {"messages": row["messages"], "id": row.get("id", i), "max_tokens": mt}
        elif "conversations" in names and "prompt" not in columns:
            entry = {"conversations": row["conversations"], "id": row.get("id", i)}
        elif prompt_col in names:
            entry = {"prompt": str(row[prompt_col]), "id": i, "max_tokens": int(mt) if mt else None}
        else:
            raise DatasetError(f"--dataset {spec}: no column {prompt_col!r} (columns: "
                               f"{', '.join(sorted(names))}); map one with --hf-column prompt=NAME")
        conv = _jsonl_entry(entry, spec, i + 1, tok)
        if image_col is not None and row.get(image_col) is not None:
            from dataclasses import replace
            uris = _image_uris(row[image_col], f"{spec}:{i + 1}")
            conv = replace(conv, turns=(replace(conv.turns[0], images=uris),) + conv.turns[1:])
        out.append(conv)
    if not out:
        raise DatasetError(f"--dataset {spec}: no rows")
    return out
