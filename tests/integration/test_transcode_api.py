"""``hf.transcode``: what the ``transcode`` command does, called from Python: the same
frames as the command writes, the film's other streams carried and named in the report,
images out, and what cannot be done refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from films import FRAMES, write_film

import hyperframes as hf
from hyperframes.cli import main


@pytest.fixture(scope="module")
def film(tmp_path_factory) -> Path:
    return write_film(tmp_path_factory.mktemp("film") / "film.mkv", attachment=True)


def frames_of(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def streams_of(path: Path) -> list[str]:
    with av.open(str(path)) as container:
        return [s.type for s in container.streams]


def test_the_same_output_as_the_command_with_the_streams_named(film, tmp_path, capsys):
    report = hf.transcode(film, tmp_path / "api.mp4", source_options={"size": (64, 48)}, crf=18)
    assert main(["transcode", str(film), str(tmp_path / "cli.mp4"), "--size", "64x48",
                 "--crf", "18"]) == 0  # fmt: skip
    capsys.readouterr()
    assert report.frames == FRAMES
    np.testing.assert_array_equal(frames_of(tmp_path / "api.mp4"), frames_of(tmp_path / "cli.mp4"))
    assert streams_of(tmp_path / "api.mp4") == streams_of(tmp_path / "cli.mp4")
    streams = report.extra["streams"]
    assert [s["type"] for s in streams["copied"]] == ["audio", "audio"]
    assert [s["type"] for s in streams["dropped"]] == ["attachment"]  # an .mp4 holds none
    assert streams["warnings"] == [
        "not in the output: attachment font.ttf (stream 4: a .mp4 file holds no "
        "attachments; write .mkv to keep it)"
    ]


def test_a_filter_and_a_sampling_keep_the_sound_in_step(film, tmp_path):
    out = tmp_path / "negative.mkv"
    report = hf.transcode(film, out, np.bitwise_not, source_options={"step": 5}, codec="ffv1",
                          carry=hf.Carry(subtitles="none"))  # fmt: skip
    assert report.frames == FRAMES // 5 and report.stages[1].frames == FRAMES // 5
    assert streams_of(out).count("audio") == 2 and "subtitle" not in streams_of(out)
    plain = tmp_path / "plain.mkv"
    hf.transcode(film, plain, source_options={"step": 5}, codec="ffv1")
    np.testing.assert_array_equal(frames_of(out), 255 - frames_of(plain))


def test_images_out_hold_no_other_stream_and_say_so(film, tmp_path):
    report = hf.transcode(film, tmp_path / "frames" / "f_%03d.png", stop=6)
    assert sorted(p.name for p in (tmp_path / "frames").iterdir()) == [
        f"f_{k:03d}.png" for k in range(6)
    ]
    dropped = report.extra["streams"]["dropped"]
    assert {s["type"] for s in dropped} == {"audio", "subtitle", "attachment"}
    assert all(s["why"] == "the output is images, which hold no other streams" for s in dropped)


@pytest.mark.parametrize(
    ("output", "options", "message"),
    [
        ("film.mkv", {}, "the output is the input"),
        ("one.png", {}, "names one image"),
        ("out.mp4", {"source_options": {"sise": (64, 48)}}, "got \\['sise'\\]"),
        ("out.mp4", {"fn": np.bitwise_not, "chunks": 0}, "a function runs in one process"),
        ("out.mp4", {"loop": 2, "chunks": 0}, "cannot take loop"),
        ("out.mp4", {"source_options": {"fps": 2}, "chunks": 0}, "read in one process"),
        ("out.webm", {"carry": hf.Carry(audio_codec="aac")}, "cannot hold aac sound"),
        ("out.mp4", {"reuse": hf.ReuseTarget(0.9)}, "there is no fn"),
        ("out.mp4", {"source_options": {"rate": 24}, "chunks": 0}, "its own rate"),
    ],
)
def test_what_cannot_be_done_is_refused_before_anything_is_written(
    film, tmp_path, output, options, message
):
    fn = options.pop("fn", None)
    target = film.parent / output if output == "film.mkv" else tmp_path / output
    with pytest.raises(ValueError, match=message):
        hf.transcode(film, target, fn, **options)
    assert list(tmp_path.iterdir()) == []
