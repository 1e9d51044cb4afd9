"""The input's other streams written beside a video, on the video's clock: :class:`Carrier`.

The writer of the video (:class:`~.video_sink.VideoSink`, or the join of a chunked run)
makes a :class:`Carrier` on its output before the header is written, tells it where the
video starts in the input (:meth:`Carrier.start`) and, as the video advances, how far it
has come (:meth:`Carrier.until`); the carrier muxes the other streams' packets up to
there, so the muxer never holds more than a batch's worth of them, whatever the length.
:meth:`Carrier.finish` cuts them at the video's end and writes the chapters in range.

Copied packets keep their payload and are shifted as the video's timestamps are, so
sound and picture stay in step under a cut (to within one audio packet, about 21 ms of
AAC). Re-encoded sound is cut to the sample. Subtitle cues that overlap the start are
kept, shortened to start with the video.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import av
import av.container

from ..errors import MediaError
from .carry import STREAM_TAGS, Carry, Route, kept_tags, plan
from .sound import SoundEncoder
from .streams import other_streams
from .subtitles import payload, text_of

TS_NEGATIVE = 0x40000
"""FFmpeg's ``AVFMT_TS_NEGATIVE``: the container keeps times before zero (MP4, MOV, by an
edit list) and tells players to skip what is there."""


class Carrier:
    """The streams of ``source`` that ``carry`` asks for, carried into ``output`` (a
    container whose header is not written yet) beside its ``video`` stream.

    Attributes:
        routes: each of the input's other streams and what became of it (:func:`~.carry.plan`).
    """

    def __init__(
        self, carry: Carry, source: str, output: av.container.OutputContainer, suffix: str,
        video: Any = None,
    ) -> None:  # fmt: skip
        self._input = av.open(source)
        self._output, self._carry = output, carry
        first = self._input.streams.video[0] if self._input.streams.video else None
        chapters = self._input.chapters()
        self._chapters: list[Any] = chapters if carry.metadata else []
        streams = other_streams(self._input, first)
        supported = set(output.supported_codecs)
        self.routes = plan(streams, suffix, supported, carry, has_chapters=bool(chapters))
        self._tracks: dict[int, _Copy | SoundEncoder] = {}
        for i, route in enumerate(self.routes):
            try:
                self._add(route)
            except (av.FFmpegError, ValueError, KeyError) as exc:
                self.routes[i] = Route(
                    route.index, route.kind, route.codec, "drop",
                    why=f"cannot be carried: {exc}", language=route.language,
                )  # fmt: skip
        if carry.metadata:
            output.metadata.update(kept_tags(dict(self._input.metadata)))
            if first is not None and video is not None:
                _copy_tags(first, video)
        wanted = [self._input.streams[i] for i in self._tracks]
        self._packets: Iterator[Any] = self._input.demux(*wanted) if wanted else iter(())
        self._held: Any = None  # a packet read past the time asked for
        self._origin = 0.0

    def _add(self, route: Route) -> None:
        stream: Any = self._input.streams[route.index]
        if route.action == "attach":
            self._output.add_attachment(stream.name, stream.mimetype, bytes(stream.data))
            return
        if route.action == "copy":  # (its codec's parameters too: a mov_text style box)
            out = self._output.add_stream_from_template(stream)
        elif route.action == "convert":
            out = self._output.add_mux_stream(route.to or route.codec)
            out.time_base = stream.time_base
        elif route.action == "encode":
            assert route.to is not None
            self._tracks[route.index] = SoundEncoder(stream, self._output, route.to)
            _copy_tags(stream, self._tracks[route.index].out)
            return
        else:
            return
        _copy_tags(stream, out)
        convert = route.codec if route.action == "convert" else None
        negative = bool(self._output.format.flags & TS_NEGATIVE)
        self._tracks[route.index] = _Copy(out, convert, route.to, preroll=negative)

    def start(self, origin: float) -> None:
        """The video starts at ``origin`` seconds of the input: what is before it is left out."""
        self._origin = origin

    def until(self, seconds: float) -> None:
        """Mux what starts before ``seconds`` of the input (and ends after the origin),
        shifted to the output's clock.

        Raises:
            MediaError: a stream of the input cannot be read or re-encoded there.
        """
        try:
            while True:
                packet = self._held if self._held is not None else next(self._packets, None)
                self._held = None
                if packet is None:
                    break
                if packet.pts is None or not packet.size:
                    continue  # a demuxer's flush packet, or one without a time
                at = float(packet.pts * packet.time_base)
                if at >= seconds:
                    self._held = packet
                    break
                self._tracks[packet.stream.index].feed(packet, self._output, self._origin)
            for track in self._tracks.values():
                track.reach(seconds, self._output, self._origin)
        except av.FFmpegError as exc:
            raise MediaError(
                f"the input's sound or subtitles cannot be carried near {seconds:.3f} s "
                f"({exc}); pass --audio none and --subtitles none to leave them out"
            ) from exc

    def finish(self, end: float) -> None:
        """Mux what starts before ``end`` seconds of the input, cut there, and write the
        chapters that overlap the video."""
        self.until(end)
        for track in self._tracks.values():
            track.flush(self._output)
        chapters: list[Any] = [c for c in self._chapters if _seconds(c, "end") > self._origin]
        kept = []
        for number, c in enumerate(c for c in chapters if _seconds(c, "start") < end):
            base = c["time_base"]
            lo = max(c["start"], math.ceil(self._origin / base)) - round(self._origin / base)
            hi = min(c["end"], math.floor(end / base)) - round(self._origin / base)
            kept.append(c | {"id": number + 1, "start": max(0, lo), "end": max(lo, hi)})
        if kept:
            self._output.set_chapters(kept)
        self._chapters = kept

    def described(self) -> dict[str, Any]:
        """What was carried and how, for a report: ``copied``, ``encoded``, ``converted``,
        ``attached``, ``dropped`` (each a list of streams), ``chapters`` (how many)."""
        names = {"copy": "copied", "encode": "encoded", "convert": "converted",
                 "attach": "attached", "drop": "dropped"}  # fmt: skip
        out: dict[str, Any] = {}
        for route in self.routes:
            if route.action in names:
                out.setdefault(names[route.action], []).append(route.described())
        if self._chapters:
            out["chapters"] = len(self._chapters)
        return out

    def close(self) -> None:
        with contextlib.suppress(av.FFmpegError):
            self._input.close()


class _Copy:
    """Packets as they are (or a text subtitle's cue in another codec), shifted by the origin."""

    def __init__(self, out: Any, convert: str | None, to: str | None, preroll: bool) -> None:
        self.out, self.convert, self.to, self.preroll = out, convert, to, preroll
        self._preroll: Any = None  # the sound packet just before the video starts

    def feed(self, packet: Any, output: Any, origin: float) -> None:
        base = packet.time_base
        shift = round(origin / base)
        if packet.pts < shift:  # starts before the video: a cue that overlaps is shortened
            if packet.stream.type == "audio":
                self._preroll = packet if self.preroll else None
                return
            if not packet.duration or packet.pts + packet.duration <= shift:
                return
            if packet.stream.type != "subtitle":
                return
            packet.duration -= shift - packet.pts
            packet.dts = packet.pts = shift
        if self._preroll is not None:  # sound is decoded from the packet before (AAC's
            # overlap): it goes first, before zero, as an encoder's own delay does, where
            # the container can tell players to skip it (MP4 and MOV, by an edit list;
            # Matroska would play it, so there the first packet decodes without it)
            preroll, self._preroll = self._preroll, None
            self.feed_at(preroll, output, shift)
        if self.convert is not None:
            text = text_of(self.convert, bytes(packet))
            if not text.strip():  # mov_text's gaps between cues
                return
            new = av.Packet(payload(self.to or "subrip", text))
            new.pts, new.dts, new.duration, new.time_base = (
                packet.pts,
                packet.pts,
                packet.duration,
                base,
            )
            packet = new
        self.feed_at(packet, output, shift)

    def feed_at(self, packet: Any, output: Any, shift: int) -> None:
        packet.pts -= shift
        packet.dts = packet.pts if packet.dts is None else packet.dts - shift
        packet.stream = self.out
        output.mux(packet)

    def reach(self, seconds: float, output: Any, origin: float) -> None:
        """(Packets go out as they come: nothing is held.)"""

    def flush(self, output: Any) -> None:
        """(Nothing is held.)"""


def _copy_tags(source: Any, target: Any) -> None:
    for key in STREAM_TAGS:
        value = (source.metadata or {}).get(key)
        if value and value != "und":
            target.metadata[key] = value
    with contextlib.suppress(AttributeError, ValueError, TypeError):
        target.disposition = source.disposition


def _seconds(chapter: dict[str, Any], key: str) -> float:
    return float(chapter[key] * chapter["time_base"])
