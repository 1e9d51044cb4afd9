"""Every command and option that writes follows one set of rules (``io.publish``):

an existing path is refused without --overwrite; a symbolic link is never written through;
a path that is one of the run's inputs, or lies inside a store's folder, is refused; two
runs writing one name never mix their bytes. Each case is checked for each writer, and
what was there before is checked unchanged.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from hyperframes import FrameSpec
from hyperframes.cli import main
from hyperframes.io.video_sink import VideoSink


@pytest.fixture
def world(tmp_path, synthetic_mp4, monkeypatch):
    """An input clip, a store packed from it and a module to render, in tmp_path."""
    store = tmp_path / "S"
    assert main(["pack", str(synthetic_mp4), str(store), "--json"]) == 0
    (tmp_path / "painter.py").write_text(
        "import numpy as np\n\ndef frame(i):\n    return np.full((16, 16, 3), i, np.uint8)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return {"IN": synthetic_mp4, "S": store, "tmp": tmp_path}


# (command line with OUT in the written position, what OUT is: "file" or "folder")
WRITERS = {
    "transcode": (["transcode", "IN", "OUT.mkv", "--codec", "ffv1"], "OUT.mkv"),
    "transcode --report": (["transcode", "IN", "o.mkv", "--report", "OUT.json"], "OUT.json"),
    "pack --report": (["pack", "IN", "P", "--report", "OUT.json"], "OUT.json"),
    "unpack": (["unpack", "S", "OUT.mkv", "--codec", "ffv1"], "OUT.mkv"),
    "frame": (["frame", "S", "3", "OUT.png"], "OUT.png"),
    "analyze --plot": (["analyze", "IN", "--plot", "OUT.png", "--samples", "0"], "OUT.png"),
    "analyze --report": (["analyze", "IN", "--report", "OUT.json", "--samples", "0"], "OUT.json"),
    "pack": (["pack", "IN", "OUT.hfs"], "OUT.hfs"),
    "unpack images": (["unpack", "S", "OUT"], "OUT"),
    "unpack --report": (["unpack", "S", "o.mkv", "--report", "OUT.json"], "OUT.json"),
    "render": (["render", "painter:frame", "OUT.mkv", "--frames", "8", "--size", "16x16"],
               "OUT.mkv"),
    "transcode --start": (["transcode", "IN", "OUT.mkv", "--start", "30", "--codec", "ffv1"],
                          "OUT.mkv"),
}  # fmt: skip
FOLDERS = {"pack", "unpack images"}  # a folder is written: another file there is never removed


def argv(world, words: list[str], out: Path) -> list[str]:
    """The command line with IN, S and OUT... replaced by paths (o.mkv, P: in tmp_path)."""
    named = {"IN": str(world["IN"]), "S": str(world["S"])}
    named |= {w: str(world["tmp"] / w) for w in ("o.mkv", "P")}
    return [str(out) if w.startswith("OUT") else named.get(w, w) for w in words]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_an_existing_output_is_refused_without_overwrite(world, writer, capsys):
    words, name = WRITERS[writer]
    out = world["tmp"] / name
    out.write_bytes(b"precious")
    assert main(argv(world, words, out)) != 0
    err = capsys.readouterr().err.strip().splitlines()
    if writer in FOLDERS:  # refused even with --overwrite, saying to choose another path
        assert main([*argv(world, words, out), "--overwrite"]) != 0
        err += capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2 and all("a folder" in e or "new path" in e for e in err), err
    else:
        assert len(err) == 1 and "exists" in err[0] and "--overwrite" in err[0], err
    assert out.read_bytes() == b"precious"


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_link_is_never_written_through(world, writer, capsys):
    """Without --overwrite a link is refused; with it the link itself is replaced by the
    new file (a folder output refuses it still). Its target is never written either way."""
    words, name = WRITERS[writer]
    target = world["tmp"] / "victim.bin"
    target.write_bytes(b"precious")
    out = world["tmp"] / name
    out.symlink_to(target)
    assert main(argv(world, words, out)) != 0
    assert "symbolic link" in capsys.readouterr().err
    assert target.read_bytes() == b"precious" and out.is_symlink()
    if writer in FOLDERS:
        assert main([*argv(world, words, out), "--overwrite"]) != 0
        assert "symbolic link" in capsys.readouterr().err
        assert target.read_bytes() == b"precious" and out.is_symlink()
        return
    assert main([*argv(world, words, out), "--overwrite"]) == 0
    assert target.read_bytes() == b"precious"
    assert not out.is_symlink() and out.stat().st_size > 0


@pytest.mark.parametrize(
    "writer", sorted(w for w in WRITERS if w.startswith(("transcode", "analyze")))
)
def test_an_output_that_is_the_input_is_refused(world, writer, capsys):
    words, _ = WRITERS[writer]
    before = digest(world["IN"])
    code = main([*argv(world, words, world["IN"]), "--overwrite"])
    assert code != 0
    assert "reads" in capsys.readouterr().err
    assert digest(world["IN"]) == before


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_an_output_inside_a_store_is_refused(world, writer, capsys):
    words, name = WRITERS[writer]
    store_files = {p.name: digest(p) for p in world["S"].iterdir() if p.is_file()}
    out = world["S"] / name
    assert main([*argv(world, words, out), "--overwrite"]) != 0
    err = capsys.readouterr().err
    assert "store" in err or "reads" in err, err
    assert not out.exists()
    assert {p.name: digest(p) for p in world["S"].iterdir() if p.is_file()} == store_files


def test_unpack_into_its_own_store_is_refused(world, capsys):
    before = sorted(p.name for p in world["S"].iterdir())
    assert main(["unpack", str(world["S"]), str(world["S"]), "--overwrite"]) != 0
    assert "reads" in capsys.readouterr().err
    assert sorted(p.name for p in world["S"].iterdir()) == before


def test_a_side_output_named_like_the_main_one_is_refused(world, capsys):
    out = world["tmp"] / "o.mkv"
    code = main(["transcode", str(world["IN"]), str(out), "--report", str(out)])
    assert code != 0 and "both name" in capsys.readouterr().err
    assert not out.exists()


def test_plot_dir_never_writes_through_a_link_inside_it(world, capsys):
    pytest.importorskip("matplotlib")
    folder = world["tmp"] / "plots"
    folder.mkdir()
    victim = world["tmp"] / "victim.png"
    victim.write_bytes(b"precious")
    (folder / "queue_depth.png").symlink_to(victim)
    out = world["tmp"] / "o.mkv"
    command = ["transcode", str(world["IN"]), str(out), "--plot-dir", str(folder)]
    assert main(command) != 0 and "symbolic link" in capsys.readouterr().err
    assert not out.exists()  # refused before the run
    assert main([*command, "--overwrite"]) == 0
    assert victim.read_bytes() == b"precious"
    assert not (folder / "queue_depth.png").is_symlink()


def test_two_sinks_writing_one_name_never_mix(tmp_path):
    """Two runs to one output: each writes a file of its own; the later to finish wins whole."""
    out = tmp_path / "o.mkv"
    spec = FrameSpec((16, 16, 3))
    a, b = VideoSink(out, codec="ffv1"), VideoSink(out, codec="ffv1")
    assert a.temp != b.temp
    a.open(spec, {})
    b.open(spec, {})
    for k in range(4):
        a.write(np.full((2, 16, 16, 3), 10, np.uint8), np.arange(2 * k, 2 * k + 2), {})
        b.write(np.full((2, 16, 16, 3), 200, np.uint8), np.arange(2 * k, 2 * k + 2), {})
    b.close(ok=True)
    a.close(ok=True)
    import av

    with av.open(str(out)) as container:
        values = {int(f.to_ndarray(format="rgb24").mean()) for f in container.decode(video=0)}
    assert values == {10}  # a finished last: all of a's frames, none of b's
    assert not list(tmp_path.glob(".o.partial-*"))


def test_outputs_are_published_under_a_name_of_the_run(tmp_path):
    sink = VideoSink(tmp_path / "o.mkv", codec="ffv1")
    assert sink.temp.parent == tmp_path and sink.temp.name.startswith(".o.partial-")
    assert sink.temp.suffix == ".mkv"  # FFmpeg guesses the muxer from it


def test_unpack_of_an_incomplete_store_says_so(tmp_path, synthetic_mp4, partial_store, capsys):
    store = partial_store(synthetic_mp4, tmp_path / "partial.hfs")
    out = tmp_path / "o.mkv"
    assert main(["unpack", str(store), str(out), "--json"]) == 0
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "incomplete" in err[0] and "8 frames" in err[0], err
    assert '"complete": false' in captured.out and out.exists()


def test_a_killed_runs_temporary_file_is_removed_by_the_next_run(tmp_path):
    """kill -9 leaves a temporary file under a name of its own: the next run to write the
    same output removes it (when its process is gone), not those of running processes."""
    import subprocess
    import sys

    from hyperframes.io.publish import host_name, temp_beside

    out = tmp_path / "o.mkv"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = tmp_path / f".o.partial-{host_name()}-{int(gone.stdout)}-abcd1234.mkv"
    alive = tmp_path / f".o.partial-{host_name()}-{os.getppid()}-abcd1234.mkv"
    elsewhere = tmp_path / f".o.partial-other_host-{int(gone.stdout)}-abcd1234.mkv"
    for temp in (dead, alive, elsewhere):
        temp.write_bytes(b"partial")
    temp_beside(out)
    assert not dead.exists() and alive.exists() and elsewhere.exists()
