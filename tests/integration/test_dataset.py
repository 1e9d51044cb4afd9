"""``hf.VideoDataset`` under a real ``DataLoader`` (issue 52): every frame (or clip)
exactly once over 2 workers x 2 ranks, for many inputs and for one long input cut into
runs; a shuffle that is the same in every worker and changes with the epoch; the frames
equal a plain read's; and a loader deleted mid-epoch leaves no process, thread or shared
memory behind."""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from shm_blocks import left_since, shm_names  # the suite's helper

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import hyperframes as hf  # noqa: E402
from hyperframes.io import shared_blocks  # noqa: E402


def data_loader(dataset, **options) -> DataLoader:
    """A ``DataLoader`` whose workers start from a fork server: forked from this test
    process (Ray's threads, earlier tests' threads), a worker can hang on a lock one of
    them held at the fork (seen once, in torch's seeding)."""
    if options.get("num_workers"):
        options.setdefault("multiprocessing_context", "forkserver")
    return DataLoader(dataset, **options)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, clip_path) -> Path:
    here = tmp_path_factory.mktemp("dataset") / "clips"
    here.mkdir()
    for name in ("bikes.mp4", "carphone_pristine.mp4", "bigbuckbunny.mp4"):
        (here / name).symlink_to(clip_path(name))
    return here


def seen(dataset: hf.VideoDataset, workers: int) -> list[tuple[str, int]]:
    loader = data_loader(dataset, batch_size=8, num_workers=workers)
    found = []
    for batch in loader:
        found += [(Path(p).name, int(f)) for p, f in zip(batch["path"], batch["frame"],
                                                         strict=True)]  # fmt: skip
    return found


def every_frame(folder: Path, **options) -> list[tuple[str, int]]:
    found = []
    for item in sorted(folder.iterdir()):
        source = hf.VideoSource(item, **options)
        found += [(item.name, n) for n in range(source.length or 0)]
    return found


@pytest.mark.parametrize("how", ["many inputs", "one input in runs"])
def test_every_frame_once_over_two_workers_and_two_ranks(folder: Path, how: str) -> None:
    inputs = folder if how == "many inputs" else folder / "bikes.mp4"
    options = {"size": (64, 48)}
    found = []
    for rank in (0, 1):
        dataset = hf.VideoDataset(inputs, rank=rank, world_size=2, **options)
        found += seen(dataset, workers=2)
    expected = (every_frame(folder) if how == "many inputs"
                else [("bikes.mp4", n) for n in range(250)])  # fmt: skip
    assert sorted(found) == sorted(expected)  # each once: no frame twice, none missing


@pytest.fixture(scope="module")
def matroska(tmp_path_factory, clip_path) -> Path:
    """bikes with a sound track, in Matroska: a film as users hold it, which does not say
    how many frames it holds."""
    import av

    out = tmp_path_factory.mktemp("mkv") / "bikes.mkv"
    with av.open(str(clip_path("bikes.mp4"))) as src, av.open(str(out), "w") as dst:
        video = dst.add_stream_from_template(src.streams.video[0])
        sound = dst.add_stream("aac", rate=48000, layout="stereo")
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is not None:
                packet.stream = video
                dst.mux(packet)
        for k in range(100):  # 2 s of silence
            frame = av.AudioFrame.from_ndarray(np.zeros((2, 960), np.float32), "fltp", "stereo")
            frame.sample_rate, frame.pts = 48000, k * 960
            dst.mux(sound.encode(frame))
        dst.mux(sound.encode(None))
    assert hf.VideoSource(out).length is None
    return out


@pytest.mark.parametrize("workers", [0, 2])
def test_an_input_that_does_not_count_its_frames_is_read_whole(matroska, workers) -> None:
    """One Matroska file, alone (cut into runs for 2 workers) and as clips: every frame
    once, not left out for want of a count."""
    found = seen(hf.VideoDataset(matroska, size=(64, 48)), workers=workers)
    assert sorted(f for _, f in found) == list(range(250))
    clips = data_loader(hf.VideoDataset(matroska, clip=8, size=(64, 48)), batch_size=4)
    starts = [int(f) for batch in clips for f in batch["frame"]]
    assert starts == list(range(0, 248, 8))  # 31 whole clips; the last 2 frames make none


def test_clips_and_a_sampling_are_shared_out_once(folder: Path) -> None:
    found = []
    for rank in (0, 1):
        dataset = hf.VideoDataset(folder / "bikes.mp4", clip=4, fps=10, size=(64, 48),
                                  rank=rank, world_size=2)  # fmt: skip
        loader = data_loader(dataset, batch_size=2, num_workers=2)
        for batch in loader:
            assert batch["frames"].shape[1:] == (4, 3, 48, 64)
            found += batch["frame"].tolist()
    whole = hf.VideoSource(folder / "bikes.mp4", fps=10)  # 100 samples: 25 clips of 4
    assert len(found) == 25 and len(set(found)) == 25
    assert whole.length == 100


@pytest.mark.parametrize("clip", [1, 4])
def test_whole_batches_through_shared_memory_are_every_sample_once(folder: Path, clip: int):
    """batch_size=: each worker hands whole batches of one input, in shared memory, for
    DataLoader(batch_size=None), laid out channels first; every frame (clip) once over 2
    workers x 2 ranks, the pixels a plain read's, an input's last batch short."""
    found, plain = [], {}
    for item in sorted(folder.iterdir()):
        with hf.VideoSource(item, size=(64, 48)) as source:
            plain[item.name] = np.stack(list(source))
    for rank in (0, 1):
        dataset = hf.VideoDataset(folder, size=(64, 48), rank=rank, world_size=2, clip=clip,
                                  batch_size=16)  # fmt: skip
        for batch in data_loader(dataset, batch_size=None, num_workers=2):
            n = len(batch["frame"])
            assert batch["frames"].shape == ((n, 3, 48, 64) if clip == 1 else (n, clip, 3, 48, 64))
            assert 1 <= n <= 16 and batch["time"].shape == (n,)
            assert batch["frames"].is_contiguous()  # (channels first in memory too)
            name = Path(batch["path"]).name
            frames = batch["frames"].reshape(n * clip, 3, 48, 64).permute(0, 2, 3, 1).numpy()
            first = int(batch["frame"][0])
            assert np.array_equal(frames, plain[name][first : first + n * clip])
            found += [(name, int(f)) for f in batch["frame"]]
    expected = [(name, f) for name, frames in plain.items()
                for f in range(0, len(frames) - len(frames) % clip, clip)]  # fmt: skip
    assert sorted(found) == sorted(expected)
    with pytest.raises(ValueError, match="batch_size must be 1 or more"):
        hf.VideoDataset(folder, batch_size=0)


def test_batches_read_without_workers_are_laid_out_as_the_workers_lay_them(folder: Path):
    """The same batches, channels first and contiguous, with no DataLoader worker."""
    clip = folder / "carphone_pristine.mp4"
    with hf.VideoSource(clip) as source:
        plain = np.stack(list(source))
    got = list(hf.VideoDataset(clip, batch_size=16))
    assert [len(b["frame"]) for b in got[:-1]] == [16] * (len(got) - 1)
    assert all(b["frames"].is_contiguous() for b in got)
    frames = np.concatenate([b["frames"].permute(0, 2, 3, 1).numpy() for b in got])
    assert np.array_equal(frames, plain)


def test_the_frames_are_a_plain_reads_and_the_shuffle_follows_the_epoch(folder: Path):
    dataset = hf.VideoDataset(folder / "carphone_pristine.mp4")
    first = next(iter(dataset))
    source = hf.VideoSource(folder / "carphone_pristine.mp4")
    frames = np.empty((1, *source.spec.shape), np.uint8)
    source.read_into(frames)
    source.close()
    assert first["frame"] == 0 and first["frames"].shape == (3, *source.spec.shape[:2])
    assert np.array_equal(first["frames"].permute(1, 2, 0).numpy(), frames[0])
    shuffled = hf.VideoDataset(folder, shuffle=True, seed=3)
    orders = []
    for epoch in (0, 0, 1):
        shuffled.set_epoch(epoch)
        orders.append(shuffled.units(4))
    assert orders[0] == orders[1] != orders[2]
    assert sorted(orders[0]) == sorted(orders[2]) == sorted(hf.VideoDataset(folder).units(4))


@pytest.mark.parametrize("batches", [False, True])
def test_a_loader_deleted_mid_epoch_leaves_nothing_behind(folder: Path, batches: bool) -> None:
    before_shm, before_threads = shm_names(), set(threading.enumerate())
    if batches:  # (the worker's reused blocks of shared memory)
        loader = data_loader(hf.VideoDataset(folder, fps=5, batch_size=4), batch_size=None,
                             num_workers=2)  # fmt: skip
    else:
        loader = data_loader(hf.VideoDataset(folder, fps=5), batch_size=4, num_workers=2)
    batches = iter(loader)
    for _ in range(3):
        assert next(batches)["frames"].dtype == torch.uint8
    del batches, loader
    gc.collect()
    deadline = time.monotonic() + 30
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert multiprocessing.active_children() == []
    left = [t.name for t in set(threading.enumerate()) - before_threads if t.is_alive()]
    assert not [name for name in left if name.startswith("hf-")]
    # (multiprocessing's queue semaphores, sem.mp-*, are unlinked by the children's and the
    # resource tracker's finalisers, a moment after the workers exit: a leak stays)
    while left_since(before_shm) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_since(before_shm) == set()


def test_bad_places_and_clips_are_refused(folder: Path) -> None:
    with pytest.raises(ValueError, match="need 0 <= rank < world_size"):
        hf.VideoDataset(folder, rank=2, world_size=2)
    with pytest.raises(ValueError, match="clip must be 1 or more"):
        hf.VideoDataset(folder, clip=0)


def test_a_broken_input_is_left_out_with_a_warning_or_fails(folder: Path, tmp_path: Path):
    clips = tmp_path / "with_a_broken_one"
    clips.mkdir()
    (clips / "bikes.mp4").symlink_to(folder / "bikes.mp4")
    (clips / "broken.mp4").write_bytes((folder / "bigbuckbunny.mp4").read_bytes()[:300_000])
    with pytest.warns(UserWarning, match="broken.mp4' is left out of this epoch"):
        got = [s["frame"] for s in hf.VideoDataset(clips, size=(64, 48), fps=5)]
    assert got == list(range(0, 250, 5))  # bikes' frames, all of them
    loader = data_loader(hf.VideoDataset(clips, size=(64, 48), fps=5), batch_size=8,
                        num_workers=2)  # fmt: skip
    with warnings.catch_warnings():  # (the workers, forked here, warn on their stderr)
        warnings.simplefilter("ignore")
        assert sum(len(b["frame"]) for b in loader) == 50
    with pytest.raises(hf.MediaError, match="truncated or damaged"):
        list(hf.VideoDataset(clips, size=(64, 48), fps=5, on_error="fail"))


def test_each_worker_decodes_on_its_share_of_the_cores_and_leaves_what_it_inherited_be(
    monkeypatch, clip_path
):
    import hyperframes.io.dataset as dataset_module

    share = max(1, len(os.sched_getaffinity(0)) // 2)
    real = dataset_module.open_item
    expected = {"threads": share}

    def checked(item, **options):  # (in the loader's forked workers: a failure ends the epoch)
        if options.get("threads") != expected["threads"]:
            raise AssertionError(f"a worker's decoder took threads={options.get('threads')!r}")
        if not gc.get_freeze_count():  # (the collector leaves the inherited objects be)
            raise AssertionError("a worker's collector walks the objects it inherited")
        return real(item, **options)

    monkeypatch.setattr(dataset_module, "open_item", checked)
    forked = {"batch_size": None, "num_workers": 2, "multiprocessing_context": "fork"}
    dataset = hf.VideoDataset(str(clip_path("bikes.mp4")), batch_size=16, size=(64, 32))
    loader = data_loader(dataset, **forked)  # (forked: the workers see the patch)
    assert sum(len(batch["frames"]) for batch in loader) == 250
    expected["threads"] = 3  # the user's choice wins (the workers fork after this line)
    given = hf.VideoDataset(str(clip_path("bikes.mp4")), batch_size=16, size=(64, 32), threads=3)
    assert sum(len(batch["frames"]) for batch in data_loader(given, **forked)) == 250


def test_tensors_make_a_loaders_batches_float_reusing_what_the_loop_let_go(folder: Path) -> None:
    to_float = hf.Tensors()
    dataset = hf.VideoDataset(folder / "bikes.mp4", batch_size=8, size=(64, 48))
    kept, let_go = [], set()
    for k, batch in enumerate(data_loader(dataset, batch_size=None, num_workers=2)):
        x = to_float(batch["frames"])
        assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 48, 64)
        assert torch.equal(x, batch["frames"].float() / 255)
        if k % 2:
            kept.append((x, batch["frames"].float() / 255))
        else:
            let_go.add(x.data_ptr())
    assert all(torch.equal(x, want) for x, want in kept)  # kept ones never changed
    assert len(let_go) < len(kept)  # those let go were made in a few tensors, again and again


def mapped_file(tensor) -> int:
    """The inode of the shared memory ``tensor``'s pixels are mapped from, in this process."""
    address = tensor.untyped_storage().data_ptr()
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, _, _, _, inode, *_ = line.split()
        low, high = (int(v, 16) for v in span.split("-"))
        if low <= address < high:
            return int(inode)
    raise AssertionError("the batch is in no mapping")


@pytest.mark.parametrize("keep", ["none", "every other", "a view of each", "all"])
def test_batches_the_loop_keeps_never_change_and_the_rest_reuse_a_few_blocks(folder, keep):
    """A worker's blocks of shared memory are reused once the loop has let a batch go, and
    only then: a batch kept whole, or only through a view of it, keeps its pixels."""
    clip = folder / "bikes.mp4"
    with hf.VideoSource(clip, size=(64, 48)) as source:
        plain = np.stack(list(source))
    dataset = hf.VideoDataset(clip, size=(64, 48), batch_size=8)
    kept, files = [], set()
    for k, batch in enumerate(data_loader(dataset, batch_size=None, num_workers=2)):
        files.add(mapped_file(batch["frames"]))
        first = int(batch["frame"][0])
        if keep == "all" or (keep == "every other" and k % 2):
            kept.append((first, batch["frames"]))
        elif keep == "a view of each":
            kept.append((first + 1, batch["frames"][1:3]))
        del batch
    assert len(kept) == {"none": 0, "every other": 16, "a view of each": 32, "all": 32}[keep]
    for first, frames in kept:
        assert np.array_equal(
            frames.permute(0, 2, 3, 1).numpy(), plain[first : first + len(frames)]
        )
    if keep == "none":  # two workers, each with a few blocks in turn (32 batches)
        assert len(files) <= 2 * shared_blocks.KEPT
    if keep == "all":
        assert len(files) == 32


def shm_mapped() -> set[int]:
    """The inodes of torch's shared memory (unlinked once made) that this process maps."""
    return {int(line.split()[4]) for line in Path("/proc/self/maps").read_text().splitlines()
            if "/torch_" in line}  # fmt: skip


def test_the_loop_keeps_its_workers_blocks_mapped_while_they_run(folder: Path):
    """The loop's process maps a worker's blocks once (a block sent again is found mapped,
    not mapped afresh), and lets them go once the loop has let go of the last batch of a
    loader whose workers have ended, epoch after epoch."""
    clip = folder / "bikes.mp4"
    with hf.VideoSource(clip, size=(64, 48)) as source:
        plain = np.stack(list(source))
    before = shm_mapped()
    dataset = hf.VideoDataset(clip, size=(64, 48), batch_size=8)
    for epoch in range(3):
        files, mapped, ending = set(), [], False
        for batch in data_loader(dataset, batch_size=None, num_workers=2):
            files.add(mapped_file(batch["frames"]))
            if not ending:  # (a worker's short batch is its last: it may end after it)
                mapped.append(files <= shm_mapped())
            ending |= len(batch["frames"]) < 8
            first = int(batch["frame"][0])
            assert np.array_equal(batch["frames"].permute(0, 2, 3, 1).numpy(),
                                  plain[first : first + len(batch["frames"])])  # fmt: skip
        del batch
        gc.collect()
        assert len(files) <= 2 * 3, epoch  # (2 in flight and 1 held, at most, a worker)
        assert shm_mapped() - before == set()  # (the workers ended: their blocks go)
        assert len(mapped) > 20 and all(mapped)  # every block seen stayed mapped while
        # both workers ran (the blocks of one that has ended go with the loop's next let-go)


def test_persistent_workers_hand_every_frame_right_epoch_after_epoch(folder: Path):
    """Workers that live from epoch to epoch make new blocks each epoch; the loop's
    process maps the new ones in place of the old, and every frame is right."""
    clip = folder / "carphone_pristine.mp4"
    with hf.VideoSource(clip, size=(64, 48)) as source:
        plain = np.stack(list(source))
    before = shm_mapped()
    dataset = hf.VideoDataset(clip, size=(64, 48), batch_size=8)
    loader = data_loader(dataset, batch_size=None, num_workers=2, persistent_workers=True)
    for epoch in range(3):
        seen = []
        for batch in loader:
            first = int(batch["frame"][0])
            frames = batch["frames"].permute(0, 2, 3, 1).numpy()
            assert np.array_equal(frames, plain[first : first + len(frames)]), epoch
            seen += range(first, first + len(frames))
        assert sorted(seen) == list(range(len(plain)))
        assert len(shm_mapped() - before) <= 2 * (3 + 1)  # (this epoch's blocks and flags)
    del batch, loader
    gc.collect()
