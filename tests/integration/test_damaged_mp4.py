"""MP4 files cut short or missing their ``moov`` box say "truncated or damaged".

Cut inside the ``moov`` box (the index recorders write last), FFmpeg opens some such
files without error but finds no video stream, or a video stream with no codec: those
used to be reported as "has no video stream" (or as a raw ``AttributeError``).
"""

from __future__ import annotations

import struct
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes.cli import main
from hyperframes.errors import MediaError
from hyperframes.io.probe import iso_damage, probe
from hyperframes.io.video import VideoSource


def _mp4(path: Path, *, faststart: bool = False, frames: int = 30) -> Path:
    options = {"movflags": "faststart"} if faststart else {}
    rng = np.random.default_rng(0)
    with av.open(str(path), "w", options=options) as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        for i in range(frames):
            image = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def _boxes(data: bytes) -> dict[bytes, tuple[int, int]]:
    """Top-level box type -> (offset, size)."""
    found, offset = {}, 0
    while offset + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[offset : offset + 8])
        found[kind] = (offset, size)
        offset += size
    return found


@pytest.fixture
def mp4(tmp_path: Path) -> Path:
    """A whole mp4 with its moov box at the end, as a recorder writes it."""
    path = _mp4(tmp_path / "whole.mp4")
    boxes = _boxes(path.read_bytes())
    assert boxes[b"moov"][0] > boxes[b"mdat"][0]
    return path


def _says_damaged(path: Path) -> None:
    for opener in (VideoSource, probe):
        with pytest.raises(MediaError) as caught:
            opener(path)
        message = str(caught.value)
        assert "truncated or damaged" in message and "\n" not in message, message
        assert "no video stream" not in message
        assert "again" in message  # says what to do


def test_an_mp4_cut_to_40_percent_is_truncated(tmp_path, mp4):
    cut = tmp_path / "cut.mp4"
    data = mp4.read_bytes()
    cut.write_bytes(data[: len(data) * 4 // 10])
    _says_damaged(cut)


def test_an_mp4_without_its_moov_box_is_damaged(tmp_path, mp4):
    data = mp4.read_bytes()
    start, size = _boxes(data)[b"moov"]
    dropped = tmp_path / "no-moov.mp4"
    dropped.write_bytes(data[:start] + data[start + size :])
    _says_damaged(dropped)
    assert "moov" in (iso_damage(dropped) or "")


def test_every_cut_inside_the_moov_box_is_truncated_or_harmless(tmp_path, mp4):
    """A cut in the moov box says "truncated or damaged", at open or at the first read;
    only a cut in its trailing metadata, after the track index, leaves every frame."""
    data = mp4.read_bytes()
    start, size = _boxes(data)[b"moov"]
    cut = tmp_path / "cut.mp4"
    outcomes = set()
    for end in range(start + 1, start + size, max(1, size // 80)):
        cut.write_bytes(data[:end])
        try:
            source = VideoSource(cut)
            out = np.empty((64, *source.spec.shape), np.uint8)
            read = len(source.read_into(out))
            source.close()
        except MediaError as exc:
            message = str(exc)
            assert "truncated or damaged" in message, f"cut at byte {end}: {message}"
            assert "no video stream" not in message and "\n" not in message
            outcomes.add("damaged")
        else:
            assert read == 30, f"cut at byte {end} read {read} frames without an error"
            outcomes.add("whole")
    assert "damaged" in outcomes


def test_the_cli_says_truncated_in_one_line(tmp_path, mp4, capsys):
    data = mp4.read_bytes()
    start, size = _boxes(data)[b"moov"]
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: start + size // 3])
    assert main(["info", str(cut)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is truncated or damaged" in err[0], err


def test_an_audio_only_file_has_no_video_stream(tmp_path):
    path = tmp_path / "sound.m4a"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=44100)
        for i in range(8):
            samples = np.zeros((1, 1024), np.float32)
            frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 44100, i * 1024
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    with pytest.raises(MediaError, match=r"has no video stream \(only audio\)") as caught:
        VideoSource(path)
    assert "truncated" not in str(caught.value)


def test_a_text_file_is_not_called_an_mp4(tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n" * 100)
    assert iso_damage(text) is None
    with pytest.raises(MediaError, match="not a video"):
        VideoSource(text)


def test_a_faststart_mp4_cut_short_still_reads_what_is_there(tmp_path):
    data = _mp4(tmp_path / "fast.mp4", faststart=True).read_bytes()
    boxes = _boxes(data)
    assert boxes[b"moov"][0] < boxes[b"mdat"][0]
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) * 6 // 10])
    assert "mdat" in (iso_damage(cut) or "")
    source = VideoSource(cut, on_corrupt="skip")
    out = np.empty((64, *source.spec.shape), np.uint8)
    assert 5 < len(source.read_into(out)) < 30
    source.close()


def test_iso_damage_reads_64_bit_and_to_the_end_box_sizes(tmp_path):
    path = tmp_path / "boxes.mp4"
    ftyp = struct.pack(">I4s", 16, b"ftyp") + b"isom\0\0\0\0"
    moov = struct.pack(">I4sQ", 1, b"moov", 24) + b"\0" * 8  # 64-bit size
    mdat = struct.pack(">I4s", 0, b"mdat") + b"\0" * 40  # runs to the end of the file
    path.write_bytes(ftyp + moov + mdat)
    assert iso_damage(path) is None
    path.write_bytes(ftyp + struct.pack(">I4sQ", 1, b"moov", 4000) + b"\0" * 8)
    assert "'moov' box runs" in (iso_damage(path) or "")
    path.write_bytes(ftyp + struct.pack(">I4s", 1, b"moov") + b"\0\0")
    assert "cut off" in (iso_damage(path) or "")
