"""FFmpeg's own pixel conversion (swscale) written into an array, its context kept from
frame to frame (:class:`Swscale`).

``frame.to_ndarray(format="rgb24")``, what PyAV, torchcodec and OpenCV's FFmpeg backend
give, makes a new swscale context for every frame (its set-up, and a pool of threads of
its own) and then a new array. :class:`Swscale` keeps one context, converts on the
calling thread and copies the result into the array it is given: the same pixels, bit
for bit (``tests/unit/test_swscale.py``), at 1.1-1.5x the rate of ``to_ndarray`` on
640x272, 720p and 1080p frames (``benchmarks/colour.py``). Slices on threads of its own
were slower beside a decoder's threads (a whole 720p decode: 657 frames/s against 708 on
one thread; 1080p: 294 against 314), and threads started in a ``DataLoader``'s forked
worker hung there once.

Example:
    >>> import av
    >>> frame = av.VideoFrame(64, 48, "yuv420p")
    >>> out = np.empty((48, 64, 3), np.uint8)
    >>> Swscale("rgb24").convert_into(frame, out)
    >>> bool((out == frame.to_ndarray(format="rgb24")).all())
    True
"""

from __future__ import annotations

import threading

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from ..errors import FrameError
from ..frames import describe_shape


class Swscale:
    """Frames converted to ``pix_fmt`` as FFmpeg converts them (PyAV's ``reformat`` with its
    defaults), into arrays of ``(height, width, channels)``. One a thread: the context
    it keeps is not shared."""

    def __init__(self, pix_fmt: str) -> None:
        self.pix_fmt = pix_fmt
        self._reformatter = VideoReformatter()

    def convert_into(self, frame: av.VideoFrame, dst: np.ndarray) -> None:
        """Write ``frame`` in :attr:`pix_fmt` (a format of one plane: ``rgb24``, ``rgba``,
        ``gray``) into ``dst``, which has its size.

        Raises:
            FrameError: ``dst`` does not hold a frame of ``frame``'s size.
        """
        height, width = frame.height, frame.width
        if dst.shape[:2] != (height, width):
            raise _refused((height, width, *dst.shape[2:]), dst.dtype, dst)
        out = self._reformatter.reformat(frame, format=self.pix_fmt, threads=1)
        rows = np.frombuffer(memoryview(out.planes[0]), dst.dtype).reshape(height, -1)
        dst[...] = rows[:, : dst.size // height].reshape(dst.shape)  # (row padding left out)


def _refused(shape: tuple[int, ...], dtype: np.dtype, dst: np.ndarray) -> FrameError:
    return FrameError(
        f"cannot write a decoded {describe_shape(shape, dtype)} frame into a slot of "
        f"{describe_shape(dst.shape, dst.dtype)}; every frame must have the slot's shape"
    )


_KEPT = threading.local()


def swscale_of(pix_fmt: str) -> Swscale:
    """This thread's :class:`Swscale` to ``pix_fmt`` (made at its first use): what every
    reader of the library converts with."""
    kept = _KEPT.__dict__.setdefault("converters", {})
    if pix_fmt not in kept:
        kept[pix_fmt] = Swscale(pix_fmt)
    return kept[pix_fmt]
