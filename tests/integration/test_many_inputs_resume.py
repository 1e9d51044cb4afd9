"""A job over many inputs killed at any moment resumes (issue 50): files finished are not
redone, the file in progress continues after its last kept row, and the table and the
failures list equal an uninterrupted run's; a changed set of inputs is refused naming
what changed, and ``--add-new`` takes the inputs that appeared since."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hyperframes.cli import main
from hyperframes.cli.many import PARTIAL
from hyperframes.io.results import parts_folder, resume_state

MODEL = """
import os, time

def brightness(frames):
    time.sleep(float(os.environ.get("SLOW", "0")))
    return [round(float(f.mean()), 6) for f in frames]
"""
SIZE = "96x64"
ARGS = ["slow_brightness:brightness", "--size", SIZE, "--batch-size", "8"]


@pytest.fixture
def folder(tmp_path: Path, clip_path, monkeypatch) -> Path:
    """``clips/``: four real clips and a damaged one (listed as failed); the function's
    module beside it."""
    clips = tmp_path / "clips"
    clips.mkdir()
    for name in ("bikes.mp4", "carphone_pristine.mp4", "bigbuckbunny.mp4"):
        shutil.copy(clip_path(name), clips / name)
    shutil.copy(clip_path("carphone_pristine.mp4"), clips / "c_again.mp4")
    (clips / "broken.mp4").write_bytes(clip_path("bikes.mp4").read_bytes()[:4000])
    (tmp_path / "slow_brightness.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return clips


def rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines()]


def failures(out: Path) -> list[dict]:
    return [json.loads(line) for line in Path(f"{out}.failures.jsonl").read_text().splitlines()]


def start(tmp_path: Path, out: Path, *extra: str) -> subprocess.Popen:
    code = (
        "import signal, sys, hyperframes.io.results as r; r.PART_ROWS = 16\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from hyperframes.cli import main\n"
        f"sys.exit(main({['map', 'clips', *ARGS, '--out', str(out), *extra]!r}))"
    )
    env = {**os.environ, "SLOW": "0.03", "PYTHONPATH": str(tmp_path)}
    with open(tmp_path / "stderr.txt", "wb") as err:
        return subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip


def kill_between_files(tmp_path: Path, out: Path, signum: int, files_done: int) -> dict:
    """Start the job, and stop it with ``signum`` once ``files_done`` files are finished
    (its kept rows have reached the next file) and before the last; the kept state."""
    process = start(tmp_path, out)
    deadline = time.monotonic() + 120
    while (state := resume_state(out)) is None or state["input"] < files_done:
        assert process.poll() is None, (tmp_path / "stderr.txt").read_text()
        assert time.monotonic() < deadline, "no rows were kept"
        time.sleep(0.02)
    process.send_signal(signum)
    process.wait(timeout=60)
    assert process.returncode != 0
    state = resume_state(out)
    assert state is not None and 0 < state["input"] < 5  # 0 < files done < total (5)
    return state


@pytest.mark.parametrize(
    ("signum", "files_done", "suffix"),
    [(signal.SIGKILL, 1, ".parquet"), (signal.SIGINT, 2, ".jsonl"),
     pytest.param(signal.SIGTERM, 3, ".parquet", marks=pytest.mark.slow)],
)  # fmt: skip
def test_killed_and_resumed_equals_an_uninterrupted_run(
    folder: Path, tmp_path: Path, capsys, signum, files_done, suffix
):
    whole = tmp_path / f"whole{suffix}"
    assert main(["map", "clips", *ARGS, "--out", str(whole)]) == PARTIAL
    out = tmp_path / f"killed{suffix}"
    kill_between_files(tmp_path, out, signum, files_done)
    capsys.readouterr()
    assert main(["map", "clips", *ARGS, "--out", str(out), "--resume", "--json"]) == PARTIAL
    report = json.loads(capsys.readouterr().out)
    assert report["frames"] < len(rows(whole))  # the files finished were not redone
    assert rows(out) == rows(whole)
    assert failures(out) == failures(whole)
    assert not parts_folder(out).exists()


def test_resume_refuses_a_changed_folder_and_add_new_takes_new_files(
    folder: Path, tmp_path: Path, clip_path, capsys
):
    out = tmp_path / "rows.jsonl"
    kill_between_files(tmp_path, out, signal.SIGKILL, 1)
    shutil.copy(clip_path("bikes.mp4"), folder / "new_one.mp4")
    again = ["map", "clips", *ARGS, "--out", str(out), "--resume"]
    assert main(again) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 added (new_one.mp4)" in err[0] and "--add-new" in err[0]
    assert main([*again, "--add-new"]) == PARTIAL
    got = rows(out)
    assert [Path(r["path"]).name for r in got][-1] == "new_one.mp4"  # after the others
    assert sum(Path(r["path"]).name == "new_one.mp4" for r in got) == 250
    whole = tmp_path / "whole.jsonl"
    assert main(["map", "clips", *ARGS, "--out", str(whole)]) == PARTIAL
    assert sorted(got, key=lambda r: (r["path"], r["frame"])) == sorted(
        rows(whole), key=lambda r: (r["path"], r["frame"])
    )


def test_resume_refuses_inputs_gone_or_changed(folder: Path, tmp_path: Path, capsys):
    out = tmp_path / "rows.parquet"
    kill_between_files(tmp_path, out, signal.SIGKILL, 1)
    (folder / "c_again.mp4").unlink()
    again = ["map", "clips", *ARGS, "--out", str(out), "--resume"]
    assert main([*again, "--add-new"]) == 1
    assert "1 gone (c_again.mp4)" in capsys.readouterr().err
    shutil.copy(folder / "carphone_pristine.mp4", folder / "c_again.mp4")
    with open(folder / "bikes.mp4", "ab") as f:
        f.write(b"\0" * 10)
    assert main(again) == 1
    assert "1 changed (bikes.mp4)" in capsys.readouterr().err
