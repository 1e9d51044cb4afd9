"""A folder of stores (what ``pack INPUTS OUTDIR`` makes) as the input of a job over many:
each store read as ``map STORE`` reads it, the table the videos they were packed from
give (in one process, side by side, read here, at another size), by a folder, a glob, a
manifest or beside videos; a killed job resumes to the uninterrupted table; a damaged
store is listed and the others written; what would choose frames of a store is refused
in one line; ``info`` lists the stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from _row_models import KILLABLE  # this folder's helper

from hyperframes.cli import main
from hyperframes.cli.many import PARTIAL

FN = "stores_rows:brightness"


@pytest.fixture
def here(tmp_path: Path, clip_path, monkeypatch) -> Path:
    """``clips/`` (bikes, carphone) packed into ``stores/`` (a store each), and the
    function's module."""
    (tmp_path / "stores_rows.py").write_text(KILLABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clips").mkdir()
    for name in ("bikes.mp4", "carphone_pristine.mp4"):
        (tmp_path / "clips" / name).symlink_to(clip_path(name))
    assert main(["pack", "clips", "stores"]) == 0
    return tmp_path


def rows(path: str, *, paths: bool = False) -> list[dict]:
    """The table's rows, without their inputs' paths unless ``paths``."""
    found = pq.read_table(path).to_pylist()
    return found if paths else [{k: v for k, v in r.items() if k != "path"} for r in found]


@pytest.mark.parametrize(
    "how",
    [[], ["--file-timeout", "0"], ["--executor", "processes", "--workers", "2"],
     ["--size", "320x136"]],
    ids=["reader", "here", "side-by-side", "sized"],
)  # fmt: skip
def test_a_folder_of_stores_gives_the_rows_of_the_videos_it_was_packed_from(
    here: Path, how: list[str]
) -> None:
    assert main(["map", "stores", FN, "--out", "stores.parquet", *how]) == 0
    assert main(["map", "clips", FN, "--out", "clips.parquet", *how]) == 0
    got = rows("stores.parquet", paths=True)
    assert len(got) == 370 and rows("stores.parquet") == rows("clips.parquet")
    assert [Path(p).name for p in dict.fromkeys(r["path"] for r in got)] == [
        "bikes.hfs", "carphone_pristine.hfs"]  # fmt: skip


def test_a_glob_a_manifest_and_stores_beside_videos(here: Path) -> None:
    assert main(["map", "stores", FN, "--out", "folder.parquet"]) == 0
    (here / "list.txt").write_text("stores/carphone_pristine.hfs\nstores/bikes.hfs\n")
    for given in ("stores/*.hfs", "list.txt"):
        assert main(["map", given, FN, "--out", "other.parquet", "--overwrite"]) == 0
        assert rows("other.parquet", paths=True) == rows("folder.parquet", paths=True)
    (here / "mixed").mkdir()
    os.rename(here / "stores" / "bikes.hfs", here / "mixed" / "bikes.hfs")
    (here / "mixed" / "carphone_pristine.mp4").symlink_to(here / "clips/carphone_pristine.mp4")
    assert main(["map", "mixed", FN, "--out", "mixed.parquet"]) == 0
    assert rows("mixed.parquet") == rows("folder.parquet")


def test_a_killed_job_over_stores_resumes_to_the_uninterrupted_table(here: Path) -> None:
    assert main(["map", "stores", FN, "--out", "whole.parquet"]) == 0
    argv = [sys.executable, "-c", "import sys, hyperframes.io.results as r; r.PART_ROWS = 16\n"
            "from hyperframes.cli import main; sys.exit(main(sys.argv[1:]))", "map",
            "stores", "stores_rows:dies", "--out", "cut.parquet",
            "--batch-size", "16"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(here), DIE_AT="300")  # (in the second store)
    killed = subprocess.run(argv, cwd=here, env=env, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL
    env.pop("DIE_AT")
    resumed = subprocess.run([*argv, "--resume"], cwd=here, env=env, capture_output=True,
                             text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert rows("cut.parquet", paths=True) == rows("whole.parquet", paths=True)


def test_choosing_frames_of_stores_is_refused_and_info_lists_them(here: Path, capsys) -> None:
    assert main(["map", "stores", FN, "--out", "every.parquet", "--every", "2"]) != 0
    err = capsys.readouterr().err.strip()
    assert "'bikes.hfs' is a store; drop --every" in err and len(err.splitlines()) == 1
    assert not [p for p in here.iterdir() if p.name.startswith("every.")]
    assert main(["info", "stores"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[1].split(" fps")[0] for line in lines] == [
        "store 640x272 25.0", "store 176x144 29.97002997002997"]  # fmt: skip


def test_a_damaged_store_is_listed_and_the_others_written(here: Path) -> None:
    data = here / "stores" / "bikes.hfs" / "data.mdb"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 3])  # (cut short)
    for how in ([], ["--file-timeout", "0"]):
        out = here / "d.parquet"
        assert main(["map", "stores", FN, "--out", str(out), "--overwrite", *how]) == PARTIAL
        assert [Path(r["path"]).name for r in rows(str(out), paths=True)] == [
            "carphone_pristine.hfs"] * 120  # fmt: skip
        (failed,) = map(json.loads, Path(f"{out}.failures.jsonl").read_text().splitlines())
        assert Path(failed["path"]).name == "bikes.hfs" and "truncated" in failed["reason"]
