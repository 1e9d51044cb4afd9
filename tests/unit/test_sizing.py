"""The run's plan is a pure function of the frames, the budget, the footprints of the stages
and the sink, and the input's length: tested here with no thread and no allocation."""

from __future__ import annotations

import pytest

from hyperframes import FrameSpec, Sink
from hyperframes.engine.plan import Footprint, least_budget, plan_run, pool_specs
from hyperframes.engine.sizing import (
    MAX_AUTO_BATCH,
    TARGET_SLOT_BYTES,
    default_budget,
    parse_memory,
)
from hyperframes.store.sink import ENCODING_COST, plan_pack, store_footprint

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


def maps(workers: int) -> list[Footprint]:
    return [Footprint("map", workers=workers)]


def grouping(max_len: int, min_len: int = 2) -> Footprint:
    from hyperframes.hyper.grouping.tagging import grouping_footprint

    return grouping_footprint(max_len=max_len, min_len=min_len)


@pytest.mark.parametrize(
    ("spec", "batch"), [(K4, 1), (P1080, 2), (P720, 4), (FrameSpec((48, 64, 3)), MAX_AUTO_BATCH)]
)
def test_batch_follows_the_frame_bytes(spec, batch):
    plan = plan_run(spec, maps(2), budget=GIB)
    assert plan.batch_size == batch
    if 1 < batch < MAX_AUTO_BATCH:  # the largest power of two with a slot under the target
        assert batch * spec.nbytes <= TARGET_SLOT_BYTES < 2 * batch * spec.nbytes
    assert plan.slots == 5 and plan.pool_bytes == 5 * batch * spec.nbytes <= GIB
    assert [p.name for p in plan.pools] == ["source"] and plan.sink_bytes == 0


def test_a_small_budget_lowers_the_batch_then_refuses():
    assert plan_run(P720, maps(2), budget=40 << 20).batch_size == 2
    with pytest.raises(MemoryError, match="memory budget of 10 MiB cannot hold 5 slots of 1 frame"):
        plan_run(P720, maps(2), budget=10 << 20)


def test_the_length_caps_batch_and_slots():
    plan = plan_run(P720, maps(6), budget=GIB, length=3)
    assert (plan.batch_size, plan.slots) == (4, 2)  # one batch, and the source's last read
    assert plan_run(P720, maps(6), budget=GIB, length=400).slots == 9


def test_held_batches_are_counted_and_kept():
    group = grouping(60)  # holds ceil(62 / batch) + 2 batches
    plan = plan_run(P1080, [group], budget=GIB, length=10)
    assert plan.slots >= group.held(plan.batch_size) + 1
    assert group.held(1) == 64 and group.held(4) == 18
    with pytest.raises(ValueError, match="slots must be at least"):
        plan_run(P1080, [group], budget=GIB, slots=3)


def test_an_explicit_batch_size_wins_unless_it_does_not_fit():
    assert plan_run(P720, maps(2), budget=GIB, batch_size=16).batch_size == 16
    with pytest.raises(MemoryError, match="smaller batch_size"):
        plan_run(K4, maps(2), budget=GIB, batch_size=64)


@pytest.mark.parametrize(("spec", "longest"), [(K4, 7), (P1080, 31), (P720, 60)])
def test_pack_fits_its_groups_to_the_budget(spec, longest):
    """The pools (with the frames the grouping holds), the sink's group buffer and the groups
    being encoded fit the budget together: the same plan the run makes."""
    plan = plan_pack(spec, GIB, min_len=2)
    assert plan.max_len == longest
    run = plan.run
    group = longest * spec.nbytes
    assert run.slots >= grouping(longest).held(run.batch_size) + 1
    assert run.sink_bytes >= group + ENCODING_COST * group  # the buffer and one group encoding
    assert run.pool_bytes + run.sink_bytes <= GIB
    if longest < 60:  # one frame longer does not fit
        with pytest.raises(MemoryError):
            plan_pack(spec, GIB, min_len=2, max_len=longest + 1, batch_size=run.batch_size)


def test_pack_refuses_groups_the_budget_cannot_hold():
    with pytest.raises(MemoryError, match="cannot pack hyperframes of 60 frames"):
        plan_pack(K4, GIB, min_len=2, max_len=60)


def test_the_sink_gets_what_the_pools_leave_up_to_what_it_wants():
    sink = store_footprint(P720, 30, workers=2)
    group = 30 * P720.nbytes
    assert (sink.least, sink.wants) == (4 * group, group + 12 * group)
    roomy = plan_run(P720, [grouping(30)], budget=4 * GIB, sink=sink)
    assert roomy.sink_bytes == sink.wants and roomy.left > 0
    tight = plan_run(P720, [grouping(30)], budget=GIB, sink=sink)
    assert sink.least <= tight.sink_bytes < sink.wants
    assert tight.pool_bytes + tight.sink_bytes == GIB and tight.left == 0
    need = least_budget(P720, [grouping(30)], sink=sink)
    plan_run(P720, [grouping(30)], budget=need, sink=sink)  # the least it needs fits
    with pytest.raises(MemoryError, match="and the store's"):
        plan_run(P720, [grouping(30)], budget=need - 1, sink=sink)


def test_stages_that_declare_other_frames_are_planned_with_the_source():
    """720p in, a stage declaring 1080p out, 96 MiB: batch 4 (what the source alone gets)
    would need 142 MiB with the stage's pool; the plan picks 2 (71 MiB), before anything
    starts, where the run used to fail at its first batch."""
    hd, full = FrameSpec((720, 1280, 3)), FrameSpec((1080, 1920, 3))
    assert plan_run(hd, maps(1), budget=96 << 20).batch_size == 4
    pools = pool_specs(hd, [None, full, full, hd], ["a", "b", "c", "d"])
    assert pools == [("b", full), ("d", hd)]  # unchanged frames need no pool of their own
    up = [Footprint("up", spec=full)]
    plan = plan_run(hd, up, budget=96 << 20)
    assert (plan.batch_size, plan.slots) == (2, 4)
    assert [(p.name, p.spec) for p in plan.pools] == [("source", hd), ("up", full)]
    assert plan.pool_of("up") is plan.pools[1] and plan.pool_of("source") is None
    assert plan.pool_bytes == (hd.nbytes + full.nbytes) * 2 * 4 <= 96 << 20
    with pytest.raises(MemoryError, match="stage pool of 1920x1080, 3 channels"):
        plan_run(hd, up, budget=20 << 20)


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


class Holding(Sink):
    """A sink that holds ``least`` bytes outside the pools and wants ``wants``."""

    def __init__(self, least: int, wants: int) -> None:
        self.least, self.wants, self.granted, self.frames = least, wants, None, 0

    def footprint(self, spec, facts):
        return Footprint("holding sink", least=self.least, wants=self.wants)

    def grant(self, nbytes):
        self.granted = nbytes

    def write(self, frames, index, meta):
        self.frames += len(frames)


def test_the_sink_is_in_the_run_plan_and_is_granted_its_share():
    """720p, 64 MiB: batch 4 (4 slots, 43 MiB) leaves too little for a sink that needs
    25 MiB, so the plan takes batch 2, and grants the sink what the pools leave."""
    import numpy as np

    from hyperframes import Pipeline

    frames = np.zeros((16, *P720.shape), np.uint8)
    roomy = Holding(0, 0)
    assert (
        Pipeline.from_frames(frames).map(lambda f: f).to(roomy).run(memory="64MiB").batch_size == 4
    )
    sink = Holding(25 << 20, 100 << 20)
    report = Pipeline.from_frames(frames).map(lambda f: f).to(sink).run(memory="64MiB")
    assert report.batch_size == 2 and sink.frames == 16
    assert sink.granted == (64 << 20) - report.pool_bytes >= 25 << 20
    with pytest.raises(MemoryError, match="and the holding sink's 60 MiB"):
        Pipeline.from_frames(frames).to(Holding(60 << 20, 60 << 20)).run(memory="64MiB")


def test_every_planned_pool_is_made_before_the_first_frame_is_read(monkeypatch):
    import numpy as np

    from hyperframes import Pipeline
    from hyperframes.executors import ThreadExecutor

    made: list[int] = []
    allocate = ThreadExecutor.allocate
    monkeypatch.setattr(
        ThreadExecutor, "allocate", lambda self, n: made.append(n) or allocate(self, n)
    )
    small, large = FrameSpec((8, 8, 3)), FrameSpec((16, 16, 3))
    seen: list[int] = []

    def frame(i):
        seen.append(len(made))
        return np.full(small.shape, i, np.uint8)

    def upscale(batch):
        return np.repeat(np.repeat(batch, 2, axis=1), 2, axis=2)

    report = (
        Pipeline.from_generator(frame, count=8, spec=small, batch_size=2)
        .map(upscale, spec=large, name="up")
        .run(memory="1MiB")
    )
    assert report.frames == 8 and seen[0] == len(made) == 2  # the source's and the stage's
    assert sorted(made) == sorted([small.nbytes * 2 * report.pool_slots,
                                   large.nbytes * 2 * report.pool_slots])  # fmt: skip


def test_scratch_is_planned_for_retries_isolation_and_reuse_rows():
    plain = plan_run(P720, [Footprint("map", workers=2)], budget=GIB)
    scratch = Footprint("map", workers=2, scratch_batches=4)
    planned = plan_run(P720, [scratch], budget=GIB)
    assert planned.scratch_of("map") is not None and planned.scratch_of("map").slots == 4
    assert planned.pool_bytes - plain.pool_bytes == 4 * P720.nbytes * planned.batch_size
    assert least_budget(P720, [scratch]) - least_budget(P720, [Footprint("map", workers=2)]) == (
        4 * P720.nbytes
    )
    with pytest.raises(MemoryError, match="4 scratch slots"):
        plan_run(K4, [scratch], budget=6 * K4.nbytes)


def test_backups_rows_and_frames_tried_alone_come_from_the_plans_scratch(monkeypatch):
    """No pool is made outside the plan while a run retries, isolates a failing frame and
    shares answers: each takes slots of the stage's scratch pool, which the plan counted."""
    import numpy as np

    from hyperframes import Pipeline, Retry, ReuseTarget
    from hyperframes.engine import stage_run
    from hyperframes.hyper.reuse import _rows

    made: list[str] = []
    for module in (stage_run, _rows):
        real = module.FramePool
        monkeypatch.setattr(
            module,
            "FramePool",
            lambda *a, _real=real, **k: made.append(k["name"]) or _real(*a, **k),
        )
    frames = np.arange(48, dtype=np.uint8).repeat(8 * 8 * 3).reshape(48, 8, 8, 3)

    def flaky(batch):
        if (batch[:, 0, 0, 0] == 5).any():
            raise ValueError("frame 5 never works")
        return batch

    def labels(batch):
        return [int(f[0, 0, 0]) // 16 for f in batch]

    dead = (
        Pipeline.from_frames(frames, batch_size=4)
        .map(flaky, workers=2, faults=Retry(retries=1, backoff=0.0))
        .run(allow_failures=1)
    )
    reused = (
        Pipeline.from_frames(frames, batch_size=4)
        .map(labels, workers=2, into="label", reuse=ReuseTarget(0.9))
        .run()
    )
    assert dead.frames == 47 and len(dead.failures) == 1 and reused.frames == 48
    assert made == []


def test_a_pack_in_python_counts_the_store_and_fails_before_writing_anything(tmp_path):
    import numpy as np

    from hyperframes import Pipeline
    from hyperframes.store import StoreSink

    frames = np.zeros((8, *P720.shape), np.uint8)
    store = tmp_path / "s.hfs"
    pipeline = Pipeline.from_frames(frames).group(max_len=8).to(StoreSink(store))
    with pytest.raises(MemoryError, match=r"and the store's 85 MiB \(119 MiB\).*memory='119MiB'"):
        pipeline.run(memory="100MiB")
    assert not store.exists()
    report = pipeline.run(memory="200MiB")
    assert report.frames == 8 and report.pool_bytes + (85 << 20) <= 200 << 20
