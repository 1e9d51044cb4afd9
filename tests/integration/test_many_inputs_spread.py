"""Many inputs spread over processes and Ray nodes (issue 50): ``map INPUTS --executor
processes`` (or ``ray``) reads runs of whole inputs side by side, each in a process of its
own, and gives the table the one-process job gives, row for row; a file that cannot be
read or that hangs is listed as there; a killed job resumes with the runs it finished, and
leaves no process or shared memory behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from _processes import Leftovers, marked, reading  # this folder's helper

import hyperframes as hf
from hyperframes import Pipeline, ResultsSink
from hyperframes.chunked import run_files
from hyperframes.cli import main
from hyperframes.cli.many import PARTIAL
from shm_blocks import left_since, shm_names  # the suite's helper

FUNCTION = """
import os, time
def brightness(frames):
    time.sleep(float(os.environ.get("HF_TEST_SLEEP", "0")))
    return [round(float(f.mean()), 6) for f in frames]
def build(pipeline):
    return pipeline.map(brightness, into="value")
def fails_on_dark(frames):
    if any(float(f.mean()) < 70 for f in frames):  # bikes' frames 30-40 and 110-130
        raise RuntimeError("too dark to answer")
    return [1.0 for f in frames]
def bug(frames):
    return frames.no_such_thing
def fails_on_black(frames):
    if any(f.max() < 20 for f in frames):
        raise RuntimeError("nothing to see")
    return [float(f.mean()) for f in frames]
def answers_unless_told(frames):
    if os.path.exists("stop") and any(float(f.mean()) < 70 for f in frames):
        raise RuntimeError("told to stop")
    return [round(float(f.mean()), 6) for f in frames]
def build_black(pipeline):
    return pipeline.map(fails_on_black, into="value")
"""
SIZE = "96x64"


@pytest.fixture
def folder(tmp_path: Path, clip_path, monkeypatch) -> Path:
    """``clips/`` with twelve short real clips (two kinds), a damaged one among them; the
    function's module beside it."""
    clips = tmp_path / "clips"
    clips.mkdir()
    for k in range(6):
        shutil.copy(clip_path("bikes.mp4"), clips / f"{k:02d}_bikes.mp4")
        shutil.copy(clip_path("carphone_pristine.mp4"), clips / f"{k:02d}_carphone.mp4")
    damaged = clip_path("bikes.mp4").read_bytes()
    (clips / "03_damaged.mp4").write_bytes(damaged[: len(damaged) // 3])
    (tmp_path / "spread_fn.py").write_text(FUNCTION)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return clips


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["map", *argv, "--size", SIZE, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_side_by_side_gives_the_one_process_table_and_lists_the_same_failures(
    folder: Path, tmp_path: Path, capsys
):
    left = Leftovers()
    before = shm_names()
    code, here = run(capsys, "clips", "spread_fn:brightness", "--out", "here.parquet")
    assert code == PARTIAL
    code, spread = run(capsys, "clips", "spread_fn:brightness", "--out", "spread.parquet",
                       "--executor", "processes", "--workers", "2")  # fmt: skip
    assert code == PARTIAL
    assert pq.read_table("spread.parquet").equals(pq.read_table("here.parquet"))
    assert len(pq.read_table("spread.parquet")) == 6 * (250 + 120)
    failed = [json.loads(line) for line in Path(spread["failures"]).read_text().splitlines()]
    assert failed == [json.loads(line) for line in Path(here["failures"]).read_text().splitlines()]
    assert [Path(f["path"]).name for f in failed] == ["03_damaged.mp4"]
    chunks = spread["extra"]["chunks"]
    assert chunks["segments"] >= 4 and chunks["segments_done"] == chunks["segments"]
    assert not (tmp_path / ".spread.parquet.segments").exists()  # removed after the join
    again = ["map", "clips", "spread_fn:brightness", "--out", "spread.parquet", "--size", SIZE,
             "--executor", "processes", "--resume"]  # fmt: skip
    assert main(again) == 0  # the table records its job, as one process's does
    assert "nothing to resume" in capsys.readouterr().out
    assert left() == []
    assert left_since(before) == set()


def test_a_hanging_file_is_listed_and_the_rest_written(folder: Path, tmp_path: Path, capsys):
    left = Leftovers()
    os.mkfifo(folder / "02_stalled.mp4")
    names = sorted(f"clips/{p.name}" for p in folder.iterdir() if "damaged" not in p.name)
    (tmp_path / "clips.txt").write_text("\n".join(names) + "\n")
    began = time.monotonic()
    code, report = run(capsys, "clips.txt", "spread_fn:brightness", "--out", "rows.parquet",
                       "--executor", "processes", "--file-timeout", "2")  # fmt: skip
    assert code == PARTIAL and time.monotonic() - began < 60
    failed = [json.loads(line) for line in Path(report["failures"]).read_text().splitlines()]
    assert [Path(f["path"]).name for f in failed] == ["02_stalled.mp4"]
    assert "file timeout" in failed[0]["reason"]
    assert len(pq.read_table("rows.parquet")) == 6 * (250 + 120)
    assert left() == []


def test_a_file_the_function_fails_on_is_listed_with_its_rows_before_as_one_process_does(
    folder: Path, capsys
):
    left = Leftovers()
    tables, lists = [], []
    ways = (("here", ["--batch-size", "8"]),
            ("spread", ["--executor", "processes", "--batch-size", "32"]))  # fmt: skip
    for name, extra in ways:  # what a failed file keeps does not depend on the batches
        code, report = run(capsys, "clips", "spread_fn:fails_on_dark", "--out",
                           f"{name}.parquet", *extra)  # fmt: skip
        assert code == PARTIAL
        tables.append(pq.read_table(f"{name}.parquet"))
        lists.append([json.loads(x) for x in Path(report["failures"]).read_text().splitlines()])
    assert tables[1].equals(tables[0]) and lists[1] == lists[0]
    rows: dict[str, int] = {}
    for path in tables[0].column("path").to_pylist():
        rows[Path(path).name] = rows.get(Path(path).name, 0) + 1
    assert all(rows[f"{k:02d}_carphone.mp4"] == 120 for k in range(6))
    failed = {Path(f["path"]).name: f for f in lists[0]}
    assert sorted(failed) == sorted([f"{k:02d}_bikes.mp4" for k in range(6)] + ["03_damaged.mp4"])
    width, height = (int(x) for x in SIZE.split("x"))
    means = [f.mean() for f in hf.VideoSource(folder / "00_bikes.mp4", size=(width, height))]
    dark = next(i for i, m in enumerate(means) if m < 70)
    for k in range(6):  # the rows before the first frame it fails on kept, none after
        bikes = failed[f"{k:02d}_bikes.mp4"]
        assert bikes["frames"] == rows[f"{k:02d}_bikes.mp4"] == dark
        assert f"failed at frame {dark}: RuntimeError: too dark" in bikes["reason"]
    assert left() == []


def test_a_function_that_fails_on_every_file_stops_the_job_in_one_line(folder: Path, capsys):
    left = Leftovers()
    lines = []
    for extra in ([], ["--executor", "processes"]):
        code = main(["map", "clips", "spread_fn:bug", "--out", "rows.parquet",
                     "--size", SIZE, *extra])  # fmt: skip
        assert code == 1 and not Path("rows.parquet").exists()
        lines.append([x for x in capsys.readouterr().err.splitlines() if x.strip()])
    assert [len(found) for found in lines] == [1, 1]
    assert all("no_such_thing" in found[0] for found in lines)
    assert all("first 3 inputs and answered no frame" in found[0] for found in lines)
    assert "segment 0 (inputs 0-" in lines[1][0]  # which inputs' run it was
    assert left() == []


def test_only_the_jobs_first_inputs_count_towards_a_fault_in_the_function(
    folder: Path, tmp_path: Path, clip_path, make_video
):
    """The function fails on every frame of the last three inputs, which begin the second
    run side by side: they are listed as one process lists them; the job goes on."""
    from spread_fn import build_black as build

    dark = np.zeros((20, 64, 96, 3), np.uint8)
    paths = [shutil.copy(clip_path("carphone_pristine.mp4"), f"a{k}.mp4") for k in range(3)]
    paths += [str(make_video(tmp_path / f"b{k}.mp4", dark)) for k in range(3)]
    options = {"size": (96, 64)}
    whole = Pipeline.from_source(hf.VideoFiles(paths, on_failed=lambda f: None, **options))
    build(whole).to(ResultsSink("here.parquet", values=["value"])).run()
    report = run_files(paths, "spread.parquet", build, executor="processes", workers=2,
                       segments=2, source_options=options)  # fmt: skip
    assert [Path(f["path"]).name for f in report.extra["source"]["failed"]] == [
        "b0.mp4", "b1.mp4", "b2.mp4"]  # fmt: skip
    assert pq.read_table("spread.parquet").equals(pq.read_table("here.parquet"))
    assert len(pq.read_table("here.parquet")) == 3 * 120
    failed: list[dict] = []  # a job resumed at them: they are not the job's first either
    resumed = hf.VideoFiles(paths, on_failed=failed.append, **options)
    resumed.resume_after(3, -1, 360)
    assert build(Pipeline.from_source(resumed)).to(hf.ResultsSink("more.jsonl")).run().frames == 0
    assert [Path(f["path"]).name for f in failed] == ["b0.mp4", "b1.mp4", "b2.mp4"]


def test_fail_fast_stops_the_job_in_one_line(folder: Path, capsys):
    left = Leftovers()
    code = main(["map", "clips", "spread_fn:brightness", "--out", "rows.parquet", "--size",
                 SIZE, "--executor", "processes", "--fail-fast"])  # fmt: skip
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code not in (0, PARTIAL) and not Path("rows.parquet").exists()
    assert len(err) == 1 and "03_damaged.mp4" in err[0], err
    assert left() == []


def test_inputs_of_several_sizes_give_the_one_process_table_side_by_side(
    folder: Path, tmp_path: Path, capsys
):
    """bikes are 640x272, carphone 176x144: each read at its own size, in one process and
    over two, the same table."""
    tables = []
    for k, extra in enumerate([[], ["--executor", "processes", "--workers", "2"]]):
        argv = ["map", "clips", "spread_fn:brightness", "--out", f"rows{k}.parquet", *extra]
        assert main(argv) == PARTIAL  # (the damaged one)
        tables.append(pq.read_table(f"rows{k}.parquet"))
    assert tables[0].equals(tables[1]) and len(tables[0]) == 6 * (250 + 120)
    capsys.readouterr()


def test_a_stopped_job_resumes_and_takes_the_inputs_added_since_after_the_others(
    folder: Path, tmp_path: Path, clip_path, capsys
):
    for path in folder.iterdir():  # six carphones, then one bikes in the last run
        if "carphone" not in path.name:
            path.unlink()
    shutil.copy(clip_path("bikes.mp4"), folder / "zz_bikes.mp4")
    spread = ["--size", SIZE, "--executor", "processes", "--workers", "2"]
    (tmp_path / "stop").touch()  # the function fails on bikes' dark frames while it is there
    job = ["map", "clips", "spread_fn:answers_unless_told", "--out", "rows.parquet", *spread]
    assert main([*job, "--fail-fast"]) == 1 and not Path("rows.parquet").exists()
    (tmp_path / "stop").unlink()
    shutil.copy(clip_path("carphone_pristine.mp4"), folder / "02b_carphone.mp4")
    capsys.readouterr()
    assert main([*job, "--resume"]) == 1  # not without --add-new
    assert "1 added (02b_carphone.mp4)" in capsys.readouterr().err
    assert main([*job, "--resume", "--add-new", "--size", "64x48"]) == 1  # other frames
    assert "the reading options), so there is nothing to resume" in capsys.readouterr().err
    assert list(Path(".rows.parquet.segments").glob("segment-*.json"))  # runs kept
    code, report = run(capsys, *job[1:], "--resume", "--add-new")
    assert code == 0 and report["extra"]["chunks"]["reused"] >= 1
    assert main(["map", "clips", "spread_fn:answers_unless_told", "--out", "whole.parquet",
                 "--size", SIZE]) == 0  # fmt: skip
    rows, whole = pq.read_table("rows.parquet"), pq.read_table("whole.parquet")
    names = [Path(p).name for p in dict.fromkeys(rows.column("path").to_pylist())]
    assert names[-1] == "02b_carphone.mp4" and names[:-1] == sorted(names[:-1])
    assert sorted(names) == [Path(p).name for p in dict.fromkeys(whole.column("path").to_pylist())]
    assert sorted(rows.to_pylist(), key=str) == sorted(whole.to_pylist(), key=str)


def test_a_window_is_refused_before_any_work(folder: Path):
    with pytest.raises(ValueError, match="window"):
        run_files("clips", "rows.parquet", lambda p: p.map(lambda f: f, window=(1, 1)),
                  executor="processes", source_options={"size": (96, 64)})  # fmt: skip


@pytest.mark.parametrize(
    "how", [signal.SIGKILL, pytest.param(signal.SIGINT, marks=pytest.mark.slow)]
)
def test_a_killed_job_leaves_nothing_and_resumes_to_the_same_table(
    how: signal.Signals, folder: Path, tmp_path: Path, capsys
):
    code, _ = run(capsys, "clips", "spread_fn:brightness", "--out", "whole.parquet")
    assert code == PARTIAL
    before = shm_names()
    argv = [sys.executable, "-m", "hyperframes", "map", "clips", "spread_fn:brightness",
            "--out", "rows.parquet", "--size", SIZE, "--executor", "processes",
            "--batch-size", "8", "--json"]  # fmt: skip
    mark = f"spread-{os.getpid()}-{how}"
    env = os.environ | {"PYTHONPATH": str(tmp_path), "HF_TEST_SLEEP": "0.05", "HF_TEST_MARK": mark}
    job = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    segments = tmp_path / ".rows.parquet.segments"
    deadline = time.monotonic() + 60
    while len(list(segments.glob("segment-*.parquet.json"))) < 2:  # two runs finished
        assert job.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    assert len(marked(mark)) >= 4  # the job, its fork server, two workers (and readers)
    job.send_signal(how)
    job.communicate(timeout=30)
    assert job.returncode != 0
    deadline = time.monotonic() + 5  # (the processes it started end themselves)
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked(mark) == []
    assert not Path("rows.parquet").exists()
    kept = len(list(segments.glob("segment-*.parquet.json")))
    assert kept >= 2
    done = subprocess.run([*argv, "--resume"], env=env | {"HF_TEST_SLEEP": "0"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == PARTIAL, done.stderr
    report = json.loads(done.stdout)
    chunks = report["extra"]["chunks"]
    assert chunks["reused"] == kept and 0 < chunks["reused_inputs"] < 13
    assert report["frames"] + chunks["reused_frames"] == 6 * (250 + 120)  # made, kept
    assert pq.read_table("rows.parquet").equals(pq.read_table("whole.parquet"))
    failed = [json.loads(line) for line in Path(report["failures"]).read_text().splitlines()]
    assert [Path(f["path"]).name for f in failed] == ["03_damaged.mp4"]  # (a kept run's)
    assert left_since(before) == set()


@pytest.mark.ray
def test_ray_spreads_the_runs_over_the_nodes_and_gives_the_same_table(
    idle_cluster, folder: Path, capsys
):
    code, _ = run(capsys, "clips", "spread_fn:brightness", "--out", "here.parquet")
    assert code == PARTIAL
    code, report = run(capsys, "clips", "spread_fn:brightness", "--out", "ray.parquet",
                       "--executor", "ray")  # fmt: skip
    assert code == PARTIAL
    assert pq.read_table("ray.parquet").equals(pq.read_table("here.parquet"))
    assert report["extra"]["chunks"]["nodes"] == 2
    assert [Path(f["path"]).name for f in report["extra"]["source"]["failed"]] == ["03_damaged.mp4"]


def test_the_api_takes_a_list_and_reports_what_failed(folder: Path):
    paths = sorted(str(p) for p in folder.iterdir())

    from spread_fn import build

    report = run_files(paths, "rows.jsonl", build, executor="processes", workers=2,
                       source_options={"size": (96, 64)})  # fmt: skip
    assert report.frames == 6 * (250 + 120)
    assert [Path(f["path"]).name for f in report.extra["source"]["failed"]] == ["03_damaged.mp4"]
    rows = [json.loads(line) for line in Path("rows.jsonl").read_text().splitlines()]
    assert [r["path"] for r in rows[:1]] == [paths[0]] and len(rows) == report.frames


def test_a_process_that_dies_in_a_read_fails_that_file_alone(
    folder: Path, tmp_path: Path, clip_path, capsys
):
    left = Leftovers()
    fifo = folder / "02_cut.mp4"
    os.mkfifo(fifo)
    (tmp_path / "clips.txt").write_text(
        "clips/00_bikes.mp4\nclips/02_cut.mp4\nclips/04_bikes.mp4\n"
    )
    head = clip_path("bikes.mp4").read_bytes()[:100_000]

    def feed_then_kill_the_reader() -> None:  # a crash in the decoder, as the job sees it
        with open(fifo, "wb") as writer:
            writer.write(head)
            writer.flush()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                holders = [p for p in reading(fifo) if p != os.getpid()]
                if holders:
                    os.kill(holders[0], signal.SIGKILL)
                    return
                time.sleep(0.05)

    killer = threading.Thread(target=feed_then_kill_the_reader)
    killer.start()
    code, report = run(capsys, "clips.txt", "spread_fn:brightness", "--out", "rows.parquet",
                       "--executor", "processes", "--file-timeout", "60")  # fmt: skip
    killer.join()
    assert code == PARTIAL
    failed = [json.loads(line) for line in Path(report["failures"]).read_text().splitlines()]
    assert [Path(f["path"]).name for f in failed] == ["02_cut.mp4"]
    assert "killed by signal 9" in failed[0]["reason"]
    assert len(pq.read_table("rows.parquet")) == 2 * 250  # the other two, whole
    assert left() == []
