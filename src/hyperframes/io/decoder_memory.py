"""What a video decoder holds outside a run's pools: an estimate the memory plan counts.

FFmpeg's decoder keeps the pictures a stream refers back to (H.264's buffer holds at most
16, and at 4K its levels allow about 5), a picture for each thread decoding at once, and
the buffers it recycles; a reader that resizes RGB converts each frame at the stream's
size first, a frame of scratch. So a 4K file among 640x360 ones takes far more than the
pools of its 640x360 frames.

Measured (PyAV, x264 streams, peak RSS over a baseline, the reader's own frames left out):
at 4K, 8.7, 10.6 and 12.7 of the stream's frames on 1, 2 and 3 threads; at 1080p, 9.8,
12.1 and 15.2. The estimate, :data:`FRAMES_HELD` + :data:`FRAMES_PER_THREAD` a thread,
lies above them. A source declares the estimate on one thread as the least it needs and
on FFmpeg's automatic count as what it wants (:class:`~.base.Footprint`); the plan gives
it what the budget allows between them, and it decodes on as many threads as that
holds (:func:`threads_within`).

Example:
    >>> decoder_bytes(1000, threads=2)
    14000
    >>> threads_within(20_000, 1000, most=17)
    4
"""

from __future__ import annotations

import os

from .base import Footprint
from .formats import CHANNELS, PixFmt, sample_dtype
from .layouts import native_layout
from .probe import open_video

FRAMES_HELD = 8
"""Frames a decoder holds whatever its threads: the pictures referred back to, and those
in flight."""
FRAMES_PER_THREAD = 3
"""Frames each decoding thread adds."""
MAX_AUTO_THREADS = 16
"""FFmpeg's cap on the threads it picks itself."""
AHEAD_BYTES = 32 << 20
"""The decoded frames a sampled read's job may hold before they are taken (2 to 16
frames; :mod:`.sparse`)."""


def ahead_frames(frame_bytes: int) -> int:
    """The decoded frames of ``frame_bytes`` a sampled read's job may hold before they
    are taken."""
    return max(2, min(16, AHEAD_BYTES // max(frame_bytes, 1)))


def held_bytes(frame_bytes: int, workers: int) -> int:
    """The most a sampled read's decoded frames not yet taken hold: those of a job a
    worker, and of one more begun (its jobs in flight)."""
    return (workers + 1) * ahead_frames(frame_bytes) * frame_bytes


def auto_threads() -> int:
    """The threads FFmpeg's automatic count gives a decoder here: a core each, plus one,
    at most :data:`MAX_AUTO_THREADS`."""
    return min(len(os.sched_getaffinity(0)) + 1, MAX_AUTO_THREADS)


def decoder_bytes(frame_bytes: int, threads: int, scratch: int = 0) -> int:
    """The bytes a decoder of frames of ``frame_bytes`` (in the stream's own format and
    size) holds on ``threads`` threads, with ``scratch`` bytes of the reader's own."""
    return (FRAMES_HELD + FRAMES_PER_THREAD * max(1, threads)) * frame_bytes + scratch


def threads_within(nbytes: int, frame_bytes: int, *, most: int, scratch: int = 0) -> int:
    """The most threads (1 to ``most``) whose decoder fits in ``nbytes``; 1 where none
    does (the plan gave the source at least that)."""
    fit = ((nbytes - scratch) // max(1, frame_bytes) - FRAMES_HELD) // FRAMES_PER_THREAD
    return max(1, min(most, fit))


def decoding(
    width: int,
    height: int,
    stream_pix_fmt: str | None,
    *,
    resized: tuple[int, int] | None,
    pix_fmt: PixFmt,
    threads: bool | int,
) -> Footprint:
    """What a reader of a ``width x height`` stream of ``stream_pix_fmt`` holds outside the
    pools (:mod:`.decoder_memory`): the decoder's frames on one thread (``least``) and on
    the threads it would take (``wants``), and a frame of RGB at the stream's size where
    frames are ``resized`` after their conversion."""
    frame, scratch = frame_bytes(width, height, stream_pix_fmt, resized, pix_fmt)
    if threads is True:
        least, wants = (decoder_bytes(frame, t, scratch) for t in (1, auto_threads()))
    else:
        least = wants = decoder_bytes(frame, int(threads) or 1, scratch)
    return Footprint("decoder", least=least, wants=wants)


def sampled_decoding(
    width: int,
    height: int,
    stream_pix_fmt: str | None,
    *,
    resized: tuple[int, int] | None,
    pix_fmt: PixFmt,
    workers: int,
) -> Footprint:
    """What a sampled read's decoders hold (:mod:`.sparse`): a one-thread decoder a
    worker, the frames its jobs hold before they are taken, and a frame of RGB scratch;
    on one worker (``least``) and on ``workers`` (``wants``, or one decoder on FFmpeg's
    threads where the jobs want most frames: the more of the two)."""
    frame, scratch = frame_bytes(width, height, stream_pix_fmt, resized, pix_fmt)
    least = sampled_bytes(frame, width * height * 3 // 2, 1, scratch)
    wants = sampled_bytes(frame, width * height * 3 // 2, workers, scratch)
    dense = decoder_bytes(frame, auto_threads(), scratch) + held_bytes(width * height * 3 // 2, 1)
    return Footprint("decoder", least=least, wants=max(least, wants, dense))


def sampled_bytes(frame: int, decoded: int, workers: int, scratch: int = 0) -> int:
    """The bytes of a sampled read on ``workers`` one-thread decoders of ``frame``-byte
    pictures, whose jobs hold frames of ``decoded`` bytes until they are taken."""
    return workers * decoder_bytes(frame, 1) + held_bytes(decoded, workers) + scratch


def workers_within(nbytes: int, frame: int, decoded: int, *, most: int, scratch: int = 0) -> int:
    """The most workers (1 to ``most``) whose sampled read fits in ``nbytes`` (1 where
    none does: the plan gave the source at least that)."""
    fits = [w for w in range(1, most + 1) if sampled_bytes(frame, decoded, w, scratch) <= nbytes]
    return max(fits, default=1)


def decoding_of(path: str, *, resized: tuple[int, int] | None, pix_fmt: PixFmt) -> Footprint:
    """:func:`decoding` of the video at ``path`` on FFmpeg's threads, from its header alone
    (nothing where it cannot be opened: it fails, and is listed, when it is reached)."""
    try:
        container, stream = open_video(path)
    except (OSError, ValueError):  # (MediaError is a ValueError; PyAV's errors OSErrors)
        return Footprint("decoder")
    with container:
        ctx = stream.codec_context
        return decoding(ctx.width, ctx.height, ctx.pix_fmt, resized=resized, pix_fmt=pix_fmt,
                        threads=True)  # fmt: skip


def frame_bytes(
    width: int,
    height: int,
    stream_pix_fmt: str | None,
    resized: tuple[int, int] | None,
    pix_fmt: PixFmt,
) -> tuple[int, int]:
    """The bytes of a decoded frame in the stream's own format and size (4 a pixel where
    it is not a layout we know), and of the reader's scratch frame."""
    native = native_layout(stream_pix_fmt, width, height)
    frame = native.spec.nbytes if native is not None else width * height * 4
    resizing = resized is not None and tuple(resized) != (width, height)
    sample = sample_dtype(pix_fmt).itemsize
    scratch = width * height * CHANNELS[pix_fmt] * sample if resizing and pix_fmt in CHANNELS else 0
    return frame, scratch
