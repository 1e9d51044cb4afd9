"""A film as users hold them, written with PyAV (no ffmpeg command needed): H.264 video
with two sound tracks, text subtitles, a title and chapters."""

from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

RATE, FRAMES = 25, 100  # four seconds
CUES = [(0.2, 0.9, "Hello there"), (1.0, 1.8, "Second line"), (2.5, 3.5, "Third line")]
TRACKS = ((440, 48000, "eng"), (660, 44100, "fra"))


def write_film(path: Path, *, attachment: bool = False) -> Path:
    """Four seconds of H.264 (a keyframe a second) with two AAC stereo tracks (English at
    48 kHz, French at 44.1 kHz), text subtitles, a title and two chapters."""
    text_codec = "subrip" if path.suffix == ".mkv" else "mov_text"
    with av.open(str(path), "w") as out:
        out.metadata["title"] = "A Film"
        video = out.add_stream("libx264", rate=RATE)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        video.codec_context.gop_size = RATE
        tracks = []
        for hz, rate, language in TRACKS:
            audio = out.add_stream("aac", rate=rate, layout="stereo")
            audio.metadata["language"] = language
            tracks.append((audio, hz, rate))
        subs = out.add_mux_stream(text_codec)
        subs.time_base, subs.metadata["language"] = Fraction(1, 1000), "eng"
        if attachment:
            out.add_attachment("font.ttf", "application/x-truetype-font", b"a font's bytes")
        for i in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 2, np.uint8), "rgb24")
            out.mux(video.encode(frame))
        out.mux(video.encode())
        for audio, hz, rate in tracks:
            for first in range(0, rate * FRAMES // RATE, 1024):
                wave = np.sin(np.arange(first, first + 1024) * 2 * np.pi * hz / rate) / 2
                chunk = av.AudioFrame.from_ndarray(
                    np.tile(wave.astype(np.float32), (2, 1)), format="fltp", layout="stereo"
                )
                chunk.sample_rate, chunk.pts, chunk.time_base = rate, first, Fraction(1, rate)
                out.mux(audio.encode(chunk))
            out.mux(audio.encode())
        for start, end, text in CUES:
            data = text.encode()
            packet = av.Packet(
                struct.pack(">H", len(data)) + data if text_codec == "mov_text" else data
            )
            packet.pts = packet.dts = round(start * 1000)
            packet.duration, packet.time_base = round((end - start) * 1000), Fraction(1, 1000)
            packet.stream = subs
            out.mux(packet)
        base = Fraction(1, 1000)
        out.set_chapters([
            {"id": k + 1, "start": 2000 * k, "end": 2000 * (k + 1), "time_base": base,
             "metadata": {"title": title}}
            for k, title in enumerate(("Opening", "Ending"))
        ])  # fmt: skip
    return path


def write_long_film(path: Path, seconds: int, *, rate: int = RATE) -> Path:
    """``seconds`` of tiny H.264 (16x16, a keyframe every 10 s) with an 8 kHz mono AAC tone:
    hours of input in a minute or two."""
    sample_rate = 8000
    wave = (np.sin(np.arange(sample_rate * 2) * 2 * np.pi * 440 / sample_rate) / 2).astype(
        np.float32
    )
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=rate)
        video.width = video.height = 16
        video.pix_fmt, video.options = "yuv420p", {"preset": "ultrafast"}
        video.codec_context.gop_size = 10 * rate
        audio = out.add_stream("aac", rate=sample_rate, layout="mono")
        frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), "rgb24")
        samples = 0
        for i in range(seconds * rate):
            frame.pts = i
            out.mux(video.encode(frame))
            while samples < (i + 1) * sample_rate // rate:
                at = samples % sample_rate
                chunk = av.AudioFrame.from_ndarray(
                    wave[None, at : at + 1024].copy(), "fltp", "mono"
                )
                chunk.sample_rate, chunk.pts = sample_rate, samples
                chunk.time_base = Fraction(1, sample_rate)
                samples += 1024
                out.mux(audio.encode(chunk))
        out.mux(video.encode())
        out.mux(audio.encode())
    return path
