"""How much memory a run may use: its budget in bytes, from what the user says or the
machine has (``engine.plan`` divides it among the pools and the sink).

Example:
    >>> parse_memory("512MiB")
    536870912
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

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


def mib(nbytes: int) -> str:
    """``nbytes`` for a person, rounded up: ``"1.5 GiB"``, ``"300 MiB"``, ``"512 bytes"``."""
    if nbytes >= 1 << 30:
        return f"{math.ceil(nbytes / (1 << 30) * 10) / 10:g} GiB"
    if nbytes >= 1 << 20:
        return f"{math.ceil(nbytes / (1 << 20))} MiB"
    return f"{nbytes} bytes"
