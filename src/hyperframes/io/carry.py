"""What goes along with the video into an output file: the input's sound, subtitles,
attachments and data streams, its metadata and its chapters.

:class:`Carry` says what to carry (frozen, validated: the command line builds it from
``--audio``, ``--audio-codec`` and ``--subtitles``); :func:`plan` decides, stream by
stream, what the output container can take (a pure function of the streams and the
container: copied as they are, re-encoded, converted, attached or dropped, with why);
:class:`~.tracks.Carrier` does it while a video is written.

The rules, as users of the ``ffmpeg`` command know them:

* **sound** is copied as it is where the container takes its codec, and re-encoded
  otherwise (AAC into MP4, M4V and MOV; Opus into WebM and Matroska); ``audio_codec``
  re-encodes every track into the codec named; ``audio="none"`` leaves the sound out.
* **text subtitles** are copied where the container takes their codec, and converted to
  the container's own otherwise (``mov_text`` in MP4/MOV, SubRip in Matroska, WebVTT in
  WebM); their styling does not survive a conversion. Bitmap subtitles go to Matroska only.
* **attachments** (a Matroska file's fonts) go to Matroska; **data streams** where the
  container takes their codec; an MP4's chapter track is carried as the chapters it is.
* **metadata** (the title, the creation time, each stream's language and title) and the
  **chapters** in the range kept are copied.

Whatever cannot be carried is named, with why, in :attr:`Route.why`; nothing is dropped
without a word except what was asked to be left out.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Any, Literal

import av

AUDIO_ENCODERS = {"aac": "aac", "opus": "libopus", "flac": "flac", "mp3": "libmp3lame",
                  "vorbis": "libvorbis", "alac": "alac", "pcm_s16le": "pcm_s16le"}  # fmt: skip
"""The sound codecs ``audio_codec`` takes, and the FFmpeg encoder of each."""
DEFAULT_AUDIO = {".mp4": "aac", ".m4v": "aac", ".mov": "aac", ".webm": "opus", ".mkv": "opus"}
"""The codec a track is re-encoded into where the container cannot hold it as it is."""
TEXT_SUBTITLES = frozenset({"mov_text", "subrip", "srt", "ass", "ssa", "webvtt", "text"})
SUBTITLE_FOR = {".mp4": "mov_text", ".m4v": "mov_text", ".mov": "mov_text", ".mkv": "subrip",
                ".webm": "webvtt"}  # fmt: skip
"""The text subtitle codec each container takes, for conversions."""
TECHNICAL_TAGS = frozenset({"major_brand", "minor_version", "compatible_brands", "encoder",
                            "duration", "vendor_id", "handler_name"})  # fmt: skip
"""Tags a muxer writes about itself: not the input's to carry."""
STREAM_TAGS = ("language", "title")
"""The tags of each stream that are carried."""

Action = Literal["copy", "encode", "convert", "attach", "drop", "omit"]


@dataclass(frozen=True)
class Carry:
    """What goes along with the video.

    Args:
        audio: ``"keep"`` the sound (copied, or re-encoded where the container needs it)
            or ``"none"`` (left out, with no warning).
        audio_codec: re-encode every sound track into this codec (a key of
            :data:`AUDIO_ENCODERS`); ``None`` copies where the container allows.
        subtitles: ``"keep"`` or ``"none"``.
        metadata: carry the container's tags and chapters.
        sound_only: carry the sound and leave every other stream out, silently (a
            soundtrack muxed into a render).
        source: the file to carry from; ``None``: the video the run reads.
    """

    audio: Literal["keep", "none"] = "keep"
    audio_codec: str | None = None
    subtitles: Literal["keep", "none"] = "keep"
    metadata: bool = True
    sound_only: bool = False
    source: str | None = None

    def __post_init__(self) -> None:
        for name, value in (("audio", self.audio), ("subtitles", self.subtitles)):
            if value not in ("keep", "none"):
                raise ValueError(f"{name} must be 'keep' or 'none', got {value!r}")
        if self.audio_codec is not None and self.audio_codec not in AUDIO_ENCODERS:
            raise ValueError(
                f"audio_codec must be one of {', '.join(AUDIO_ENCODERS)}, got {self.audio_codec!r}"
            )
        if self.audio_codec is not None and AUDIO_ENCODERS[self.audio_codec] not in (
            av.codecs_available
        ):
            raise ValueError(f"this FFmpeg build has no {self.audio_codec} encoder")

    def check(self, output: str | os.PathLike[str]) -> None:
        """Refuse, before any work, an ``audio_codec`` the ``output``'s container cannot
        hold (a container FFmpeg does not know is left for the sink to name)."""
        suffix = os.path.splitext(output)[1].lower()
        supported = container_codecs(suffix) if self.audio_codec else None
        if supported is None or self.audio != "keep":
            return
        if self.audio_codec and self.audio_codec not in supported:
            takes = sorted(c for c in AUDIO_ENCODERS if c in supported)
            raise ValueError(
                f"a {suffix} file cannot hold {self.audio_codec} sound; pick one of "
                f"{', '.join(takes)} or another container"
            )


@dataclass(frozen=True)
class Route:
    """One input stream's way into the output: ``action`` (copy, encode, convert, attach;
    drop when it cannot go, omit when asked or when carried otherwise), the codec it is
    written as (``to``) and why it is not copied as it is."""

    index: int
    kind: str
    codec: str
    action: Action
    to: str | None = None
    why: str = ""
    language: str | None = None

    def described(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"index": self.index, "type": self.kind, "codec": self.codec}
        if self.language:
            entry["language"] = self.language
        if self.to and self.to != self.codec:
            entry["to"] = self.to
        if self.why:
            entry["why"] = self.why
        return entry


def plan(
    streams: list[dict[str, Any]], suffix: str, supported: set[str] | frozenset[str],
    carry: Carry, *, has_chapters: bool = False,
) -> list[Route]:  # fmt: skip
    """The route of each of ``streams`` (as :func:`~.probe.other_streams` describes them)
    into a ``suffix`` container that takes the codecs ``supported``."""
    suffix = suffix.lower()
    routes = []
    for s in streams:
        kind, codec = s["type"], s["codec"]
        base = {"index": s["index"], "kind": kind, "codec": codec, "language": s.get("language")}
        cannot = f"a {suffix} file cannot hold {codec}"
        if kind == "audio":
            routes.append(Route(**base, **_audio(codec, suffix, supported, carry, cannot)))
        elif carry.sound_only:
            routes.append(Route(**base, action="omit", why="the sound only was asked for"))
        elif kind == "subtitle":
            routes.append(Route(**base, **_subtitle(codec, suffix, supported, carry, cannot)))
        elif kind == "attachment":
            attach = suffix == ".mkv"
            why = "" if attach else f"a {suffix} file holds no attachments; write .mkv to keep it"
            routes.append(Route(**base, action="attach" if attach else "drop", why=why))
        elif kind == "data" and s.get("discarded") and has_chapters:
            routes.append(
                Route(**base, action="omit", why="the chapters' track: carried as chapters")
            )
        elif kind == "data" and codec in supported:
            routes.append(Route(**base, action="copy"))
        elif kind == "data":
            routes.append(Route(**base, action="drop", why=f"{cannot} data"))
        else:
            routes.append(Route(**base, action="drop", why="only the first video stream is read"))
    return routes


def _audio(
    codec: str, suffix: str, supported: set[str] | frozenset[str], carry: Carry, cannot: str
) -> dict[str, Any]:
    if carry.audio == "none":
        return {"action": "omit", "why": "asked for no sound"}
    if carry.audio_codec is not None:
        return {"action": "encode", "to": carry.audio_codec, "why": "asked for"}
    if codec in supported:
        return {"action": "copy"}
    fallback = DEFAULT_AUDIO.get(suffix)
    if not _decodable(codec):
        return {"action": "drop", "why": f"{cannot} as it is, and this FFmpeg cannot decode it"}
    if fallback is None or fallback not in supported:
        return {"action": "drop", "why": f"{cannot}; pass --audio-codec with a codec it takes"}
    return {"action": "encode", "to": fallback, "why": f"{cannot} as it is"}


def _subtitle(
    codec: str, suffix: str, supported: set[str] | frozenset[str], carry: Carry, cannot: str
) -> dict[str, Any]:
    if carry.subtitles == "none":
        return {"action": "omit", "why": "asked for no subtitles"}
    if codec in supported:
        return {"action": "copy"}
    own = SUBTITLE_FOR.get(suffix)
    if codec in TEXT_SUBTITLES and own is not None and own in supported:
        return {"action": "convert", "to": own, "why": f"{cannot}; converted, without styling"}
    hint = "; write .mkv to keep them" if codec not in TEXT_SUBTITLES else ""
    return {"action": "drop", "why": f"{cannot} subtitles{hint}"}


def _decodable(codec: str) -> bool:
    try:
        av.Codec(codec, "r")
    except (av.FFmpegError, ValueError):
        return False
    return True


def container_codecs(suffix: str) -> frozenset[str] | None:
    """The codecs a container of ``suffix`` takes (``None``: FFmpeg knows no such container)."""
    buffer = io.BytesIO()
    buffer.name = f"probe{suffix}"
    try:
        with av.open(buffer, "w") as output:
            return frozenset(output.supported_codecs)
    except (av.FFmpegError, ValueError):
        return None


def kept_tags(tags: dict[str, str]) -> dict[str, str]:
    """A container's tags without those its muxer wrote about itself."""
    return {k: v for k, v in tags.items() if k.lower() not in TECHNICAL_TAGS}
