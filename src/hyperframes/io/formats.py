"""The frame formats and checks that video and image I/O share: pixel formats, the I420
layout, a batch's check, and an OpenCV call that must land in a pool slot.

Nothing here decodes or encodes, so image I/O does not load PyAV through it.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ..errors import FrameError
from ..frames import FrameSpec, describe_shape

PixFmt = Literal["rgb24", "gray", "rgba", "rgb48", "rgba64", "yuv420p", "native"]
OnCorrupt = Literal["fail", "skip"]

CHANNELS: dict[str, int] = {"gray": 1, "rgb24": 3, "rgba": 4, "rgb48": 3, "rgba64": 4}
DEEP_RGB: dict[str, str] = {"rgb48": "rgb48le", "rgba64": "rgba64le"}
"""The RGB frames of 16 bits a sample (uint16), and FFmpeg's names for them."""
ALPHA_IMAGES = frozenset({".png", ".tif", ".tiff", ".webp"})
"""The image suffixes whose files keep alpha."""
DEEP_IMAGES = frozenset({".png", ".tif", ".tiff"})
"""The image suffixes whose files keep 16 bits a sample."""


def rgb_keeping(*, alpha: bool, deep: bool) -> PixFmt:
    """The RGB frames that keep alpha and samples of more than 8 bits, as asked."""
    if deep:
        return "rgba64" if alpha else "rgb48"
    return "rgba" if alpha else "rgb24"


def sample_dtype(pix_fmt: str) -> np.dtype[Any]:
    """The dtype of a sample of frames in ``pix_fmt``: uint16 for :data:`DEEP_RGB`, else uint8."""
    return np.dtype(np.uint16 if pix_fmt in DEEP_RGB else np.uint8)


def i420_spec(width: int, height: int) -> FrameSpec:
    """The spec of yuv420p frames as PyAV and OpenCV (``I420``) lay them out: one uint8
    ``(height * 3 / 2, width)`` array holding the Y plane (``height x width`` bytes), then
    the U and the V plane (``height/2 x width/2`` bytes each) packed one after the other.
    When ``height / 2`` is odd the chroma planes do not fill whole rows of ``width``;
    :func:`~hyperframes.io.yuv.planes` splits a frame into its planes.

    Raises:
        ValueError: an odd width or height, which yuv420p cannot hold.
    """
    if width % 2 or height % 2:
        raise ValueError(
            f"yuv420p frames need an even width and height, got {width}x{height}; "
            "read them as rgb24 instead"
        )
    return FrameSpec((height * 3 // 2, width), np.uint8)


def frame_format(spec: FrameSpec) -> str:
    """The PyAV pixel format of frames of ``spec``: ``gray``, ``rgb24`` or ``rgba`` for
    ``uint8``, ``gray16le``, ``rgb48le`` or ``rgba64le`` for ``uint16``.

    Raises:
        FrameError: the spec is not ``uint8`` or ``uint16`` ``(H, W)`` or ``(H, W, 1|3|4)``.
    """
    channels = 1 if len(spec.shape) == 2 else spec.shape[-1]
    deep = spec.dtype == np.uint16
    if (
        (spec.dtype != np.uint8 and not deep)
        or len(spec.shape) not in (2, 3)
        or channels not in (1, 3, 4)
    ):
        raise FrameError(
            f"frames must be uint8 or uint16 (H, W) or (H, W, 1|3|4) to write as video or "
            f"images, got {spec.describe()}; convert with a map stage first"
        )
    return (_DEEP if deep else _EIGHT)[channels]


_EIGHT = {1: "gray", 3: "rgb24", 4: "rgba"}
_DEEP = {1: "gray16le", 3: "rgb48le", 4: "rgba64le"}


def check_frames(frames: np.ndarray, spec: FrameSpec, where: str) -> None:
    """Raise :class:`FrameError` unless ``frames`` is a batch of frames of ``spec``."""
    if frames.shape[1:] != spec.shape or frames.dtype != spec.dtype:
        got = describe_shape(frames.shape[1:], frames.dtype)
        raise FrameError(
            f"{where} was opened for frames of {spec.describe()}, got {got}; "
            "every frame of one output must have the same shape and dtype"
        )


def cv_into(
    dst: np.ndarray,
    shape: tuple[int, ...],
    fn: Callable[..., np.ndarray],
    src: np.ndarray,
    *args: Any,
    **kwargs: Any,
) -> None:
    """Call the OpenCV function ``fn(src, *args, dst=dst, **kwargs)`` whose result has
    ``shape``, and make sure the result is in ``dst``.

    OpenCV silently allocates a new array when ``dst`` has another shape than the result,
    which would leave ``dst`` unwritten; this checks the shape first, and copies a result
    OpenCV did not write in place (it refuses a strided ``dst``).

    Raises:
        FrameError: ``dst`` does not have the result's ``shape``.
    """
    if dst.shape != shape:
        raise FrameError(
            f"cannot write a {describe_shape(shape, dst.dtype)} result into a slot of "
            f"{describe_shape(dst.shape, dst.dtype)}; every frame must have the slot's shape"
        )
    # OpenCV refuses a strided dst outright: let it allocate, then copy.
    contiguous = dst.flags.c_contiguous
    result = fn(src, *args, dst=dst, **kwargs) if contiguous else fn(src, *args, **kwargs)
    if result is not dst:
        if result.shape != shape:
            raise FrameError(f"OpenCV gave a {result.shape} result where {shape} was expected")
        dst[...] = result


def rate_of(value: float | Fraction | str) -> Fraction:
    """A rate or time base as a fraction: ``"30000/1001"``, ``29.97``, ``Fraction(1, 25)``."""
    try:
        result = (
            Fraction(value)
            if isinstance(value, str)
            else Fraction(value).limit_denominator(1_000_000)
        )
    except (ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"a rate must be a positive number or 'a/b', got {value!r}") from exc
    if result <= 0:
        raise ValueError(f"a rate must be a positive number or 'a/b', got {value!r}")
    return result
