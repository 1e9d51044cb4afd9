"""``--file-timeout`` on the commands that run a job per input over many (``info``,
``analyze``, ``transcode``, ``pack``): each input's job runs in a worker process; one that
does nothing for the timeout (a FIFO with no writer standing in for a stalled mount) or
whose process dies (a crash in the decoder) is listed, nothing half-written is left beside
its output, and the others are done as in one process; with ``--executor processes``
the jobs run side by side and give the same outputs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from _processes import Leftovers, reading  # this folder's helper

from hyperframes.cli import main
from hyperframes.cli.many import PARTIAL

COMMANDS = {
    "info": ["info", "list.txt"],
    "analyze": ["analyze", "list.txt", "--samples", "0"],
    "transcode": ["transcode", "list.txt", "out", "--size", "96x64"],
    "pack": ["pack", "list.txt", "out", "--size", "96x64"],
}


@pytest.fixture
def listed(tmp_path: Path, clip_path, monkeypatch) -> Path:
    """``list.txt``: bikes, a FIFO (``01_stalled.mp4``), carphone and a damaged file."""
    clips = tmp_path / "clips"
    clips.mkdir()
    shutil.copy(clip_path("bikes.mp4"), clips / "00_bikes.mp4")
    os.mkfifo(clips / "01_stalled.mp4")
    shutil.copy(clip_path("carphone_pristine.mp4"), clips / "02_carphone.mp4")
    damaged = clip_path("bikes.mp4").read_bytes()
    (clips / "03_damaged.mp4").write_bytes(damaged[: len(damaged) // 3])
    names = ["00_bikes.mp4", "01_stalled.mp4", "02_carphone.mp4", "03_damaged.mp4"]
    (tmp_path / "list.txt").write_text("".join(f"clips/{n}\n" for n in names))
    monkeypatch.chdir(tmp_path)
    return clips


def rows_of(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def partials(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".partial-" in p.name]


SPREAD = ["--executor", "processes", "--workers", "2"]


@pytest.mark.parametrize(
    ("command", "spread"),
    [(c, False) for c in sorted(COMMANDS)] + [(c, True) for c in ("analyze", "pack", "transcode")],
)
def test_an_input_that_stalls_is_listed_and_the_others_done(
    command: str, spread: bool, listed: Path, tmp_path: Path, capsys
):
    left = Leftovers()
    began = time.monotonic()
    extra = (SPREAD if command != "analyze" else SPREAD[:2]) if spread else []  # (no --workers)
    code = main([*COMMANDS[command], "--file-timeout", "2", "--json", *extra])
    took = time.monotonic() - began
    found = rows_of(capsys.readouterr().out)
    assert code == PARTIAL and took < 30
    if command == "transcode":  # a summary, and a failures file
        (summary,) = found
        failed = {Path(f["path"]).name: f["reason"] for f in summary["failed"]}
        done = {Path(d["path"]).name for d in summary["outputs"]}
    else:
        rows = {Path(r["path"]).name: r for r in found}
        failed = {name: r["error"] for name, r in rows.items() if "error" in r}
        done = {name for name, r in rows.items() if "error" not in r}
    assert done == {"00_bikes.mp4", "02_carphone.mp4"}
    assert sorted(failed) == ["01_stalled.mp4", "03_damaged.mp4"]
    assert "(the file timeout)" in failed["01_stalled.mp4"]
    assert "damaged" in failed["03_damaged.mp4"]
    if (tmp_path / "out").exists():
        assert partials(tmp_path / "out") == []
    assert left() == []


def test_without_the_timeout_the_same_rows_come_in_this_process(listed: Path, capsys):
    (listed / "01_stalled.mp4").unlink()  # (it would hang the job: no timeout; now missing)
    found = []
    for timeout in ("0", "30"):
        assert main(["info", "list.txt", "--file-timeout", timeout, "--json"]) == PARTIAL
        found.append(rows_of(capsys.readouterr().out))
    assert found[0] == found[1] and len(found[0]) == 4
    assert [("error" in row) for row in found[0]] == [False, True, False, True]


def test_a_transcode_whose_process_dies_is_listed_and_leaves_no_partial_output(
    listed: Path, tmp_path: Path, capsys
):
    left = Leftovers()
    (tmp_path / "two.txt").write_text("clips/00_bikes.mp4\nclips/02_carphone.mp4\n")
    out = tmp_path / "out"

    def kill_the_job_as_it_writes() -> None:  # a crash in the decoder, as the command sees it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for temp in partials(out) if out.exists() else []:
                holders = [p for p in reading(temp) if p != os.getpid()]
                if holders and "00_bikes" in temp.name:
                    os.kill(holders[0], signal.SIGKILL)
                    return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_job_as_it_writes)
    killer.start()
    code = main(["transcode", "two.txt", "out", "--file-timeout", "60", "--json"])
    killer.join()
    (summary,) = rows_of(capsys.readouterr().out)
    assert code == PARTIAL
    failed = {Path(f["path"]).name: f["reason"] for f in summary["failed"]}
    assert list(failed) == ["00_bikes.mp4"] and "killed by signal 9" in failed["00_bikes.mp4"]
    assert [Path(d["path"]).name for d in summary["outputs"]] == ["02_carphone.mp4"]
    assert partials(out) == [] and not (out / "clips/00_bikes.mp4").exists()
    assert left() == []


@pytest.mark.parametrize("command", ["analyze", "pack", "transcode"])
def test_side_by_side_gives_what_one_process_gives(
    command: str, listed: Path, tmp_path: Path, capsys
):
    (listed / "01_stalled.mp4").unlink()
    for k in range(4):  # enough inputs for both processes
        shutil.copy(listed / "00_bikes.mp4", listed / f"1{k}_bikes.mp4")
    (tmp_path / "list.txt").write_text(
        "".join(f"clips/{p.name}\n" for p in sorted(listed.iterdir()))
    )
    found = []
    spread = SPREAD if command != "analyze" else SPREAD[:2]  # (it has no --workers)
    for extra, out in (([], "one"), (spread, "two")):
        argv = [a if a != "out" else out for a in COMMANDS[command]]
        if command == "transcode":  # lossless: the same frames, however it was threaded
            argv += ["--codec", "ffv1", "--suffix", ".mkv"]
        assert main([*argv, "--json", *extra]) == PARTIAL
        rows = rows_of(capsys.readouterr().out)
        rows[0].pop("failures", None)  # (a transcode's summary: the failures file, named)
        for row in rows[0]["outputs"] if command == "transcode" else rows:
            for key in ("seconds", "wall_s", "fps", "store", "output"):
                row.pop(key, None)
        found.append(rows)
    assert found[0] == found[1]
    if command == "transcode":
        for name in ("00_bikes.mkv", "12_bikes.mkv"):
            one, two = (frames_of(tmp_path / f / "clips" / name) for f in ("one", "two"))
            assert len(one) == len(two) == 250
            assert all((a == b).all() for a, b in zip(one, two, strict=True))


def frames_of(path: Path) -> list:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="gray") for f in container.decode(video=0)]


def test_ray_runs_the_inputs_as_tasks_over_the_nodes(
    idle_cluster, listed: Path, tmp_path: Path, capsys
):
    (listed / "01_stalled.mp4").unlink()
    for k in range(3):
        shutil.copy(listed / "02_carphone.mp4", listed / f"1{k}_carphone.mp4")
    (tmp_path / "list.txt").write_text(
        "".join(f"clips/{p.name}\n" for p in sorted(listed.iterdir()))
    )
    found = []
    for extra, out in (([], "one"), (["--executor", "ray"], "two")):
        argv = ["pack", "list.txt", out, "--size", "96x64", "--json", *extra]
        assert main(argv) == PARTIAL
        found.append(rows_of(capsys.readouterr().out))
    nodes = {row.pop("node") for row in found[1] if "node" in row}
    assert len(nodes) == 2  # spread over both nodes
    for rows in found:
        for row in rows:
            for key in ("seconds", "wall_s", "fps", "store"):
                row.pop(key, None)
    assert found[0] == found[1] and len(found[0]) == 6
    assert [Path(r["path"]).name for r in found[1] if "error" in r] == ["03_damaged.mp4"]


def test_side_by_side_a_bar_counts_the_files(listed: Path):
    import functools
    import io

    from hyperframes.cli.per_input import each
    from hyperframes.cli.video import input_facts
    from hyperframes.io.inputs import expand
    from hyperframes.metrics.progress import ProgressBar

    (listed / "01_stalled.mp4").unlink()
    drawn = io.StringIO()
    done, failed = each(
        expand(listed), functools.partial(input_facts, None), fail_fast=False, workers=2,
        file_timeout=30, bar=ProgressBar(stream=drawn, enabled=True, hz=1e6),
    )  # fmt: skip
    assert len(done) == 2 and len(failed) == 1
    lines = [line for line in drawn.getvalue().split("\r\x1b[2K") if line.strip()]
    assert [line.split("file ")[1].split()[0] for line in lines] == ["1/3", "2/3", "3/3"]
    assert "bottleneck" not in drawn.getvalue() and drawn.getvalue().endswith("\n")


def test_on_ray_a_hanging_file_is_listed_after_the_timeout(
    idle_cluster, listed: Path, tmp_path: Path, capsys
):
    began = time.monotonic()
    argv = [*COMMANDS["transcode"], "--executor", "ray", "--file-timeout", "2", "--json"]
    assert main(argv) == PARTIAL
    assert time.monotonic() - began < 120
    summary = rows_of(capsys.readouterr().out)[0]
    failed = {Path(f["path"]).name: f["reason"] for f in summary["failed"]}
    assert sorted(failed) == ["01_stalled.mp4", "03_damaged.mp4"]
    assert "(the file timeout)" in failed["01_stalled.mp4"]
    assert [Path(o["path"]).name for o in summary["outputs"]] == ["00_bikes.mp4", "02_carphone.mp4"]
    assert partials(tmp_path / "out") == []
