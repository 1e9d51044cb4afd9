"""What a video file holds, without decoding it: the facts ``hyperframes info`` prints.

This module owns opening a video with PyAV and turning every way that can fail
into one :class:`~hyperframes.errors.MediaError` with a one-line message. The
video source uses the same helpers, so a file that ``probe`` accepts opens the
same way for decoding.

Example:
    >>> facts = probe("clip.mp4")  # doctest: +SKIP
    >>> facts["width"], facts["height"], facts["fps"], facts["frames"]  # doctest: +SKIP
    (1280, 720, 25.0, 132)
"""

from __future__ import annotations

import itertools
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import av.container
import av.video.stream

from ..errors import MediaError

#: Packets whose timestamps are inspected to decide whether a stream looks VFR.
VFR_SCAN_PACKETS = 240
_REORDER_DEPTH = 16


def open_video(
    path: str | os.PathLike[str],
) -> tuple[av.container.InputContainer, av.video.stream.VideoStream]:
    """Open ``path`` for reading and return the container and its first video stream.

    Raises:
        MediaError: the file is missing, is not media, is truncated or has no video stream.
    """
    where = Path(path)
    if not where.exists():
        raise MediaError(f"no such video file: {str(where)!r}; check the path")
    if where.is_dir():
        raise MediaError(f"{str(where)!r} is a folder, not a video file; name a file in it")
    if where.stat().st_size == 0:
        raise MediaError(f"{str(where)!r} is empty (0 bytes); it is not a video yet")
    try:
        container = av.open(str(where), mode="r")
    except av.FFmpegError as exc:
        raise MediaError(
            f"cannot read {str(where)!r} as a video ({exc.strerror or exc}); "
            "the file may be truncated or not a video: check it with ffprobe"
        ) from exc
    if not container.streams.video:
        container.close()
        raise MediaError(f"{str(where)!r} has no video stream; pass a video file")
    stream = container.streams.video[0]
    if not stream.codec_context.width or not stream.codec_context.height:
        container.close()
        raise MediaError(
            f"{str(where)!r} has a video stream without a frame size; "
            "it holds no decodable frames or is damaged"
        )
    return container, stream


def stream_facts(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream
) -> dict[str, Any]:
    """The facts about one open video stream that need no decoding or demuxing.

    ``frames`` is the count the container declares, or an estimate from duration times
    fps (then ``frames_estimated`` is ``True``), or ``None`` when neither is known.
    """
    ctx = stream.codec_context
    time_base = stream.time_base or Fraction(1, 1_000_000)
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    fps = float(rate) if rate else None
    duration = None
    if stream.duration is not None:
        duration = float(stream.duration * time_base)
    elif container.duration is not None and len(container.streams) == 1:
        duration = container.duration / av.time_base  # no other stream can lengthen it
    frames: int | None = int(stream.frames) if stream.frames else None
    estimated = False
    if frames is None and duration is not None and fps:
        frames, estimated = round(duration * fps), True
    start = float(stream.start_time * time_base) if stream.start_time is not None else 0.0
    return {
        "path": str(container.name),
        "container": container.format.name,
        "codec": ctx.name,
        "width": int(ctx.width),
        "height": int(ctx.height),
        "pix_fmt": ctx.pix_fmt,
        "fps": fps,
        "rate": str(rate) if rate else None,
        "time_base": str(time_base),
        "start_time": start,
        "frames": frames,
        "frames_estimated": estimated,
        "duration": duration,
        "bit_rate": int(container.bit_rate) if container.bit_rate else None,
    }


def vfr_suspected(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream
) -> bool:
    """Whether the stream looks variable-frame-rate.

    It does when the average rate and the container's nominal rate differ by more
    than 1 %, or when the packet durations among the first :data:`VFR_SCAN_PACKETS`
    packets differ by more than one time-base tick. Demuxes packets (no decoding),
    so call it on a container that is not read afterwards, or seek back.
    """
    average, nominal = stream.average_rate, stream.base_rate
    if average and nominal and abs(float(average) / float(nominal) - 1) > 0.01:
        return True
    stamps = []
    for packet in container.demux(stream):
        if packet.pts is not None:
            stamps.append(packet.pts)
        if len(stamps) >= VFR_SCAN_PACKETS:
            break
    # Decode order differs from presentation order by the reorder depth: drop the tail
    # so that frames presented after the scanned window leave no gap.
    stamps = sorted(stamps)[: max(2, len(stamps) - _REORDER_DEPTH)]
    steps = [b - a for a, b in itertools.pairwise(stamps)]
    return bool(steps) and max(steps) - min(steps) > 1


def probe(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe the first video stream of ``path``.

    Returns:
        A dict with ``path``, ``container``, ``codec``, ``width``, ``height``, ``pix_fmt``,
        ``fps`` (average), ``rate`` (the same as a fraction string), ``time_base``,
        ``start_time`` and ``duration`` in seconds, ``frames`` (``None`` when unknown),
        ``frames_estimated``, ``bit_rate`` (bits/s or ``None``) and ``vfr`` (whether a
        variable frame rate is suspected).

    Raises:
        MediaError: the file cannot be opened as a video.
    """
    container, stream = open_video(path)
    try:
        facts = stream_facts(container, stream)
        try:
            facts["vfr"] = vfr_suspected(container, stream)
        except av.FFmpegError as exc:
            raise MediaError(
                f"{str(path)!r} is damaged: its packets cannot be read ({exc}); "
                "re-encode or re-download it"
            ) from exc
        return facts
    finally:
        container.close()
