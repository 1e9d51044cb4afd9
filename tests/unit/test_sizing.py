"""The run's plan is a pure function of the frames, the budget, the stages and the length."""

from __future__ import annotations

import pytest

from hyperframes import FrameSpec
from hyperframes.engine.sizing import (
    MAX_AUTO_BATCH,
    TARGET_SLOT_BYTES,
    default_budget,
    parse_memory,
    plan_run,
    stage_pools,
)
from hyperframes.store.sink import plan_pack

GIB = 1 << 30
K4, P1080, P720 = FrameSpec((2160, 3840, 3)), FrameSpec((1080, 1920, 3)), FrameSpec((720, 1280, 3))


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("512MiB", 512 << 20), ("2GB", 2 * 10**9), ("1.5 GiB", 3 << 29), (4096, 4096), ("64k", 64000)],
)
def test_parse_memory(text, nbytes):
    assert parse_memory(text) == nbytes


@pytest.mark.parametrize("bad", ["", "lots", "-5MiB", "0", 0, "12 parsecs", True, float("nan")])
def test_parse_memory_refuses(bad):
    with pytest.raises(ValueError, match="memory must"):
        parse_memory(bad)


def test_default_budget_is_a_quarter_of_what_is_available_up_to_one_gib():
    assert default_budget(available=24 * GIB) == GIB
    assert default_budget(available=2 * GIB) == GIB // 2
    assert default_budget() <= GIB


@pytest.mark.parametrize(
    ("spec", "batch"), [(K4, 1), (P1080, 2), (P720, 4), (FrameSpec((48, 64, 3)), MAX_AUTO_BATCH)]
)
def test_batch_follows_the_frame_bytes(spec, batch):
    plan = plan_run(spec, workers=2, budget=GIB)
    assert plan.batch_size == batch
    if 1 < batch < MAX_AUTO_BATCH:  # the largest power of two with a slot under the target
        assert batch * spec.nbytes <= TARGET_SLOT_BYTES < 2 * batch * spec.nbytes
    assert plan.slots == 5 and plan.pool_bytes == 5 * batch * spec.nbytes <= GIB


def test_a_small_budget_lowers_the_batch_then_refuses():
    assert plan_run(P720, workers=2, budget=40 << 20).batch_size == 2
    with pytest.raises(MemoryError, match="memory budget of 10 MiB cannot hold 5 slots of 1 frame"):
        plan_run(P720, workers=2, budget=10 << 20)


def test_the_length_caps_batch_and_slots():
    plan = plan_run(P720, workers=6, budget=GIB, length=3)
    assert (plan.batch_size, plan.slots) == (4, 2)  # one batch, and the source's last read
    assert plan_run(P720, workers=6, budget=GIB, length=400).slots == 9


def test_held_batches_are_counted_and_kept():
    held = lambda size: 64 // size + 2  # noqa: E731 - a grouping stage of max_len 60
    plan = plan_run(P1080, workers=1, budget=GIB, held=held, length=10)
    assert plan.slots >= held(plan.batch_size) + 1
    with pytest.raises(ValueError, match="slots must be at least"):
        plan_run(P1080, workers=1, budget=GIB, held=held, slots=3)


def test_an_explicit_batch_size_wins_unless_it_does_not_fit():
    assert plan_run(P720, workers=2, budget=GIB, batch_size=16).batch_size == 16
    with pytest.raises(MemoryError, match="smaller batch_size"):
        plan_run(K4, workers=2, budget=GIB, batch_size=64)


@pytest.mark.parametrize(("spec", "longest"), [(K4, 6), (P1080, 31), (P720, 60)])
def test_pack_fits_its_groups_to_the_budget(spec, longest):
    plan = plan_pack(spec, GIB, min_len=2)
    assert plan.max_len == longest
    held = (longest + 2 + 7) * spec.nbytes
    assert plan.pools >= held and plan.pending_bytes >= longest * spec.nbytes
    assert plan.pools + longest * spec.nbytes + 3 * plan.pending_bytes <= GIB


def test_pack_refuses_groups_the_budget_cannot_hold():
    with pytest.raises(MemoryError, match="cannot pack hyperframes of 60 frames"):
        plan_pack(K4, GIB, min_len=2, max_len=60)


def test_stages_that_declare_other_frames_are_planned_with_the_source():
    """720p in, a stage declaring 1080p out, 96 MiB: batch 4 (what the source alone gets)
    would need 142 MiB with the stage's pool; the plan picks 2 (71 MiB), before anything
    starts, where the run used to fail at its first batch."""
    hd, full = FrameSpec((720, 1280, 3)), FrameSpec((1080, 1920, 3))
    assert plan_run(hd, workers=1, budget=96 << 20).batch_size == 4
    pools = stage_pools(hd, [None, full, full, hd])
    assert pools == [full, hd]  # unchanged frames need no pool of their own
    plan = plan_run(hd, workers=1, budget=96 << 20, stage_specs=stage_pools(hd, [full]))
    assert (plan.batch_size, plan.slots) == (2, 4)
    assert plan.pool_bytes + plan.stage_bytes == (hd.nbytes + full.nbytes) * 2 * 4 <= 96 << 20
    with pytest.raises(MemoryError, match="stage pool of 1920x1080, 3 channels"):
        plan_run(hd, workers=1, budget=20 << 20, stage_specs=[full])


def test_a_run_with_a_larger_declared_stage_fits_the_plan_it_made():
    import numpy as np

    from hyperframes import Pipeline

    hd, full = FrameSpec((720, 1280, 3)), FrameSpec((1080, 1920, 3))
    frames = (np.full(hd.shape, i, np.uint8) for i in range(12))

    def upscale(batch):
        return np.repeat(np.repeat(batch, 3, axis=1), 3, axis=2)[:, :1080, :1920]

    report = Pipeline.from_frames(frames).map(upscale, spec=full).run(memory="96MiB")
    assert report.frames == 12 and report.batch_size == 2
    assert report.pool_high_water_bytes <= 96 << 20
