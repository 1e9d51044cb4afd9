"""Work on yuv420p frames directly (the layout of :func:`~hyperframes.io.formats.i420_spec`).

Decoders produce yuv420p and most encoders take it, so a job that only resizes can skip
both colour conversions, which cost more than decoding itself on 720p H.264.

A frame is one ``(H * 3 / 2, W)`` uint8 array holding, byte after byte, the Y plane
(``H x W``), then the U and the V plane (``H/2 x W/2`` each), as PyAV's ``to_ndarray``
and OpenCV's ``I420`` give it. When ``H/2`` is odd (e.g. 480x270) a chroma plane does not
fill whole rows of width ``W``, so the planes are cut from the flat buffer, not by rows.

Resizing averages areas. :func:`resize_i420` and :func:`resize_i420_into` use OpenCV
``INTER_AREA`` on arrays. :func:`resize_frame_into`, which :class:`~hyperframes.io.video.
VideoSource` uses for a decoded frame, reads the decoder's planes in place: OpenCV
``INTER_AREA`` when the frame is a whole multiple of the target (its exact box average,
the fastest here: 0.3 ms a frame at 1280x720 -> 640x360), swscale's area averaging
(``scale=W:H:flags=area`` in ffmpeg) otherwise, where OpenCV is 3x slower (4.3 ms vs
1.4 ms at 1920x1080 -> 1280x720 on bigbuckbunny). Over bigbuckbunny's 132 frames the
two differ by a mean 0.06-0.13 levels and at most 12 on a few pixels (1280x720 ->
640x360: mean 0.07, max 10; -> 480x270: 0.13, 12; 1920x1080 -> 1280x720: 0.06, 6).

Example:
    >>> frames = np.zeros((4, 720 * 3 // 2, 1280), np.uint8)
    >>> resize_i420(frames, 640, 360).shape
    (4, 540, 640)
"""

from __future__ import annotations

import threading

import av
import cv2
import numpy as np
from av.video.reformatter import VideoReformatter

#: One swscale context per thread, kept from frame to frame: ``frame.reformat`` makes a new
#: context for every frame (set-up, and a thread pool of its own with the default
#: ``threads=0``), which cost 2.0 CPU-ms a frame at 1920x1080 -> 1280x720 against 1.3 ms.
_swscale = threading.local()


def planes(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Y, U and V planes of one yuv420p frame, as views that write through to it.

    Raises:
        ValueError: ``frame`` is not a C-contiguous ``(H * 3 / 2, W)`` array with an even
            ``H`` and ``W`` (then the planes could not be views of it).
    """
    if frame.ndim != 2 or frame.shape[0] % 3 or frame.shape[1] % 2:
        raise ValueError(
            f"a yuv420p frame is an (H * 3 / 2, W) array with an even H and W, got shape "
            f"{frame.shape}; build it with i420_spec(W, H)"
        )
    if not frame.flags.c_contiguous:
        raise ValueError("a yuv420p frame must be C-contiguous to split into planes; copy it")
    rows, width = frame.shape
    height = rows * 2 // 3
    luma, chroma = height * width, (height // 2) * (width // 2)
    flat = frame.reshape(-1)
    y = flat[:luma].reshape(height, width)
    u = flat[luma : luma + chroma].reshape(height // 2, width // 2)
    v = flat[luma + chroma :].reshape(height // 2, width // 2)
    return y, u, v


def resize_i420_into(src: np.ndarray, dst: np.ndarray) -> None:
    """Resize one yuv420p frame into another of the target size, plane by plane
    (OpenCV INTER_AREA).

    Raises:
        ValueError: either frame is not a contiguous yuv420p frame (see :func:`planes`).
    """
    for a, b in zip(planes(src), planes(dst), strict=True):
        result = cv2.resize(a, (b.shape[1], b.shape[0]), dst=b, interpolation=cv2.INTER_AREA)
        if result is not b:  # OpenCV allocated instead of writing the plane
            b[...] = result


def resize_i420(frames: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resize a batch of yuv420p frames plane by plane (OpenCV INTER_AREA).

    Raises:
        ValueError: an odd target size, which yuv420p cannot hold.
    """
    if width % 2 or height % 2:
        raise ValueError(f"yuv420p needs an even size, got {width}x{height}")
    out = np.empty((len(frames), height * 3 // 2, width), np.uint8)
    for src, dst in zip(frames, out, strict=True):
        resize_i420_into(src, dst)
    return out


def frame_planes(frame: av.VideoFrame) -> tuple[np.ndarray, ...]:
    """Read-only views of a decoded frame's planes (no copy), each ``(rows, width)`` of
    its own plane size (the padding past each row's end left out). The views are valid
    while ``frame`` is."""
    views = []
    for plane in frame.planes:
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
        views.append(rows[: plane.height, : plane.width])
    return tuple(views)


def resize_frame_into(frame: av.VideoFrame, dst: np.ndarray) -> None:
    """Resize a decoded frame into the yuv420p frame ``dst`` (its size is the target),
    averaging areas, with no copy of the decoded frame: OpenCV ``INTER_AREA`` from the
    decoder's planes when ``frame`` is yuv420p and a whole multiple of the target in both
    directions, swscale's area averaging otherwise (any size, any pixel format: it
    converts to yuv420p as it resizes).

    Raises:
        ValueError: ``dst`` is not a contiguous yuv420p frame (see :func:`planes`).
    """
    targets = planes(dst)
    height, width = targets[0].shape
    whole = frame.width % width == 0 and frame.height % height == 0
    if whole and frame.format.name == "yuv420p":
        for a, b in zip(frame_planes(frame), targets, strict=True):
            result = cv2.resize(a, (b.shape[1], b.shape[0]), dst=b, interpolation=cv2.INTER_AREA)
            if result is not b:  # OpenCV allocated instead of writing the plane
                b[...] = result
        return
    reformatter = getattr(_swscale, "reformatter", None)
    if reformatter is None:
        reformatter = _swscale.reformatter = VideoReformatter()
    # threads=1: in the calling thread, as ffmpeg's scale filter does by default (the
    # decoder's and encoder's threads already have the cores)
    small = reformatter.reformat(
        frame, width=width, height=height, format="yuv420p", interpolation="AREA", threads=1
    )
    for a, b in zip(frame_planes(small), targets, strict=True):
        b[...] = a
