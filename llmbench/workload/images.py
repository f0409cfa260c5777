"""Images for vision prompts (--images): synthetic pictures made before the load, or files.

A synthetic image is deterministic for (seed, index, size): a colour gradient under blocks of
noise, so it compresses like a photo more than like a flat colour (a 512x512 PNG is ~0.5 MB).
PNG is written here with zlib and numpy (no imaging library); JPEG needs Pillow and says so.
Images are made once, into a bounded pool (``pool`` distinct images, reused in turn order), and
sent as data URIs in ``image_url`` parts: nothing is encoded on the hot path, and memory stays
bounded however many turns a run has. A server that caches images by content sees a pool image
again after ``pool`` turns, as it would see a popular image; raise ``pool`` to avoid it.
"""

from __future__ import annotations

import base64
import io
import os
import random
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from llmbench.workload.files import DatasetError

FORMATS = ("png", "jpeg")
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
         ".gif": "image/gif"}
_SIZE = re.compile(r"^(\d+)x(\d+)$")
MAX_SIDE = 8192
MAX_FILE_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class ImageSpec:
    """Per user turn: ``count`` images, each between ``min_size`` and ``max_size`` (w, h), in
    ``fmt``; or, with ``folder``, one file from the folder per image, in name order."""
    count: int = 1
    min_size: tuple[int, int] = (512, 512)
    max_size: tuple[int, int] = (512, 512)
    fmt: str = "png"
    folder: str | None = None
    pool: int = 32
    seed: int = 0

    def describe(self) -> dict[str, object]:
        if self.folder:
            return {"per_turn": self.count, "folder": self.folder}
        return {"per_turn": self.count, "size": size_text(self.min_size, self.max_size),
                "format": self.fmt, "distinct": self.pool}


def size_text(lo: tuple[int, int], hi: tuple[int, int]) -> str:
    return f"{lo[0]}x{lo[1]}" if lo == hi else f"{lo[0]}x{lo[1]}-{hi[0]}x{hi[1]}"


def parse_size(text: str, flag: str = "--image-size") -> tuple[tuple[int, int], tuple[int, int]]:
    """'512x512' or '256x256-1024x768' -> (min, max)."""
    parts = text.strip().lower().split("-")
    sizes = []
    for p in parts:
        m = _SIZE.match(p.strip())
        if m is None or len(parts) > 2:
            raise DatasetError(f"{flag} {text!r}: expected WxH or WxH-WxH, e.g. 512x512 or "
                               "256x256-1024x768")
        w, h = int(m.group(1)), int(m.group(2))
        if not (1 <= w <= MAX_SIDE and 1 <= h <= MAX_SIDE):
            raise DatasetError(f"{flag} {text!r}: each side from 1 to {MAX_SIDE} pixels")
        sizes.append((w, h))
    lo, hi = sizes[0], sizes[-1]
    if hi[0] < lo[0] or hi[1] < lo[1]:
        raise DatasetError(f"{flag} {text!r}: the second size must not be smaller than the first")
    return lo, hi


def picture(width: int, height: int, seed: int) -> np.ndarray:
    """An RGB uint8 array: a gradient whose colours depend on the seed, with 8x8 noise blocks."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    c0, c1, c2 = rng.uniform(0, 255, size=(3, 3)).astype(np.float32)
    base = np.stack([c0[i] * (1 - x) * (1 - y) + c1[i] * x + c2[i] * y for i in range(3)], axis=-1)
    blocks = rng.normal(0.0, 24.0, size=((height + 7) // 8, (width + 7) // 8, 3)).astype(np.float32)
    noise = np.repeat(np.repeat(blocks, 8, axis=0), 8, axis=1)[:height, :width]
    fine = rng.normal(0.0, 6.0, size=(height, width, 3)).astype(np.float32)
    return np.clip(base + noise + fine, 0, 255).astype(np.uint8)


def png_bytes(rgb: np.ndarray) -> bytes:
    """A PNG file (8-bit RGB, filter 0 on every row), written with zlib."""
    h, w, _ = rgb.shape
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), rgb.reshape(h, w * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + chunk(b"IEND", b""))


def jpeg_bytes(rgb: np.ndarray) -> bytes:
    try:
        from PIL import Image
    except ImportError:
        raise DatasetError("--image-format jpeg needs Pillow (pip install pillow); "
                           "--image-format png needs nothing") from None
    out = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(out, format="JPEG", quality=85)
    return out.getvalue()


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _synthetic_pool(spec: ImageSpec) -> list[str]:
    rng = random.Random(spec.seed)
    encode, mime = (png_bytes, "image/png") if spec.fmt == "png" else (jpeg_bytes, "image/jpeg")
    out = []
    for i in range(max(spec.pool, 1)):
        w = rng.randint(spec.min_size[0], spec.max_size[0])
        h = rng.randint(spec.min_size[1], spec.max_size[1])
        out.append(data_uri(encode(picture(w, h, spec.seed * 100003 + i)), mime))
    return out


def _folder_pool(folder: str) -> list[str]:
    root = Path(folder)
    if not root.is_dir():
        raise DatasetError(f"--images {folder}: not a folder; give a number of synthetic images "
                           "per turn or a folder of .png/.jpg/.webp/.gif files")
    files = sorted(p for p in root.iterdir() if p.suffix.lower() in _MIME and p.is_file())
    if not files:
        raise DatasetError(f"--images {folder}: no .png, .jpg, .jpeg, .webp or .gif file in it")
    out = []
    for p in files:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise DatasetError(f"--images {p}: {size / 1e6:.1f} MB; at most "
                               f"{MAX_FILE_BYTES // (1024 * 1024)} MB per image")
        out.append(data_uri(p.read_bytes(), _MIME[p.suffix.lower()]))
    return out


class ImagePool:
    """The images of a run, made before the load: ``for_turn(k)`` gives the k-th user turn's."""

    def __init__(self, spec: ImageSpec) -> None:
        self.spec = spec
        self.uris = _folder_pool(spec.folder) if spec.folder else _synthetic_pool(spec)

    def for_turn(self, k: int) -> tuple[str, ...]:
        n = len(self.uris)
        return tuple(self.uris[(k * self.spec.count + j) % n] for j in range(self.spec.count))

    @property
    def bytes(self) -> int:
        return sum(len(u) for u in self.uris)


def parse_images(value: str, flag: str = "--images") -> tuple[int, str | None]:
    """'2' -> (2, None); a folder -> (1, folder)."""
    text = value.strip()
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= 64:
            raise DatasetError(f"{flag} {value}: from 1 to 64 images per turn")
        return n, None
    if os.path.isdir(text):
        return 1, text
    raise DatasetError(f"{flag} {value!r}: a number of synthetic images per turn, or a folder "
                       "of image files")


def content_parts(text: str, images: Sequence[str]) -> list[dict[str, object]]:
    """A user message's content as the chat API takes text with images."""
    return [{"type": "text", "text": text}] + [
        {"type": "image_url", "image_url": {"url": u}} for u in images]


class WithImages(Sequence):
    """A workload's conversations with the pool's images on every user turn, made on access
    (a regenerated synthetic workload stays regenerated: nothing per turn is held)."""

    def __init__(self, convs: Sequence, pool: ImagePool) -> None:
        self.convs = convs
        self.pool = pool

    def __len__(self) -> int:
        return len(self.convs)

    def __getitem__(self, i):  # type: ignore[override]
        from dataclasses import replace
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        c = self.convs[i]
        i = i % len(self) if i < 0 else i
        turns = tuple(replace(t, images=self.pool.for_turn(i * 64 + k)) for k, t in enumerate(c.turns))
        return replace(c, turns=turns)
