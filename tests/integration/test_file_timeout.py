"""Inputs read in a reader process (``--file-timeout``, ``VideoFiles(file_timeout=)``): a
file that hangs is stopped and listed after the timeout, one whose reader crashes is
listed, the rest are read as in this process, and nothing is left behind.

The hanging file is a FIFO with no writer, named in a manifest: FFmpeg's open of it waits
forever, as a read from a stalled network mount does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _processes import Leftovers, marked  # this folder's helper

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.cli.many import PARTIAL
from hyperframes.io.inputs import expand as hf_expand
from shm_blocks import left_since, shm_names  # the suite's helper

FUNCTION = """
def brightness(frames):
    return [round(float(f.mean()), 6) for f in frames]
"""


@pytest.fixture
def folder(tmp_path: Path, clip_path, monkeypatch) -> Path:
    """``clips/`` with two real clips; the function's module beside it."""
    clips = tmp_path / "clips"
    clips.mkdir()
    shutil.copy(clip_path("bikes.mp4"), clips / "a_bikes.mp4")
    shutil.copy(clip_path("carphone_pristine.mp4"), clips / "c_carphone.mp4")
    (tmp_path / "brightness_fn.py").write_text(FUNCTION)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return clips


def test_a_hanging_file_is_stopped_listed_and_the_rest_written(folder: Path, tmp_path, capsys):
    left = Leftovers()
    reference = tmp_path / "reference.jsonl"
    argv = ["map", "clips.txt", "brightness_fn:brightness", "--size", "160x96"]
    (tmp_path / "clips.txt").write_text("clips/a_bikes.mp4\nclips/c_carphone.mp4\n")
    assert main([*argv, "--out", str(reference), "--file-timeout", "0"]) == 0
    capsys.readouterr()
    os.mkfifo(folder / "b_stalled.mp4")  # listed between the two clips
    (tmp_path / "clips.txt").write_text(
        "clips/a_bikes.mp4\nclips/b_stalled.mp4\nclips/c_carphone.mp4\n"
    )
    assert [i.name for i in hf_expand("clips")] == ["a_bikes.mp4", "c_carphone.mp4"]
    before = shm_names()
    out = tmp_path / "rows.jsonl"
    began = time.monotonic()
    assert main([*argv, "--out", str(out), "--file-timeout", "2", "--json"]) == PARTIAL
    took = time.monotonic() - began
    report = json.loads(capsys.readouterr().out)
    failures = [json.loads(line) for line in Path(report["failures"]).read_text().splitlines()]
    assert [Path(f["path"]).name for f in failures] == ["b_stalled.mp4"]
    assert "2 s" in failures[0]["reason"] and "file timeout" in failures[0]["reason"]
    assert out.read_text() == reference.read_text()  # every other row, as read here
    assert took < 30
    assert left() == []
    assert left_since(before) == set()


def test_a_reader_that_dies_fails_its_file_alone(tmp_path: Path, clip_path):
    left = Leftovers()
    paths = [str(clip_path("bikes.mp4")), str(clip_path("carphone_pristine.mp4"))]
    source = hf.VideoFiles(paths, size=(160, 96), file_timeout=30)
    before = shm_names()
    got: dict[int, int] = {}
    killed = False
    batches = hf.Pipeline.from_source(source, batch_size=8).iter_batches(meta=True)
    with pytest.warns(UserWarning, match=r"bikes.mp4' is left out \(the process reading"):
        for _, _, meta in batches:  # (the loop is told, by a warning, of the file it lost)
            for k in meta["input"]:
                got[int(k)] = got.get(int(k), 0) + 1
            if not killed:  # a crash in the decoder, as the parent sees it
                os.kill(source._reader._worker.pid, signal.SIGKILL)
                killed = True
    assert [f["path"] for f in source.failed] == [paths[0]]
    assert "killed by signal 9" in source.failed[0]["reason"]
    assert 0 < source.failed[0]["frames"] < 250
    assert got[1] == 120  # the next file, whole, in a fresh reader
    assert left() == []
    assert left_since(before) == set()


def test_files_read_in_a_reader_give_the_frames_read_here(clip_path):
    paths = [str(clip_path("bikes.mp4")), str(clip_path("carphone_pristine.mp4"))]

    def frames(**options) -> np.ndarray:
        source = hf.VideoFiles(paths, size=(160, 96), **options)
        batches = hf.Pipeline.from_source(source, batch_size=16).iter_batches()
        return np.concatenate([frames for _, frames in batches])

    here, there = frames(), frames(file_timeout=30)
    assert here.shape == (370, 96, 160, 3)
    np.testing.assert_array_equal(here, there)


def test_the_reader_decodes_straight_into_the_run_pool(clip_path):
    source = hf.VideoFiles([str(clip_path("bikes.mp4"))], size=(160, 96), file_timeout=30)
    report = hf.Pipeline.from_source(source).for_each(lambda *a: None).run()
    assert report.frames == 250
    assert source._reader.copies == 0  # the child decoded into the slots


def test_a_small_dev_shm_copies_each_batch_or_says_what_to_do(clip_path, monkeypatch):
    from hyperframes.executors import _shm

    real = _shm.shutil.disk_usage
    path = str(clip_path("bikes.mp4"))

    def run_with_free(mib: int) -> hf.VideoFiles:
        free = mib << 20
        monkeypatch.setattr(_shm.shutil, "disk_usage", lambda p: real(p)._replace(free=free))
        source = hf.VideoFiles([path], size=(160, 96), file_timeout=30)
        hf.Pipeline.from_source(source, batch_size=64).for_each(lambda *a: None).run()
        return source

    # the pool (5 slots of 64 frames, 14 MiB) does not fit: one batch (2.8 MiB) does
    assert run_with_free(8)._reader.copies == 5  # 4 batches and the empty read at the end
    with pytest.raises(
        MemoryError, match=r"reader process needs a batch of 3 MiB.*--file-timeout 0"
    ):
        run_with_free(2)


@pytest.mark.parametrize("given", ["-1", "soon", "inf"])
def test_a_bad_file_timeout_is_refused_in_one_line(given, folder: Path, capsys):
    argv = ["map", "clips", "brightness_fn:brightness", "--out", "r.jsonl"]
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--file-timeout", given])
    assert stop.value.code == 2
    assert "--file-timeout" in capsys.readouterr().err


@pytest.mark.parametrize("given", [0, -5, True])
def test_a_bad_file_timeout_is_refused_in_python(given, clip_path):
    with pytest.raises(ValueError, match="file_timeout must be seconds above 0"):
        hf.VideoFiles([str(clip_path("bikes.mp4"))], file_timeout=given)


def test_a_reader_stuck_on_a_file_ends_when_its_job_is_killed(folder: Path, tmp_path: Path):
    os.mkfifo(folder / "b_stalled.mp4")
    (tmp_path / "clips.txt").write_text("clips/b_stalled.mp4\nclips/a_bikes.mp4\n")
    mark = f"reader-kill-{os.getpid()}"
    env = os.environ | {"PYTHONPATH": str(tmp_path), "HF_TEST_MARK": mark}
    job = subprocess.Popen(
        [sys.executable, "-m", "hyperframes", "map", "clips.txt", "brightness_fn:brightness",
         "--out", "rows.jsonl", "--size", "160x96"],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(marked(mark)) < 3:  # the job, its fork server, the reader stuck on the FIFO
        assert job.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    job.kill()
    job.wait(timeout=30)
    deadline = time.monotonic() + 5
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked(mark) == []
