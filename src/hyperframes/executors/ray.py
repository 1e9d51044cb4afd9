"""The same pipeline on a Ray cluster: ``executor="ray"`` (the ``[ray]`` extra).

Two ways to use a cluster:

* **Stages as actors** (:class:`RayExecutor`). Source, pools and sink stay in the
  driver; each stage gets ``workers`` Ray actors (spread over the nodes), and each of
  the stage's engine threads calls one actor at a time and waits, so a stage never has
  more than ``workers`` batches out on the cluster (the engine's pools bound the rest)
  and order is restored at the sink as in a local run. Pools are shared memory: an
  actor on the driver's host works on the pool slots themselves and only handles
  cross Ray; for an actor on another host, batches travel through Ray's object store
  and the result of an in-place stage is copied back into its pool slot.
* **Chunked** (:func:`hyperframes.chunked.run_chunked`). One long video is cut at keyframes into
  segments; a Ray task decodes, processes and encodes each segment on its own (with a
  halo of extra frames for windowed stages), and the segments are joined by stream
  copy. Finished segments are kept, so a rerun does only what is missing.

Ray is imported in ``_ray_connect.py`` (connecting, checks) and nowhere else.

Example:
    >>> from hyperframes.executors.ray import RayExecutor  # doctest: +SKIP
    >>> pipeline.run(executor=RayExecutor(address="auto"))  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import StageError
from ..frames import committed_memory
from ._ray_actor import Answer, StageActor, pack
from ._ray_connect import (
    check_shippable,
    import_ray,
    leave_quickly,
    node_id,
    ship_by_value,
    start_ray,
)
from ._shm import SharedBlocks, SharedMemoryFull
from ._wire import Shared, reraised

__all__ = [
    "RayExecutor", "check_shippable", "import_ray", "leave_quickly", "node_id", "ship_by_value",
]  # fmt: skip


def _actor_died(stage: str, exc: BaseException) -> StageError:
    return StageError(
        f"stage {stage!r}: its Ray actor died ({exc}); the run stopped (a node was lost, "
        "the actor ran out of memory, or the function could not be loaded on the worker)"
    )


class _RayRemote:
    """``fn`` as called from the engine's threads: each call goes to an idle actor.

    ``actors`` pairs each actor with whether it maps the driver's shared ``blocks``: a
    bool, or the pending answer of its probe (read at its first call, so actors start
    while the run allocates its pools).
    """

    def __init__(
        self,
        ray: Any,
        actors: list[tuple[Any, Any]],
        blocks: SharedBlocks,
        *,
        stage: str,
        calls: collections.Counter[str],
    ) -> None:
        self._ray, self._blocks, self._stage, self._calls = ray, blocks, stage, calls
        self._idle: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        for actor in actors:
            self._idle.put(actor)

    def _probed(self, answer: Any) -> bool:
        """An actor's probe answer; a probe that failed (not the actor) means no sharing."""
        try:
            return bool(self._ray.get(answer))
        except self._ray.exceptions.RayActorError:
            raise
        except Exception:
            return False

    def _send(self, value: Any, shared: bool) -> Any:
        where = self._blocks.locate(value) if shared else None
        return pack(value) if where is None else Shared(where)

    def __call__(self, *args: Any) -> Any:
        ray = self._ray
        actor, shared = self._idle.get()
        try:
            if not isinstance(shared, bool):
                shared = self._probed(shared)
            self._calls["shared memory" if shared else "object store"] += 1
            sent = [self._send(a, shared) for a in args]
            answer: Answer = ray.get(actor.call.remote(*sent))
        except ray.exceptions.RayActorError as exc:
            raise _actor_died(self._stage, exc) from exc
        finally:
            self._idle.put((actor, shared))
        if answer.failure is not None:
            raise reraised(answer.failure, stage=self._stage, where="a Ray actor")
        if isinstance(answer.value, Shared):
            return self._blocks.view(answer.value.where)
        if answer.same_as is not None:
            target = args[answer.same_as]
            np.copyto(target, answer.value)
            return target
        for i, array in (answer.written or {}).items():
            np.copyto(args[i], array)
        return answer.value


class RayExecutor:
    """Runs each stage as Ray actors; pools, source and sink stay in the driver.

    Args:
        address: the cluster to join (``"auto"``, ``"ray://host:10001"``...); ``None``
            joins the cluster of ``RAY_ADDRESS`` or starts a local one. Ignored when Ray
            is already initialised in this process.
        actor_options: options for every stage actor (``ray.remote`` options such as
            ``num_cpus``, ``num_gpus``, ``resources``, ``scheduling_strategy``); by
            default an actor reserves no CPU and actors go round robin over the nodes
            that have the resources asked for.
        shared_memory: put the pools in shared memory, so actors on the driver's host
            work on them in place (the default); ``False`` sends every batch through
            Ray's object store, as for actors on other hosts.
        init_kwargs: passed to ``ray.init`` when this executor starts Ray.

    Note:
        For an actor on another host, every batch crosses the object store twice (there
        and back) and is copied once more into a writable array on the actor: for cheap
        stages that is slower than threads on one machine, and pays when a stage is
        costly per frame or needs the resources of other nodes (see docs/executors.md
        for measured figures). Whether an actor shares the driver's host is tested, not
        guessed: it must map a probe block and read back its random token.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        actor_options: dict[str, Any] | None = None,
        shared_memory: bool = True,
        **init_kwargs: Any,
    ) -> None:
        self._ray = import_ray()
        start_ray(self._ray, address, **init_kwargs)
        self.actor_options = {"num_cpus": 0} | dict(actor_options or {})
        self._placed = 0
        self._actor_class = self._ray.remote(StageActor)
        self._actors: list[Any] = []
        self._lock = threading.Lock()
        self.shared_memory = shared_memory
        self.blocks = SharedBlocks()
        self._pools: collections.Counter[str] = collections.Counter()
        self._calls: collections.Counter[str] = collections.Counter()
        self._why_copied: str | None = None
        self._probe: tuple[str, bytes] | None = None

    def allocate(self, nbytes: int) -> Any:
        """A pool block in the driver's host: shared memory unless ``shared_memory=False``
        or ``/dev/shm`` lacks the room (then batches in it travel through the object store)."""
        if self.shared_memory:
            try:
                block = self.blocks.create(nbytes)
                self._pools["shared memory"] += 1
                return block
            except SharedMemoryFull as exc:
                self._why_copied = f"/dev/shm could not hold a pool ({exc})"
        self._pools["object store"] += 1
        return committed_memory(nbytes)

    def remote(self, fn: Callable[..., Any], *, stage: str, workers: int) -> Callable[..., Any]:
        """Start ``workers`` actors running ``fn``; return the callable that feeds them."""
        check_shippable(self._ray, fn, f"the function of stage {stage!r}")
        made = [self._actor_class.options(**self._options()).remote(fn) for _ in range(workers)]
        with self._lock:
            self._actors += made
        actors = [(a, self._shares(a)) for a in made]
        return _RayRemote(self._ray, actors, self.blocks, stage=stage, calls=self._calls)

    def summary(self) -> dict[str, Any]:
        """Where batches travelled since the last summary (the runner asks once a run), for
        the run report: pools and calls in shared memory (no copies) or through Ray's object
        store (copies), and why, if any did."""
        figures: dict[str, Any] = {
            "pools in shared memory": self._pools["shared memory"],
            "pools through the object store": self._pools["object store"],
            "calls on shared memory": self._calls["shared memory"],
            "calls through the object store": self._calls["object store"],
        }
        if self._calls["object store"] or self._pools["object store"]:
            figures["why copied"] = self._why_copied or (
                "shared_memory=False"
                if not self.shared_memory
                else "some actors run on other hosts (they cannot map this host's memory)"
            )
        self._pools.clear()
        self._calls.clear()
        self._why_copied = None
        return figures

    def _shares(self, actor: Any) -> Any:
        """Whether ``actor`` maps the driver's shared memory: ``False``, or its probe's answer."""
        if not self.shared_memory:
            return False
        if self._probe is None:
            token = os.urandom(16)
            try:
                buffer = self.blocks.create(len(token))
            except SharedMemoryFull:
                return False
            buffer[: len(token)] = token
            where = self.blocks.locate(np.frombuffer(buffer, np.uint8))
            assert where is not None
            self._probe = (where.block, token)
        return actor.sees.remote(*self._probe)

    def _options(self) -> dict[str, Any]:
        """The next actor's options: round robin over the alive nodes unless told otherwise."""
        options = dict(self.actor_options)
        if "scheduling_strategy" in options:
            return options
        need = {"CPU": options.get("num_cpus") or 0, "GPU": options.get("num_gpus") or 0}
        need |= options.get("resources") or {}
        nodes = sorted(
            n["NodeID"]
            for n in self._ray.nodes()
            if n.get("Alive") and all(n["Resources"].get(k, 0) >= v for k, v in need.items() if v)
        )
        if nodes:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            node = nodes[self._placed % len(nodes)]
            self._placed += 1
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        return options

    def close(self) -> None:
        """End this run's actors and unlink its shared memory (Ray itself keeps running)."""
        with self._lock:
            actors, self._actors = self._actors, []
        try:
            for actor in actors:
                with contextlib.suppress(Exception):  # already gone: the others still go
                    self._ray.kill(actor)
        finally:
            self._probe = None
            self.blocks.unlink_all()

    @property
    def ray(self) -> Any:
        """The ``ray`` module this executor started or joined (for tasks of your own, and
        :func:`hyperframes.chunked.run_chunked`)."""
        return self._ray

    def __repr__(self) -> str:
        return f"RayExecutor(actors={len(self._actors)})"
