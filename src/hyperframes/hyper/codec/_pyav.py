"""PyAV frames of a video's planes, and each thread's open coders: what the FFV1 records
(``_ffv1``) and the lossless H.264 groups (``_x264``) share.

A planar frame is one flat run of samples, its planes one after another (see ``_planes``).
Coders are kept open per thread, since opening one starts its threads; a forked child opens
its own and never touches those it inherited.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import av
import numpy as np

from ...errors import StoreCorrupt

_CONTEXTS = threading.local()
"""Each thread's open coders, by kind."""
_ORPHANS: list[object] = []
"""Coders inherited through ``fork``: never used or freed in the child (freeing one would
join slice threads that do not exist there)."""


def coders(kind: str) -> dict[Any, Any]:
    """This thread's open coders of one ``kind`` (``"ffv1 decoders"``...), anew in a
    forked child."""
    if getattr(_CONTEXTS, "pid", None) != os.getpid():
        if hasattr(_CONTEXTS, "coders"):
            _ORPHANS.append(_CONTEXTS.coders)
        _CONTEXTS.coders, _CONTEXTS.pid = {}, os.getpid()
    contexts: dict[Any, Any] = _CONTEXTS.coders.setdefault(kind, {})
    return contexts


def frame_of(flat: np.ndarray, pix_fmt: str, planes: Sequence[tuple[int, int]]) -> av.VideoFrame:
    """The planar frame ``flat`` (its planes one after another) as a PyAV frame."""
    height, width = planes[0]
    frame = av.VideoFrame(width, height, pix_fmt)
    dtype = np.dtype(np.uint8 if "10le" not in pix_fmt else "<u2")
    at = 0
    for plane, (h, w) in zip(frame.planes, planes, strict=True):
        rows = np.frombuffer(memoryview(plane), dtype).reshape(plane.height, -1)
        rows[:h, :w] = flat[at : at + h * w].reshape(h, w)
        at += h * w
    return frame


GRAY_AS = {"gray": "yuv420p", "gray10le": "yuv420p10le"}


def planes_into(
    frame: av.VideoFrame, pix_fmt: str, planes: Sequence[tuple[int, int]], out: np.ndarray
) -> None:
    """A decoded PyAV frame's planes into the flat ``out``; refuse any other format or size
    (``gray`` planes may come as the luma of ``yuv420p``: FFmpeg's H.264 decoder gives them
    so)."""
    height, width = planes[0]
    decoded = GRAY_AS.get(pix_fmt, "") if frame.format.name != pix_fmt else pix_fmt
    if (frame.format.name, frame.width, frame.height) != (decoded, width, height):
        raise StoreCorrupt("a record decodes to frames of another format or size")
    dtype = np.dtype(np.uint8 if "10le" not in pix_fmt else "<u2")
    at = 0
    for plane, (h, w) in zip(frame.planes, planes, strict=False):  # a gray's chroma: unread
        rows = np.frombuffer(memoryview(plane), dtype).reshape(plane.height, -1)
        out[at : at + h * w].reshape(h, w)[...] = rows[:h, :w]
        at += h * w
