"""A store is untrusted input: damage raises a typed error naming it, never a wrong frame."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import lmdb
import numpy as np
import pytest

from hyperframes import Pipeline, StoreCorrupt, StoreError
from hyperframes.store import FrameStore, StoreSink
from hyperframes.store import format as fmt


@pytest.fixture
def frames(make_frames: Callable[..., np.ndarray]) -> np.ndarray:
    rng = np.random.default_rng(7)
    out = make_frames(40, 64, 96)
    out[:, :8] = rng.integers(0, 256, (40, 8, 96, 3), dtype=np.uint8)  # incompressible rows
    return out


@pytest.fixture
def path(tmp_path: Path, frames: np.ndarray) -> Path:
    store = tmp_path / "s.hfs"
    pipeline = Pipeline.from_frames(frames, batch_size=8).group(threshold=0.5, max_len=8)
    pipeline.to(StoreSink(store)).run()
    return store


def _edit(path: Path, fn: Callable[[lmdb.Transaction, lmdb.Environment], None]) -> None:
    env = lmdb.open(str(path), max_dbs=2)
    try:
        with env.begin(write=True) as txn:
            fn(txn, env)
    finally:
        env.close()


def _record_of(path: Path, group: int) -> bytes:
    env = lmdb.open(str(path), max_dbs=2, readonly=True)
    try:
        db = env.open_db(fmt.RECORDS_DB, create=False)
        with env.begin() as txn:
            return bytes(txn.get(fmt.group_key(group), db=db))
    finally:
        env.close()


def test_flipped_bytes_in_a_record_name_the_frames(path: Path, frames: np.ndarray) -> None:
    record = _record_of(path, 1)
    data = bytearray((path / "data.mdb").read_bytes())
    at = data.find(record[-200:])
    assert at > 0
    data[at + 50] ^= 0xFF
    (path / "data.mdb").write_bytes(bytes(data))
    with FrameStore(path, decode="frame") as store:
        first, stop = store.groups.span(1)
        damaged = []
        for i in range(first, stop):  # a frame is read from its own records alone
            try:
                assert np.array_equal(store[i], frames[i]), i  # never a wrong frame
            except StoreCorrupt as exc:
                assert f"frame {i} (group 1)" in str(exc)
                damaged.append(i)
        assert stop - 1 in damaged  # (its record, the group's last, holds the flip)
        with pytest.raises(StoreCorrupt, match=f"group 1 \\(frames {first}..{stop - 1}\\)"):
            store[first:stop]  # the whole group
        assert np.array_equal(store[0], frames[0])  # other groups still read
        assert store.verify() == list(range(first, stop))


def test_truncated_data_file(path: Path) -> None:
    data = path / "data.mdb"
    size = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(StoreCorrupt, match="truncated"):
        FrameStore(path)


def test_data_file_cut_to_nothing(path: Path) -> None:
    os.truncate(path / "data.mdb", 100)
    with pytest.raises(StoreError):
        FrameStore(path)


def test_wrong_version(path: Path) -> None:
    def bump(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
        head = json.loads(txn.get(fmt.HEADER_KEY))
        head["version"] = 99
        txn.put(fmt.HEADER_KEY, json.dumps(head).encode())

    _edit(path, bump)
    with pytest.raises(StoreError, match="version 99 is not supported"):
        FrameStore(path)


def test_header_lying_about_the_frame_size(path: Path) -> None:
    def shrink(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
        head = json.loads(txn.get(fmt.HEADER_KEY))
        head["spec"]["shape"] = [32, 96, 3]
        txn.put(fmt.HEADER_KEY, json.dumps(head).encode())

    _edit(path, shrink)
    with (
        FrameStore(path) as store,
        pytest.raises(StoreCorrupt, match="header says 96x32, 3 channels"),
    ):
        store.get_frame_at(3)


def test_state_lying_about_the_frame_count(path: Path) -> None:
    def lie(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
        state = json.loads(txn.get(fmt.STATE_KEY))
        state["frames"] = 10**12
        txn.put(fmt.STATE_KEY, json.dumps(state).encode())

    _edit(path, lie)
    with pytest.raises(StoreCorrupt, match="state says 1000000000000 frames"):
        FrameStore(path)


def test_table_entry_lying_about_its_count(path: Path) -> None:
    def lie(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
        db = env.open_db(fmt.TABLE_DB, txn=txn, create=False)
        raw = bytearray(txn.get(fmt.group_key(2), db=db))
        raw[12:16] = np.uint32(60000).tobytes()
        txn.put(fmt.group_key(2), bytes(raw), db=db)

    _edit(path, lie)
    with pytest.raises(StoreCorrupt, match=r"group table entry 2 is .* bytes but 60000 frames"):
        FrameStore(path)


def test_table_entry_lying_about_record_size(path: Path) -> None:
    def lie(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
        db = env.open_db(fmt.TABLE_DB, txn=txn, create=False)
        raw = bytearray(txn.get(fmt.group_key(0), db=db))
        raw[16:24] = np.uint64(1 << 39).tobytes()
        txn.put(fmt.group_key(0), bytes(raw), db=db)

    _edit(path, lie)
    with FrameStore(path) as store:  # (a record's size is checked when it is read)
        with pytest.raises(StoreCorrupt, match=r"the record of group 0 .* the wrong size"):
            store[0]
        first, _ = store.groups.span(1)
        assert store[first] is not None  # other groups still read
        assert store.verify()[:1] == [0]


def test_missing_record(path: Path) -> None:
    def drop(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
        db = env.open_db(fmt.RECORDS_DB, txn=txn, create=False)
        txn.delete(fmt.group_key(1), db=db)

    _edit(path, drop)
    with pytest.raises(StoreCorrupt, match="group 1"):
        FrameStore(path)


def test_a_wrong_frame_checksum_is_caught(path: Path) -> None:
    def lie(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
        db = env.open_db(fmt.TABLE_DB, txn=txn, create=False)
        raw = bytearray(txn.get(fmt.group_key(0), db=db))
        raw[32] ^= 1  # first frame checksum
        txn.put(fmt.group_key(0), bytes(raw), db=db)

    _edit(path, lie)
    with FrameStore(path, decode="frame") as store:
        with pytest.raises(StoreCorrupt, match=r"frame 0 .* fails its checksum"):
            store[0]
        assert store.verify() == [0]


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a hyperframes store"):
        FrameStore(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match=r"has no data\.mdb"):
        FrameStore(tmp_path / "empty")
