"""Reading a store in order, a hyperframe's frames at a time: any range and any batch
size give exactly the stored frames (FrameStore.runs/frames and StoreSource; that each
record is read once is checked by test_observability_figures)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.store import FrameStore, StoreSink
from hyperframes.store.source import StoreSource


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A store of 90 noisy 16-bit frames in several hyperframes (scenes every 30)."""
    rng = np.random.default_rng(4)
    frames = np.repeat(rng.integers(0, 4096, (3, 24, 32), np.uint16), 30, axis=0)
    frames = frames + rng.integers(0, 3, frames.shape, np.uint16)
    path = tmp_path_factory.mktemp("in-order") / "s.hfs"
    hf.Pipeline.from_frames(frames, batch_size=8).group().to(StoreSink(path)).run()
    return path, frames


@pytest.mark.parametrize(("start", "stop"), [(0, 90), (7, 61), (29, 31), (40, 40), (89, 90)])
def test_runs_and_frames_give_the_range(stored, start: int, stop: int) -> None:
    path, frames = stored
    with FrameStore(path) as store:
        assert len(store.groups) > 1
        runs = list(store.runs(start, stop))
        assert all(not run.flags.writeable for run in runs)
        got = np.concatenate(runs) if runs else frames[:0]
        np.testing.assert_array_equal(got, frames[start:stop])
        np.testing.assert_array_equal(np.array(list(store.frames(start, stop))).reshape(
            -1, 24, 32), frames[start:stop])  # fmt: skip
        with pytest.raises(IndexError, match=r"range 5..91 is not within 0..90"):
            store.runs(5, 91)  # refused when asked, not when first read


@pytest.mark.parametrize("batch", [1, 8, 16, 64])
def test_a_store_source_reads_every_frame_once_whatever_its_batches(stored, batch: int) -> None:
    path, frames = stored
    source = StoreSource(path, start=3, stop=88)
    got = hf.Pipeline.from_source(source, batch_size=batch).collect()
    np.testing.assert_array_equal(got, frames[3:88])


@pytest.fixture(scope="module")
def colour(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A store of 60 RGB frames (its colour transform undone on the way out) in
    hyperframes of 5 frames: a batch of 16 holds whole ones and parts of others."""
    rng = np.random.default_rng(5)
    frames = np.repeat(rng.integers(0, 256, (12, 36, 48, 3), np.uint8), 5, axis=0)
    frames[1::5] += 1  # (a delta in every hyperframe)
    path = tmp_path_factory.mktemp("colour") / "s.hfs"
    with FrameStore.create(path, hf.FrameSpec((36, 48, 3))) as writer:
        for at in range(0, 60, 5):
            writer.write_group(frames[at : at + 5].copy())
    return path, frames


@pytest.mark.parametrize("batch", [1, 4, 8, 16, 64])
@pytest.mark.parametrize(("start", "stop"), [(0, 60), (3, 58), (5, 55)])
def test_whole_hyperframes_are_decoded_into_the_batch_and_parts_handed_on(
    colour, batch: int, start: int, stop: int
) -> None:
    path, frames = colour
    got = hf.Pipeline.from_source(StoreSource(path, start=start, stop=stop), batch_size=batch)
    np.testing.assert_array_equal(got.collect(), frames[start:stop])


def test_a_damaged_hyperframe_read_into_a_batch_names_its_frames(colour, tmp_path) -> None:
    import lmdb

    from hyperframes.store import format as fmt

    path, _ = colour
    copy = tmp_path / "s.hfs"
    shutil.copytree(path, copy)
    env = lmdb.open(str(copy), max_dbs=2)
    try:  # a byte of group 2 (frames 10..14, whole within the first batch of 16) flipped
        records = env.open_db(fmt.RECORDS_DB)
        with env.begin(write=True, db=records) as txn:
            record = bytearray(txn.get(fmt.group_key(2)))
            record[len(record) // 2] ^= 0xFF
            txn.put(fmt.group_key(2), bytes(record))
    finally:
        env.close()
    with pytest.raises(hf.StoreCorrupt, match=r"group 2 \(frames 10\.\.14\)"):
        hf.Pipeline.from_source(StoreSource(copy), batch_size=16).collect()


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A store of 70 simulated 16-bit frames (a smooth field drifting under sensor noise):
    each frame coded alone against its fitted surface, in hyperframes of any length."""
    rng = np.random.default_rng(12)
    y, x = np.mgrid[0:40, 0:56] / 512
    frames = np.stack([2048 + 600 * np.sin(14 * (x + 0.3 * y) - t / 40) + rng.normal(0, 4, x.shape)
                       for t in range(70)]).astype(np.uint16)  # fmt: skip
    path = tmp_path_factory.mktemp("simulated") / "s.hfs"
    hf.Pipeline.from_frames(frames, batch_size=16).group().to(StoreSink(path)).run()
    return path, frames


@pytest.mark.parametrize("batch", [1, 4, 16, 64])
def test_parts_of_hyperframes_coded_alone_are_decoded_straight_into_the_batch(
    simulated, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, frames = simulated
    with FrameStore(path) as store:
        assert store.header.version == 4 and len(store.groups) > 1
    asked: list[int] = []
    group, part = FrameStore.group, FrameStore.part

    def whole(self, g, out=None, *, frames=None):
        asked.append(len(range(*self.groups.span(g))) if frames is None else len(frames))
        return group(self, g, out, frames=frames)

    def some(self, g, frames, out):
        got, which = part(self, g, frames, out)
        asked.append(len(which))
        return got, which

    monkeypatch.setattr(FrameStore, "group", whole)
    monkeypatch.setattr(FrameStore, "part", some)
    got = hf.Pipeline.from_source(StoreSource(path, start=2, stop=69), batch_size=batch)
    np.testing.assert_array_equal(got.collect(), frames[2:69])
    assert sum(asked) == 67 and max(asked) <= batch  # (no frame decoded twice, none ahead)
