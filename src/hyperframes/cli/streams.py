"""What goes along with the frames on the command line: the stream flags (``--audio``,
``--audio-codec``, ``--subtitles``), the :class:`~hyperframes.io.carry.Carry` they make,
and positions in time, each in the words of the command line."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from ..io.inputs import is_image_sequence, is_store
from ..io.positions import Seconds
from .common import UsageError


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
    from ..io.carry import Carry

    try:
        carry = Carry(**choices)
        carry.check(output)
    except ValueError as exc:
        raise UsageError(str(exc).replace("audio_codec", "--audio-codec")) from None
    return carry


def frame_range(
    path: str, start: int | Seconds, stop: int | Seconds | None, *, rate: str | None = None
) -> tuple[int, int | None]:
    """``--start``/``--stop`` as frame indices (:func:`~hyperframes.io.positions.frame_range`;
    an image sequence's at ``rate``, 25 unless given; a store's by its frames' times)."""
    from fractions import Fraction

    from ..errors import MediaError
    from ..io import positions
    from ..io.positions import DEFAULT_RATE

    every, times = None, None
    if is_store(path):
        from ..store.as_input import store_frame_times

        times = functools.partial(store_frame_times, path)
    elif rate is not None or is_image_sequence(path):
        every = Fraction(rate) if rate else DEFAULT_RATE
    try:
        return positions.frame_range(path, start, stop, rate=every, times=times)
    except MediaError as exc:
        raise UsageError(
            f"--start/--stop in seconds go by the frames' timestamps, which {path!r} cannot "
            f"give ({str(exc).split(': ', 1)[-1].split(';')[0]}); give frame indices instead"
        ) from None
    except ValueError as exc:
        raise UsageError(f"--{exc}") from None
