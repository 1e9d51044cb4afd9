"""Stores a user can trust: no gaps after a failure, one writer, same input on resume,
no writes through links in a store folder, and the CLI's guards around them."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import lmdb
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli import Terminated, main, signals_interrupt
from hyperframes.errors import StoreError
from hyperframes.hyper.grouping.grouper import GroupingOptions
from hyperframes.store import writer as writer_module
from hyperframes.store.resume import resume_point
from hyperframes.store.writer import StoreWriter

SPEC = hf.FrameSpec((24, 32, 3))


def groups(count: int, length: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.integers(0, 256, (length, *SPEC.shape), dtype=np.uint8) for _ in range(count)]


def stored(path: Path) -> np.ndarray:
    with hf.FrameStore(path) as store:
        assert not store.verify()
        return np.stack([store[i] for i in range(len(store))])


def test_a_failed_group_ends_the_store_there_and_resume_completes_it(tmp_path, monkeypatch):
    data = groups(8)
    real = writer_module.encode_group
    calls = {"n": 0}

    def flaky(frames, **options):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError("encoder failed")
        return real(frames, **options)

    monkeypatch.setattr(writer_module, "encode_group", flaky)
    path = tmp_path / "s.hfs"
    writer = StoreWriter(path, SPEC, workers=2)
    with pytest.raises(OSError, match="encoder failed"):
        for group in data:
            writer.write_group(group)
        writer.flush()
    writer.close(complete=False)  # used to commit groups 4.. after the missing group 3
    assert resume_point(path) == (12, False)
    assert np.array_equal(stored(path), np.concatenate(data[:3]))

    monkeypatch.setattr(writer_module, "encode_group", real)
    with StoreWriter(path, SPEC, resume=True) as again:
        assert again.frames == 12
        for group in data[3:]:
            again.write_group(group)
    assert np.array_equal(stored(path), np.concatenate(data))


def test_an_interrupted_wait_loses_no_group(tmp_path, monkeypatch):
    data = groups(6)
    path = tmp_path / "s.hfs"
    writer = StoreWriter(path, SPEC, workers=1)
    for group in data[:2]:
        writer.write_group(group)
    head = writer._pending[0][0]

    def interrupted(timeout=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(head, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    monkeypatch.undo()
    writer.close(complete=False)  # commits the group whose wait was interrupted
    assert np.array_equal(stored(path), np.concatenate(data[:2]))


def test_overwrite_waits_for_the_lock_before_removing_anything(tmp_path):
    path = tmp_path / "s.hfs"
    first = StoreWriter(path, SPEC)
    first.write_group(groups(1)[0])
    first.flush()
    try:
        with pytest.raises(StoreError, match="another process is writing"):
            StoreWriter(path, SPEC, overwrite=True)
    finally:
        first.close()
    assert resume_point(path) == (4, True)  # the first writer's store is intact
    with StoreWriter(path, SPEC, overwrite=True) as second:
        second.write_group(groups(2)[1])
    assert len(stored(path)) == 4


def test_resume_and_overwrite_together_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not both"):
        StoreWriter(tmp_path / "s.hfs", SPEC, resume=True, overwrite=True)
    with pytest.raises(SystemExit) as exit_info:
        main(["pack", "in.mp4", str(tmp_path / "s.hfs"), "--resume", "--overwrite"])
    assert exit_info.value.code == 2


def test_resume_from_another_input_is_refused_naming_what_differs(
    tmp_path, make_video, make_frames, capsys
):
    first = make_video(tmp_path / "a.mp4", make_frames(24))
    other = make_video(tmp_path / "b.mp4", make_frames(24)[::-1].copy())
    store = tmp_path / "a.hfs"
    options = GroupingOptions(max_len=4)
    grouping = {"threshold": options.threshold, "min_len": options.min_len, "max_len": 4}
    source = hf.VideoSource(first)  # a partial pack, as an interrupted CLI run leaves it
    frames = hf.Pipeline.from_source(source).collect()
    writer = StoreWriter(store, source.spec, source.info, grouping=grouping)
    for start in range(0, 12, 4):
        writer.write_group(frames[start : start + 4].copy())
    writer.close(complete=False)
    done, complete = resume_point(store)
    assert 0 < done < 24 and not complete
    assert main(["verify", str(store)]) == 0
    assert f"incomplete: {done} of 24 frames" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["pack", str(other), str(store), "--resume", "--max-len", "4"]) == 1
    err = capsys.readouterr().err
    assert "packed from another input" in err and "first_packets" in err
    assert resume_point(store) == (done, False)  # nothing was appended
    assert main(["pack", str(first), str(store), "--resume", "--max-len", "4"]) == 0
    assert len(stored(store)) == 24


def test_resume_into_another_programs_lmdb_is_refused(tmp_path, synthetic_mp4):
    foreign = tmp_path / "foreign"
    env = lmdb.open(str(foreign), subdir=True)
    with env.begin(write=True) as txn:
        txn.put(b"customer:1", b"precious")
    env.close()
    with pytest.raises(StoreError, match="another program"):
        StoreWriter(foreign, SPEC, resume=True)
    assert main(["pack", str(synthetic_mp4), str(foreign), "--resume"]) == 1
    env = lmdb.open(str(foreign), subdir=True, readonly=True)
    with env.begin() as txn:
        assert [bytes(k) for k, _ in txn.cursor()] == [b"customer:1"]
    env.close()


@pytest.fixture
def small_store(tmp_path) -> Path:
    path = tmp_path / "s.hfs"
    with StoreWriter(path, SPEC) as writer:
        for group in groups(2):
            writer.write_group(group)
    return path


@pytest.mark.parametrize("name", ["lock.mdb", "data.mdb"])
@pytest.mark.parametrize("command", ["verify", "info"])
def test_read_only_commands_never_write_through_a_link(small_store, tmp_path, name, command):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me" * 1000)
    target = small_store / name
    if name == "data.mdb":  # the link points at a real copy, so only the link is wrong
        victim.write_bytes(target.read_bytes())
    before = victim.read_bytes()
    target.unlink()
    target.symlink_to(victim)
    assert main([command, str(small_store)]) == 1
    assert victim.read_bytes() == before
    with pytest.raises(StoreError, match="symbolic link"):
        hf.FrameStore(small_store)


def test_a_hard_linked_lock_file_is_refused(small_store, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me")
    (small_store / "lock.mdb").unlink()
    os.link(victim, small_store / "lock.mdb")
    with pytest.raises(StoreError, match="hard link"):
        hf.FrameStore(small_store)
    assert victim.read_bytes() == b"keep me"


def test_reading_a_store_without_a_lock_file_creates_none(small_store):
    (small_store / "lock.mdb").unlink()
    (small_store / "writer.lock").unlink()
    assert len(stored(small_store)) == 8
    assert main(["verify", str(small_store)]) == 0
    assert sorted(p.name for p in small_store.iterdir()) == ["data.mdb"]


def test_frame_refuses_an_existing_image_and_never_follows_a_link(small_store, tmp_path):
    out = tmp_path / "f.png"
    out.write_bytes(b"old")
    assert main(["frame", str(small_store), "1", str(out)]) == 1
    assert out.read_bytes() == b"old"
    victim = tmp_path / "victim.png"
    victim.write_bytes(b"keep me")
    link = tmp_path / "link.png"
    link.symlink_to(victim)
    assert main(["frame", str(small_store), "1", str(link), "--overwrite"]) == 0
    assert victim.read_bytes() == b"keep me"
    assert not link.is_symlink() and link.read_bytes().startswith(b"\x89PNG")
    assert not list(tmp_path.glob(".*partial*"))


@pytest.mark.parametrize("fps", ["0", "-5", "nan", "inf"])
def test_render_refuses_a_frame_rate_that_is_not_positive(tmp_path, fps):
    with pytest.raises(SystemExit) as exit_info:
        main(["render", "m:f", str(tmp_path / "o.mp4"), "--frames", "2", "--size", "8x8",
              "--fps", fps])  # fmt: skip
    assert exit_info.value.code == 2


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_term_and_hup_interrupt_like_ctrl_c(signum):
    before = signal.getsignal(signum)
    with pytest.raises(Terminated) as caught, signals_interrupt():
        os.kill(os.getpid(), signum)
        signal.sigtimedwait([], 0)  # let the handler run
        for _ in range(1000):
            pass
    assert isinstance(caught.value, KeyboardInterrupt) and caught.value.signum == signum
    assert signal.getsignal(signum) == before


def test_the_store_records_the_grouping_the_stage_used(tmp_path, synthetic_mp4):
    store = tmp_path / "g.hfs"
    line = hf.Pipeline.from_source(hf.VideoSource(synthetic_mp4)).group(max_len=4)
    line.to(hf.StoreSink(store)).run()
    with hf.FrameStore(store) as packed:
        assert packed.header.grouping == GroupingOptions(max_len=4).recorded()
    with pytest.raises(StoreError, match=r"differs from the options the \.group"):
        line.to(hf.StoreSink(tmp_path / "h.hfs", grouping={"max_len": 60})).run()


def test_verify_of_an_unfinished_store_names_the_recorded_input(
    tmp_path, make_video, make_frames, partial_store, capsys
):
    clip = make_video(tmp_path / "a.mp4", make_frames(24))
    store = partial_store(clip, tmp_path / "a.hfs")
    assert main(["verify", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"(pack {clip} {store} --resume continues it)" in out
