"""Sampling on the command line (issue 51): ``map --fps``, ``--at FILE``, ``--num-frames``
and ``--start``/``--stop`` in seconds give rows with the frames' true indices and times; a
killed sampled run resumes to the same file; a manifest's ``at`` column samples each input
at its own times; image sequences sample by their rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from hyperframes.cli import main
from hyperframes.io.results import resume_point

FUNCTIONS = """
import os, time

def level(frames):
    time.sleep(float(os.environ.get("SLOW", "0")))
    return frames.mean(axis=(1, 2, 3))
"""


@pytest.fixture
def work(tmp_path, monkeypatch):
    (tmp_path / "sampled_fns.py").write_text(FUNCTIONS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("sampled_fns", None)
    yield tmp_path
    sys.modules.pop("sampled_fns", None)


@pytest.fixture
def bikes(clip_path) -> Path:
    return clip_path("bikes.mp4")


def times_of(path: Path) -> list[Fraction]:
    with av.open(str(path)) as container:
        return [f.pts * f.time_base for f in container.decode(video=0)]


def played_at(times: list[Fraction], t: Fraction) -> int:
    return max(k for k, time in enumerate(times) if time <= t)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_fps_at_and_num_frames_rows_name_the_frames_and_their_times(work, bikes, capsys):
    times = times_of(bikes)
    base = ["map", str(bikes), "sampled_fns:level"]
    assert main([*base, "--out", "fps.jsonl", "--fps", "2.5"]) == 0
    expected = [played_at(times, Fraction(k, 1) / Fraction(5, 2)) for k in range(25)]
    got = rows(work / "fps.jsonl")
    assert [r["frame"] for r in got] == expected
    assert [r["time"] for r in got] == pytest.approx([float(times[n]) for n in expected])

    (work / "times.txt").write_text("# the annotator's times\n7.5\n0:01.25\n\n7.5s\n0.0\n")
    assert main([*base, "--out", "at.jsonl", "--at", "times.txt"]) == 0
    asked = [Fraction("7.5"), Fraction("1.25"), Fraction("7.5"), Fraction(0)]
    assert [r["frame"] for r in rows(work / "at.jsonl")] == [played_at(times, t) for t in asked]

    assert main([*base, "--out", "n.jsonl", "--num-frames", "5", "--start", "2s",
                 "--stop", "0:06"]) == 0  # fmt: skip
    assert [r["frame"] for r in rows(work / "n.jsonl")] == [50, 75, 100, 124, 149]
    assert "sampling 5 spread evenly" in capsys.readouterr().out


def test_sampling_mistakes_get_one_line(work, bikes, capsys):
    base = ["map", str(bikes), "sampled_fns:level", "--out", "bad.jsonl"]
    (work / "late.txt").write_text("1\n99\n")
    assert main([*base, "--at", "late.txt"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "time 99s is outside the video's frames" in err[0]
    (work / "junk.txt").write_text("1\nsoon\n")
    assert main([*base, "--at", "junk.txt"]) != 0
    assert "line 2: expected a time in seconds" in capsys.readouterr().err
    assert main([*base, "--at", "nowhere.txt"]) != 0
    assert "cannot be read" in capsys.readouterr().err
    assert main([*base, "--fps", "2", "--every", "3"]) == 2
    assert "--every and --fps each choose the frames" in capsys.readouterr().err
    assert not (work / "bad.jsonl").exists()


def _start(work: Path, argv: list[str]) -> subprocess.Popen:
    code = (
        "import sys, hyperframes.io.results as r; r.PART_ROWS = 8\n"
        "from hyperframes.cli import main\n"
        f"sys.exit(main({argv!r}))"
    )
    env = {**os.environ, "SLOW": "0.05", "PYTHONPATH": str(work)}
    return subprocess.Popen([sys.executable, "-c", code], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def _kill_once_written(process: subprocess.Popen, out: Path, least: int) -> None:
    """Kill the run once it kept rows up to sample ``least``."""
    deadline = time.monotonic() + 60
    while resume_point(out) < least:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    process.kill()
    process.wait(timeout=60)


@pytest.mark.parametrize("choice", [["--fps", "10"], ["--at", "times.txt"]])
def test_a_killed_sampled_run_resumes_to_an_equal_file(work, bikes, choice, capsys):
    rng = np.random.default_rng(51)
    (work / "times.txt").write_text("\n".join(f"{t:.3f}" for t in rng.uniform(0, 9.9, 90)))
    base = ["map", str(bikes), "sampled_fns:level", "--batch-size", "4", *choice]
    assert main([*base, "--out", "whole.jsonl"]) == 0
    out = work / "killed.jsonl"
    _kill_once_written(_start(work, [*base, "--out", str(out)]), out, 20)
    done = resume_point(out)
    assert 0 < done < len(rows(work / "whole.jsonl"))
    capsys.readouterr()
    assert main([*base, "--out", str(out), "--resume", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["frames"] == len(rows(work / "whole.jsonl")) - done
    assert out.read_bytes() == (work / "whole.jsonl").read_bytes()


def test_a_manifests_at_column_and_num_frames_over_many_inputs(work, bikes, clip_path):
    other = clip_path("carphone_pristine.mp4")
    manifest = work / "clips.jsonl"
    manifest.write_text(
        json.dumps({"path": str(bikes), "at": [3.0, 1.0], "label": "b"}) + "\n"
        + json.dumps({"path": str(other), "at": "0.5 0.25", "label": "c"}) + "\n"
    )  # fmt: skip
    assert main(["map", str(manifest), "sampled_fns:level", "--out", "many.jsonl",
                 "--size", "64x48"]) == 0  # fmt: skip
    got = rows(work / "many.jsonl")
    assert [(Path(r["path"]).name, r["label"], r["frame"]) for r in got] == [
        ("bikes.mp4", "b", played_at(times_of(bikes), Fraction(3))),
        ("bikes.mp4", "b", played_at(times_of(bikes), Fraction(1))),
        ("carphone_pristine.mp4", "c", played_at(times_of(other), Fraction(1, 2))),
        ("carphone_pristine.mp4", "c", played_at(times_of(other), Fraction(1, 4))),
    ]
    folder = work / "clips"
    folder.mkdir()
    for clip in (bikes, other):
        (folder / clip.name).symlink_to(clip)
    assert main(["map", str(folder), "sampled_fns:level", "--out", "three.jsonl",
                 "--size", "64x48", "--num-frames", "3"]) == 0  # fmt: skip
    frames = [(Path(r["path"]).name, r["frame"]) for r in rows(work / "three.jsonl")]
    count = len(times_of(other))
    middle = int(np.floor((count - 1) / 2 + 0.5))  # halves round up
    assert frames == [("bikes.mp4", 0), ("bikes.mp4", 125), ("bikes.mp4", 249),
                      (other.name, 0), (other.name, middle), (other.name, count - 1)]  # fmt: skip


def test_an_image_sequence_samples_by_its_rate(work):
    folder = work / "frames"
    folder.mkdir()
    for n in range(30):
        cv2.imwrite(str(folder / f"f_{n:03d}.png"), np.full((8, 8, 3), n * 8, np.uint8))
    assert main(["map", str(folder), "sampled_fns:level", "--out", "img.jsonl",
                 "--rate", "10", "--fps", "2"]) == 0  # fmt: skip
    got = rows(work / "img.jsonl")
    assert [r["frame"] for r in got] == [0, 5, 10, 15, 20, 25]
    assert [r["time"] for r in got] == pytest.approx([0, 0.5, 1.0, 1.5, 2.0, 2.5])
    assert [r["value"] for r in got] == pytest.approx([n * 8 for n in (0, 5, 10, 15, 20, 25)])


def test_a_killed_run_over_many_inputs_resumes_mid_file_where_frames_repeat(work, bikes):
    folder = work / "clips"
    folder.mkdir()
    for name in ("a.mp4", "b.mp4"):
        (folder / name).symlink_to(bikes)
    # 30 a second from 25: some frames come twice, so the resume goes by sample, not frame
    base = ["map", "clips", "sampled_fns:level", "--size", "64x48", "--fps", "30",
            "--batch-size", "4"]  # fmt: skip
    assert main([*base, "--out", "whole.jsonl"]) == 0
    out = work / "killed.jsonl"
    _kill_once_written(_start(work, [*base, "--out", str(out)]), out, 90)
    assert 90 <= resume_point(out) < 600
    assert main([*base, "--out", str(out), "--resume"]) == 0
    assert out.read_bytes() == (work / "whole.jsonl").read_bytes()


def shown(path: Path) -> tuple[list[float], list[float], int]:
    """An output's frame times, their mean levels, and how many sound tracks it has."""
    with av.open(str(path)) as container:
        tracks = len(container.streams.audio)
        frames = [(float(f.time), float(f.to_ndarray(format="gray").mean()))
                  for f in container.decode(video=0)]  # fmt: skip
    return [t for t, _ in frames], [m for _, m in frames], tracks


def test_transcode_fps_at_and_num_frames(work, make_film, capsys):
    film = make_film(work / "film.mp4")  # 4 s at 25 fps; frame i is level 2i; two tracks
    out = work / "out.mkv"
    base = ["transcode", str(film), str(out), "--codec", "ffv1", "--overwrite"]
    assert main([*base, "--fps", "10"]) == 0  # a constant 10 a second, the sound kept
    times, levels, tracks = shown(out)
    assert times == pytest.approx([k / 10 for k in range(40)], abs=1e-3) and tracks == 2
    assert levels == pytest.approx([2 * int(k * 2.5) for k in range(40)], abs=3)
    with av.open(str(out)) as container:
        assert round(float(container.streams.video[0].average_rate)) == 10
    assert main([*base, "--fps", "50"]) == 0  # faster than the input: each frame twice
    times, levels, _ = shown(out)
    assert len(times) == 200 and levels[0::2] == pytest.approx(levels[1::2])
    (work / "times.txt").write_text("3.0\n1.0\n1.0\n")
    capsys.readouterr()
    assert main([*base, "--at", "times.txt"]) == 0  # one after the other, no sound
    times, levels, tracks = shown(out)
    assert levels == pytest.approx([150, 50, 50], abs=3) and tracks == 0
    assert times == pytest.approx([0, 0.04, 0.08], abs=1e-3)
    assert "out of the input's time" in capsys.readouterr().out
    assert main([*base, "--num-frames", "5"]) == 0  # the input's own times, sound kept
    times, levels, tracks = shown(out)
    assert times == pytest.approx([0, 1.0, 2.0, 2.96, 3.96], abs=0.05) and tracks == 2


def test_pack_and_analyze_take_a_sampling(work, bikes, capsys):
    import hyperframes as hf

    store = work / "second.hfs"
    assert main(["pack", str(bikes), str(store), "--fps", "2", "--pix-fmt", "rgb24"]) == 0
    times = times_of(bikes)
    expected = [played_at(times, Fraction(k, 2)) for k in range(20)]
    with hf.FrameStore(store) as held:
        assert len(held) == 20  # numbered 0, 1, 2...: the samples, each the frame asked for
        reference = hf.VideoSource(bikes)
        frames = np.empty((250, *reference.spec.shape), np.uint8)
        reference.read_into(frames)
        for k in (0, 7, 19):
            assert np.array_equal(held[k], frames[expected[k]])
    assert main(["pack", str(bikes), str(store), "--fps", "2", "--resume"]) != 0
    assert "starts again: pass --overwrite" in capsys.readouterr().err
    capsys.readouterr()
    assert main(["analyze", str(bikes), "--keyframes", "--json", "--samples", "0"]) == 0
    keys = hf.VideoSource(bikes, keyframes=True).length
    assert json.loads(capsys.readouterr().out)["frames"] == keys
