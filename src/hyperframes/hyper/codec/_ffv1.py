"""FFV1 keyframe packets of a video's planes, through PyAV: the coder of ``_planes``' raw
records with ``intra="ffv1"``.

Each thread keeps its FFV1 decoders and encoders open (opening one starts its slice threads
and, for the range coder, builds its state tables: 6 ms at 720p, once per group before
they were kept; see ``_pyav.coders``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import av
import numpy as np

from ...errors import StoreCorrupt
from ._pyav import coders, frame_of, planes_into

FFV1_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Slice threads an FFV1 record decodes on: one per slice, at most one per core."""
FFV1_FORMATS = frozenset(
    {"yuv420p", "yuv422p", "yuv444p", "gray", "yuv420p10le", "yuv422p10le", "yuv444p10le",
     "gray10le"}
)  # fmt: skip
"""Planar formats an FFV1 raw record may hold (full-range ``yuvj`` planes are coded as
their ``yuv`` twins: the bytes are the same)."""


def ffv1_format(pix_fmt: str) -> str:
    return pix_fmt.replace("yuvj", "yuv")


class Ffv1Planes:
    """Planar frames to FFV1 keyframe packets and back, through PyAV (one encoder each)."""

    def __init__(
        self,
        pix_fmt: str,
        planes: Sequence[tuple[int, int]],
        extradata: bytes = b"",
        options: dict[str, str] | None = None,
    ) -> None:
        self.options = dict(options or {})
        self.pix_fmt = ffv1_format(pix_fmt)
        self.planes = [(int(h), int(w)) for h, w in planes]
        self.height, self.width = self.planes[0]
        self.extradata = extradata
        self._encoder: list[Any] | None = None  # [av.VideoCodecContext, next pts]

    def encode(self, flat: np.ndarray) -> bytes:
        if self._encoder is None:  # this thread's encoder for these planes, kept open
            key = (self.pix_fmt, self.width, self.height, tuple(sorted(self.options.items())))
            cache = coders("ffv1 encoders")
            if key not in cache:
                enc = av.CodecContext.create("ffv1", "w")
                enc.width, enc.height, enc.pix_fmt = self.width, self.height, self.pix_fmt
                enc.time_base = Fraction(1, 25)
                enc.options = dict(self.options)
                enc.open()
                if len(cache) >= 4:
                    cache.clear()
                cache[key] = [enc, 0]  # the encoder, its next pts
            self._encoder = cache[key]
            self.extradata = bytes(self._encoder[0].extradata or b"")
        frame = frame_of(flat, self.pix_fmt, self.planes)
        frame.pts = self._encoder[1]
        self._encoder[1] += 1
        packets = self._encoder[0].encode(frame)
        if len(packets) != 1:  # pragma: no cover - FFV1 has no delay
            raise RuntimeError(f"FFV1 gave {len(packets)} packets for one frame")
        return bytes(packets[0])

    def decode(self, blob: memoryview, out: np.ndarray) -> None:
        """Decode one packet into the flat ``out``; refuse anything but these planes."""
        key = (self.pix_fmt, self.width, self.height, self.extradata)
        cache = coders("ffv1 decoders")
        dec = cache.pop(key, None)
        try:
            if dec is None:
                dec = av.CodecContext.create("ffv1", "r")
                dec.width, dec.height = self.width, self.height
                if self.extradata:
                    dec.extradata = self.extradata
                dec.thread_type, dec.thread_count = "SLICE", FFV1_THREADS
                dec.open()
            frames = dec.decode(av.Packet(bytes(blob)))
        except av.FFmpegError as exc:
            raise StoreCorrupt(f"an FFV1 record fails to decode: {exc}") from None
        if len(cache) >= 4:
            cache.clear()
        cache[key] = dec  # kept for this thread's next record (a packet resets its state)
        if len(frames) != 1:
            raise StoreCorrupt("an FFV1 record does not decode to one frame")
        planes_into(frames[0], self.pix_fmt, self.planes, out)
