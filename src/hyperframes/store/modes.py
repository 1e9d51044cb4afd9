"""Which store mode suits a video: each mode's size and the time to read a random frame,
estimated on a few short windows of its planes (``hyperframes analyze`` prints them).

A window is :data:`WINDOW` consecutive whole frames, at evenly spread positions. Each is
coded by every mode, as the store codes a group:

- its base record and its other records apart, so that a group of ``L`` frames is
  estimated as one base and ``L - 1`` others (``L``: the groups' mean length that
  ``analyze`` found; for ``x264``, one GOP);
- ``gradient`` and ``ffv1``: the median time to decode a frame of it alone (a frame decodes
  from at most 6 records in a group of any length);
- ``x264``: a random frame decodes its keyframe and, on average, ``(gop - 1) / 2`` packets
  after it.

Times are the decoding only (the conversion to RGB, the same for every mode, is left out),
on one thread's coders as a store's reader has them. Whole frames, not strips of rows: on
bigbuckbunny a strip of 204 rows made lossless H.264 25 % larger than whole frames do (the
motion across its edges is lost); whole frames cost 2-5 s at 720p.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np

from ..choices import GOP, Intra
from ..hyper import decode_frame, decode_group, encode_group
from ..hyper.codec.group_header import parse_header
from ..io.layouts import NATIVE, Layout

WINDOW = 8
"""Frames per window."""
WINDOWS = 3
"""Windows per estimate, spread over the video."""


@dataclass(frozen=True)
class ModeEstimate:
    """What one store mode would do with a video, estimated."""

    intra: str
    gop: int | None
    ratio: float
    """Stored bytes / raw bytes of the planes."""
    access_ms: float
    """Decoding one random frame, planes (ms)."""
    pack_fps: float
    """Coding frames as one of the store's encoding workers does (frames / s; libx264
    codes on threads of its own)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_modes(
    path: str | os.PathLike[str],
    *,
    gop: int = GOP,
    group_length: float | None = None,
    windows: int = WINDOWS,
) -> list[ModeEstimate]:
    """Estimate every store mode of planes on the video at ``path``: ``[]`` when its frames
    would not be stored as planes (see ``pack --pix-fmt``) or it is too short to sample.

    ``group_length``: the mean length of the groups ``pack`` would cut (``analyze`` finds
    it), over which a group's base is shared; by default the window's."""
    from ..io.video import VideoSource

    probe = VideoSource(path, pix_fmt="native")
    layout = _layout_of(probe.info)
    length = probe.length
    probe.close()
    if layout is None or not length:
        return []
    samples: list[np.ndarray] = []
    for start in _starts(length, windows):
        source = VideoSource(path, pix_fmt="native", start=start, stop=start + WINDOW)
        frames = np.empty((WINDOW, *layout.shape), layout.dtype)
        n = len(source.read_into(frames))
        source.close()
        if n >= 2:
            samples.append(frames[:n])
    if not samples:
        return []
    shared = float(group_length or WINDOW)
    return [_measure(samples, layout, i, None, shared) for i in ("gradient", "ffv1")] + [
        _measure(samples, layout, "x264", gop, gop)
    ]


def _layout_of(info: dict[str, Any]) -> Layout | None:
    name = info.get("layout")
    if not isinstance(name, str) or name not in NATIVE:
        return None
    return Layout.of(name, info["width"], info["height"])


def _starts(length: int, windows: int) -> list[int]:
    if length <= WINDOW:
        return [0]
    span = length - WINDOW
    return sorted({round(span * (k + 0.5) / windows) for k in range(windows)})


def _measure(
    samples: Sequence[np.ndarray], layout: Layout, intra: str, gop: int | None, length: float
) -> ModeEstimate:
    raw = coded = 0.0
    access: list[float] = []
    coding = 0.0
    for frames in samples:
        n = len(frames)
        t = time.perf_counter()
        group = encode_group(
            frames, planes=layout.plane_shapes, pix_fmt=layout.name, intra=cast(Intra, intra),
            gop=n if intra == "x264" else None,
        )  # fmt: skip
        coding += time.perf_counter() - t
        raw += frames.nbytes
        decode_frame(group.data, 0)  # this thread's decoder opened, as a store's would be
        head = parse_header(group.data)
        base = head.records[head.base].length
        others = [r.length for j, r in enumerate(head.records) if j != head.base]
        coded += n * (base + (length - 1) * statistics.fmean(others)) / length
        if intra != "x264":
            for i in (n // 2, n // 4, n - 1):
                t = time.perf_counter()
                decode_frame(group.data, i)
                access.append(time.perf_counter() - t)
            continue
        assert gop is not None
        t = time.perf_counter()
        decode_frame(group.data, 0)
        first = time.perf_counter() - t
        t = time.perf_counter()
        decode_group(group.data)
        rest = max(0.0, time.perf_counter() - t - first) / (n - 1)
        access.append(first + rest * (gop - 1) / 2)
    frames_coded = sum(len(f) for f in samples)
    return ModeEstimate(
        intra, gop, coded / raw, 1e3 * statistics.median(access),
        frames_coded / coding if coding else math.inf,
    )  # fmt: skip
