"""The streams of a media file besides its video (sound, subtitles, attachments, data),
described for ``info``, for warnings and for :func:`~.carry.plan`."""

from __future__ import annotations

import os
from typing import Any

import av

from ..errors import MediaError


def sound_streams(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The sound streams of any media file (a soundtrack, a film), as
    :func:`other_streams` lists them.

    Raises:
        MediaError: the file cannot be opened as media.
    """
    try:
        with av.open(str(path)) as container:
            return [s for s in other_streams(container, None) if s["type"] == "audio"]
    except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise MediaError(f"cannot open {str(path)!r} as media: {exc}") from exc


def streams_named(container: Any, video: Any) -> str:
    """The streams of ``container`` besides ``video``, and its chapters, in a few words for
    a warning (``"audio aac (eng), subtitle mov_text, 2 chapters"``; ``""``: none)."""
    named = [label(s) for s in other_streams(container, video) if not s.get("discarded")]
    chapters = len(container.chapters())
    return ", ".join(named + ([f"{chapters} chapters"] if chapters else []))


def _codec_name(context: Any) -> str:
    """The codec's own name (``mp3``, not its decoder's ``mp3float``)."""
    codec = getattr(context, "codec", None)
    return getattr(codec, "canonical_name", None) or getattr(context, "name", None) or "unknown"


DISCARD_ALL = 48
"""FFmpeg's ``AVDISCARD_ALL``: a stream its demuxer reads for itself (an MP4's chapter track)."""


def other_streams(container: Any, video: Any) -> list[dict[str, Any]]:
    """The streams of ``container`` besides ``video`` (audio, subtitles, attachments, data,
    other video): index, type, codec, language, duration in seconds where known, and for
    audio its rate and channels (``video=None``: every stream)."""
    found = []
    for each in container.streams:
        if video is not None and each.index == video.index:
            continue
        context = getattr(each, "codec_context", None)
        entry: dict[str, Any] = {
            "index": each.index,
            "type": each.type,
            "codec": _codec_name(context),
            "language": _language(each),
        }
        if each.duration is not None and each.time_base is not None:
            entry["duration"] = round(float(each.duration * each.time_base), 6)
        if each.type == "audio":
            entry["rate"] = getattr(context, "sample_rate", None)
            entry["channels"] = getattr(context, "channels", None)
        if each.type == "attachment":  # named by its file
            entry["codec"] = getattr(each, "name", None) or entry["codec"]
        if each.type == "data" and int(each.discard) >= DISCARD_ALL:  # (an MP4's chapters)
            entry["discarded"] = True
        found.append(entry)
    return found


def _language(stream: Any) -> str | None:
    """The stream's language tag, ``None`` where it is missing or ``und`` (undetermined)."""
    value = (stream.metadata or {}).get("language")
    return None if value in (None, "", "und") else str(value)


def label(stream: dict[str, Any]) -> str:
    """A stream as warnings and ``info`` name it: ``audio aac (eng)``."""
    language = f" ({stream['language']})" if stream.get("language") else ""
    return f"{stream['type']} {stream['codec']}{language}"
