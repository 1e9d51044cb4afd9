"""Which video a file is: the facts a resumed pack checks before it appends to a store.

A pack that resumes must continue the same input, or the store silently mixes two
videos. The fingerprint is cheap (demuxing a few packets, no decoding) and names
what it compares, so a refusal can say what differs.

Example:
    >>> video_fingerprint("clip.mp4")  # doctest: +SKIP
    {'file_bytes': 2150532, 'duration': 5.28, 'first_packets': '9f3c...'}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import av
import xxhash

from .inputs import is_image_sequence
from .probe import open_video

#: Packets hashed from the start of the video stream (a few keyframes' worth of bytes).
FINGERPRINT_PACKETS = 32


def video_fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The byte size, duration and a hash of the first packets of the video at ``path``.

    Returns:
        ``{"file_bytes": int, "duration": float | None, "first_packets": str}``; the
        codec and frame facts are in the source's ``info`` already.

    Raises:
        MediaError: the file cannot be opened as a video.
    """
    where = Path(path)
    container, stream = open_video(where)
    try:
        digest = xxhash.xxh3_128()
        seen = 0
        try:
            for packet in container.demux(stream):
                if packet.size:
                    digest.update(bytes(packet))
                    seen += 1
                    if seen == FINGERPRINT_PACKETS:
                        break
        except av.FFmpegError:
            pass  # a damaged tail: the packets hashed so far still identify the file
        duration = None if container.duration is None else round(container.duration / 1e6, 6)
        return {
            "file_bytes": where.stat().st_size,
            "duration": duration,
            "first_packets": digest.hexdigest(),
        }
    finally:
        container.close()


def sequence_fingerprint(pattern_or_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """An image sequence's :func:`video_fingerprint`: the files' bytes in all and a hash of
    every name and size and of the first file's bytes (no image is decoded).

    Raises:
        MediaError: no images match.
    """
    from .image_names import list_images

    files = list_images(pattern_or_dir)
    digest = xxhash.xxh3_128(files[0].read_bytes())
    total = 0
    for path in files:
        size = path.stat().st_size
        total += size
        digest.update(f"{path.name}\0{size}\0".encode())
    return {"file_bytes": total, "duration": None, "first_packets": digest.hexdigest()}


def input_fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`video_fingerprint` of a video, :func:`sequence_fingerprint` of images."""
    if is_image_sequence(path):
        return sequence_fingerprint(path)
    return video_fingerprint(path)


def with_fingerprint(info: dict[str, Any]) -> dict[str, Any]:
    """A video source's ``info`` with :func:`video_fingerprint` added, for a store to record
    (computed when a store asks, not by every source that opens a video); other ``info``
    (images, arrays, a store's own record that has it already) comes back as it is."""
    if info.get("source") == "images" and "first_packets" not in info:
        return info | sequence_fingerprint(info["path"])
    if "path" not in info or "codec" not in info or "first_packets" in info:
        return info
    return info | video_fingerprint(info["path"])


IDENTITY_KEYS = (
    "file_bytes", "duration", "first_packets", "codec", "width", "height", "source_pix_fmt",
    "fps", "frames",
)  # fmt: skip
"""The keys of a fingerprint (a store header's ``source``) that identify an input (see
:func:`source_differences`)."""


def source_differences(packed: dict[str, Any], resumed: dict[str, Any]) -> str:
    """What differs between the input a store was packed from and the one resuming it.

    Compares the :data:`IDENTITY_KEYS` both sources name (a video's byte size, duration,
    a hash of its first packets, codec and frame facts; see
    :func:`video_fingerprint`). The path is not compared: a
    moved file is the same input.

    Returns:
        ``""`` when nothing differs, else e.g. ``"file_bytes: 123 vs 456, width: ..."``.
    """
    return ", ".join(
        f"{key}: {packed[key]!r} vs {resumed[key]!r}"
        for key in IDENTITY_KEYS
        if key in packed and key in resumed and packed[key] != resumed[key]
    )
