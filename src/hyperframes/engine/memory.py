"""A run's memory: its budget, the plan made from it, and the pools made from the plan.

:func:`plan_for` reads the footprints of a run's stages and sink (data: nothing is built)
and the budget the user gave, or the machine's default, and makes the run's plan
(:func:`.plan.plan_run`). :class:`Pools` makes every pool the plan sized, up front, and
the pool of a stage that did not declare its frames, when its first result shows them,
from what the plan left of the budget.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..executors import Executor
from ..frames import FramePool, FrameSpec, check_pool_memory
from ..io.base import Sink, Source
from .plan import Plan, PoolPlan, least_budget, plan_run
from .sizing import default_budget, parse_memory
from .stage import Stage


def plan_for(
    source: Source,
    stages: Sequence[Stage],
    sink: Sink,
    *,
    sink_spec: FrameSpec,
    batch_size: int | None,
    slots: int | None,
    memory: int | str | None,
    isolating: bool = False,
) -> Plan:
    """The plan of a run of ``stages`` from ``source`` into ``sink`` (which gets frames of
    ``sink_spec``). Without ``memory`` the budget is the machine's default, or what the run
    needs at least where that is more (an explicit batch size or a grouping's ``max_len``
    wins over the default), within half of the machine's memory. ``isolating``: the run
    tries failing batches frame by frame (``allow_failures``), which takes scratch slots.

    Raises:
        MemoryError: the budget cannot hold the run (see :func:`.plan.plan_run`).
    """
    footprints = [stage.footprint(isolating=isolating) for stage in stages]
    facts: dict[str, Any] = {}
    for stage in stages:
        facts.update(stage.facts or {})
    held = sink.footprint(sink_spec, facts)
    reading = source.footprint()
    length = source.length if isinstance(source.length, int) else None
    if memory is not None:
        budget = parse_memory(memory)
    else:
        budget = default_budget()
        least = least_budget(
            source.spec, footprints, sink=held, source=reading, length=length,
            batch_size=batch_size, slots=slots,
        )  # fmt: skip
        if least > budget:
            check_pool_memory(
                least, what=f"this run's pools (batches of {batch_size or 1} frames of "
                f"{source.spec.describe()}) and what its source and sink hold",
            )  # fmt: skip
            budget = least
    return plan_run(
        source.spec, footprints, budget=budget, sink=held, source=reading, length=length,
        batch_size=batch_size, slots=slots,
    )  # fmt: skip


class Pools:
    """The pools of one run, made under ``executor`` as ``plan`` says."""

    def __init__(self, plan: Plan, executor: Executor) -> None:
        self.plan = plan
        self.executor = executor
        self._left = plan.left
        self._lock = threading.Lock()

    def make(self, planned: PoolPlan, buffer: Any = None) -> FramePool:
        """The pool ``planned``, in ``buffer`` where given, else in memory allocated now."""
        return FramePool(
            planned.spec,
            batch_size=planned.batch_size,
            slots=planned.slots,
            name=planned.name,
            buffer=self.executor.allocate(planned.nbytes) if buffer is None else buffer,
        )

    def allocate(self, nbytes: int, what: str) -> Any:
        """The memory of the pool of a stage that did not declare its frames, made when its
        first result shows them, from what the plan left of the budget.

        Raises:
            MemoryError: the pool does not fit what the budget has left.
        """
        with self._lock:
            if nbytes > self._left:
                raise MemoryError(
                    f"{what} needs {nbytes / 2**20:.0f} MiB, but the run's memory budget of "
                    f"{self.plan.budget / 2**20:.0f} MiB has {self._left / 2**20:.0f} MiB "
                    "left; pass a larger memory= or a smaller batch_size=, or declare the "
                    "stage's spec= so the plan counts it before the run starts"
                )
            self._left -= nbytes
        return self.executor.allocate(nbytes)
