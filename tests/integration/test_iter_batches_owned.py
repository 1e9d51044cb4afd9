"""A loop of the user's owns the batches it is given (issue 52): kept in a list, sliced,
handed to another thread, they never change under it, and the common loop that keeps
nothing gets views of the run's slots (no copy); memory stays within the plan."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.io.handoff import KEPT_VIEWS

COUNT = 250


def numbered(count: int = COUNT):
    """Frames whose every pixel holds its frame number (mod 251)."""
    return (np.full((16, 24, 3), i % 251, np.uint8) for i in range(count))


def pipeline(workers: int = 1) -> hf.Pipeline:
    def add(frames: np.ndarray) -> np.ndarray:  # a new array a batch: the stage's own pool
        return frames + np.uint8(1)

    return hf.Pipeline.from_frames(numbered(), batch_size=8).map(add, workers=workers)


def right(frames: np.ndarray, ids: np.ndarray) -> bool:
    return bool(np.all(frames == ((ids % 251 + 1) % 256).astype(np.uint8)[:, None, None, None]))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_list_of_every_batch_holds_every_frame(workers: int) -> None:
    batches = pipeline(workers).iter_batches()
    kept = list(batches)
    assert sum(len(ids) for ids, _ in kept) == COUNT
    assert all(right(frames, ids) for ids, frames in kept)
    # the first come as views; later ones as copies, until the run ended (views again)
    assert 0 < batches.copies <= len(kept) - KEPT_VIEWS


def test_slices_kept_stay_right() -> None:
    slices = [(ids[:3], frames[:3]) for ids, frames in pipeline().iter_batches()]
    assert all(right(frames, ids) for ids, frames in slices)


def test_the_loop_that_keeps_nothing_copies_nothing() -> None:
    batches = pipeline(2).iter_batches()
    seen = 0
    for ids, frames in batches:
        assert right(frames, ids)
        seen += len(ids)
    assert seen == COUNT and batches.copies == 0


def test_the_previous_batch_kept_for_a_difference_is_no_copy() -> None:
    batches = pipeline().iter_batches()
    previous = None
    for ids, frames in batches:
        if previous is not None:
            assert right(previous[1], previous[0])
            assert int(frames[0, 0, 0, 0]) - int(previous[1][0, 0, 0, 0]) in (8, 8 - 251)
        previous = (ids, frames)
    assert batches.copies == 0


def test_batches_handed_to_another_thread_stay_right() -> None:
    handed: queue.Queue = queue.Queue(maxsize=4)
    checked: list[bool] = []

    def consume() -> None:
        while (item := handed.get()) is not None:
            threading.Event().wait(0.002)  # slower than the loop: batches wait in the queue
            checked.append(right(item[1], item[0]))

    worker = threading.Thread(target=consume)
    worker.start()
    for ids, frames in pipeline(2).iter_batches():
        handed.put((ids, frames))
    handed.put(None)
    worker.join()
    assert len(checked) == -(-COUNT // 8) and all(checked)


def test_leaving_while_holding_views_leaves_nothing_running() -> None:
    before = {t.ident for t in threading.enumerate()}
    kept = []
    batches = pipeline(2).iter_batches()
    for _, frames in batches:
        kept.append(frames)
        if len(kept) == 5:
            break
    batches.close()
    assert {t.ident for t in threading.enumerate()} <= before
    assert len(kept) == 5


@pytest.fixture
def torch():
    return pytest.importorskip("torch")  # the [gpu] extra, which make test installs


def test_batches_as_float_nchw_tensors(torch) -> None:
    batches = pipeline().iter_batches(tensors=hf.Tensors())
    seen = 0
    for ids, x in batches:
        assert isinstance(x, torch.Tensor) and x.dtype == torch.float32 and x.is_contiguous()
        assert tuple(x.shape) == (len(ids), 3, 16, 24)
        want = torch.from_numpy(((ids % 251 + 1) % 256).astype(np.float32) / 255)
        assert torch.equal(x[:, 1, 3, 5], want)
        seen += len(ids)
    assert seen == COUNT


def test_float_tensors_let_go_are_reused_and_those_kept_never_change(torch) -> None:
    def want(ids):
        return torch.from_numpy(((ids % 251 + 1) % 256).astype(np.float32) / 255)

    let_go = {x.data_ptr() for _, x in pipeline().iter_batches(tensors=hf.Tensors())}
    assert len(let_go) <= 3  # 32 batches in a few tensors, reused once nothing held them
    kept, views, arrays = [], [], []
    for k, (ids, x) in enumerate(pipeline().iter_batches(tensors=hf.Tensors())):
        held = (kept, views, arrays, [])[k % 4]  # the whole tensor, a view, an array, none
        if held is kept:
            kept.append((ids, x))
        elif held is views:
            views.append((ids[:1], x[:1, 1, 3, 5]))
        elif held is arrays:
            arrays.append((ids, x.numpy()))
    assert all(torch.equal(x[:, 1, 3, 5], want(ids)) for ids, x in kept)
    assert all(torch.equal(v, want(ids)) for ids, v in views)
    assert all(torch.equal(torch.from_numpy(a[:, 1, 3, 5]), want(ids)) for ids, a in arrays)


def test_a_loop_given_tensors_of_its_own_keeps_no_slot(torch) -> None:
    """Float tensors are copies: the plan leaves out the slots a loop that keeps views
    would hold, and every batch still comes right, none of them a copy of a copy."""
    float_run = pipeline().iter_batches(tensors=hf.Tensors())
    kept = list(float_run)
    views_run = pipeline().iter_batches(tensors=hf.Tensors(dtype="uint8"))
    for _ in views_run:
        pass
    assert float_run.report.pool_slots == views_run.report.pool_slots - KEPT_VIEWS  # a pool
    assert float_run.copies == 0 and len(kept) == -(-COUNT // 8)
    for ids, x in kept:
        assert torch.equal(x[:, 0, 0, 0], torch.from_numpy(((ids % 251 + 1) % 256) / 255).float())


def test_tensors_straight_from_the_source_take_two_slots_and_come_right(torch) -> None:
    """No stage between source and loop: one slot decoded into while the loop makes its
    tensors of the other, every frame right, kept tensors too; slots= still wins."""
    run = hf.Pipeline.from_frames(numbered(), batch_size=8).iter_batches(
        tensors=hf.Tensors(layout="NHWC")
    )
    kept = list(run)
    assert run.report.pool_slots == 2 and sum(len(ids) for ids, _ in kept) == COUNT
    for ids, x in kept:
        assert torch.equal(x[:, 0, 0, 0], torch.from_numpy((ids % 251) / 255).float())
    wider = hf.Pipeline.from_frames(numbered(), batch_size=8).iter_batches(
        tensors=hf.Tensors(), slots=4
    )
    assert sum(len(ids) for ids, _ in wider) == COUNT and wider.report.pool_slots == 4


def test_uint8_tensors_are_views_the_loop_owns(torch) -> None:
    kept = [(ids, x) for ids, x in pipeline(2).iter_batches(tensors=hf.Tensors(dtype="uint8"))]
    assert all(x.dtype == torch.uint8 and tuple(x.shape[1:]) == (3, 16, 24) for _, x in kept)
    assert all(right(x.permute(0, 2, 3, 1).numpy(), ids) for ids, x in kept)  # none overwritten


def test_tensor_options_are_checked() -> None:
    with pytest.raises(ValueError, match="layout must be"):
        hf.Tensors(layout="CHW")
    with pytest.raises(ValueError, match="dtype must be one of"):
        hf.Tensors(dtype="int7")
