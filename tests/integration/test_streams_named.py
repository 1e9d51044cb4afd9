"""A film's sound goes through a transcode (issue 48's first step): ``info`` lists the
streams; ``transcode`` copies the audio as it is, in step with the frames kept, where the
output container takes its codec, and names in a warning line and in its report every
stream it does not carry, never dropping one in silence."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes.cli import main


@pytest.fixture
def film(tmp_path) -> Path:
    """Two seconds of H.264 video with an AAC stereo track, as films and lectures come."""
    path = tmp_path / "film.mp4"
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=25)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = out.add_stream("aac", rate=48000, layout="stereo")
        audio.metadata["language"] = "eng"
        for i in range(50):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 5, np.uint8), "rgb24")
            out.mux(video.encode(frame))
        samples = 0
        for _ in range(100):
            tone = np.sin(np.arange(samples, samples + 960) * 2 * np.pi * 440 / 48000)
            block = np.tile(tone.astype(np.float32), (2, 1))
            chunk = av.AudioFrame.from_ndarray(block, format="fltp", layout="stereo")
            chunk.sample_rate, chunk.pts, chunk.time_base = 48000, samples, Fraction(1, 48000)
            samples += 960
            out.mux(audio.encode(chunk))
        out.mux(video.encode())
        out.mux(audio.encode())
    return path


def test_info_lists_the_other_streams(film, capsys):
    assert main(["info", str(film), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    (sound,) = facts["streams"]
    assert (sound["type"], sound["codec"], sound["channels"]) == ("audio", "aac", 2)
    assert sound["language"] == "eng" and sound["rate"] == 48000


def samples(path: Path, start: float = 0.0, stop: float = 1e9) -> np.ndarray:
    """The decoded audio of ``path`` from ``start`` to ``stop`` seconds (by packet)."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        blocks = [
            frame.to_ndarray()
            for packet in container.demux(stream)
            if packet.pts is not None
            and start - 1e-6 <= float(packet.pts * packet.time_base) < stop
            for frame in packet.decode()
        ]
    return np.concatenate(blocks, axis=1)


def durations(path: Path) -> tuple[float, float]:
    """The seconds of video and of sound in ``path``, from their packets."""
    with av.open(str(path)) as container:
        ends = []
        for stream in (container.streams.video[0], container.streams.audio[0]):
            packets = [p for p in container.demux(stream) if p.pts is not None]
            first = min(p.pts for p in packets)
            last = max(p.pts + p.duration for p in packets)
            ends.append(float((last - first) * stream.time_base))
            container.seek(0)
    return ends[0], ends[1]


@pytest.mark.parametrize("suffix", [".mp4", ".mov", ".mkv"])
def test_a_transcode_copies_the_sound_in_step(film, tmp_path, suffix, capsys):
    out = tmp_path / f"out{suffix}"
    assert main(["transcode", str(film), str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["extra"]["streams"]["copied"] == [1] and report["warnings"] == []
    np.testing.assert_array_equal(samples(out), samples(film))  # copied, not re-encoded
    video, sound = durations(out)
    assert abs(video - sound) <= 1 / 25 + 0.03  # in step within a frame (and a packet)


def test_a_cut_keeps_the_sound_of_the_frames_kept(film, tmp_path):
    out = tmp_path / "cut.mkv"
    assert main(["transcode", str(film), str(out), "--start", "10", "--stop", "40"]) == 0
    video, sound = durations(out)
    assert abs(video - 1.2) < 0.01 and abs(sound - video) <= 1 / 25 + 0.03
    kept = samples(film, 0.4, 1.6)
    np.testing.assert_array_equal(samples(out), kept)


def test_a_stream_the_output_cannot_hold_is_named(film, tmp_path, capsys):
    out = tmp_path / "out.webm"
    assert main(["transcode", str(film), str(out), "--codec", "libvpx-vp9", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (warning,) = [w for w in report["warnings"] if "not in the output" in w]
    assert "audio aac (eng)" in warning and "cannot hold aac" in warning
    assert report["extra"]["streams"]["dropped"][0]["type"] == "audio"
    assert main(["transcode", str(film), str(tmp_path / "looped.mp4"), "--loop", "2"]) == 0
    assert "warning: streams: not in the output: audio aac" in capsys.readouterr().out


def test_a_video_alone_gets_no_warning(film, tmp_path, capsys):
    alone = tmp_path / "alone.mp4"
    assert main(["transcode", str(film), str(alone), "--loop", "2"]) == 0
    capsys.readouterr()
    assert main(["transcode", str(alone), str(tmp_path / "again.mp4"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "streams" not in report["extra"] and report["warnings"] == []


def test_a_filter_and_a_new_size_keep_the_sound(film, tmp_path, monkeypatch, capsys):
    (tmp_path / "invert.py").write_text("def invert(frames):\n    return 255 - frames\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "inverted.mp4"
    argv = ["transcode", str(film), str(out), "--map", "invert:invert", "--size", "32x24"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["extra"]["streams"]["copied"] == [1]
    np.testing.assert_array_equal(samples(out), samples(film))
