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
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

from llmbench.workload.files import DatasetError
from llmbench.workload.model import Conversation, Made

FORMATS = ("png", "jpeg")
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
         ".gif": "image/gif"}
_SIZE = re.compile(r"^(\d+)x(\d+)$")
MAX_SIDE = 8192
MAX_FILE_BYTES = 20 * 1024 * 1024
# The most a run's pool of images may hold (module doc): 32 images of 4096x4096 were 2.9 GB and
# 163 s before the first request. A larger pool is made smaller (images repeat sooner, and
# ``ImagePool.note`` says so); one turn's images that alone are larger are refused.
MAX_POOL_BYTES = 512 << 20
# Above this many pixels in all, making the pool is said before it starts (it takes seconds:
# about 3 million pixels a second, measured on a 2-core machine)
SAY_FROM_PIXELS = 8_000_000


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
    import numpy as np      # here: a run without --images never loads numpy for it
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
    import numpy as np
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


def uri_bytes(width: int, height: int, fmt: str) -> int:
    """About how large one synthetic image is as a data URI: the noise in a picture (so that it
    compresses like a photo) leaves a PNG near its raw size (0.9 measured at 512x512 and
    4096x4096), a JPEG at quality 85 near a fifth of it; base64 adds a third."""
    raw = width * height * 3
    return int(raw * (0.9 if fmt == "png" else 0.2) * 4 / 3) + 64


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} kB"


def _synthetic_pool(spec: ImageSpec, n: int) -> list[str]:
    rng = random.Random(spec.seed)
    encode, mime = (png_bytes, "image/png") if spec.fmt == "png" else (jpeg_bytes, "image/jpeg")
    out = []
    for i in range(max(n, 1)):
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
    """The images of a run, made before the load: ``for_turn(k)`` gives the k-th user turn's.
    ``needed``: the run's image slots (conversations x turns x images per turn); when fewer
    than ``spec.pool``, only that many are made (a 3-request run makes 3, not 32)."""

    def __init__(self, spec: ImageSpec, needed: int | None = None) -> None:
        self.spec = spec
        self.note: str | None = None
        if spec.folder:
            self.uris = _folder_pool(spec.folder)
            return
        n = max(spec.pool, 1) if needed is None else max(min(spec.pool, needed), 1)
        w, h = spec.max_size
        per = uri_bytes(w, h, spec.fmt)
        size = size_text(spec.min_size, spec.max_size)
        if spec.count * per > MAX_POOL_BYTES:
            raise DatasetError(
                f"--images {spec.count} --image-size {size}: one turn's images are about "
                f"{_mb(spec.count * per)}, over the {_mb(MAX_POOL_BYTES)} llmbench holds for a "
                "run's images; give a smaller --image-size or fewer --images")
        fit = MAX_POOL_BYTES // per
        if n > fit:
            self.note = (f"--images: {n} distinct {size} images would take about "
                         f"{_mb(n * per)}; made {fit} (at most {_mb(MAX_POOL_BYTES)} in "
                         f"all), so each repeats every {max(fit // spec.count, 1)} turns (a "
                         "server that caches images by content sees them again sooner)")
            n = fit
        pixels = n * w * h
        if pixels >= SAY_FROM_PIXELS:
            print(f"making {n} synthetic {size} image{'s' if n != 1 else ''} before the load "
                  f"(about {_mb(n * per)} in memory, {max(pixels / 3e6, 1):.0f} s or so)...",
                  file=sys.stderr, flush=True)
        self.uris = _synthetic_pool(spec, n)

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


class WithImages(Made):
    """A workload's conversations with the pool's images on every user turn, made on access
    (a regenerated synthetic workload stays regenerated). Conversation i's turn k is the
    pool's turn i x ``stride`` + k (``stride``: the most turns a conversation has), so every
    user turn gets its own images until the pool comes round (a stride of 64 once gave every
    conversation's first turn the same image of a 32-image pool)."""

    def __init__(self, convs: Sequence, pool: ImagePool, stride: int = 1) -> None:
        self.convs = convs
        self.pool = pool
        self.stride = max(stride, 1)

    def __len__(self) -> int:
        return len(self.convs)

    def made(self, i: int) -> Conversation:
        from dataclasses import replace
        c = self.convs[i]
        at = i * self.stride
        turns = tuple(replace(t, images=self.pool.for_turn(at + k)) for k, t in enumerate(c.turns))
        return replace(c, turns=turns)
