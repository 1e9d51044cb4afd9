"""Native pixel layouts: a decoded video frame's planes kept as the decoder gave them.

A frame of a planar layout (``yuv420p``, ``yuv422p``, ``yuv444p`` and their full-range
``yuvj`` twins, ``gray``, and the 10-bit ``...10le`` forms) is held as one array: the
planes' samples one plane after another (Y, then U, then V), ``uint8`` or (10-bit)
``uint16``, shaped ``(rows, width)`` when the samples fill whole rows of ``width`` (for
``yuv420p`` at an even size this is exactly :func:`~hyperframes.io.formats.i420_spec`'s
layout) and flat otherwise. :meth:`Layout.planes` cuts such an array into plane views.

:func:`to_rgb` converts one such frame to ``rgb24`` exactly as
:class:`~hyperframes.io.video.VideoSource` converts the decoder's frame by default
(FFmpeg's swscale, with the frame's colour tags), so a store of planes reads back as the
same RGB a pack of RGB frames would have held.

Example:
    >>> layout = Layout.of("yuv420p", 1280, 720)
    >>> layout.shape, layout.plane_shapes
    ((1080, 1280), ((720, 1280), (360, 640), (360, 640)))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import av
import numpy as np

from ..errors import FrameError
from ..frames import FrameSpec
from .formats import DEEP_RGB, sample_dtype
from .swscale import swscale_of

#: name -> (chroma width shift, chroma height shift, planes, bytes per sample)
NATIVE: dict[str, tuple[int, int, int, int]] = {
    "yuv420p": (1, 1, 3, 1), "yuvj420p": (1, 1, 3, 1),
    "yuv422p": (1, 0, 3, 1), "yuvj422p": (1, 0, 3, 1),
    "yuv444p": (0, 0, 3, 1), "yuvj444p": (0, 0, 3, 1),
    "gray": (0, 0, 1, 1),
    "yuv420p10le": (1, 1, 3, 2), "yuv422p10le": (1, 0, 3, 2), "yuv444p10le": (0, 0, 3, 2),
    "gray10le": (0, 0, 1, 2),
}  # fmt: skip
"""The decoder layouts kept as planes (others are converted to RGB)."""


@dataclass(frozen=True)
class Layout:
    """The planes of one ``width x height`` frame of pixel format ``name``."""

    name: str
    width: int
    height: int

    def __post_init__(self) -> None:
        if self.name not in NATIVE:
            raise ValueError(f"unknown native layout {self.name!r}; use one of {sorted(NATIVE)}")
        if self.width < 1 or self.height < 1:
            raise ValueError(f"a frame needs a positive size, got {self.width}x{self.height}")

    @classmethod
    def of(cls, name: str, width: int, height: int) -> Layout:
        return cls(name, int(width), int(height))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint8 if NATIVE[self.name][3] == 1 else "<u2")

    @property
    def plane_shapes(self) -> tuple[tuple[int, int], ...]:
        sx, sy, count, _ = NATIVE[self.name]
        w, h = self.width, self.height
        chroma = (-(-h >> sy), -(-w >> sx))
        return ((h, w), *(chroma,) * (count - 1))

    @property
    def samples(self) -> int:
        return sum(h * w for h, w in self.plane_shapes)

    @property
    def shape(self) -> tuple[int, ...]:
        n = self.samples
        return (n // self.width, self.width) if n % self.width == 0 else (n,)

    @property
    def spec(self) -> FrameSpec:
        return FrameSpec(self.shape, self.dtype)

    def planes(self, frame: np.ndarray) -> list[np.ndarray]:
        """The planes of one frame of this layout, as views of it (C-contiguous input)."""
        flat = np.ascontiguousarray(frame).reshape(-1)
        if flat.size != self.samples or frame.dtype != self.dtype:
            raise FrameError(
                f"a {self.name} frame of {self.width}x{self.height} needs {self.samples} "
                f"{self.dtype} samples, got {frame.shape} {frame.dtype}"
            )
        out, at = [], 0
        for h, w in self.plane_shapes:
            out.append(flat[at : at + h * w].reshape(h, w))
            at += h * w
        return out

    def read(self, frame: av.VideoFrame, dst: np.ndarray) -> None:
        """Copy a decoded frame's planes into ``dst`` (a frame of this layout), no conversion.

        Raises:
            FrameError: the frame's format or size is not this layout's.
        """
        if frame.format.name != self.name or (frame.width, frame.height) != (
            self.width,
            self.height,
        ):
            raise FrameError(
                f"a decoded {frame.format.name} {frame.width}x{frame.height} frame is not "
                f"{self.name} {self.width}x{self.height}"
            )
        if dst.size != self.samples or dst.dtype != self.dtype:
            raise FrameError(f"cannot hold {self.name} planes in an array of {dst.shape}")
        if not dst.flags.c_contiguous:
            raise FrameError("a planar frame must be C-contiguous")
        for plane, out in zip(frame.planes, self.planes(dst), strict=True):
            rows = np.frombuffer(memoryview(plane), self.dtype).reshape(plane.height, -1)
            out[...] = rows[: out.shape[0], : out.shape[1]]

    def to_frame(self, frame: np.ndarray, tags: dict[str, Any] | None = None) -> av.VideoFrame:
        """A PyAV frame holding these planes (and the colour ``tags``, see :func:`tags_of`)."""
        out = av.VideoFrame(self.width, self.height, self.name)
        for plane, src in zip(out.planes, self.planes(frame), strict=True):
            rows = np.frombuffer(memoryview(plane), self.dtype).reshape(plane.height, -1)
            rows[: src.shape[0], : src.shape[1]] = src
        for key, value in (tags or {}).items():
            if key in TAGS and isinstance(value, int):
                setattr(out, key, value)
        return out


TAGS = ("colorspace", "color_range", "color_primaries", "color_trc")
"""The colour tags of a frame that its conversion to RGB depends on."""


def tags_of(frame: av.VideoFrame) -> dict[str, int]:
    """A decoded frame's colour tags as ints (what :func:`to_rgb` needs back)."""
    return {key: int(getattr(frame, key)) for key in TAGS}


def tags_in(info: dict[str, Any]) -> dict[str, int]:
    """The colour tags a source's ``info`` holds (as :class:`VideoSource` puts them there)."""
    return {key: info[key] for key in TAGS if isinstance(info.get(key), int)}


def native_layout(name: str | None, width: int, height: int) -> Layout | None:
    """The layout for a decoder's pixel format, or ``None`` when it is not kept as planes."""
    return Layout.of(name, width, height) if name in NATIVE else None


def layout_for(name: str, spec: FrameSpec, info: dict[str, Any]) -> Layout | None:
    """The ``name`` layout whose frames have ``spec``, sized by ``info["width"]`` and
    ``info["height"]``, or (for frames resized on the way, whose shape is 2-D) by the
    shape; ``None`` where no size fits."""
    if name not in NATIVE or len(spec.shape) not in (1, 2):
        return None
    sizes: list[tuple[Any, Any]] = [(info.get("width"), info.get("height"))]
    if len(spec.shape) == 2:
        rows, width = spec.shape
        sizes += [(width, rows * 2 // 3), (width, rows // 2), (width, rows // 3), (width, rows)]
    for width, height in sizes:
        if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
            layout = Layout.of(name, width, height)
            if layout.spec == spec:
                return layout
    return None


def encodable_twin(name: str, formats: set[str]) -> str | None:
    """The pixel format among ``formats`` (an encoder's) that holds ``name``'s planes as
    they are: ``name`` itself, or for a full-range ``yuvj`` layout its ``yuv`` twin (then
    tagged full range); ``None`` where the encoder takes neither."""
    for candidate in (name, name.replace("yuvj", "yuv")):
        if candidate in formats:
            return candidate
    return None


def to_rgb(
    frame: np.ndarray, layout: Layout, tags: dict[str, Any], pix_fmt: str = "rgb24"
) -> np.ndarray:
    """One planar frame as ``(H, W, 3)`` RGB, as :class:`VideoSource` converts it (FFmpeg's
    swscale): ``rgb24`` by default, ``rgb48`` (uint16) to keep more than 8 bits."""
    rgb = np.empty((layout.height, layout.width, 3), sample_dtype(pix_fmt))
    swscale_of(DEEP_RGB.get(pix_fmt, pix_fmt)).convert_into(layout.to_frame(frame, tags), rgb)
    return rgb
