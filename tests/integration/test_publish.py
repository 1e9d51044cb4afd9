"""Write-then-rename outputs are flushed to disk before the rename, and their folder after.

``os.fsync`` and ``os.replace`` are wrapped to record what happened in which order; an
fsync is named by the path its descriptor was opened on (``/proc/self/fd``).
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes import FrameSpec, RunReport
from hyperframes.io.publish import publish, publish_files

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir() or sys.platform == "win32",
    reason="needs /proc/self/fd to name what was fsynced",
)


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Records ``("fsync", path)`` and ``("replace", src -> dst)`` in order."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("replace", f"{os.fspath(src)} -> {os.fspath(dst)}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _check_published(events: list[tuple[str, str]], temp: Path, final: Path) -> None:
    """``temp`` was fsynced, then renamed to ``final``, then ``final``'s folder fsynced."""
    temp, final = temp.parent.resolve() / temp.name, final.resolve()
    rename = ("replace", f"{temp} -> {final}")
    renames = [e for e in events if e[0] == "replace" and Path(e[1].split(" -> ")[1]) == final]
    assert len(renames) == 1, events
    at = events.index(renames[0])
    moved = Path(renames[0][1].split(" -> ")[0]).resolve()
    assert fnmatch.fnmatch(str(moved), str(temp)), (renames, rename)  # temp may be a pattern
    temp = moved
    assert ("fsync", str(temp)) in events[:at], events
    assert ("fsync", str(final.parent)) in events[at + 1 :], events


def test_publish_a_file(tmp_path, journal):
    temp, final = tmp_path / ".out.partial", tmp_path / "out.txt"
    temp.write_text("data")
    final.write_text("old")
    publish(temp, final)
    assert final.read_text() == "data" and not temp.exists()
    assert journal == [
        ("fsync", str(temp)),
        ("replace", f"{temp} -> {final}"),
        ("fsync", str(tmp_path)),
    ]


def test_publish_a_folder_syncs_everything_in_it(tmp_path, journal):
    temp = tmp_path / ".tree.partial"
    (temp / "sub").mkdir(parents=True)
    (temp / "a.bin").write_bytes(b"a")
    (temp / "sub" / "b.bin").write_bytes(b"b")
    final = tmp_path / "tree"
    publish(temp, final)
    assert (final / "sub" / "b.bin").read_bytes() == b"b"
    at = journal.index(("replace", f"{temp} -> {final}"))
    synced_before = {path for kind, path in journal[:at] if kind == "fsync"}
    assert synced_before == {
        str(temp / "a.bin"),
        str(temp / "sub" / "b.bin"),
        str(temp / "sub"),
        str(temp),
    }
    assert journal[at + 1 :] == [("fsync", str(tmp_path))]


def test_publish_files_syncs_each_folder_once_after_the_renames(tmp_path, journal):
    moves = []
    for name in ("a", "b", "c"):
        (tmp_path / f".{name}").write_text(name)
        moves.append((tmp_path / f".{name}", tmp_path / name))
    publish_files(moves)
    assert [kind for kind, _ in journal] == ["fsync", "replace"] * 3 + ["fsync"]
    assert journal[-1] == ("fsync", str(tmp_path))
    journal.clear()
    (tmp_path / ".d").write_text("d")
    publish_files([(tmp_path / ".d", tmp_path / "d")], synced=True)
    assert journal == [
        ("replace", f"{tmp_path / '.d'} -> {tmp_path / 'd'}"),
        ("fsync", str(tmp_path)),
    ]


def test_a_failed_fsync_leaves_the_old_output(tmp_path, monkeypatch):
    temp, final = tmp_path / ".out.partial", tmp_path / "out.txt"
    temp.write_text("new")
    final.write_text("old")

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="Input/output"):
        publish(temp, final)
    assert final.read_text() == "old"


def test_video_sink_publishes_its_output(tmp_path, journal):
    from hyperframes.io.video_sink import VideoSink

    out = tmp_path / "o.mkv"
    sink = VideoSink(out, codec="ffv1")
    sink.open(FrameSpec((16, 16, 3)), {})
    sink.write(np.zeros((3, 16, 16, 3), np.uint8), np.arange(3), {})
    temp = sink.temp
    assert sink.close(ok=True) == str(out)
    _check_published(journal, temp, out)


def test_image_sink_publishes_every_file(tmp_path, journal):
    from hyperframes.io.image_sink import ImageSequenceSink

    folder = tmp_path / "frames"
    sink = ImageSequenceSink(folder, workers=2)
    sink.open(FrameSpec((8, 8, 3)), {})
    temp = sink._temp
    assert temp is not None
    sink.write(np.zeros((3, 8, 8, 3), np.uint8), np.arange(3), {})
    sink.close(ok=True)
    for index in range(3):
        name = f"frame_{index:06d}.png"
        _check_published(journal, temp / name, folder / name)
    assert journal[-1] == ("fsync", str(tmp_path))  # the folder it created, in its parent


def test_report_file_is_published(tmp_path, journal):
    from hyperframes.cli.observe import finish_observe
    from hyperframes.cli.options import Observe

    path = tmp_path / "reports" / "run.json"
    report = RunReport(
        frames=0,
        wall_s=0.0,
        fps=0.0,
        stages=(),
        pool_slots=1,
        pool_high_water_slots=0,
        pool_high_water_bytes=0,
        pool_bytes=0,
        reorder_high_water=0,
        batch_size=1,
    )
    assert finish_observe(Observe(report=str(path)), None, report)["report"] == str(path)
    _check_published(journal, path.with_name(".run.partial-*.json"), path)


def test_ray_chunk_join_publishes_its_output(tmp_path, journal):
    from hyperframes.segments import join

    part = tmp_path / "part0.mkv"
    with av.open(str(part), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 16, 16, "bgr0"
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    output = tmp_path / "joined.mkv"
    join([part], [0.0], output)
    _check_published(journal, output.with_name(".joined.partial-*.mkv"), output)
