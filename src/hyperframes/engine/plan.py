"""The one plan of a run's memory: every pool, and what the sink may hold, before anything starts.

Every stage and the sink declare what they take as data (:class:`Footprint`): the frames
a stage writes when it declares other frames, the batches it may hold back (a grouping's
longest hyperframe, a window's frames after, a reuse strategy's rounds), the bytes a sink
holds outside the pools (a store's group buffer and the groups being encoded). One pure
function, :func:`plan_run`, turns the source's frames, those footprints and the budget
into the batch size and every pool's size; the runner allocates them all up front, and
``pack``, chunked segments and the CLI read the same plan. A plan that cannot give every
pool one frame per slot fails here, naming what it needs, so no run fails mid-way for
memory its plan promised. (A stage that does not declare its frames gets its pool from
what the plan left, when its first result shows its frames.)

The batch size (unless set) is the largest power of two whose slot stays near
:data:`~.sizing.TARGET_SLOT_BYTES` and whose pools fit the budget with the sink's least;
the slots are one per stage worker plus three (source, sink, spare) plus what stages hold
back, and no more than the batches the input can fill. The sink gets what is left, up
to what it can use.

Example:
    >>> plan = plan_run(FrameSpec((2160, 3840, 3)), [Footprint("map", workers=2)],
    ...                 budget=1 << 30)
    >>> plan.batch_size, plan.slots
    (1, 5)
    >>> grouping = Footprint("group", held_frames=62, held_batches=2)
    >>> plan_run(FrameSpec((720, 1280, 3)), [grouping], budget=1 << 30).slots
    22
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..frames import FrameSpec, check_batch_size
from ..io.base import NOTHING, Footprint
from .sizing import MAX_AUTO_BATCH, TARGET_SLOT_BYTES, mib


@dataclass(frozen=True)
class PoolPlan:
    """One pool of a run: ``slots`` slots of ``batch_size`` frames of ``spec``."""

    name: str
    spec: FrameSpec
    batch_size: int
    slots: int

    @property
    def nbytes(self) -> int:
        return self.spec.nbytes * self.batch_size * self.slots


@dataclass(frozen=True)
class Plan:
    """What a run allocates, and why.

    Attributes:
        batch_size: frames per batch.
        slots: slots of each pool.
        pools: every pool known before the run: the source's first, then one for each
            stage that declares other frames (by the stage's name).
        scratch: the scratch pool of each stage that declares scratch batches (by the
            stage's name): slots of the frames it gets.
        sink_bytes: what the sink may hold outside the pools.
        budget: the run's memory budget in bytes (pools, source and sink together).
        why: one line saying how the batch size was chosen.
    """

    batch_size: int
    slots: int
    pools: tuple[PoolPlan, ...]
    sink_bytes: int
    budget: int
    why: str
    scratch: tuple[PoolPlan, ...] = ()
    source_bytes: int = 0
    """What the source may hold outside the pools (a decoder's frames)."""

    @property
    def pool_bytes(self) -> int:
        """The bytes of every pool planned, scratch pools included."""
        return sum(pool.nbytes for pool in (*self.pools, *self.scratch))

    @property
    def left(self) -> int:
        """What the budget has left for the pools of stages that did not declare their
        frames."""
        return self.budget - self.pool_bytes - self.sink_bytes - self.source_bytes

    def scratch_of(self, name: str) -> PoolPlan | None:
        """The scratch pool planned for stage ``name``, if it declared scratch batches."""
        return next((pool for pool in self.scratch if pool.name == name), None)

    def pool_of(self, name: str) -> PoolPlan | None:
        """The pool planned for stage ``name``, if it declared other frames."""
        return next((pool for pool in self.pools[1:] if pool.name == name), None)


def auto_batch(spec: FrameSpec) -> int:
    """The batch size :func:`plan_run` starts from for frames of ``spec`` (before the budget
    and the input's length may lower it)."""
    return _pow2_floor(max(1, TARGET_SLOT_BYTES // max(1, spec.nbytes)), MAX_AUTO_BATCH)


def plan_run(
    spec: FrameSpec,
    stages: Sequence[Footprint],
    *,
    budget: int,
    sink: Footprint = NOTHING,
    source: Footprint = NOTHING,
    length: int | None = None,
    batch_size: int | None = None,
    slots: int | None = None,
) -> Plan:
    """The batch size, slots and pools of a run over frames of ``spec`` through ``stages``
    into ``sink``.

    Every pool has the same slots and batch size, so the plan picks the largest batch
    whose pools fit the budget together with the source's and the sink's ``least``; the
    source then gets what is left up to its ``wants`` (a decoder's threads), and the
    sink the rest up to its own.

    Args:
        spec: the source's frames.
        stages: the stages' footprints, in order.
        budget: the bytes the pools, the source and the sink may take together.
        sink: the sink's footprint.
        source: what the source holds outside the pools (``least``, ``wants``).
        length: the input's frames, if known: no more slots than batches (plus the
            source's last read), and no batch larger than the input.
        batch_size: an explicit batch size, which wins over the automatic one.
        slots: an explicit slot count (at least what the stages hold, plus one).

    Raises:
        ValueError: ``slots`` too few for the batches the stages hold.
        MemoryError: ``budget`` cannot hold the sink's least and every pool's slots of
            even one frame each, or an explicit ``batch_size`` does not fit it.
    """
    pools = pool_specs(spec, [stage.spec for stage in stages], [stage.name for stage in stages])
    names = ["source", *(name for name, _ in pools)]
    frame = sum(s.nbytes for s in [spec, *(s for _, s in pools)])  # a frame in every pool
    scratch = scratch_specs(spec, stages)
    frame_scratch = sum(s.nbytes * slots_ for _, s, slots_ in scratch)  # a frame a slot
    workers = sum(stage.workers for stage in stages)
    if batch_size is not None:
        sizes = [check_batch_size(batch_size)]
        why = "set by the caller"
    else:
        top = auto_batch(spec)
        if length is not None and length > 0:
            top = min(top, _pow2_ceil(length))
        sizes = [1 << k for k in range(top.bit_length() - 1, -1, -1)]
        why = f"the largest power of two with a slot under {mib(TARGET_SLOT_BYTES)}"
    for size in sizes:
        need = slots_needed([*stages, sink], size, workers=workers, length=length, slots=slots)
        if (frame * need + frame_scratch) * size + sink.least + source.least <= budget:
            if size != sizes[0]:
                why = f"the largest power of two whose {need} slots fit the budget"
            planned = tuple(
                PoolPlan(name, s, size, need)
                for name, s in zip(names, [spec, *(s for _, s in pools)], strict=True)
            )
            extra = tuple(PoolPlan(name, s, size, n) for name, s, n in scratch)
            left = budget - (frame * need + frame_scratch) * size
            source_bytes = min(left - sink.least, max(source.least, source.wants))
            sink_bytes = min(left - source_bytes, max(sink.least, sink.wants))
            return Plan(size, need, planned, sink_bytes, budget, why, extra, source_bytes)
    raise MemoryError(_too_small(spec, stages, pools, sink, source, budget, size, need, batch_size))


def least_budget(
    spec: FrameSpec,
    stages: Sequence[Footprint],
    *,
    sink: Footprint = NOTHING,
    source: Footprint = NOTHING,
    length: int | None = None,
    batch_size: int | None = None,
    slots: int | None = None,
) -> int:
    """The smallest budget :func:`plan_run` accepts for this run (at ``batch_size``, or one
    frame per slot)."""
    size = batch_size or 1
    pools = pool_specs(spec, [stage.spec for stage in stages])
    frame = sum(s.nbytes for s in [spec, *(s for _, s in pools)])
    frame_scratch = sum(s.nbytes * n for _, s, n in scratch_specs(spec, stages))
    workers = sum(stage.workers for stage in stages)
    need = slots_needed([*stages, sink], size, workers=workers, length=length, slots=slots)
    return (frame * need + frame_scratch) * size + sink.least + source.least


def slots_needed(
    stages: Sequence[Footprint],
    batch_size: int,
    *,
    workers: int,
    length: int | None = None,
    slots: int | None = None,
) -> int:
    """The slots of each pool with batches of ``batch_size``: one per worker plus three
    (source, sink, spare) plus what the stages (and the sink) hold back, no more than the input's
    batches plus one; or ``slots`` when given (at least what the stages hold, plus one)."""
    hold = sum(stage.held(batch_size) for stage in stages)
    if slots is not None and slots < hold + 1:
        raise ValueError(
            f"slots must be at least {hold + 1} here (ordered stages hold up to {hold} "
            f"batches), got {slots}; leave slots= unset for the default"
        )
    need = slots if slots is not None else workers + 3 + hold
    if length is not None and length > 0:
        need = max(hold + 1, min(need, math.ceil(length / batch_size) + 1))
    return need


def pool_specs(
    source: FrameSpec, specs: Sequence[FrameSpec | None], names: Sequence[str] | None = None
) -> list[tuple[str, FrameSpec]]:
    """The stages' own pools, from the source's frames and each stage's declared frames
    (``None``: not declared, taken as unchanged): a stage needs a pool of its own where its
    frames differ from those it gets. Each pool is named by its stage (by position when
    ``names`` is not given)."""
    pools, current = [], source
    for k, spec in enumerate(specs):
        if spec is not None and spec != current:
            pools.append((str(k) if names is None else names[k], spec))
            current = spec
    return pools


def scratch_specs(
    source: FrameSpec, stages: Sequence[Footprint]
) -> list[tuple[str, FrameSpec, int]]:
    """``(stage name, the frames it gets, slots)`` of each stage that declares scratch
    batches."""
    out, current = [], source
    for stage in stages:
        if stage.scratch_batches:
            out.append((stage.name, current, stage.scratch_batches))
        current = stage.spec or current
    return out


def _too_small(
    spec: FrameSpec,
    stages: Sequence[Footprint],
    pools: list[tuple[str, FrameSpec]],
    sink: Footprint,
    source: Footprint,
    budget: int,
    size: int,
    need: int,
    batch_size: int | None,
) -> str:
    """The one line that says what the budget cannot hold, and what to do."""
    scratch = scratch_specs(spec, stages)
    frame = sum(s.nbytes for s in [spec, *(s for _, s in pools)])
    total = (frame * need + sum(s.nbytes * n for _, s, n in scratch)) * size + sink.least
    total += source.least
    what = f"{need} slots of {size} frame{'s' if size > 1 else ''} of {spec.describe()}"
    if pools:
        what += f" (and {len(pools)} stage pool{'s' if len(pools) > 1 else ''} of "
        what += ", ".join(s.describe() for _, s in pools) + ")"
    if scratch:
        what += f", {sum(n for *_, n in scratch)} scratch slots (reuse rows, retry backups)"
    hold = sum(stage.held(size) for stage in stages)
    if hold:
        what += f", {hold} of them held back by ordered stages (a grouping's max_len, a window)"
    if sink.least:
        what += f", and the {possessive(sink.name)} {mib(sink.least)}"
    if source.least:
        what += f", and the {possessive(source.name)} {mib(source.least)}"
    fix = (
        "pass a smaller batch_size= or a larger memory="
        if batch_size is not None
        else "pass a larger memory=, use fewer workers, or downscale the frames"
    )
    return (
        f"the memory budget of {mib(budget)} cannot hold {what} ({mib(total)}); {fix} "
        f"(it needs at least memory='{mib(total).replace(' ', '')}')"
    )


def possessive(name: str) -> str:
    """``"decoder's"``, ``"results'"``."""
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def _pow2_floor(value: int, cap: int) -> int:
    return min(cap, 1 << (max(1, int(value)).bit_length() - 1))


def _pow2_ceil(value: int) -> int:
    return 1 << max(0, int(value - 1).bit_length())
