"""The input's sound beside the video: :class:`SoundCopy` copies a video's audio streams,
packet by packet (no re-encoding), into the file a :class:`~.video_sink.VideoSink` writes,
on the video's clock.

The sink tells it where the video starts (the first frame's time in the input) and, after
each batch, how far the video has come; it muxes the audio packets up to there, so the
muxer never holds more than a batch's worth of sound, whatever the length. Packets before
the first frame or after the last are left out, and the kept ones are shifted as the
video's timestamps are, so sound and picture stay in step under ``start``/``stop`` (to
within one audio packet, about 21 ms of AAC). A stream the output container cannot hold
as it is (AAC in WebM, say) is not copied: :attr:`SoundCopy.dropped` says which and why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import av
import av.container

CONTAINERS: dict[str, frozenset[str] | None] = {
    ".mp4": frozenset({"aac", "mp3", "ac3", "eac3", "alac", "opus", "flac"}),
    ".m4v": frozenset({"aac", "mp3", "ac3", "eac3", "alac"}),
    ".mov": frozenset({"aac", "mp3", "ac3", "eac3", "alac", "pcm_s16le", "pcm_s24le"}),
    ".mkv": None,  # Matroska takes every audio codec
    ".webm": frozenset({"opus", "vorbis"}),
}
"""The audio codecs each output container takes as they are (``None``: any)."""


class SoundCopy:
    """The audio streams of ``source`` copied into ``output`` (a container whose header is
    not written yet), in step with the video the caller writes.

    Attributes:
        copied: the input's audio streams being copied, as ``{"index", "codec"}``.
        dropped: those that cannot be, as ``{"index", "codec", "why"}``.
    """

    def __init__(self, source: str, output: av.container.OutputContainer, suffix: str) -> None:
        self.copied: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []
        self._input = av.open(source)
        self._pairs: dict[int, Any] = {}
        allowed = CONTAINERS.get(suffix.lower(), frozenset())
        for stream in self._input.streams.audio:
            codec = stream.codec_context.name
            entry = {"index": stream.index, "codec": codec}
            if allowed is not None and codec not in allowed:
                why = f"a {suffix} file cannot hold {codec} as it is"
                self.dropped.append(entry | {"why": why})
                continue
            try:
                self._pairs[stream.index] = output.add_stream_from_template(stream)
            except (av.FFmpegError, ValueError) as exc:
                self.dropped.append(entry | {"why": f"cannot be copied: {exc}"})
                continue
            self.copied.append(entry)
        self._packets: Iterator[Any] = iter(())
        if self._pairs:
            self._packets = self._input.demux(*(self._input.streams[i] for i in self._pairs))
        self._held: Any = None  # a packet read past the time asked for
        self._origin = 0.0
        self._output = output

    def start(self, origin: float) -> None:
        """The video starts at ``origin`` seconds of the input: sound before it is left out."""
        self._origin = origin

    def until(self, seconds: float) -> None:
        """Mux the packets that start before ``seconds`` of the input (and at or after the
        origin), shifted to the output's clock."""
        while True:
            packet = self._held if self._held is not None else next(self._packets, None)
            self._held = None
            if packet is None:
                return
            if packet.pts is None or packet.dts is None or not packet.size:
                continue  # a demuxer's flush packet, or one without a time
            at = float(packet.pts * packet.time_base)
            if at >= seconds:
                self._held = packet
                return
            if at < self._origin - 1e-6:
                continue
            shift = round(self._origin / packet.time_base)
            packet.pts -= shift
            packet.dts -= shift
            packet.stream = self._pairs[packet.stream.index]
            self._output.mux(packet)

    def close(self) -> None:
        with contextlib.suppress(av.FFmpegError):
            self._input.close()
