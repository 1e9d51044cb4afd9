"""A store's readers over time: read-ahead failures, reopening a source, concurrent runs."""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hyperframes import FrameSpec, Pipeline, StoreCorrupt
from hyperframes.store import FrameStore, StoreWriter, _env
from hyperframes.store import format as fmt
from hyperframes.store.source import StoreSource

GROUP = 4


@pytest.fixture
def frames(make_frames: Callable[..., np.ndarray]) -> np.ndarray:
    return make_frames(24)


@pytest.fixture
def path(tmp_path: Path, frames: np.ndarray) -> Path:
    """Six groups of four frames, with timestamps."""
    store = tmp_path / "s.hfs"
    with StoreWriter(store, FrameSpec(frames.shape[1:], frames.dtype), {"fps": 25.0}) as writer:
        for a in range(0, len(frames), GROUP):
            writer.write_group(frames[a : a + GROUP].copy(), pts=np.arange(a, a + GROUP) / 25)
    return store


def reading_ahead() -> bool:
    return threading.current_thread().name.startswith("hf-store-ahead")


# -- read-ahead ---------------------------------------------------------------------------


def test_a_read_ahead_that_fails_once_does_not_poison_later_reads(
    path: Path, frames: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FrameStore(path, decode="group") as store:
        real = store._load_group
        failed: list[int] = []

        def flaky(g: int, *, hashed: bool = False) -> np.ndarray:
            if reading_ahead() and not failed:
                failed.append(g)
                raise OSError(errno.EIO, "injected: the read-ahead of one group failed")
            return real(g, hashed=hashed)

        monkeypatch.setattr(store, "_load_group", flaky)
        assert np.array_equal(store[0], frames[0])
        assert np.array_equal(store[1], frames[1])  # moving forward: group 1 is read ahead
        for i in range(GROUP, 3 * GROUP):  # group 1 (whose read-ahead failed) and group 2
            assert np.array_equal(store[i], frames[i]), i
        assert failed == [1]
        assert np.array_equal(store[GROUP], frames[GROUP])  # and again, later
        assert np.array_equal(store[:], frames)


def damage_record(path: Path, group: int) -> None:
    import lmdb

    env = lmdb.open(str(path), max_dbs=2, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            record = bytes(txn.get(fmt.group_key(group), db=env.open_db(fmt.RECORDS_DB, txn=txn)))
    finally:
        env.close()
    data = bytearray((path / "data.mdb").read_bytes())
    at = data.find(record)
    assert at > 0
    while at >= 0:  # every copy: a small record's leaf page may have older copies
        data[at + len(record) // 2] ^= 0xFF
        at = data.find(record, at + 1)
    (path / "data.mdb").write_bytes(bytes(data))


def test_a_damaged_group_still_raises_on_every_direct_access(
    path: Path, frames: np.ndarray
) -> None:
    damage_record(path, 1)
    with FrameStore(path, decode="group") as store:
        assert np.array_equal(store[0], frames[0])
        assert np.array_equal(store[1], frames[1])  # reads group 1 ahead, which fails
        for _ in range(3):
            with pytest.raises(StoreCorrupt, match=r"group 1 \(frames 4\.\.7\)") as info:
                store[GROUP + 1]
            assert info.value.frames == list(range(GROUP, 2 * GROUP))  # type: ignore[attr-defined]
        assert np.array_equal(store[2 * GROUP], frames[2 * GROUP])  # the others still read
        assert store.verify() == list(range(GROUP, 2 * GROUP))


def test_threads_playing_one_store_at_once_get_every_frame(path: Path, frames: np.ndarray) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(4, timeout=30)
    with FrameStore(path, hot_bytes=frames[0].nbytes * 8, decode="auto") as store:

        def play(offset: int) -> None:
            try:
                start.wait()
                for turn in range(20):
                    for i in range(len(frames)):
                        j = (i + offset + turn) % len(frames)
                        if not np.array_equal(store[j], frames[j]):
                            raise AssertionError(f"frame {j} differs")
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=play, args=(k * 5,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


# -- StoreSource --------------------------------------------------------------------------


def test_one_source_serves_run_after_run(path: Path, frames: np.ndarray) -> None:
    source = StoreSource(path)
    first = Pipeline.from_source(source, batch_size=8).collect()
    second = Pipeline.from_source(source, batch_size=2).collect()
    assert np.array_equal(first, frames) and np.array_equal(second, frames)
    assert not _env.is_open(path)  # nothing held between runs: a writer may resume it


def test_a_range_source_starts_at_its_start_on_every_open(path: Path, frames: np.ndarray) -> None:
    source = StoreSource(path, start=5, stop=17)
    assert source.length == 12 and source.info["frames"] == 12
    out = np.empty((4, *frames.shape[1:]), frames.dtype)
    for _ in range(2):
        source.open()
        chunk = source.read_into(out)
        assert chunk.index.tolist() == [5, 6, 7, 8]
        assert np.array_equal(out, frames[5:9])
        assert np.allclose(chunk.meta["pts"], np.arange(5, 9) / 25)
        source.close()
    for _ in range(2):
        assert np.array_equal(Pipeline.from_source(source).collect(), frames[5:17])


def test_two_runs_read_one_source_at_once(path: Path, frames: np.ndarray) -> None:
    both_running = threading.Barrier(2, timeout=30)
    waited = threading.local()

    def meet(batch: np.ndarray) -> np.ndarray:
        if not getattr(waited, "done", False):  # each run's worker waits once for the other
            waited.done = True
            both_running.wait()
        return batch

    pipeline = Pipeline.from_source(StoreSource(path), batch_size=4).map(meet)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(pipeline.collect())
        except BaseException as exc:
            errors.append(exc)
            both_running.abort()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 2
    assert all(np.array_equal(r, frames) for r in results)
    assert not _env.is_open(path)
