"""Sound re-encoded beside a video: :class:`SoundEncoder` decodes a stream's packets, cuts
the sound to the sample at the video's ends, resamples it where the encoder needs (Opus
takes 48 kHz and a few lower rates) and encodes it into the output, on the video's clock
(:class:`~.tracks.Carrier` feeds it)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import av
import numpy as np

from .carry import AUDIO_ENCODERS

OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


class SoundEncoder:
    """Sound decoded, cut to the sample at the video's ends, re-encoded."""

    def __init__(self, stream: Any, output: Any, codec: str) -> None:
        context = stream.codec_context
        rate = context.sample_rate
        encoder = AUDIO_ENCODERS[codec]
        if encoder == "libopus" and rate not in OPUS_RATES:
            rate = 48000
        formats = [f.name for f in av.Codec(encoder, "w").audio_formats or ()]
        wide = [f for f in ("s32", "s32p") if f in formats]  # float into integers: 24 bits
        fmt = context.format.name if context.format.name in formats else (wide or formats)[0]
        layout = context.layout.name
        self.out = output.add_stream(encoder, rate=rate, layout=layout)
        self.out.format = fmt
        self.rate, self.fmt, self.layout = rate, fmt, layout
        self._resampler: av.AudioResampler | None = None
        self._decoder, self._base = stream.codec_context, stream.time_base
        self._held: list[Any] = []  # decoded frames, past the video's last time
        self._next: int | None = None  # the next sample's pts in the output

    def feed(self, packet: Any, output: Any, origin: float) -> None:
        for frame in self._decoder.decode(packet):
            if frame.pts is not None:
                frame.time_base = frame.time_base or self._base
                self._held.append(frame)

    def reach(self, seconds: float, output: Any, origin: float) -> None:
        held, self._held = self._held, []
        for frame in held:
            kept = _cut(frame, origin, seconds)
            if kept is not None:
                self._encode(kept, output, origin)
            rest = _cut(frame, seconds, math.inf)
            if rest is not None:
                self._held.append(rest)

    def flush(self, output: Any) -> None:
        self._held = []
        if self._resampler is not None:
            for frame in self._resampler.resample(None):
                self._send(frame, output)
        output.mux(self.out.encode(None))

    def _encode(self, frame: Any, output: Any, origin: float) -> None:
        if self._resampler is None:
            if not self.out.codec_context.is_open:
                self.out.codec_context.open()
            size = self.out.codec_context.frame_size or None
            self._resampler = av.AudioResampler(self.fmt, self.layout, self.rate, frame_size=size)
            at = float(frame.pts * frame.time_base) - origin
            self._next = max(0, round(at * self.rate))
        for out in self._resampler.resample(frame):
            self._send(out, output)

    def _send(self, frame: Any, output: Any) -> None:
        assert self._next is not None
        frame.pts, frame.time_base = self._next, Fraction(1, self.rate)
        self._next += frame.samples
        output.mux(self.out.encode(frame))


def _cut(frame: Any, lo: float, hi: float) -> Any:
    """The samples of ``frame`` that play in ``[lo, hi)`` seconds, or ``None``."""
    at, rate, count = float(frame.pts * frame.time_base), frame.sample_rate, frame.samples
    first = max(0, math.ceil((lo - at) * rate - 1e-6))
    last = count if hi == math.inf else min(count, math.ceil((hi - at) * rate - 1e-6))
    if first >= last:
        return None
    if first == 0 and last == count:
        return frame
    data = frame.to_ndarray()
    channels = 1 if frame.format.is_planar else len(frame.layout.channels)
    part = np.ascontiguousarray(data[:, first * channels : last * channels])
    cut = av.AudioFrame.from_ndarray(part, format=frame.format.name, layout=frame.layout.name)
    cut.sample_rate, cut.time_base = rate, frame.time_base
    cut.pts = frame.pts + round(first / rate / frame.time_base)
    return cut
