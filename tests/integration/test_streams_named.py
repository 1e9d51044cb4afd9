"""Streams a transcode does not carry are named, never dropped in silence (issue 48's first
step): a film's sound and chapters are listed by ``info`` and named in the transcode's
report and warning line."""

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


def test_a_transcode_names_the_sound_it_does_not_carry(film, tmp_path, capsys):
    out = tmp_path / "out.mp4"
    assert main(["transcode", str(film), str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["type"] for s in report["extra"]["streams"]["dropped"]] == ["audio"]
    (warning,) = [w for w in report["warnings"] if "not carried" in w]
    assert "audio aac (eng)" in warning
    assert main(["transcode", str(film), str(tmp_path / "b.mp4")]) == 0
    assert "warning: streams: not carried to the output: audio aac" in capsys.readouterr().out


def test_a_video_alone_gets_no_warning(film, tmp_path, capsys):
    alone = tmp_path / "alone.mp4"
    assert main(["transcode", str(film), str(alone)]) == 0
    capsys.readouterr()
    assert main(["transcode", str(alone), str(tmp_path / "again.mp4"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "streams" not in report["extra"] and report["warnings"] == []
