"""Lossless H.264 GOPs of a video's planes, through PyAV's libx264: the coder of planar groups
with ``intra="x264"`` (the store's size mode).

A group is coded as one H.264 stream of its own: qp 0 (lossless: libx264 then codes with
the High 4:4:4 Predictive profile, bit-exact for 4:2:0, 4:2:2, 4:4:4, gray and their 10-bit
forms), no B-frames (decode order is frame order), and an IDR keyframe at the group's first
frame and every ``gop`` frames after it (closed GOPs, no keyframes placed by scene cuts).
Each frame's record is its packet: a keyframe's is a ``raw`` record, every other frame's a
``delta`` on the frame before it, so the group header's references say which packets a
frame needs (its keyframe's and every one after it up to its own). The sequence and
picture parameter sets are the group's ``extradata``.

Each thread keeps its H.264 decoders open (opening one starts its threads); a read feeds
the packets from the frame's keyframe to the frame and then resets the decoder. A forked
child opens its own (see ``_ffv1``'s coders, kept the same way).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import av
import numpy as np

from ...errors import StoreCorrupt
from ._ffv1 import FFV1_FORMATS
from ._pyav import coders, frame_of, planes_into
from .group_header import Header, Record

X264_FORMATS = FFV1_FORMATS
"""The planar formats libx264 codes losslessly (the same eight as FFV1's)."""
PRESET = "medium"
"""libx264's preset: ``veryfast`` packs about 1.5x faster and 10 % larger."""
SLICES = 4
"""libx264 cuts each frame into one slice per thread it codes on (its sliced threads): a
fixed 4, so that a store's bytes do not depend on the packing machine's cores, and a
frame decodes on up to 4 cores (0.5 % larger than 2 slices on bigbuckbunny)."""
DECODE_THREADS = max(1, min(SLICES, os.cpu_count() or 1))
"""Slice threads an H.264 record decodes on: one per slice, at most one per core."""


def x264_options(gop: int, preset: str = PRESET) -> dict[str, str]:
    """libx264's options for lossless closed GOPs of ``gop`` frames, keyframes fixed."""
    return {
        "qp": "0", "preset": preset, "g": str(gop), "keyint_min": str(gop),
        "sc_threshold": "0", "bf": "0", "threads": str(SLICES),
    }  # fmt: skip


def encode_x264(
    flat: np.ndarray, pix_fmt: str, planes: Sequence[tuple[int, int]], gop: int
) -> tuple[list[bytes], bytes]:
    """Code the frames ``flat`` (``(n, samples)``) as lossless H.264 with a keyframe every
    ``gop`` frames from the first.

    Returns:
        Each frame's packet (in frame order) and the stream's parameter sets.

    Raises:
        RuntimeError: libx264 did not give one packet per frame, keyframes where asked.
    """
    height, width = planes[0]
    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt = width, height, pix_fmt
    enc.time_base = Fraction(1, 25)
    enc.flags |= av.codec.context.Flags.global_header  # parameter sets apart, once
    enc.options = x264_options(gop)
    packets: list[Any] = []
    for i in range(flat.shape[0]):
        frame = frame_of(flat[i], pix_fmt, planes)
        frame.pts = i
        packets += enc.encode(frame)
    packets += enc.encode(None)
    extradata = bytes(enc.extradata or b"")
    keys = [i for i, p in enumerate(packets) if p.is_keyframe]
    if (
        len(packets) != flat.shape[0]
        or [p.pts for p in packets] != list(range(len(packets)))
        or keys != list(range(0, len(packets), gop))
    ):  # pragma: no cover - what the options above ask of libx264
        raise RuntimeError(f"libx264 gave {len(packets)} packets, keyframes at {keys[:8]}")
    return [bytes(p) for p in packets], extradata


def encode_x264_group(
    flat: np.ndarray, planes: Sequence[tuple[int, int]], pix_fmt: str, gop: int
) -> tuple[dict[str, object], list[Record], list[bytes]]:
    """Code a lossless group of planar frames (``(n, samples)``) as lossless H.264.

    Returns:
        The header keys, the records and their bytes.
    """
    packets, extradata = encode_x264(flat, pix_fmt, planes, gop)
    meta: dict[str, object] = {
        "base": 0,
        "layout": "gop",
        "planes": [list(p) for p in planes],
        "segments": _whole_planes(planes),
        "predictor": "x264",
        "pix_fmt": pix_fmt,
        "extradata": extradata.hex(),
    }
    return meta, x264_records(packets, gop), packets


def _whole_planes(planes: Sequence[tuple[int, int]]) -> list[list[int]]:
    """One segment per plane (the header's ``segments``: an x264 packet codes them all)."""
    out, at = [], 0
    for h, w in planes:
        out.append([at, h, w])
        at += h * w
    return out


def x264_records(packets: Sequence[bytes], gop: int) -> list[Record]:
    """The group header's records for ``packets``: keyframes raw, others on the one before."""
    records, at = [], 0
    for i, packet in enumerate(packets):
        key = i % gop == 0
        records.append(Record("raw" if key else "delta", -1 if key else i - 1, at, len(packet)))
        at += len(packet)
    return records


def decode_x264(view: memoryview, header: Header, frames: Sequence[int]) -> np.ndarray:
    """Frames ``frames`` of an x264 group as ``(len(frames), samples)``; each packet is
    decoded once per call, frames of one GOP in one pass from its keyframe."""
    size = int(np.prod(header.shape))
    out = np.empty((len(frames), size), header.dtype)
    wanted: dict[int, list[int]] = {}
    for slot, i in enumerate(frames):
        wanted.setdefault(i, []).append(slot)
    key = (header.pix_fmt, header.planes[0], header.extradata)
    cache = coders("h264")
    dec = cache.pop(key, None) or _decoder(header)
    try:
        for start, stop in _passes(header, sorted(wanted)):
            _decode_pass(dec, view, header, start, stop, wanted, out)
    finally:
        dec.flush_buffers()  # no reference frames carried to the next read
    if len(cache) >= 4:
        cache.clear()
    cache[key] = dec
    return out


def _decoder(header: Header) -> Any:
    dec = av.CodecContext.create("h264", "r")
    dec.width, dec.height = header.planes[0][1], header.planes[0][0]
    dec.extradata = header.extradata
    dec.thread_type, dec.thread_count = "SLICE", DECODE_THREADS  # no frame delay
    dec.open()
    return dec


def _passes(header: Header, frames: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, stop)`` runs of packets to decode: from each wanted frame's keyframe to the
    last wanted frame before the next keyframe."""
    runs: list[tuple[int, int]] = []
    for i in frames:
        key = header.chain(i)[0]
        if runs and runs[-1][0] == key:
            runs[-1] = (key, i + 1)
        else:
            runs.append((key, i + 1))
    return runs


def _decode_pass(
    dec: Any,
    view: memoryview,
    header: Header,
    start: int,
    stop: int,
    wanted: dict[int, list[int]],
    out: np.ndarray,
) -> None:
    dec.flush_buffers()
    got: list[Any] = []
    try:
        for j in range(start, stop):
            rec: Record = header.records[j]
            at = header.payload_start + rec.offset
            packet = av.Packet(bytes(view[at : at + rec.length]))
            packet.pts = j
            got += dec.decode(packet)
        if len(got) < stop - start:  # pragma: no cover - no delay without B-frames
            got += dec.decode(None)
    except av.FFmpegError as exc:
        raise StoreCorrupt(f"an x264 record fails to decode: {exc}") from None
    if [f.pts for f in got] != list(range(start, stop)):
        raise StoreCorrupt(f"x264 records {start}..{stop - 1} do not decode to one frame each")
    for frame in got:
        if frame.pts in wanted:
            planes_into(frame, header.pix_fmt, header.planes, out[wanted[frame.pts][0]])
            for slot in wanted[frame.pts][1:]:
                out[slot] = out[wanted[frame.pts][0]]
