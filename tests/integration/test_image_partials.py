"""A killed ``unpack`` to a folder leaves its ``.partial-*`` temporary folder; the next
image sink on that folder removes it, and only it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from hyperframes import FrameSpec
from hyperframes.io.image_sink import ImageSequenceSink, remove_stale_partials
from hyperframes.io.publish import host_name as _host

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX process ids")

WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from hyperframes import FrameSpec
    from hyperframes.io.image_sink import ImageSequenceSink

    sink = ImageSequenceSink(sys.argv[1], workers=1)
    sink.open(FrameSpec((8, 8, 3)), {})
    sink.write(np.zeros((2, 8, 8, 3), np.uint8), np.arange(2), {})
    print(sink._temp.name, flush=True)
    time.sleep(120)
    """
)


def _partials(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.name.startswith(".partial-")}


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _write_one(folder: Path, index: int) -> None:
    sink = ImageSequenceSink(folder, workers=1, overwrite=True)
    sink.open(FrameSpec((8, 8, 3)), {})
    sink.write(np.full((1, 8, 8, 3), index, np.uint8), np.array([index]), {})
    sink.close(ok=True)


def test_a_rerun_removes_the_folder_of_a_killed_run_but_not_of_a_running_one(tmp_path):
    folder = tmp_path / "frames"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        left = child.stdout.readline().strip()
        assert left.startswith(f".partial-{_host()}-{child.pid}-"), left
        _write_one(folder, 5)  # the writer is still running: its folder stays
        assert _partials(folder) == {left}
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert (folder / left / "frame_000000.png").exists()  # what the killed run left
    _write_one(folder, 6)
    assert _partials(folder) == set()
    assert sorted(p.name for p in folder.iterdir()) == ["frame_000005.png", "frame_000006.png"]


def test_which_temporary_folders_are_stale(tmp_path):
    host, dead, alive = _host(), _dead_pid(), os.getppid()
    names = {
        "dead": f".partial-{host}-{dead}-abc_12",
        "alive": f".partial-{host}-{alive}-def_34",
        "other-host": f".partial-elsewhere-{dead}-ghi_56",
        "old-style fresh": ".partial-k2j4h5g6",
        "old-style a day old": ".partial-p9q8r7s6",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "frame_000000.png").write_bytes(b"x")
    day_ago = time.time() - 2 * 86400
    os.utime(tmp_path / names["old-style a day old"], (day_ago, day_ago))
    (tmp_path / ".partial-not-a-folder").write_text("kept")
    removed = {p.name for p in remove_stale_partials(tmp_path)}
    assert removed == {names["dead"], names["old-style a day old"]}
    assert _partials(tmp_path) == {
        names["alive"],
        names["other-host"],
        names["old-style fresh"],
        ".partial-not-a-folder",
    }


def test_a_sink_never_removes_its_own_or_a_sibling_sinks_folder(tmp_path):
    first = ImageSequenceSink(tmp_path, workers=1)
    first.open(FrameSpec((8, 8, 3)), {})
    second = ImageSequenceSink(tmp_path, workers=1, pattern="g_{index:03d}.png")
    second.open(FrameSpec((8, 8, 3)), {})
    assert first._temp is not None and first._temp.is_dir()
    first.write(np.zeros((1, 8, 8, 3), np.uint8), np.array([0]), {})
    second.write(np.zeros((1, 8, 8, 3), np.uint8), np.array([0]), {})
    assert first.close(ok=True) == str(tmp_path)
    assert second.close(ok=True) == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frame_000000.png", "g_000.png"]
