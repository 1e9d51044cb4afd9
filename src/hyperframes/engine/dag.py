"""Tasks with declared dependencies, run in topological order with bounded parallelism.

For work where some frames or hyperframes read others' results ("frames 5 and 6 both
depend on 4, so they run together once 4 is done"). Results equal a serial run's.

Example:
    >>> g = TaskGraph()
    >>> g.add(4, lambda: 10)
    >>> g.add(5, lambda four: four + 1, deps=[4])
    >>> g.add(6, lambda four: four + 2, deps=[4])
    >>> g.run(workers=2)
    {4: 10, 5: 11, 6: 12}
"""

from __future__ import annotations

import collections
import graphlib
import heapq
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from ..errors import CycleError


class TaskGraph:
    """A set of tasks ``key -> fn(*results of deps)``."""

    def __init__(self) -> None:
        self._fns: dict[Hashable, Callable[..., Any]] = {}
        self._deps: dict[Hashable, tuple[Hashable, ...]] = {}

    def __len__(self) -> int:
        return len(self._fns)

    def add(self, key: Hashable, fn: Callable[..., Any], *, deps: Iterable[Hashable] = ()) -> None:
        """Add task ``key``; ``fn`` gets the results of ``deps``, in the order given."""
        if key in self._fns:
            raise ValueError(f"task {key!r} was added twice")
        if not callable(fn):
            raise TypeError(f"task {key!r} needs a callable, got {type(fn).__name__}")
        self._fns[key] = fn
        self._deps[key] = tuple(deps)

    def order(self) -> list[Hashable]:
        """A topological order (stable: ties keep the order tasks were added in).

        Raises:
            KeyError: a task depends on a task that was never added.
            CycleError: the dependencies form a cycle; the message lists it.
        """
        for key, deps in self._deps.items():
            for dep in deps:
                if dep not in self._fns:
                    raise KeyError(f"task {key!r} depends on {dep!r}, which was never added")
        waiting = {k: len(set(d)) for k, d in self._deps.items()}
        users: dict[Hashable, list[Hashable]] = {k: [] for k in self._fns}
        for key, deps in self._deps.items():
            for dep in set(deps):
                users[dep].append(key)
        ready = collections.deque(k for k in self._fns if waiting[k] == 0)
        out: list[Hashable] = []
        while ready:
            key = ready.popleft()
            out.append(key)
            for user in users[key]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    ready.append(user)
        if len(out) < len(self._fns):
            cycle = self._find_cycle({k for k in self._fns if waiting[k] > 0})
            shown = " -> ".join(repr(k) for k in [*cycle, cycle[0]])
            raise CycleError(f"tasks depend on each other in a cycle: {shown}", list(cycle))
        return out

    def run(self, *, workers: int = 1) -> dict[Hashable, Any]:
        """Run every task, at most ``workers`` at once; return ``{key: result}`` in order.

        Tasks that are ready together start in the order of :meth:`order`. The first
        exception stops new tasks from starting, waits for those running, and is raised
        with a note naming the task.

        Raises:
            KeyError: a task depends on a task that was never added.
            CycleError: the dependencies form a cycle; the message lists it.

        Note:
            Readiness is tracked by :class:`graphlib.TopologicalSorter`, so scheduling costs
            O(tasks + dependencies) in all, not a scan of every task per completion.
        """
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        order = self.order()  # names a missing dependency or a cycle before anything runs
        rank = {k: i for i, k in enumerate(order)}
        sorter: graphlib.TopologicalSorter[Hashable] = graphlib.TopologicalSorter()
        for key in order:
            sorter.add(key, *self._deps[key])
        sorter.prepare()
        ready: list[tuple[int, Hashable]] = []  # a heap keyed on rank: ties keep order()

        def admit(keys: Iterable[Hashable]) -> None:
            for k in keys:
                heapq.heappush(ready, (rank[k], k))

        admit(sorter.get_ready())
        results: dict[Hashable, Any] = {}
        running: dict[Future[Any], Hashable] = {}
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hf-dag") as pool:
            while ready or running:
                while ready and len(running) < workers:
                    _, key = heapq.heappop(ready)
                    args = [results[d] for d in self._deps[key]]
                    running[pool.submit(self._fns[key], *args)] = key
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: rank[running[f]]):
                    key = running.pop(future)
                    error = future.exception()
                    if error is not None:
                        wait(running)
                        error.add_note(f"in task {key!r} of the task graph")
                        raise error
                    results[key] = future.result()
                    sorter.done(key)
                admit(sorter.get_ready())
        return {k: results[k] for k in order}

    def _find_cycle(self, stuck: set[Hashable]) -> list[Hashable]:
        """One cycle among the tasks that never became ready."""
        start = next(k for k in self._fns if k in stuck)
        path: list[Hashable] = []
        seen: dict[Hashable, int] = {}
        key = start
        while key not in seen:
            seen[key] = len(path)
            path.append(key)
            key = next(d for d in self._deps[key] if d in stuck)
        return path[seen[key] :]
