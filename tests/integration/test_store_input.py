"""A store named as ``map``'s input: its frames as stored give the rows the input it was
packed from gives, at its own times and at another size; what would choose other frames
is refused in one line with nothing written; a run killed part-way resumes to an
uninterrupted run's table; other commands say how a store is read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from _row_models import KILLABLE  # this folder's helper

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.store import StoreSink


@pytest.fixture
def here(tmp_path: Path, clip_path, monkeypatch) -> Path:
    """bikes (250 frames with hard cuts) packed lossless into ``bikes.hfs``, a 16-bit
    simulation's frames into ``sim.hfs``, and the function's module."""
    (tmp_path / "store_rows.py").write_text(KILLABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bikes.mp4").symlink_to(clip_path("bikes.mp4"))
    assert main(["pack", "bikes.mp4", "bikes.hfs"]) == 0
    rng = np.random.default_rng(4)
    y, x = np.mgrid[0:96, 0:128] / 96
    sim = np.stack([2048 + 800 * np.sin(6 * x - t / 7) * np.cos(4 * y) + rng.normal(0, 3, x.shape)
                    for t in range(40)]).astype(np.uint16)  # fmt: skip
    hf.Pipeline.from_frames(sim, batch_size=8).group().to(StoreSink(tmp_path / "sim.hfs")).run()
    np.save(tmp_path / "sim.npy", sim)
    return tmp_path


def table(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_a_store_gives_the_rows_its_input_gives(here: Path, capsys) -> None:
    assert main(["map", "bikes.hfs", "store_rows:brightness", "--out", "store.parquet"]) == 0
    assert main(["map", "bikes.mp4", "store_rows:brightness", "--out", "video.parquet"]) == 0
    stored, video = table(here / "store.parquet"), table(here / "video.parquet")
    assert len(stored) == 250 and stored == video  # frame, time and value, row for row
    assert (
        pq.read_schema(here / "store.parquet").metadata[b"hyperframes.time_base"]
        == (pq.read_schema(here / "video.parquet").metadata[b"hyperframes.time_base"])
    )
    for size in ("320x136", "333x100"):  # (half, and neither a whole part nor its aspect)
        sized = ["--size", size, "--overwrite"]
        assert main(["map", "bikes.hfs", "store_rows:brightness", "--out", "s.jsonl", *sized]) == 0
        assert main(["map", "bikes.mp4", "store_rows:brightness", "--out", "v.jsonl", *sized]) == 0
        assert (here / "s.jsonl").read_text() == (here / "v.jsonl").read_text()
    args = ["--start", "1.5s", "--stop", "4s"]
    assert main(["map", "bikes.hfs", "store_rows:brightness", "--out", "s2.jsonl", *args]) == 0
    assert main(["map", "bikes.mp4", "store_rows:brightness", "--out", "v2.jsonl", *args]) == 0
    assert (here / "s2.jsonl").read_text() == (here / "v2.jsonl").read_text()
    sim = np.load(here / "sim.npy")
    assert main(["map", "sim.hfs", "store_rows:brightness", "--out", "sim.parquet"]) == 0
    rows = table(here / "sim.parquet")
    assert [r["value"] for r in rows] == [round(float(f.mean()), 6) for f in sim]
    assert {r["time"] for r in rows} == {None}  # (arrays: no times, none made up)
    assert main(["map", "sim.hfs", "store_rows:brightness", "--out", "t.parquet", "--start", "1s"])
    assert "holds no timestamps and no frame rate" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "says"),
    [(["--every", "2"], "--every"), (["--fps", "2"], "--fps 2"),
     (["--rate", "10"], "a store has its own frame rate"), (["--chunks"], "drop --chunks")],
)  # fmt: skip
def test_what_would_change_a_stores_frames_is_refused_in_one_line(
    here: Path, capsys, given: list[str], says: str
) -> None:
    assert main(["map", "sim.hfs", "store_rows:brightness", "--out", "r.parquet", *given]) != 0
    err = capsys.readouterr().err.strip()
    assert says in err and "drop" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in here.iterdir() if p.name.startswith("r.")) == []


def test_a_killed_run_over_a_store_resumes_to_the_uninterrupted_table(here: Path) -> None:
    assert main(["map", "bikes.hfs", "store_rows:brightness", "--out", "whole.parquet"]) == 0
    argv = [sys.executable, "-c", "import sys, hyperframes.io.results as r; r.PART_ROWS = 16\n"
            "from hyperframes.cli import main; sys.exit(main(sys.argv[1:]))", "map",
            "bikes.hfs", "store_rows:dies", "--out", "cut.parquet",
            "--batch-size", "16"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(here), DIE_AT="120")  # (parts of 16 rows)
    killed = subprocess.run(argv, cwd=here, env=env, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL
    env.pop("DIE_AT")
    resumed = subprocess.run([*argv, "--resume", "--json"], cwd=here, env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert 0 < json.loads(resumed.stdout)["frames"] < 250  # (the rows kept are not redone)
    assert table(here / "cut.parquet") == table(here / "whole.parquet")


def test_other_commands_say_how_a_store_is_read(here: Path, capsys) -> None:
    for argv in (["transcode", "sim.hfs", "out.mkv"], ["analyze", "sim.hfs"]):
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert "is a hyperframes store" in err and "hyperframes map" in err and "unpack" in err
    assert not (here / "out.mkv").exists()
