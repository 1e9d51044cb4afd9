"""What goes along with the frames on the command line: the stream flags (``--audio``,
``--audio-codec``, ``--subtitles``), the :class:`~hyperframes.io.carry.Carry` they make,
positions in time, and the report of what became of each stream."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..io.inputs import is_image_sequence
from ..io.positions import Seconds
from .common import UsageError

if TYPE_CHECKING:
    from .. import RunReport


def add_stream_options(p: argparse.ArgumentParser) -> None:
    """What goes along with the frames: the input's sound and subtitles."""
    p.add_argument(
        "--audio",
        choices=("keep", "none"),
        default="keep",
        help="the input's sound: keep it (the default) or leave it out",
    )
    p.add_argument(
        "--audio-codec",
        default=None,
        metavar="CODEC",
        help="re-encode the sound into aac, opus, flac, mp3, vorbis, alac or "
        "pcm_s16le (default: copied as it is where the container takes it, else "
        "AAC for MP4/MOV and Opus for WebM/MKV)",
    )
    p.add_argument(
        "--subtitles",
        choices=("keep", "none"),
        default="keep",
        help="the input's subtitles: keep them (converted where the container "
        "needs it) or leave them out",
    )


def carry_of(output: str, **choices: Any) -> Any:
    """The :class:`~hyperframes.io.carry.Carry` of ``choices``, checked against the
    ``output``'s container before any work."""
    from ..io.carry import Carry, container_codecs

    try:
        carry = Carry(**choices)
        suffix = Path(output).suffix.lower()
        supported = container_codecs(suffix)
        if supported is not None:  # (else the sink names the unknown container)
            carry.check(suffix, supported)
    except ValueError as exc:
        raise UsageError(str(exc).replace("audio_codec", "--audio-codec")) from None
    return carry


def frame_range(
    path: str, start: int | Seconds, stop: int | Seconds | None, *, rate: str | None = None
) -> tuple[int, int | None]:
    """``--start``/``--stop`` as frame indices (:func:`~hyperframes.io.positions.frame_range`;
    an image sequence's at ``rate``, 25 unless given)."""
    from fractions import Fraction

    from ..errors import MediaError
    from ..io import positions
    from ..io.positions import DEFAULT_RATE

    every = None
    if rate is not None or is_image_sequence(path):
        every = Fraction(rate) if rate else DEFAULT_RATE
    try:
        return positions.frame_range(path, start, stop, rate=every)
    except MediaError as exc:
        raise UsageError(
            f"--start/--stop in seconds go by the frames' timestamps, which {path!r} cannot "
            f"give ({str(exc).split(': ', 1)[-1].split(';')[0]}); give frame indices instead"
        ) from None
    except ValueError as exc:
        raise UsageError(f"--{exc}") from None


def not_carried(
    report: RunReport, extra: dict[str, Any], facts: dict[str, Any], *, dropped: str = ""
) -> tuple[RunReport, dict[str, Any]]:
    """Say what became of the input's other streams (copied, re-encoded, converted,
    attached, dropped, with why) and of its chapters: ``report.extra["streams"]``, and a
    warning line for what the output lacks, never silence. ``dropped``: why none of them
    could go along (``--loop``, an output of images)."""
    if dropped:
        others = [s for s in facts.get("streams", []) if not s.get("discarded")]
        report.extra["streams"] = {"dropped": [s | {"why": dropped} for s in others]}
        if facts.get("chapters"):
            report.extra["streams"]["chapters_dropped"] = facts["chapters"]
    return streams_report(report), extra


def streams_report(report: RunReport) -> RunReport:
    """``report.extra["streams"]``: what became of the other streams (from the sink's
    notes, or a chunked run's join), with a warning line naming what the output lacks."""
    sink = report.extra.get("sink", {})
    streams = sink.pop("streams", None) or report.extra.pop("streams", {})
    if "sink" in report.extra and not sink:
        report.extra.pop("sink")
    dropped = [_named(s) for s in streams.get("dropped", [])]
    if streams.get("chapters_dropped"):
        dropped.append(f"{streams['chapters_dropped']} chapters")
    if dropped:
        streams["warnings"] = [f"not in the output: {', '.join(dropped)}"]
    if streams:
        report.extra["streams"] = streams
    return report


def _named(stream: dict[str, Any]) -> str:
    from ..io.streams import label

    return f"{label(stream)} (stream {stream['index']}: {stream['why']})"
