"""Decoded frames into pool slots: the pixel format, the colour conversion, the size and
the rotation a :class:`~hyperframes.io.video.VideoSource` gives.

Note:
    RGB is FFmpeg's by default (``colour="ffmpeg"``): swscale converts every frame, pixel
    for pixel what ``frame.to_ndarray(format="rgb24")`` gives (and so PyAV, torchcodec and
    OpenCV's FFmpeg backend), from one context kept from frame to frame
    (:class:`~hyperframes.io.swscale.Swscale`). In a whole decode that is as fast as
    OpenCV's conversion: ``colour="fast"`` ran at 0.96-1.00x its rate, decoding and
    converting 640x272, 720p and 1080p H.264 on 2 busy cores (``benchmarks/colour.py``).
    ``colour="fast"`` converts the 4:2:0 planes of ``yuv420p`` input tagged BT.601 or
    untagged with ``cv2.cvtColor(COLOR_YUV2RGB_I420)`` instead: 1.1-1.3x swscale's rate for
    the conversion alone. Both use the BT.601 limited-range matrix with the same (nearest)
    chroma, but their pixels differ: by 1 or 2 levels on most of them (more than 99.4 % are
    within 2), because swscale's integer arithmetic comes out about 1 level darker than the
    exact formula (mean 1.08-1.18 levels off it, OpenCV 0.04-0.05): the two differ by a mean
    1.03 levels on bigbuckbunny and 1.15 on bikes, and by up to 16 levels on a few pixels
    darker than video black (Y below 16, which OpenCV clamps to black before adding the
    chroma and swscale does not): the maximum is 16 on bigbuckbunny and 3 on bikes
    (``docs/colour.md``). Other inputs (BT.709-tagged, full-range ``yuvj420p``, 4:2:2,
    4:4:4, odd sizes) and ``pix_fmt="gray"`` always go through swscale.

    A stream whose frame size changes part-way (a concatenated MPEG-TS, a live recording)
    is an error unless ``size=(W, H)`` asks for every frame at one size; then each frame is
    resized as it is decoded, averaging areas: ``"rgb24"``, ``"rgba"`` and ``"gray"``
    frames are converted at their own size and resized with OpenCV ``INTER_AREA``;
    ``"yuv420p"`` frames are resized from the decoder's planes with no copy, by OpenCV
    ``INTER_AREA`` when the frame is a whole multiple of the target size and by swscale's
    area averaging otherwise (ffmpeg's ``scale=W:H:flags=area``; see
    :func:`~hyperframes.io.yuv.resize_frame_into`).
"""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np

from ..errors import FrameError, MediaError
from ..frames import FrameSpec, describe_shape
from .formats import CHANNELS, DEEP_RGB, PixFmt, cv_into, i420_spec, sample_dtype
from .layouts import TAGS, Layout
from .swscale import swscale_of
from .yuv import resize_frame_into

_I420_TO = {"rgb24": cv2.COLOR_YUV2RGB_I420, "rgba": cv2.COLOR_YUV2RGBA_I420}
#: AVColorSpace values swscale converts with the BT.601 matrix: unspecified, BT470BG, SMPTE170M.
_BT601 = frozenset({2, 5, 6})


def assign(dst: np.ndarray, array: np.ndarray) -> None:
    """Copy a decoded ``array`` into ``dst``, refusing one of another frame size."""
    if array.shape[:2] != dst.shape[:2] or array.size != dst.size:
        raise FrameError(
            f"cannot write a decoded {describe_shape(array.shape, array.dtype)} array into a "
            f"slot of {describe_shape(dst.shape, dst.dtype)}; every frame must have the slot's "
            "shape"
        )
    dst[...] = array.reshape(dst.shape)


def turned(size: tuple[int, int], turns: int) -> tuple[int, int]:
    """``(width, height)`` after ``turns`` quarter turns."""
    return (size[1], size[0]) if turns % 2 else size


class FrameConverter:
    """Writes the decoded frames of one video into slots, one frame at a time.

    Args:
        path: the video (for messages).
        pix_fmt: the frames out (``"rgb24"``, ``"rgba"``, ``"gray"``, 16 bits a sample
            ``"rgb48"`` and ``"rgba64"``, ``"yuv420p"`` or ``"native"`` planes, then
            ``native`` is their layout).
        colour: ``"ffmpeg"`` (swscale) or ``"fast"`` (OpenCV for BT.601 4:2:0).
        stream_size: ``(width, height)`` the stream declares.
        out_size: ``(width, height)`` of the frames out (after they are turned upright).
        turns: quarter turns that make frames upright.
        resizes: every frame is resized to ``out_size`` (else a change of size is refused).
    """

    def __init__(
        self,
        path: Path,
        pix_fmt: PixFmt,
        colour: str,
        *,
        native: Layout | None,
        stream_size: tuple[int, int],
        out_size: tuple[int, int],
        turns: int,
        resizes: bool,
    ) -> None:
        self.path, self.pix_fmt, self.colour = path, pix_fmt, colour
        self._native = native
        self._stream_size, self._turns, self._resizes = stream_size, turns, resizes
        # the size frames are decoded at, before they are turned upright
        self._decoded_size = turned(out_size, turns)
        self._scratch: np.ndarray | None = None
        self._unturned: np.ndarray | None = None
        self._tags: tuple[int, ...] | None = None  # the first frame's colour tags (planes)

    def layout(self, width: int, height: int) -> FrameSpec:
        """The spec of one ``width x height`` frame in :attr:`pix_fmt`."""
        if self._native is not None:
            return self._native.spec
        if self.pix_fmt == "yuv420p":
            return i420_spec(width, height)
        return FrameSpec((height, width, CHANNELS[self.pix_fmt]), sample_dtype(self.pix_fmt))

    def convert(self, frame: av.VideoFrame, number: int, dst: np.ndarray, *, seen: int) -> None:
        """Write frame ``number`` into ``dst`` in :attr:`pix_fmt`, at :attr:`spec`'s size,
        turned upright when the rotation is applied."""
        if not self._turns:
            self._place(frame, number, dst, seen)
            return
        shape = self.layout(*self._decoded_size).shape
        if self._unturned is None or self._unturned.shape != shape:
            self._unturned = np.empty(shape, dst.dtype)
        self._place(frame, number, self._unturned, seen)
        np.copyto(dst, np.rot90(self._unturned, self._turns))

    def _place(self, frame: av.VideoFrame, number: int, dst: np.ndarray, seen: int) -> None:
        """Write frame ``number`` into ``dst`` at the decoded size (before any turn)."""
        got = (frame.width, frame.height)
        if got != self._stream_size and not self._resizes:
            (width, height), before = self._stream_size, "the stream declares"
            if seen > 1:
                before = "the frames before it are"
            raise MediaError(
                f"frame {number} of {str(self.path)!r} is {got[0]}x{got[1]} but {before} "
                f"{width}x{height}; pass size=({width}, {height}) (--size {width}x{height} "
                "on the command line) to resize every frame to one size"
            )
        if self.pix_fmt in ("native", "yuv420p"):
            self._check_tags(frame, number)
        if got == self._decoded_size:
            self._decode_into(frame, dst)
            return
        width, height = self._decoded_size
        if self.pix_fmt == "yuv420p":  # from the decoder's planes, no copy of the frame
            resize_frame_into(frame, dst)
            return
        shape = self.layout(*got).shape
        if self._scratch is None or self._scratch.shape != shape:
            self._scratch = np.empty(shape, dst.dtype)
        self._decode_into(frame, self._scratch)
        src, out = self._scratch, dst
        if self.pix_fmt == "gray":  # OpenCV drops a last axis of 1: resize the 2-D views
            src, out = src[..., 0], dst[..., 0]
        shape = (height, width, *src.shape[2:])
        cv_into(out, shape, cv2.resize, src, (width, height), interpolation=cv2.INTER_AREA)

    def _check_tags(self, frame: av.VideoFrame, number: int) -> None:
        """Planes go out with one set of colour tags (a store records them once): refuse a
        frame whose tags differ from the first frame's, as a change of size is refused.
        (RGB needs no such check: each frame is converted with its own tags.)"""
        tags = tuple(int(getattr(frame, key)) for key in TAGS)
        if self._tags is None:
            self._tags = tags
        elif tags != self._tags:
            changed = ", ".join(
                f"{key} {a} -> {b}" for key, a, b in zip(TAGS, self._tags, tags, strict=True)
                if a != b
            )  # fmt: skip
            raise MediaError(
                f"frame {number} of {str(self.path)!r} changes its colour tags ({changed}); "
                "planes keep one set of tags: convert to RGB (pix_fmt='rgb24', "
                "--pix-fmt rgb24), which takes each frame's own, or split the video there"
            )

    def _decode_into(self, frame: av.VideoFrame, dst: np.ndarray) -> None:
        """Write ``frame`` into ``dst``, which has the frame's own size, in :attr:`pix_fmt`."""
        if self._native is not None:
            self._native.read(frame, dst)
            return
        if self.pix_fmt == "yuv420p":  # planes as decoded: no colour conversion at all
            yuv = frame.format.name == "yuv420p"
            assign(dst, frame.to_ndarray() if yuv else frame.to_ndarray(format="yuv420p"))
            return
        code = _I420_TO.get(self.pix_fmt)
        if (
            code is not None
            and self.colour == "fast"
            and frame.format.name == "yuv420p"
            and frame.colorspace in _BT601
            and frame.width % 2 == 0
            and frame.height % 2 == 0
        ):
            shape = (frame.height, frame.width, CHANNELS[self.pix_fmt])
            cv_into(dst, shape, cv2.cvtColor, frame.to_ndarray(), code)
        else:
            swscale_of(DEEP_RGB.get(self.pix_fmt, self.pix_fmt)).convert_into(frame, dst)
