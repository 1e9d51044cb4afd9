"""Opening a store says what went wrong: permissions, missing files, damage, a full map."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import pytest

from hyperframes import FrameSpec, StoreCorrupt, StoreError
from hyperframes.store import FrameStore, StoreWriter, _env

NOBODY = 65534


def write_store(path: Path, frames: np.ndarray, group: int = 4) -> None:
    with StoreWriter(path, FrameSpec(frames.shape[1:], frames.dtype), workers=1) as writer:
        for a in range(0, len(frames), group):
            writer.write_group(frames[a : a + group].copy())


@pytest.fixture
def frames(make_frames: Callable[..., np.ndarray]) -> np.ndarray:
    return make_frames(12)


@pytest.fixture
def store(tmp_path: Path, frames: np.ndarray) -> Path:
    path = tmp_path / "s.hfs"
    write_store(path, frames)
    return path


# -- what lmdb.open raises, and what the user sees --------------------------------------


def refuse_with(monkeypatch: pytest.MonkeyPatch, exc: lmdb.Error) -> None:
    def refuse(*args: Any, **kwargs: Any) -> lmdb.Environment:
        raise exc

    monkeypatch.setattr(_env.lmdb, "open", refuse)


@pytest.mark.parametrize(
    ("error", "kind", "code", "match"),
    [
        (lmdb.ReadonlyError("{}: Permission denied"), PermissionError, errno.EACCES,
         "cannot be read by this user: reading needs read permission"),
        (lmdb.Error("{}: Operation not permitted"), PermissionError, errno.EPERM,
         "cannot be read by this user"),
        (lmdb.Error("{}: No such file or directory"), FileNotFoundError, errno.ENOENT,
         "disappeared while it was opened"),
        (lmdb.Error("{}: Input/output error"), OSError, errno.EIO, "Input/output error"),
        (lmdb.MemoryError("{}: Cannot allocate memory"), OSError, errno.ENOMEM, "allocate"),
    ],
)  # fmt: skip
def test_system_errors_on_open_are_os_errors_with_the_path(
    store: Path, monkeypatch: pytest.MonkeyPatch, error: lmdb.Error, kind: type, code: int,
    match: str,
) -> None:  # fmt: skip
    refuse_with(monkeypatch, type(error)(str(error).format(store)))
    with pytest.raises(kind, match=match) as info:
        FrameStore(store)
    assert isinstance(info.value, OSError) and not isinstance(info.value, StoreError)
    assert info.value.errno == code and info.value.filename == str(store)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("error", "code", "match"),
    [
        (lmdb.ReadonlyError("{}: Permission denied"), errno.EACCES,
         "cannot be written by this user: writing needs write permission"),
        (lmdb.Error("{}: Read-only file system"), errno.EROFS, "is on a read-only file system"),
    ],
)  # fmt: skip
def test_a_writer_without_write_access_gets_permission_error(
    store: Path, monkeypatch: pytest.MonkeyPatch, error: lmdb.Error, code: int, match: str
) -> None:
    refuse_with(monkeypatch, type(error)(str(error).format(store)))
    with pytest.raises(PermissionError, match=match) as info:
        _env.acquire(store, writable=True, create=True)
    assert info.value.errno == code and info.value.filename == str(store)
    assert not _env.is_open(store)


@pytest.mark.parametrize(
    "error",
    [
        lmdb.InvalidError("{}: MDB_INVALID: File is not an LMDB file"),
        lmdb.CorruptedError("{}: MDB_CORRUPTED: Located page was wrong type"),
        lmdb.VersionMismatchError("{}: MDB_VERSION_MISMATCH: Database environment version"),
        lmdb.Error("{}: LMDB data format v9 is not supported by this build."),
    ],
)
def test_only_damage_is_store_corrupt(
    store: Path, monkeypatch: pytest.MonkeyPatch, error: lmdb.Error
) -> None:
    refuse_with(monkeypatch, type(error)(str(error).format(store)))
    with pytest.raises(StoreCorrupt, match="damaged or was written by an incompatible LMDB"):
        FrameStore(store)


def test_lmdb_refusals_that_are_not_damage_are_store_errors(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_with(monkeypatch, lmdb.ReadersFullError("MDB_READERS_FULL: maxreaders reached"))
    with pytest.raises(StoreError, match="MDB_READERS_FULL") as info:
        FrameStore(store)
    assert not isinstance(info.value, StoreCorrupt)


# -- real damage ------------------------------------------------------------------------


def test_garbage_and_empty_data_files_are_store_corrupt(store: Path) -> None:
    data = store / "data.mdb"
    data.write_bytes(np.random.default_rng(0).bytes(20_000))
    with pytest.raises(StoreCorrupt, match="File is not an LMDB file"):
        FrameStore(store)
    os.truncate(data, 100)
    with pytest.raises(StoreCorrupt, match="not an LMDB file"):
        FrameStore(store)
    os.truncate(data, 0)  # LMDB says "Bad file descriptor": not an OS problem here
    with pytest.raises(StoreCorrupt, match=r"data\.mdb' is empty"):
        FrameStore(store)


def test_an_unsupported_lmdb_format_version_is_store_corrupt(store: Path) -> None:
    with open(store / "data.mdb", "r+b") as f:  # the version field of both meta pages
        for page in (0, 1):
            f.seek(page * 4096 + 20)
            f.write(struct.pack("<I", 9))
    with pytest.raises(StoreCorrupt, match="v9 is not supported"):
        FrameStore(store)


# -- real permissions, as an unprivileged user -------------------------------------------


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder any user may enter (pytest's own tmp_path is private to its owner)."""
    folder = Path(tempfile.mkdtemp(prefix="hf-perm-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for root, dirs, _ in os.walk(folder):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        shutil.rmtree(folder)


def as_unprivileged(fn: Callable[[], object]) -> dict[str, Any]:
    """``fn()``'s outcome as a user who does not own the files: in a forked child that
    drops to ``nobody`` when the tests run as root (root reads any file), else here."""

    def outcome() -> dict[str, Any]:
        try:
            return {"ok": repr(fn())}
        except Exception as exc:
            return {
                "type": type(exc).__name__, "errno": getattr(exc, "errno", None),
                "filename": getattr(exc, "filename", None), "text": str(exc),
                "oserror": isinstance(exc, OSError),
            }  # fmt: skip

    if os.geteuid() != 0:
        return outcome()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 1
        try:
            os.close(read)
            try:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                result = outcome()
            except PermissionError as exc:
                result = {"skip": f"cannot drop to uid {NOBODY}: {exc}"}
            with os.fdopen(write, "w") as out:
                json.dump(result, out)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    result: dict[str, Any] = json.loads(text)
    if "skip" in result:
        pytest.skip(result["skip"])
    return result


def test_a_data_file_the_user_cannot_read(open_dir: Path, frames: np.ndarray) -> None:
    path = open_dir / "s.hfs"
    write_store(path, frames)
    path.chmod(0o755)
    (path / "lock.mdb").chmod(0o644)
    readable = as_unprivileged(lambda: FrameStore(path).get_frame_at(5).sum())
    assert readable.get("ok") == repr(frames[5].sum()), readable  # the control: it can read
    (path / "data.mdb").chmod(0o600)
    out = as_unprivileged(lambda: FrameStore(path))
    assert out["type"] == "PermissionError" and out["errno"] == errno.EACCES, out
    assert out["filename"] == str(path)
    assert "cannot be read by this user" in out["text"] and "chmod" in out["text"]


def test_a_store_folder_the_user_cannot_enter(open_dir: Path, frames: np.ndarray) -> None:
    path = open_dir / "s.hfs"
    write_store(path, frames)
    path.chmod(stat.S_IRWXU)
    out = as_unprivileged(lambda: FrameStore(path))
    assert out["type"] == "PermissionError" and out["errno"] == errno.EACCES, out
    assert out["filename"] == str(path) and "cannot be read by this user" in out["text"]


def test_a_writer_on_a_store_the_user_may_only_read(open_dir: Path, frames: np.ndarray) -> None:
    path = open_dir / "s.hfs"
    write_store(path, frames)
    path.chmod(0o755)
    for name in ("data.mdb", "lock.mdb"):
        (path / name).chmod(0o644)
    out = as_unprivileged(lambda: _env.acquire(path, writable=True))
    assert out["type"] == "PermissionError" and out["errno"] == errno.EACCES, out
    assert out["filename"] == str(path) and "cannot be written by this user" in out["text"]


# -- the writer's map grows within a cap --------------------------------------------------


@pytest.mark.parametrize(
    ("current", "used", "free", "grown"),
    [
        (64 << 30, 64 << 30, 10 << 40, 128 << 30),  # room: doubles
        (768 << 30, 768 << 30, 10 << 40, 1 << 40),  # stops at MAX_MAP_SIZE
        (1 << 40, 1 << 40, 10 << 40, None),  # at MAX_MAP_SIZE: full
        (64 << 30, 64 << 30, (3 << 30) + 123, (67 << 30)),  # the disk's free space, whole pages
        (64 << 30, 64 << 30, 100, None),  # less than a page free: full
    ],
)
def test_grown_map_size_doubles_within_the_cap(
    current: int, used: int, free: int, grown: int | None
) -> None:
    assert _env.MAX_MAP_SIZE == 1 << 40
    assert _env.grown_map_size(current, used=used, free=free, page=4096) == grown


def noise(count: int, seed: int) -> np.ndarray:
    """Frames zstd cannot shrink: every group adds its full size to the store."""
    return np.random.default_rng(seed).integers(0, 256, (count, 64, 96, 3), dtype=np.uint8)


def fill_until_full(path: Path, frames: np.ndarray) -> OSError:
    with pytest.raises(OSError) as info:
        write_store(path, frames)
    return info.value


def resume_and_check(path: Path, frames: np.ndarray, committed: int) -> None:
    with FrameStore(path) as store:
        assert len(store) == committed and not store.complete
        assert np.array_equal(store[0:committed], frames[:committed])
    with StoreWriter(path, FrameSpec(frames.shape[1:], frames.dtype), resume=True) as writer:
        for a in range(committed, len(frames), 4):
            writer.write_group(frames[a : a + 4].copy())
    with FrameStore(path) as store:
        assert store.complete and np.array_equal(store[:], frames)


def test_a_full_map_at_the_size_cap_raises_enospc_and_keeps_the_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = noise(160, 1)  # 160 frames of 18 KiB: about 2.9 MiB
    path = tmp_path / "s.hfs"
    monkeypatch.setattr(_env, "INITIAL_MAP_SIZE", 1 << 20)
    monkeypatch.setattr(_env, "MAX_MAP_SIZE", 2 << 20)
    error = fill_until_full(path, frames)
    assert error.errno == errno.ENOSPC and not isinstance(error, StoreError)
    text = str(error)
    assert "is full" in text and "the limit of 2 MiB per store" in text
    assert "the groups committed before are kept" in text and "another store" in text
    assert "\n" not in text
    with FrameStore(path) as store:
        committed = len(store)
    assert 0 < committed < len(frames) and committed % 4 == 0
    monkeypatch.setattr(_env, "MAX_MAP_SIZE", 1 << 40)
    resume_and_check(path, frames, committed)


def test_a_full_map_on_a_full_disk_says_free_space_and_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = noise(160, 2)
    path = tmp_path / "s.hfs"
    monkeypatch.setattr(_env, "INITIAL_MAP_SIZE", 1 << 20)
    real_usage = shutil.disk_usage

    def little_free(where: Any) -> Any:  # a "disk" of 1.5 MiB for the data file
        data = path / "data.mdb"
        used = data.stat().st_size if data.exists() else 0
        return real_usage(where)._replace(free=max(0, (3 << 19) - used))

    monkeypatch.setattr(_env.shutil, "disk_usage", little_free)
    error = fill_until_full(path, frames)
    assert error.errno == errno.ENOSPC
    text = str(error)
    assert "is full" in text and "what its file system can hold (" in text
    assert "free space, and pack --resume continues after them" in text
    with FrameStore(path) as store:
        committed = len(store)
    assert 0 < committed < len(frames)
    monkeypatch.setattr(_env.shutil, "disk_usage", real_usage)
    resume_and_check(path, frames, committed)


GROW = """
import lmdb, sys
env = lmdb.open(sys.argv[1], map_size=1 << 20)
env.set_mapsize(8 << 20)
with env.begin(write=True) as txn:
    txn.put(b"big", b"y" * (3 << 20))
"""


def test_a_grown_map_is_adopted_only_once_no_read_is_open(tmp_path: Path) -> None:
    """Adopting a map another process grew unmaps the old one, and reads decode values
    where they lie in it: the adoption waits for the open read, and never frees its
    view under it."""
    env = lmdb.open(str(tmp_path), map_size=1 << 20)
    try:
        with env.begin(write=True) as txn:
            txn.put(b"small", b"x" * 1000)
        gate, events = _env.ReadGate(), []
        holding, grown = threading.Event(), threading.Event()

        def first_reader() -> None:
            with gate.read(env) as txn:
                view = txn.get(b"small")
                holding.set()
                grown.wait(10)
                time.sleep(0.2)  # (the other read meets the grown map meanwhile)
                events.append(("first read", bytes(view[:3])))

        def second_reader() -> None:
            with gate.read(env) as txn:
                events.append(("second read", len(txn.get(b"big"))))

        first = threading.Thread(target=first_reader)
        first.start()
        assert holding.wait(10)
        subprocess.run([sys.executable, "-c", GROW, str(tmp_path)], check=True, timeout=60)
        grown.set()
        second = threading.Thread(target=second_reader)
        second.start()
        first.join(10)
        second.join(10)
        assert events == [("first read", b"xxx"), ("second read", 3 << 20)]
    finally:
        env.close()


def test_a_store_is_read_with_the_kernels_readahead(tmp_path: Path) -> None:
    """A frame's records are read whole: without readahead (``MADV_RANDOM``) each 4 KiB
    page of a store not in the page cache came from disk on a fault of its own (127-146 ms
    a random 512x512 uint16 frame, 3.2-3.3 ms with it, measured after dropping caches)."""
    path = tmp_path / "s.hfs"
    frames = np.zeros((4, 8, 8), np.uint8)
    with StoreWriter(path, FrameSpec(frames.shape[1:], frames.dtype), {"fps": 25.0}) as w:
        w.write_group(frames, pts=np.arange(4) / 25)
    with FrameStore(path) as store:
        assert store._handles.env.flags()["readahead"] is True
