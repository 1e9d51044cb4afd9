"""How much memory a run may use, and the batch size and slots that follow from it.

A run has a memory budget in bytes. The frames' size decides the rest: the batch size
is the largest power of two whose slot stays near :data:`TARGET_SLOT_BYTES` (larger
batches stop helping once a slot outgrows the caches and the set-up it amortises) and
whose pool of ``slots`` slots fits the budget; the slots are what the line needs (one
per worker plus three), and no more than the batches the input can fill.

Everything here is a pure function of its arguments: no threads, no allocation.

Example:
    >>> plan = plan_run(FrameSpec((2160, 3840, 3)), workers=2, budget=1 << 30)
    >>> plan.batch_size, plan.slots
    (1, 5)
    >>> plan = plan_run(FrameSpec((720, 1280, 3)), workers=2, budget=1 << 30, length=10)
    >>> plan.batch_size, plan.slots
    (4, 4)
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..frames import FrameSpec, check_batch_size

TARGET_SLOT_BYTES = 16 << 20
"""The bytes of one slot the automatic batch size aims under (see ``benchmarks/sizing.py``)."""
MAX_AUTO_BATCH = 64
"""The largest batch the automatic size picks (small frames)."""
DEFAULT_BUDGET_CAP = 1 << 30
"""The default budget: the smaller of this and a quarter of the memory available."""
AVAILABLE_SHARE = 0.25

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1 << 10, "m": 1e6, "mb": 1e6,
          "mib": 1 << 20, "g": 1e9, "gb": 1e9, "gib": 1 << 30, "t": 1e12, "tb": 1e12,
          "tib": 1 << 40}  # fmt: skip
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*$")


def parse_memory(value: int | float | str) -> int:
    """Bytes from ``value``: a number of bytes, or a string like ``"512MiB"`` or ``"2GB"``.

    Raises:
        ValueError: not a size, or not above zero.
    """
    if isinstance(value, bool):
        raise ValueError(f"memory must be a number of bytes or a size like '512MiB', got {value}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = _SIZE.match(str(value).lower())
        unit = match.group(2) if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(
                f"memory must be a number of bytes or a size like '512MiB' or '2GB', got {value!r}"
            )
        number = float(match.group(1)) * _UNITS[unit]
    if not math.isfinite(number) or number < 1:
        raise ValueError(f"memory must be above zero, got {value!r}")
    return int(number)


def available_memory() -> int | None:
    """Bytes this process can still use: the smaller of the machine's available memory and
    what its cgroup (a container's limit) has left; ``None`` when neither is known."""
    known = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                known.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    limit = _cgroup_room()
    if limit is not None:
        known.append(limit)
    if not known:
        try:
            known.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            return None
    return min(known)


def _cgroup_room() -> int | None:
    """The cgroup v2 memory limit minus its current use, if a limit is set."""
    try:
        line = Path("/proc/self/cgroup").read_text().splitlines()[0]
        folder = Path("/sys/fs/cgroup") / line.split("::", 1)[1].lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((folder / "memory.current").read_text()))
    except (OSError, ValueError, IndexError):
        return None


def default_budget(available: int | None = None) -> int:
    """The budget of a run that names none: the smaller of 1 GiB and a quarter of
    ``available`` (by default, :func:`available_memory`)."""
    if available is None:
        available = available_memory()
    if available is None:
        return DEFAULT_BUDGET_CAP
    return max(1 << 20, min(DEFAULT_BUDGET_CAP, int(available * AVAILABLE_SHARE)))


@dataclass(frozen=True)
class Plan:
    """What a run allocates, and why.

    Attributes:
        batch_size: frames per batch.
        slots: slots of each pool.
        pool_bytes: bytes of the source's pool.
        stage_bytes: bytes of the stages' own pools whose frames are known before the run
            (declared ``spec=``), counted against the budget with the source's.
        budget: the run's memory budget in bytes (pools of every stage together).
        why: one line saying how the batch size was chosen.
    """

    batch_size: int
    slots: int
    pool_bytes: int
    budget: int
    why: str
    stage_bytes: int = 0


def auto_batch(spec: FrameSpec) -> int:
    """The batch size :func:`plan_run` starts from for frames of ``spec`` (before the budget
    and the input's length may lower it)."""
    return _pow2_floor(max(1, TARGET_SLOT_BYTES // max(1, spec.nbytes)), MAX_AUTO_BATCH)


def plan_run(
    spec: FrameSpec,
    *,
    workers: int,
    budget: int,
    held: Callable[[int], int] = lambda batch_size: 0,
    length: int | None = None,
    batch_size: int | None = None,
    slots: int | None = None,
    stage_specs: Sequence[FrameSpec] = (),
) -> Plan:
    """The batch size and slots of a run over frames of ``spec``.

    Every pool has the same slots and batch size: the source's, and one for each stage
    that changes the frames (``stage_specs``), so the plan picks the largest batch whose
    pools fit the budget together, and a run never fails mid-way for a pool it planned.

    Args:
        spec: the source's frames.
        workers: the stage workers of the line (each may hold a batch).
        budget: bytes the pools may take together.
        held: the batches ordered stages may hold back, for a batch size.
        length: the input's frames, if known: no more slots than batches (plus the
            source's last read), and no batch larger than the input.
        batch_size: an explicit batch size, which wins over the automatic one.
        slots: an explicit slot count (at least ``held + 1``).
        stage_specs: the frames of the stages' own pools (see :func:`stage_pools`).

    Raises:
        ValueError: ``slots`` too few for the batches ordered stages hold.
        MemoryError: ``budget`` cannot hold the slots of even one frame each, or an
            explicit ``batch_size`` does not fit it.
    """
    source = max(1, spec.nbytes)
    frame = source + sum(s.nbytes for s in stage_specs)  # a frame in every pool
    if batch_size is not None:
        sizes = [check_batch_size(batch_size)]
        why = "set by the caller"
    else:
        top = auto_batch(spec)
        if length is not None and length > 0:
            top = min(top, _pow2_ceil(length))
        sizes = [1 << k for k in range(top.bit_length() - 1, -1, -1)]
        why = f"the largest power of two with a slot under {_mib(TARGET_SLOT_BYTES)}"
    for size in sizes:
        hold = held(size)
        if slots is not None and slots < hold + 1:
            raise ValueError(
                f"slots must be at least {hold + 1} here (ordered stages hold up to {hold} "
                f"batches), got {slots}; leave slots= unset for the default"
            )
        need = slots if slots is not None else workers + 3 + hold
        if length is not None and length > 0:
            need = max(hold + 1, min(need, math.ceil(length / size) + 1))
        pool = frame * size * need
        if pool <= budget:
            if size != sizes[0]:
                why = f"the largest power of two whose {need} slots fit the budget"
            return Plan(size, need, source * size * need, budget, why, pool - source * size * need)
    what = f"{need} slots of {size} frame{'s' if size > 1 else ''} of {spec.describe()}"
    if stage_specs:
        what += f" (and {len(stage_specs)} stage pool{'s' if len(stage_specs) > 1 else ''} of "
        what += ", ".join(s.describe() for s in stage_specs) + ")"
    if hold:
        what += f", {hold} of them held back by ordered stages (a grouping's max_len, a window)"
    fix = (
        "pass a smaller batch_size= or a larger memory="
        if batch_size is not None
        else "pass a larger memory=, use fewer workers, or downscale the frames"
    )
    raise MemoryError(
        f"the memory budget of {_mib(budget)} cannot hold {what} ({_mib(pool)}); {fix} "
        f"(it needs at least memory='{_mib(pool).replace(' ', '')}')"
    )


def stage_pools(source: FrameSpec, specs: Sequence[FrameSpec | None]) -> list[FrameSpec]:
    """The frames of the stages' own pools, from the source's and each stage's declared
    output (``None``: not declared, taken as unchanged): a stage needs a pool of its own
    where its frames differ from those it gets."""
    pools, current = [], source
    for spec in specs:
        if spec is not None and spec != current:
            pools.append(spec)
            current = spec
    return pools


def _pow2_floor(value: int, cap: int) -> int:
    return min(cap, 1 << (max(1, int(value)).bit_length() - 1))


def _pow2_ceil(value: int) -> int:
    return 1 << max(0, int(value - 1).bit_length())


def _mib(nbytes: int) -> str:
    """``nbytes`` for a person, rounded up: ``"1.5 GiB"``, ``"300 MiB"``, ``"512 bytes"``."""
    if nbytes >= 1 << 30:
        return f"{math.ceil(nbytes / (1 << 30) * 10) / 10:g} GiB"
    if nbytes >= 1 << 20:
        return f"{math.ceil(nbytes / (1 << 20))} MiB"
    return f"{nbytes} bytes"
