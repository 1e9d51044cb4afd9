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
import struct
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import av.container
import av.video.stream

from ..errors import MediaError
from .inputs import is_store
from .streams import other_streams

#: Packets whose timestamps are inspected to decide whether a stream looks VFR.
VFR_SCAN_PACKETS = 240
_REORDER_DEPTH = 16
#: Top-level box types an ISO base media file (MP4, MOV, M4A) can start with.
_ISO_FIRST_BOXES = frozenset(
    {b"ftyp", b"styp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pdin", b"uuid"}
)
_AV_STREAM_TYPES = frozenset({"audio", "subtitle"})


def open_video(
    path: str | os.PathLike[str],
) -> tuple[av.container.InputContainer, av.video.stream.VideoStream]:
    """Open ``path`` for reading and return the container and its first video stream.

    Raises:
        MediaError: the file is missing, is not media, is truncated or damaged, or has no
            video stream (an audio-only file).
    """
    where = Path(path)
    if not where.exists():
        raise MediaError(f"no such video file: {str(where)!r}; check the path")
    if is_store(where):
        raise MediaError(
            f"{str(where)!r} is a hyperframes store, not a video file; `hyperframes map` "
            "and `info` read a store, other commands its frames unpacked (hyperframes "
            "unpack STORE frames.mkv), and Python hyperframes.store.StoreSource"
        )
    if where.is_dir():
        raise MediaError(
            f"{str(where)!r} is a folder and holds no image sequence, not a video file; name "
            "a video file, or a folder of images (one sequence)"
        )
    if where.is_file() and where.stat().st_size == 0:  # (a FIFO is read as a stream)
        raise MediaError(f"{str(where)!r} is empty (0 bytes); it is not a video yet")
    try:
        container = av.open(str(where), mode="r")
    except av.FFmpegError as exc:
        why = iso_damage(where)
        if why is not None:
            raise MediaError(damaged_message(where, why)) from exc
        raise MediaError(
            f"cannot read {str(where)!r} as a video ({exc.strerror or exc}); the file is "
            "truncated, damaged or not a video: check it with ffprobe, re-download or re-encode it"
        ) from exc
    streams = container.streams
    stream = streams.video[0] if streams.video else None
    ctx = None if stream is None else stream.codec_context
    if stream is not None and ctx is not None and ctx.width and ctx.height:
        return container, stream
    kinds = {s.type for s in streams if s.codec_context is not None}
    container.close()
    why = iso_damage(where)
    if why is None:
        if stream is None and kinds & _AV_STREAM_TYPES:
            found = " and ".join(sorted(kinds & _AV_STREAM_TYPES))
            raise MediaError(
                f"{str(where)!r} has no video stream (only {found}); pass a video file"
            )
        if stream is not None and ctx is not None:
            raise MediaError(
                f"{str(where)!r} has a video stream without a frame size; "
                "it holds no decodable frames or is damaged"
            )
        why = "FFmpeg finds no video stream it can decode in it"
    raise MediaError(damaged_message(where, why))


def iso_damage(path: str | os.PathLike[str]) -> str | None:
    """Why an MP4/MOV file is truncated or damaged, from its top-level boxes.

    Reads only the box headers. The file is damaged when a box runs past the end of the
    file (a copy or download cut short) or when no ``moov`` box (the index of the
    frames, written last by most recorders) is there.

    Returns:
        The reason in a few words, or ``None`` when the boxes look whole or the file is
        not an ISO base media file.
    """
    where = Path(path)
    size = where.stat().st_size
    offset, kinds = 0, set()
    with where.open("rb") as f:
        while offset + 8 <= size:
            f.seek(offset)
            header = f.read(16)
            box_size, kind = struct.unpack(">I4s", header[:8])
            if offset == 0 and kind not in _ISO_FIRST_BOXES:
                return None
            name = kind.decode("latin-1")
            if box_size == 1:  # a 64-bit size follows the type
                if len(header) < 16:
                    return f"its {name!r} box header is cut off by the end of the file"
                box_size = struct.unpack(">Q", header[8:])[0]
            elif box_size == 0:
                box_size = size - offset
            if box_size < 8:
                return f"its {name!r} box at byte {offset} declares an impossible size"
            if offset + box_size > size:
                missing = offset + box_size - size
                return f"its {name!r} box runs {missing} bytes past the end of the file"
            kinds.add(kind)
            offset += box_size
    if not kinds or kinds & {b"moov", b"moof"}:
        return None
    return "it has no 'moov' box, the index of its frames that recorders write last"


def damaged_message(where: Path, why: str) -> str:
    """The one-line error for a file that :func:`iso_damage` or FFmpeg found damaged."""
    return (
        f"{str(where)!r} is truncated or damaged: {why}; copy or download it again "
        "(ffprobe shows what FFmpeg can still read)"
    )


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


def samples(pix_fmt: str | None) -> tuple[bool, int]:
    """Whether frames in FFmpeg's ``pix_fmt`` have alpha, and the most bits a sample of
    theirs has: ``(True, 16)`` for ``gbrap16le``, ``(False, 10)`` for ``yuv420p10le``;
    ``(False, 8)`` for a format FFmpeg does not know (or none)."""
    try:
        components = av.VideoFormat(pix_fmt or "").components
    except (ValueError, av.FFmpegError):
        return False, 8
    return any(c.is_alpha for c in components), max(c.bits for c in components)


def display_rotation(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream
) -> int:
    """How far a player turns the frames counterclockwise to show them: 0, 90, 180 or 270
    degrees, from the first frame's display matrix (a phone's rotation tag). Decodes up to
    the first frame, so call it on a container that is not read afterwards, or seek back;
    0 when no frame decodes (reading says why later)."""
    try:
        for frame in container.decode(stream):
            return round(frame.rotation / 90) % 4 * 90
    except av.FFmpegError:
        pass
    return 0


def probe(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe the first video stream of ``path``.

    Returns:
        A dict with ``path``, ``container``, ``codec``, ``width``, ``height``, ``pix_fmt``,
        ``fps`` (average), ``rate`` (the same as a fraction string), ``time_base``,
        ``start_time`` and ``duration`` in seconds, ``frames`` (``None`` when unknown),
        ``frames_estimated``, ``bit_rate`` (bits/s or ``None``), ``vfr`` (whether a
        variable frame rate is suspected), ``streams`` (every other stream, as
        :func:`other_streams` lists them) and ``chapters`` (how many).

    Raises:
        MediaError: the file cannot be opened as a video.
    """
    container, stream = open_video(path)
    try:
        facts = stream_facts(container, stream)
        facts["streams"] = other_streams(container, stream)
        facts["chapters"] = len(container.chapters()) if hasattr(container, "chapters") else 0
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
