"""Many inputs in one job (issue 50): a folder, a glob and each manifest format give the
rows one run per file gives, in one table where every row names its input; a file that
cannot be read is listed and the rest written (exit code 4), or with ``--fail-fast`` stops
the job; inputs of several sizes are each read at its own (a part that needs one size is
refused before any work)."""

from __future__ import annotations

import csv
import datetime
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.cli.many import PARTIAL
from hyperframes.io.inputs import expand, is_video
from hyperframes.io.positions import Seconds, frame_range

FUNCTION = """
def brightness(frames):
    return [round(float(f.mean()), 6) for f in frames]
"""
SIZE = "160x96"


@pytest.fixture
def folder(tmp_path: Path, clip_path, monkeypatch) -> Path:
    """``clips/`` with three real clips (one in a subfolder, one without a video suffix),
    a note and a damaged ``.mp4``; the function's module beside it."""
    clips = tmp_path / "clips"
    (clips / "sub").mkdir(parents=True)
    shutil.copy(clip_path("bikes.mp4"), clips / "bikes.mp4")
    shutil.copy(clip_path("carphone_pristine.mp4"), clips / "sub" / "carphone.mp4")
    shutil.copy(clip_path("bigbuckbunny.mp4"), clips / "bunny.video")  # found by content
    (clips / "notes.txt").write_text("not a video\n")
    (tmp_path / "brightness_fn.py").write_text(FUNCTION)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return clips


def rows_of(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines()]


def by_input(rows: list[dict]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for row in rows:
        out.setdefault(row["path"], []).append((row["frame"], row["time"], row["value"]))
    return out


def one_run_each(
    paths: list[Path], tmp: Path, *, size: tuple[str, ...] = ("--size", SIZE)
) -> dict[str, list[tuple]]:
    """The rows of one ``map`` run per file (the reference)."""
    out = {}
    for k, path in enumerate(paths):
        single = tmp / f"single{k}.jsonl"
        argv = ["map", str(path), "brightness_fn:brightness", "--out", str(single)]
        assert main([*argv, *size]) == 0
        out[str(path)] = [(r["frame"], r["time"], r["value"]) for r in rows_of(single)]
    return out


def test_a_folder_a_glob_and_every_manifest_give_the_rows_of_one_run_per_file(
    folder: Path, tmp_path: Path, capsys
):
    videos = sorted([folder / "bikes.mp4", folder / "sub" / "carphone.mp4", folder / "bunny.video"])
    expected = one_run_each(videos, tmp_path)
    (tmp_path / "list.txt").write_text("# the clips\n" + "\n".join(
        str(p.relative_to(tmp_path)) for p in videos) + "\n")  # fmt: skip
    with open(tmp_path / "list.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["path", "label"])
        writer.writerows([[str(p.relative_to(tmp_path)), p.stem] for p in videos])
    (tmp_path / "list.jsonl").write_text("".join(
        json.dumps({"path": str(p), "label": p.stem}) + "\n" for p in videos))  # fmt: skip
    pq.write_table(pa.table({"path": [str(p) for p in videos]}), tmp_path / "list.parquet")
    for k, inputs in enumerate([str(folder), "clips/**/*.mp4", "list.txt", "list.csv",
                                "list.jsonl", "list.parquet"]):  # fmt: skip
        out = tmp_path / f"all{k}.parquet"
        code = main(["map", inputs, "brightness_fn:brightness", "--out", str(out), "--size", SIZE])
        assert code == 0, inputs
        rows = rows_of(out)
        got = by_input(rows)
        want = expected if inputs != "clips/**/*.mp4" else {
            p: v for p, v in expected.items() if p.endswith(".mp4")}  # fmt: skip
        assert got == want, inputs
        assert list(rows[0])[:3] == ["path", "frame", "time"] or "label" in rows[0]
        if inputs in ("list.csv", "list.jsonl"):
            assert {(r["path"], r["label"]) for r in rows} == {(str(p), p.stem) for p in videos}
    capsys.readouterr()


def test_a_damaged_file_is_listed_and_the_rest_written(folder: Path, tmp_path: Path, capsys):
    (folder / "broken.mp4").write_bytes((folder / "bikes.mp4").read_bytes()[:4000])
    out = tmp_path / "rows.jsonl"
    argv = ["map", "clips", "brightness_fn:brightness", "--out", str(out), "--size", SIZE]
    assert main([*argv, "--json"]) == PARTIAL == 4
    report = json.loads(capsys.readouterr().out)
    failures = [json.loads(line) for line in Path(report["failures"]).read_text().splitlines()]
    assert [Path(f["path"]).name for f in failures] == ["broken.mp4"]
    assert "damaged" in failures[0]["reason"] and "\n" not in failures[0]["reason"]
    names = {Path(r["path"]).name for r in rows_of(out)}
    assert names == {"bikes.mp4", "carphone.mp4", "bunny.video"}
    assert report["extra"]["source"]["failed"][0]["path"].endswith("broken.mp4")
    # --fail-fast: stops at it, names it, and publishes nothing
    fast = tmp_path / "fast.jsonl"
    argv = ["map", "clips", "brightness_fn:brightness", "--out", str(fast), "--size", SIZE]
    assert main([*argv, "--fail-fast"]) == 1
    err = capsys.readouterr().err
    assert "broken.mp4" in err and err.count("\n") == 1 and not fast.exists()


def test_a_failure_names_the_range_and_columns_of_a_manifest_that_lists_a_file_twice(
    folder: Path, tmp_path: Path, capsys
):
    (folder / "broken.mp4").write_bytes((folder / "bikes.mp4").read_bytes()[:4000])
    pq.write_table(pa.table({
        "path": [str(folder / "broken.mp4"), str(folder / "broken.mp4"), str(folder / "bikes.mp4")],
        "start": [0, 40, 0], "stop": [20, 60, 20], "shot": [1, 2, 3],
        "taken": [datetime.datetime(2026, 1, k) for k in (1, 2, 3)],  # (JSON cannot hold it)
    }), tmp_path / "shots.parquet")  # fmt: skip
    out = tmp_path / "rows.jsonl"
    argv = ["map", "shots.parquet", "brightness_fn:brightness", "--out", str(out), "--size", SIZE]
    assert main([*argv, "--json"]) == PARTIAL
    report = json.loads(capsys.readouterr().out)
    failures = [json.loads(line) for line in Path(report["failures"]).read_text().splitlines()]
    told = [{k: v for k, v in f.items() if k not in ("path", "reason")} for f in failures]
    assert told == [
        {"start": 0, "stop": 20, "shot": 1, "taken": "2026-01-01 00:00:00", "frames": 0},
        {"start": 40, "stop": 60, "shot": 2, "taken": "2026-01-02 00:00:00", "frames": 0},
    ]


def test_inputs_of_several_sizes_are_each_read_at_their_own(folder: Path, tmp_path: Path, capsys):
    """1280x720, 640x272 and 176x144 in one job without --size: each file's rows are
    those of a run of its own (a detector's boxes stay in its pixels), the run's slots
    planned for the largest."""
    videos = sorted([folder / "bikes.mp4", folder / "sub" / "carphone.mp4", folder / "bunny.video"])
    expected = one_run_each(videos, tmp_path, size=())
    out = tmp_path / "rows.parquet"
    assert main(["map", "clips", "brightness_fn:brightness", "--out", str(out)]) == 0
    assert by_input(rows_of(out)) == expected
    source = hf.VideoFiles(folder)
    assert source.spec.shape == (720, 1280, 3)
    assert source.several_sizes == "640x272 in 'bikes.mp4', 1280x720 in 'bunny.video' and 1 more"
    # a batch of smaller frames holds as many as the slot fits (a power of two), where no
    # stage makes frames of its own; else the plan's batch
    most = {}
    for _, frames in hf.Pipeline.from_source(source).iter_batches():
        most[frames.shape[1:]] = max(most.get(frames.shape[1:], 0), len(frames))
    assert most == {(720, 1280, 3): 4, (272, 640, 3): 16, (144, 176, 3): 120}  # (all 120)
    assert len(list(source)) == 132 + 250 + 120  # frame by frame after that run, none lost
    made: dict[tuple, int] = {}
    pipeline = hf.Pipeline.from_source(hf.VideoFiles(folder)).map(lambda f: 255 - f)
    for _, frames in pipeline.iter_batches():
        made[frames.shape[1:]] = max(made.get(frames.shape[1:], 0), len(frames))
    assert made == dict.fromkeys(most, 4)


def test_a_part_that_needs_one_size_refuses_several_before_any_work(folder: Path, tmp_path: Path):
    """A video output, a grouping or a window over inputs of several sizes: one line that
    says which part and what to pass, and nothing written."""
    out = tmp_path / "all.mp4"
    parts = {
        "the sink (VideoSink)": lambda p: p.to(hf.VideoSink(out)),
        "stage 'group'": lambda p: p.group().for_each(lambda i, f: None),
        "stage 'map:<lambda>:halo'": lambda p: p.map(lambda w: w[:, 1], window=(1, 1)).for_each(
            lambda i, f: None
        ),
    }
    for part, build in parts.items():
        with pytest.raises(ValueError, match="several sizes") as caught:
            build(hf.Pipeline.from_source(hf.VideoFiles(folder))).run()
        assert part in str(caught.value) and "size=(width, height)" in str(caught.value)
    assert not out.exists() and not list(tmp_path.glob("*.mp4"))
    with_size = hf.Pipeline.from_source(hf.VideoFiles(folder, size=(96, 64)))
    assert with_size.to(hf.VideoSink(out)).run().frames == 250 + 120 + 132


def test_options_for_one_input_are_refused_with_many(folder: Path, tmp_path: Path, capsys):
    out = str(tmp_path / "rows.jsonl")
    base = ["map", "clips", "brightness_fn:brightness", "--out", out, "--size", SIZE]
    for extra in (["--start", "5"], ["--reuse-target", "0.9"]):
        assert main([*base, *extra]) == 2, extra
        assert "takes one input for now" in capsys.readouterr().err


def test_a_manifest_reads_its_ranges_relative_to_itself(folder: Path, tmp_path: Path):
    (tmp_path / "m").mkdir()
    manifest = tmp_path / "m" / "ranges.jsonl"
    manifest.write_text(
        json.dumps({"path": "../clips/bikes.mp4", "start": 10, "stop": 14, "take": 1}) + "\n"
        + json.dumps({"path": "../clips/bikes.mp4", "start": 100, "stop": 102, "take": 2}) + "\n"
    )  # fmt: skip
    inputs = expand(manifest)
    assert [(i.start, i.stop, dict(i.columns)) for i in inputs] == [
        (10, 14, {"take": 1}), (100, 102, {"take": 2})]  # fmt: skip
    source = hf.VideoFiles(manifest)
    seen = []

    def note(ids, frames, meta):
        seen.append((meta["input"].tolist(), meta["input_frame"].tolist()))

    hf.Pipeline.from_source(source, batch_size=8).for_each(note, batched=True, meta=True).run()
    assert seen == [([0] * 4, [10, 11, 12, 13]), ([1] * 2, [100, 101])]  # never two files a batch
    clash = tmp_path / "m" / "clash.csv"
    clash.write_text("path,value\n../clips/bikes.mp4,7\n")
    out = tmp_path / "clash.jsonl"
    assert main(["map", str(clash), "brightness_fn:brightness", "--out", str(out)]) == 1
    assert not out.exists()
    bad = tmp_path / "m" / "bad.csv"
    bad.write_text("path,start\n../clips/bikes.mp4,1.5\n")  # no frame is 1.5
    with pytest.raises(ValueError, match="frame index"):
        expand(bad)


def test_a_video_is_known_by_its_content(folder: Path):
    assert is_video(folder / "bunny.video") and not is_video(folder / "notes.txt")
    found = [Path(i.path).name for i in expand(folder)]
    assert found == ["bikes.mp4", "bunny.video", "carphone.mp4"]  # sorted by path
    with pytest.raises(FileNotFoundError, match="matches no file"):
        expand(str(folder / "*.mkv"))
    assert np.array_equal(
        next(iter(hf.VideoFiles([folder / "bikes.mp4"]))),
        next(iter(hf.VideoSource(folder / "bikes.mp4"))),
    )


def test_transcode_writes_one_output_per_input_named_after_it(folder: Path, tmp_path, capsys):
    (folder / "broken.mp4").write_bytes((folder / "bikes.mp4").read_bytes()[:4000])
    argv = ["transcode", "clips/**/*.mp4", "out", "--size", "160x96", "--json"]
    assert main(argv) == PARTIAL
    summary = json.loads(capsys.readouterr().out)
    made = sorted(str(Path(o["output"]).relative_to(tmp_path / "out")) for o in summary["outputs"])
    assert made == ["bikes.mp4", "sub/carphone.mp4"]  # the folders they were found in kept
    counts = {Path(o["output"]).name: o["frames"] for o in summary["outputs"]}
    assert counts == {"bikes.mp4": 250, "carphone.mp4": 120}
    for name, n in counts.items():
        found = next((tmp_path / "out").rglob(name))
        assert sum(1 for _ in hf.VideoSource(found)) == n
    assert [Path(f["path"]).name for f in summary["failed"]] == ["broken.mp4"]
    assert Path(summary["failures"]) == tmp_path / "out.failures.jsonl"
    assert main(["transcode", "clips", "one.mp4"]) == 2  # many inputs need a folder
    assert "OUTPUT is a folder" in capsys.readouterr().err


def test_info_gives_a_line_per_input(folder: Path, capsys):
    (folder / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not really")
    assert main(["info", "clips", "--json"]) == PARTIAL
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [Path(r["path"]).name for r in rows] == [
        "bikes.mp4", "broken.mp4", "bunny.video", "carphone.mp4"]  # fmt: skip
    assert "error" in rows[1] and rows[0]["width"] == 640


def test_a_missing_file_in_a_manifest_is_listed_and_hidden_folders_are_not_searched(
    folder: Path, tmp_path: Path, capsys
):
    (folder / ".cache").mkdir()
    shutil.copy(folder / "bikes.mp4", folder / ".cache" / "copy.mp4")
    assert ".cache" not in " ".join(i.path for i in expand(folder))
    manifest = tmp_path / "list.txt"
    manifest.write_text("clips/bikes.mp4\nclips/gone.mp4\n")
    out = tmp_path / "rows.jsonl"
    assert main(["map", str(manifest), "brightness_fn:brightness", "--out", str(out)]) == PARTIAL
    assert "gone.mp4" in Path(f"{out}.failures.jsonl").read_text()
    assert {Path(r["path"]).name for r in rows_of(out)} == {"bikes.mp4"}
    capsys.readouterr()


def test_pack_many_writes_a_store_per_input_and_resumes_each(folder: Path, tmp_path: Path, capsys):
    (folder / "broken.mp4").write_bytes((folder / "bikes.mp4").read_bytes()[:4000])
    argv = ["pack", "clips", "stores", "--json"]
    assert main(argv) == PARTIAL
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_name = {Path(row["path"]).name: row for row in lines}
    assert "damaged" in by_name["broken.mp4"]["error"]
    expected = (("bikes.mp4", "bikes.hfs", 250), ("carphone.mp4", "sub/carphone.hfs", None),
                ("bunny.video", "bunny.hfs", 132))  # fmt: skip
    for name, store, frames in expected:
        row = by_name[name]
        assert (
            row["store"] == str(tmp_path / "stores" / store) and row["new_frames"] == row["frames"]
        )
        with hf.FrameStore(row["store"]) as held:
            assert held.complete and len(held) == (frames or row["frames"])
    assert [
        json.loads(x)["path"] for x in (tmp_path / "stores.failures.jsonl").read_text().splitlines()
    ] == [str(folder / "broken.mp4")]
    assert main([*argv, "--resume"]) == PARTIAL  # each store is complete: nothing packed again
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(row.get("new_frames", 0) == 0 for row in again)


def test_analyze_many_gives_a_row_per_input(folder: Path, capsys):
    assert main(["analyze", "clips", "--samples", "0", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(Path(r["path"]).name for r in rows) == [
        "bikes.mp4",
        "bunny.video",
        "carphone.mp4",
    ]
    bikes = next(r for r in rows if r["path"].endswith("bikes.mp4"))
    assert bikes["frames"] == 250 and bikes["hyperframes"] >= 1
    assert main(["analyze", "clips", "--samples", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and all("hyperframes" in line for line in out)


def test_the_progress_counts_files(folder: Path) -> None:
    notes = []
    source = hf.VideoFiles(folder, size=(160, 96))
    hf.Pipeline.from_source(source, batch_size=16).for_each(lambda i, f: None).run(
        progress=lambda p: notes.append(p.note)
    )
    assert notes[0] == "file 1/3" and notes[-1] == "file 3/3" and "file 2/3" in notes
    assert notes == sorted(notes)  # it only goes up


def test_a_manifest_takes_times_as_well_as_frames(folder: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "times.csv"
    manifest.write_text("path,start,stop\nclips/bikes.mp4,1s,00:00:02\nclips/bikes.mp4,5,9\n")
    out = tmp_path / "rows.jsonl"
    assert main(["map", str(manifest), "brightness_fn:brightness", "--out", str(out)]) == 0
    got = rows_of(out)
    first, last = frame_range(folder / "bikes.mp4", Seconds(1), Seconds(2))
    assert 0 < first < last
    frames = [r["frame"] for r in got]
    assert frames == [*range(first, last), *range(5, 9)] or frames == [
        *range(5, 9),
        *range(first, last),
    ]
    timed = [r["time"] for r in got if r["frame"] >= first]
    assert min(timed) >= 1.0 - 1e-6 and max(timed) < 2.0
    bad = tmp_path / "bad.csv"
    bad.write_text("path,start\nclips/bikes.mp4,soon\n")
    assert (
        main(["map", str(bad), "brightness_fn:brightness", "--out", str(tmp_path / "b.jsonl")]) == 1
    )


def test_a_loop_of_ones_own_is_told_of_a_file_it_lost(folder: Path) -> None:
    (folder / "broken.mp4").write_bytes((folder / "bikes.mp4").read_bytes()[:4000])
    with pytest.warns(UserWarning, match=r"broken.mp4' is left out \(.*damaged"):
        source = hf.VideoFiles(folder, size=(96, 64))
        batches = hf.Pipeline.from_source(source, batch_size=32).iter_batches()
        frames = sum(len(f) for _, f in batches)
    assert [Path(f["path"]).name for f in source.failed] == ["broken.mp4"]
    told: list[dict] = []  # told another way, it is not warned of
    told_source = hf.VideoFiles(folder, size=(96, 64), on_failed=told.append)
    hf.Pipeline.from_source(told_source).for_each(lambda i, f: None).run()
    assert [Path(f["path"]).name for f in told] == ["broken.mp4"] and frames > 0


def test_a_store_named_as_inputs_says_what_it_is_and_what_to_do(tmp_path: Path, capsys):
    from hyperframes.store import StoreSink

    store = tmp_path / "s.hfs"
    frames = np.zeros((4, 16, 16), np.uint16)
    hf.Pipeline.from_frames(frames, batch_size=4).group().to(StoreSink(store)).run()
    with pytest.raises(FileNotFoundError, match=r"is a hyperframes store.*name it alone"):
        expand(str(store))
    assert main(["transcode", str(store), str(tmp_path / "out")]) != 0
    assert "is a hyperframes store" in capsys.readouterr().err
