"""Folders of numbered images in and out through OpenCV: PNG, JPEG and whatever it reads.

:class:`ImageSequenceSource` reads a folder (every image in it), a printf pattern
(``frames/frame_%06d.png``) or a glob (``frames/*.jpg``), in the order of the numbers in
the names (``f_2.png`` before ``f_10.png``), decoding each batch on a few threads straight
into the pool slot. Frames are RGB(A) in memory, 8 or 16 bits as the files hold them; the
BGR order OpenCV uses on disk is converted here. A sequence has a frame rate only when one
is given (``rate``, 25 by default, as FFmpeg's image reader): frames carry
``meta["pts"] = number / rate``.

Example:
    >>> source = ImageSequenceSource("shots/frame_%06d.png", rate=24)  # doctest: +SKIP

The sink is ``io/image_sink.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import Any, Literal

import cv2
import numpy as np

from ..errors import CorruptFrame, FrameError, MediaError
from ..frames import FrameSpec
from .base import Chunk, Source
from .formats import CHANNELS, OnCorrupt, rate_of
from .image_names import list_images, naming_of
from .positions import DEFAULT_RATE
from .sampling import Sampling, Timeline

ImagePixFmt = Literal["rgb24", "gray", "rgba", "auto"]
"""``"auto"``: as the files hold them (gray, RGB or RGBA)."""
# IMREAD_ANYDEPTH keeps 16-bit images 16-bit (the source's spec says uint16 then)
_READ_FLAGS = {
    "gray": cv2.IMREAD_GRAYSCALE | cv2.IMREAD_ANYDEPTH,
    "rgb24": cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH,
    "rgba": cv2.IMREAD_UNCHANGED,
}
_TO_RGBA = {1: cv2.COLOR_GRAY2RGBA, 3: cv2.COLOR_BGR2RGBA, 4: cv2.COLOR_BGRA2RGBA}
_AUTO = {2: "gray", 3: "rgb24", 4: "rgba"}  # channels of the first image (2: ndim)


def default_workers() -> int:
    """Threads that decode (or encode) a batch's images: one per core, at most four."""
    return max(1, min(4, os.cpu_count() or 1))


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
            ``"rgba"`` ``(H, W, 4)`` (opaque when the files have no alpha), ``"auto"``
            what the first file holds (gray, RGB or RGBA); 8 or 16 bits as the files.
        start: index of the first file to read, in the order above.
        stop: one past the last file; ``None`` reads to the end.
        step: read every ``step``-th file from ``start``.
        keyframes, fps, at, num_frames: a sampling, as
            :class:`~hyperframes.io.video.VideoSource` takes it (image ``n`` is shown at
            ``n / rate``; every image is a key frame).
        size: ``(width, height)`` to resize every image to (then the files' sizes may
            differ); by default every file must have the first one's size.
        rate: frames a second (``24``, ``"30000/1001"``); 25 when not given.
        on_corrupt: ``"fail"`` raises :class:`CorruptFrame` at an unreadable file, ``"skip"``
            leaves it out and lists it in :attr:`skipped`.
        workers: threads decoding one batch (``cv2.imdecode`` releases the GIL).

    Attributes:
        info: ``path``, ``frames``, ``rate``/``fps``/``time_base``, ``width``/``height``,
            ``bits``, ``alpha``, ``first``/``last`` (file names) and, where the names
            follow one pattern, ``pattern``, ``first_number`` and ``number_step``
            (:func:`naming_of`: for outputs to name their images alike).

    Raises:
        MediaError: no images match, or the first one cannot be read.
    """

    def __init__(
        self,
        pattern_or_dir: str | os.PathLike[str],
        *,
        pix_fmt: ImagePixFmt = "rgb24",
        start: int = 0,
        stop: int | None = None,
        step: int = 1,
        size: tuple[int, int] | None = None,
        rate: Fraction | float | str | None = None,
        on_corrupt: OnCorrupt = "fail",
        workers: int | None = None,
        keyframes: bool = False,
        fps: float | str | Fraction | None = None,
        at: Iterable[float | str | Fraction] | None = None,
        num_frames: int | None = None,
    ) -> None:
        if pix_fmt not in (*CHANNELS, "auto") or on_corrupt not in ("fail", "skip"):
            raise ValueError(
                f"pix_fmt must be one of {sorted(CHANNELS)} or 'auto' and on_corrupt 'fail' or "
                f"'skip', got {pix_fmt!r} and {on_corrupt!r}"
            )
        if start < 0 or (stop is not None and stop < start) or step < 1:
            raise ValueError(
                f"need 0 <= start <= stop and step >= 1, got start={start}, stop={stop}, "
                f"step={step}"
            )
        self.sampling = Sampling.of(step=step, keyframes=keyframes, fps=fps, at=at,
                                    num_frames=num_frames)  # fmt: skip
        if at is not None and (start or stop is not None):
            raise ValueError("at= names its frames by time; drop start and stop")
        self.start, self.stop, self.step, self.on_corrupt = start, stop, step, on_corrupt
        self.rate = DEFAULT_RATE if rate is None else rate_of(rate)
        every = list_images(pattern_or_dir)
        whole = np.arange(len(every), dtype=np.int64)  # image n is shown at n / rate
        timeline = Timeline(whole, 1 / Fraction(self.rate), keyframes=whole)
        self._numbers = self.sampling.pick(timeline, start, stop) if len(every) else whole
        self._instants = self.sampling.instants(timeline, start, stop) if len(every) else whole
        self.files = [every[n] for n in self._numbers]
        self._offset = 0  # restrict, resume_from: the count of the first file listed
        self.size = None if size is None else (int(size[0]), int(size[1]))
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
        self.pix_fmt = (
            _AUTO[first.shape[2] if first.ndim == 3 else 2] if pix_fmt == "auto" else pix_fmt
        )
        # 16-bit files stay 16-bit: frames of uint16, not their low bytes
        height, width = first.shape[:2] if self.size is None else self.size[::-1]
        self.spec = FrameSpec((height, width, CHANNELS[self.pix_fmt]), first.dtype)
        self.length = len(self.files)
        self.info: dict[str, Any] = {
            "path": os.fspath(pattern_or_dir), "source": "images", "frames": self.length,
            "rate": str(self.sampling.fps or self.rate / step),
            "fps": float(self.sampling.fps or self.rate / step),
            "time_base": str(1 / self.rate), "width": width, "height": height,
            "bits": 16 if first.dtype == np.uint16 else 8,
            "alpha": first.ndim == 3 and first.shape[2] == 4,
            "first": self.files[0].name, "last": self.files[-1].name,
            **naming_of(self.files),
        }  # fmt: skip
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
        numbers = np.empty(len(out), dtype=np.int64)
        count = 0
        while count < len(out) and self._next < len(self.files):
            todo = range(self._next, min(self._next + len(out) - count, len(self.files)))
            base = count
            oks = list(self._pool.map(self._read_one, todo, out[base : base + len(todo)]))
            self._next = todo.stop
            for k, ok in enumerate(oks):
                number = self._number(todo[k])
                if not ok:
                    self.skipped.append(number)
                    continue
                if count != base + k:  # close the gap a skipped file left
                    out[count] = out[base + k]
                index[count] = self._offset + todo[k] if self.sampling.numbers_samples else number
                numbers[count] = number
                count += 1
        meta: dict[str, np.ndarray] = {"pts": numbers[:count] / float(self.rate)}
        if self.sampling.numbers_samples:
            meta["input_frame"] = numbers[:count]
            meta["at"] = self._instants[index[:count]]
        return Chunk(index[:count], meta)

    def resume_from(self, sample: int) -> None:
        """Leave out what comes before ``sample`` (a chunk ``index``), as
        :meth:`~.video.VideoSource.resume_from` does."""
        if self.sampling.numbers_samples:
            self._keep(max(int(sample) - self._offset, 0), len(self.files))
        else:
            self._keep(int(np.searchsorted(self._numbers, sample)), len(self.files))

    def restrict(self, first: int, stop: int) -> None:
        """Give only the images ``first`` to ``stop - 1`` of this read, as
        :meth:`~.video.VideoSource.restrict` does."""
        self._keep(first, stop)

    def _keep(self, first: int, stop: int) -> None:
        if self.sampling.numbers_samples:
            self._offset += first
        self.files, self._numbers = self.files[first:stop], self._numbers[first:stop]
        self.length = len(self.files)

    def _number(self, position: int) -> int:
        """The index in the whole sequence of the file at ``position`` of :attr:`files`."""
        return int(self._numbers[position])

    def close(self) -> None:
        """Stop the reading threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _read_one(self, position: int, dst: np.ndarray) -> bool:
        """Decode file ``position`` into ``dst``; ``False`` when skipped as unreadable."""
        path = self.files[position]
        image = read_image(path, _READ_FLAGS[self.pix_fmt])
        number = self._number(position)
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
        if self.size is not None and image.shape[:2] != self.spec.shape[:2]:
            image = cv2.resize(image, self.size, interpolation=cv2.INTER_AREA)
        if image.shape[:2] != self.spec.shape[:2]:
            raise FrameError(
                f"frame {number} ({str(path)!r}) is {image.shape[1]}x{image.shape[0]}, the "
                f"first image is {self.spec.shape[1]}x{self.spec.shape[0]}; "
                "every image of a sequence must have the same size, or pass size=(W, H) "
                "(--size WxH) to read them all at one size"
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
