"""The job users come for: a function (or a model class) over a video, its answers kept in a
results file that a killed run resumes to the same rows; a filter between decode and
encode; a loop of the user's own over the batches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.executors._shm import SharedBlocks
from hyperframes.io.results import ResultsSink, parts_folder, resume_point

MODEL = """
import time
import numpy as np

SETUPS = []

def brightness(frames):
    time.sleep(float(__import__("os").environ.get("SLOW", "0")))
    return frames.mean(axis=(1, 2, 3))

def columns(frames):
    return {"mean": frames.mean(axis=(1, 2, 3)), "first": frames[:, 0, 0, 0]}

def boxes(frames):
    return [np.tile(f[:2, :2, 0].reshape(1, 4), (int(f[0, 0, 0]) % 3, 1)) for f in frames]

def level(frames):
    return (frames.mean(axis=(1, 2, 3)) // 32).astype(int)

def wrong(frames):
    return [1]

def negative(frames):
    return 255 - frames

class Model:
    def setup(self):
        SETUPS.append(1)
        self.scale = 2.0

    def __call__(self, frames):
        return frames.mean(axis=(1, 2, 3)) * self.scale
"""


@pytest.fixture
def model(tmp_path, monkeypatch):
    """A module of functions in the working folder, as a user has it."""
    (tmp_path / "mymodel.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mymodel", None)
    yield tmp_path
    sys.modules.pop("mymodel", None)


@pytest.fixture
def bikes(clip_path) -> Path:
    return clip_path("bikes.mp4")


def plain_loop(path: Path, fn, **source_options) -> list[dict]:
    """The rows a plain loop over the decoded frames gives."""
    source = hf.VideoSource(path, **source_options)
    rows = []
    with source:
        out = np.empty((16, *source.spec.shape), source.spec.dtype)
        while len(chunk := source.read_into(out)):
            for j, frame in enumerate(chunk.index.tolist()):
                value = fn(out[j : j + 1])[0]
                rows.append({"frame": frame, "time": float(chunk.meta["pts"][j]),
                             "value": float(value)})  # fmt: skip
    return rows


def read_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_results_equal_a_plain_loop_row_for_row(model, bikes, suffix, capsys):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = model / f"results{suffix}"
    assert main(["map", str(bikes), "mymodel:brightness", "--out", str(out),
                 "--workers", "2", "--json"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["frames"] == 250 and report["extra"]["sink"] == {
        "rows": 250,
        "time_base": "1/12800",
    }
    import mymodel

    expected = plain_loop(bikes, mymodel.brightness)
    assert read_rows(out) == expected
    assert not parts_folder(out).exists()


def test_every_k_start_stop_and_size(model, bikes, capsys):
    out = model / "some.jsonl"
    assert main(["map", str(bikes), "mymodel:brightness", "--out", str(out), "--every", "7",
                 "--start", "3", "--stop", "100", "--size", "64x32"]) == 0  # fmt: skip
    import mymodel

    rows = read_rows(out)
    assert [r["frame"] for r in rows] == list(range(3, 100, 7))
    expected = plain_loop(bikes, mymodel.brightness, start=3, stop=100, size=(64, 32), step=7)
    assert rows == expected


def test_columns_boxes_and_a_class_made_once_per_worker(model, bikes, capsys):
    pytest.importorskip("pyarrow")
    assert main(["map", str(bikes), "mymodel:columns", "--out", "c.parquet", "--stop", "40"]) == 0
    rows = read_rows(model / "c.parquet")
    assert set(rows[0]) == {"frame", "time", "mean", "first"} and len(rows) == 40
    assert main(["map", str(bikes), "mymodel:boxes", "--out", "b.parquet", "--stop", "40"]) == 0
    boxes = [r["value"] for r in read_rows(model / "b.parquet")]
    assert {len(b) for b in boxes} == {0, 1, 2} and all(len(box) == 4 for b in boxes for box in b)
    assert main(["map", str(bikes), "mymodel:Model", "--out", "m.jsonl", "--workers", "2",
                 "--stop", "64", "--batch-size", "8"]) == 0  # fmt: skip
    import mymodel

    assert 1 <= len(mymodel.SETUPS) <= 2  # once per worker thread, not per batch
    rows = read_rows(model / "m.jsonl")
    plain = plain_loop(bikes, mymodel.brightness, stop=64)
    assert [r["value"] for r in rows] == pytest.approx([2 * r["value"] for r in plain])


def test_reuse_rows_say_which_frame_was_computed(model, bikes, capsys):
    out = model / "reused.jsonl"
    assert main(["map", str(bikes), "mymodel:level", "--out", str(out),
                 "--reuse-target", "0.9", "--agree", "equal", "--json"]) == 0  # fmt: skip
    figures = json.loads(capsys.readouterr().out)["extra"]["map:level"]
    rows = read_rows(out)
    computed = [r for r in rows if r["computed"]]
    assert len(computed) == figures["calls"] < 250
    by_frame = {r["frame"]: r for r in rows}
    for row in rows:  # a shared answer is the computed answer of the frame it names
        source = by_frame[row["answer_of"]]
        assert source["computed"] and source["value"] == row["value"]


def test_a_function_that_answers_wrongly_gets_one_line(model, bikes, capsys):
    assert main(["map", str(bikes), "mymodel:wrong", "--out", "w.jsonl"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one answer per frame" in err[0]
    assert not (model / "w.jsonl").exists()
    assert main(["map", str(bikes), "mymodel:nothing", "--out", "w.jsonl"]) == 1
    assert "no function or class 'nothing'" in capsys.readouterr().err
    assert main(["map", str(bikes), "mymodel:brightness", "--out", "w.csv"]) == 1
    assert ".jsonl" in capsys.readouterr().err


def _start_map(model: Path, bikes: Path, out: Path, *extra: str) -> subprocess.Popen:
    code = (
        "import signal, sys, hyperframes.io.results as r; r.PART_ROWS = 16\n"
        # Ctrl-C as a terminal gives it, also when the tests run in a background job
        # (which starts children with SIGINT ignored)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from hyperframes.cli import main\n"
        f"sys.exit(main({['map', str(bikes), 'mymodel:brightness', '--out', str(out), *extra]!r}))"
    )
    env = {**os.environ, "SLOW": "0.05", "PYTHONPATH": str(model)}
    with open(model / "stderr.txt", "wb") as err:
        return subprocess.Popen([sys.executable, "-c", code], cwd=model, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip


def _wait_for_rows(out: Path, process: subprocess.Popen, least: int) -> None:
    deadline = time.monotonic() + 60
    while resume_point(out) < least:
        assert process.poll() is None, (out.parent / "stderr.txt").read_text()
        assert time.monotonic() < deadline, "no rows were written"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("signum", "least"),
    [(signal.SIGKILL, 16), (signal.SIGINT, 48), (signal.SIGTERM, 96), (signal.SIGKILL, 160)],
)
def test_a_killed_run_resumes_to_an_equal_file(model, bikes, signum, least, capsys):
    whole = model / "whole.jsonl"
    assert main(["map", str(bikes), "mymodel:brightness", "--out", str(whole),
                 "--batch-size", "8"]) == 0  # fmt: skip
    capsys.readouterr()
    out = model / "killed.jsonl"
    process = _start_map(model, bikes, out, "--batch-size", "8")
    _wait_for_rows(out, process, least)
    process.send_signal(signum)
    process.wait(timeout=60)
    assert process.returncode != 0
    done = resume_point(out)
    assert 0 < done < 250 and not out.exists()
    assert main(["map", str(bikes), "mymodel:brightness", "--out", str(out), "--resume",
                 "--batch-size", "8", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["frames"] == 250 - done
    assert out.read_bytes() == whole.read_bytes()
    assert not parts_folder(out).exists()


def test_a_resume_of_another_job_is_refused_naming_what_differs(model, bikes, clip_path, capsys):
    out = model / "r.jsonl"
    process = _start_map(model, bikes, out)
    _wait_for_rows(out, process, 16)
    process.kill()
    process.wait(timeout=60)
    done = resume_point(out)
    again = ["map", str(bikes), "mymodel:brightness", "--out", str(out), "--resume"]
    assert main([*again, "--every", "2"]) == 1
    assert "options" in capsys.readouterr().err
    assert main([*again, "--colour", "fast"]) == 1  # it began with FFmpeg's, the default
    assert "'colour': 'ffmpeg'" in capsys.readouterr().err  # (a job of 0.6: --colour fast)
    other = ["map", str(clip_path("carphone_pristine.mp4")), *again[2:]]
    assert main(other) == 1
    assert "input" in capsys.readouterr().err
    source = (model / "mymodel.py").read_text()
    (model / "mymodel.py").write_text(
        source.replace(
            "frames.mean(axis=(1, 2, 3))\n\ndef col", "frames.mean(axis=(1, 2, 3)) + 1\n\ndef col"
        )
    )
    sys.modules.pop("mymodel", None)
    assert main(again) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "function" in err[0] and "--overwrite" in err[0]
    assert resume_point(out) == done  # nothing was added or lost
    assert main(["map", str(bikes), "mymodel:brightness", "--out", str(out)]) == 1
    assert "--resume" in capsys.readouterr().err  # the parts are not thrown away silently


def test_two_runs_writing_one_results_file_are_refused(tmp_path):
    first = ResultsSink(tmp_path / "r.jsonl")
    second = ResultsSink(tmp_path / "r.jsonl")
    first.open(hf.FrameSpec((2, 2)), {})
    try:
        with pytest.raises(FileExistsError, match="another run is writing"):
            second.open(hf.FrameSpec((2, 2)), {})
    finally:
        first.close(ok=False)


def test_transcode_map_writes_exactly_what_the_function_returned(model, bikes, capsys):
    out = model / "negative.mkv"
    assert main(["transcode", str(bikes), str(out), "--map", "mymodel:negative",
                 "--codec", "ffv1", "--stop", "50", "--workers", "2"]) == 0  # fmt: skip
    frames = hf.Pipeline.from_source(hf.VideoSource(bikes, stop=50)).collect()
    with av.open(str(out)) as container:
        written = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert np.array_equal(written, 255 - frames)


def _hf_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("hf")}


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_iter_batches_stops_cleanly_on_break_and_on_an_error(bikes, executor, monkeypatch):
    before_threads = _hf_threads()
    made = []  # the shared memory these runs make (the machine's other processes make theirs)
    create = SharedBlocks.create

    def recorded(self, nbytes):
        buffer = create(self, nbytes)
        made.extend(name for name in self.created if name not in made)
        return buffer

    monkeypatch.setattr(SharedBlocks, "create", recorded)
    pipeline = hf.Pipeline.from_source(hf.VideoSource(bikes), batch_size=16).map(
        np.negative if executor == "threads" else np.invert, workers=2
    )
    seen = []
    batches = pipeline.iter_batches(executor=executor)
    for ids, frames in batches:
        seen.append(ids.copy())
        assert frames.shape[1:] == (272, 640, 3)
        if len(seen) == 3:
            break
    assert np.concatenate(seen).tolist() == list(range(48))
    with pytest.raises(ZeroDivisionError):
        for ids, _ in pipeline.iter_batches(executor=executor):
            if ids[0] >= 32:
                _ = 1 / 0
    assert _hf_threads() <= before_threads
    assert (executor == "processes") == bool(made)
    assert [name for name in made if os.path.exists(f"/dev/shm/{name}")] == []
    whole = pipeline.iter_batches(meta=True, executor=executor)
    count = sum(len(ids) for ids, _, meta in whole if "pts" in meta)
    assert count == 250 and whole.report.frames == 250


def _under(executor: str, model: Path, bikes: Path) -> None:
    common = ["map", str(bikes), "mymodel:Model", "--stop", "40", "--workers", "2"]
    assert main([*common, "--out", "threads.jsonl"]) == 0
    assert main([*common, "--out", f"{executor}.jsonl", "--executor", executor]) == 0
    assert read_rows(model / f"{executor}.jsonl") == read_rows(model / "threads.jsonl")


def test_map_under_processes_equals_threads(model, bikes, capsys):
    _under("processes", model, bikes)


@pytest.mark.ray
def test_map_under_ray_equals_threads(ray_cluster, model, bikes, capsys):
    _under("ray", model, bikes)  # the module in the working folder goes to Ray by value


@pytest.mark.ray
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_chunked_map_on_ray_equals_a_local_run(ray_cluster, model, bikes, suffix, capsys):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    common = ["map", str(bikes), "mymodel:boxes", "--size", "320x136"]
    assert main([*common, "--out", f"local{suffix}"]) == 0
    assert main([*common, "--out", f"chunks{suffix}", "--chunks", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["frames"] == 250 and report["extra"]["chunks"]["segments"] >= 2
    assert read_rows(model / f"chunks{suffix}") == read_rows(model / f"local{suffix}")
    assert not list(model.glob(".chunks*"))  # the segments folder went after the join
    assert main([*common, "--out", "x.jsonl", "--chunks", "--every", "2"]) == 2
    assert "--every" in capsys.readouterr().err
    # with a target, the segments' figures add up to the run's
    target = ["--reuse-target", "0.9", "--agree", "boxes", "--json"]
    assert main([*common, "--out", f"t{suffix}", "--chunks", "3", *target]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (figures,) = [f for f in report["extra"].values() if "target" in f]
    assert figures["frames"] == 250 == figures["calls"] + figures["reused"]
    assert figures["target"] == 0.9 and 0 < figures["agreement"] <= 1
    rows = read_rows(model / f"t{suffix}")
    assert sum(bool(row["computed"]) for row in rows) == figures["calls"]


def test_a_killed_run_of_every_kth_frame_resumes_on_the_same_grid(model, bikes, capsys):
    every = ["--every", "3", "--start", "2", "--batch-size", "8"]
    whole = model / "whole.jsonl"
    assert main(["map", str(bikes), "mymodel:brightness", "--out", str(whole), *every]) == 0
    out = model / "killed.jsonl"
    process = _start_map(model, bikes, out, *every)
    _wait_for_rows(out, process, 20)  # frames, not rows: the 7th sampled frame and on
    process.kill()
    process.wait(timeout=60)
    assert 20 <= resume_point(out) < 250
    again = ["map", str(bikes), "mymodel:brightness", "--out", str(out), "--resume", *every]
    assert main(again) == 0
    assert out.read_bytes() == whole.read_bytes()
    assert [json.loads(line)["frame"] for line in out.read_text().splitlines()] == list(
        range(2, 250, 3)
    )
