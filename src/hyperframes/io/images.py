"""Folders of numbered images in and out through OpenCV: PNG, JPEG and whatever it reads.

:class:`ImageSequenceSource` reads a folder (every image in it, in sorted name
order), a printf pattern (``frames/frame_%06d.png``) or a glob (``frames/*.jpg``),
decoding each batch on a few threads straight into the pool slot. Frames are RGB(A) in
memory; the BGR order OpenCV uses on disk is converted here.

Example:
    >>> source = ImageSequenceSource("shots/frame_%06d.png")  # doctest: +SKIP

The sink is ``io/image_sink.py``.
"""

from __future__ import annotations

import glob
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

from ..errors import CorruptFrame, FrameError, MediaError
from ..frames import FrameSpec
from .base import Chunk, Source
from .formats import CHANNELS, OnCorrupt, PixFmt

#: Extensions a folder source picks up.
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"})
_PRINTF = re.compile(r"%(0?)(\d*)d")
# IMREAD_ANYDEPTH keeps 16-bit images 16-bit (the source's spec says uint16 then)
_READ_FLAGS = {
    "gray": cv2.IMREAD_GRAYSCALE | cv2.IMREAD_ANYDEPTH,
    "rgb24": cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH,
    "rgba": cv2.IMREAD_UNCHANGED,
}
_TO_RGBA = {1: cv2.COLOR_GRAY2RGBA, 3: cv2.COLOR_BGR2RGBA, 4: cv2.COLOR_BGRA2RGBA}


def default_workers() -> int:
    """Threads that decode (or encode) a batch's images: one per core, at most four."""
    return max(1, min(4, os.cpu_count() or 1))


def list_images(pattern_or_dir: str | os.PathLike[str]) -> list[Path]:
    """The image files a source reads, in order.

    Args:
        pattern_or_dir: a folder, a printf pattern (``frame_%06d.png``, ordered by number)
            or a glob (``*.jpg``, ordered by name).

    Raises:
        MediaError: nothing matches.
    """
    text = os.fspath(pattern_or_dir)
    if Path(text).is_dir():
        found = sorted(p for p in Path(text).iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
    elif _PRINTF.search(text):
        found = _numbered(Path(text))
    else:
        found = sorted(Path(name) for name in glob.glob(text))
    if not found:
        raise MediaError(
            f"no images found at {text!r}; name a folder of images, a pattern such as "
            "'frames/frame_%06d.png' or a glob such as 'frames/*.jpg'"
        )
    return found


def _numbered(pattern: Path) -> list[Path]:
    """Files matching a printf pattern in its folder, ordered by their number."""
    folder, name = pattern.parent, pattern.name
    if _PRINTF.search(str(folder)):
        raise ValueError(f"only the file name may hold a %d field, got {str(pattern)!r}")
    regex, last = "", 0
    for match in _PRINTF.finditer(name):
        width = match.group(2)
        digits = rf"\d{{{width},}}" if match.group(1) and width else r"\d+"
        regex += re.escape(name[last : match.start()]) + f"({digits})"
        last = match.end()
    compiled = re.compile(regex + re.escape(name[last:]) + r"\Z")
    if not folder.is_dir():
        return []
    hits = ((compiled.match(p.name), p) for p in folder.iterdir())
    return [p for m, p in sorted((int(m.group(1)), p) for m, p in hits if m)]


def read_image(path: str | os.PathLike[str], flags: int) -> np.ndarray | None:
    """Decode an image file from its bytes (``None`` if it is not one): the path never
    reaches OpenCV, which cannot open every name a file system allows.

    Raises:
        OSError: the file cannot be read.
    """
    data = np.fromfile(path, dtype=np.uint8)
    if not data.size:
        return None
    image: np.ndarray | None = cv2.imdecode(data, flags)
    return image


class ImageSequenceSource(Source):
    """Frames from numbered image files, read with OpenCV on a few threads.

    Args:
        pattern_or_dir: a folder, a printf pattern or a glob (see :func:`list_images`).
        pix_fmt: ``"rgb24"`` gives ``(H, W, 3)`` frames, ``"gray"`` ``(H, W, 1)``,
            ``"rgba"`` ``(H, W, 4)`` (opaque when the files have no alpha), all ``uint8``.
        start: index of the first file to read, in the order above.
        stop: one past the last file; ``None`` reads to the end.
        on_corrupt: ``"fail"`` raises :class:`CorruptFrame` at an unreadable file, ``"skip"``
            leaves it out and lists it in :attr:`skipped`.
        workers: threads decoding one batch (``cv2.imdecode`` releases the GIL).

    Raises:
        MediaError: no images match, or the first one cannot be read.
    """

    def __init__(
        self,
        pattern_or_dir: str | os.PathLike[str],
        *,
        pix_fmt: PixFmt = "rgb24",
        start: int = 0,
        stop: int | None = None,
        on_corrupt: OnCorrupt = "fail",
        workers: int | None = None,
    ) -> None:
        if pix_fmt not in CHANNELS or on_corrupt not in ("fail", "skip"):
            raise ValueError(
                f"pix_fmt must be one of {sorted(CHANNELS)} and on_corrupt 'fail' or 'skip', "
                f"got {pix_fmt!r} and {on_corrupt!r}"
            )
        if start < 0 or (stop is not None and stop < start):
            raise ValueError(f"need 0 <= start <= stop, got start={start}, stop={stop}")
        self.files = list_images(pattern_or_dir)[start:stop]
        self.start, self.pix_fmt, self.on_corrupt = start, pix_fmt, on_corrupt
        self.workers = workers or default_workers()
        if not self.files:
            raise ValueError(f"start={start} is past the last image; pass a smaller start")
        first = read_image(self.files[0], cv2.IMREAD_UNCHANGED)
        if first is None:
            raise MediaError(f"cannot read {str(self.files[0])!r} as an image; check the file")
        if first.dtype not in (np.uint8, np.uint16):
            raise MediaError(
                f"{str(self.files[0])!r} holds {first.dtype} samples; image sequences are read "
                "as 8-bit or 16-bit: convert the files to PNG or TIFF of 8 or 16 bits"
            )
        # 16-bit files stay 16-bit: frames of uint16, not their low bytes
        self.spec = FrameSpec((first.shape[0], first.shape[1], CHANNELS[pix_fmt]), first.dtype)
        self.length = len(self.files)
        self.info = {"path": os.fspath(pattern_or_dir), "frames": self.length}
        self.skipped: list[int] = []
        self._next = 0
        self._pool: ThreadPoolExecutor | None = None

    def open(self) -> None:
        """Start the reading threads (also done by the first :meth:`read_into`)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="hf-images-read")
            self._next, self.skipped = 0, []

    def read_into(self, out: np.ndarray) -> Chunk:
        """Read up to ``len(out)`` images into ``out``; unreadable ones fail or are skipped."""
        self.open()
        assert self._pool is not None
        index = np.empty(len(out), dtype=np.int64)
        count = 0
        while count < len(out) and self._next < len(self.files):
            todo = range(self._next, min(self._next + len(out) - count, len(self.files)))
            base = count
            oks = list(self._pool.map(self._read_one, todo, out[base : base + len(todo)]))
            self._next = todo.stop
            for k, ok in enumerate(oks):
                number = self.start + todo[k]
                if not ok:
                    self.skipped.append(number)
                    continue
                if count != base + k:  # close the gap a skipped file left
                    out[count] = out[base + k]
                index[count] = number
                count += 1
        return Chunk(index[:count])

    def close(self) -> None:
        """Stop the reading threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _read_one(self, position: int, dst: np.ndarray) -> bool:
        """Decode file ``position`` into ``dst``; ``False`` when skipped as unreadable."""
        path = self.files[position]
        image = read_image(path, _READ_FLAGS[self.pix_fmt])
        number = self.start + position
        if image is None:
            if self.on_corrupt == "skip":
                return False
            raise CorruptFrame(
                f"frame {number} ({str(path)!r}) cannot be read as an image; "
                "pass on_corrupt='skip' (--on-corrupt skip) to leave unreadable files out",
                frame=number,
            )
        if image.dtype != self.spec.dtype:
            raise FrameError(
                f"frame {number} ({str(path)!r}) holds {image.dtype} samples, the first image "
                f"{self.spec.dtype}; every image of a sequence must have the same depth"
            )
        if image.shape[:2] != self.spec.shape[:2]:
            raise FrameError(
                f"frame {number} ({str(path)!r}) is {image.shape[1]}x{image.shape[0]}, the "
                f"first image is {self.spec.shape[1]}x{self.spec.shape[0]}; "
                "every image of a sequence must have the same size"
            )
        if self.pix_fmt == "gray":
            dst[..., 0] = image
        elif self.pix_fmt == "rgb24":
            cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=dst)
        else:
            channels = 1 if image.ndim == 2 else image.shape[2]
            dst[...] = cv2.cvtColor(image, _TO_RGBA[channels])
        return True

    def __repr__(self) -> str:
        return (
            f"ImageSequenceSource({self.info['path']!r}, spec={self.spec!r}, length={self.length})"
        )
