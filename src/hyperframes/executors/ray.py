"""The same pipeline on a Ray cluster: ``executor="ray"`` (the ``[ray]`` extra).

Two ways to use a cluster:

* **Stages as actors** (:class:`RayExecutor`). Source, pools and sink stay in the
  driver; each stage gets ``workers`` Ray actors (spread over the nodes), and each of
  the stage's engine threads calls one actor at a time and waits, so a stage never has
  more than ``workers`` batches out on the cluster (the engine's pools bound the rest)
  and order is restored at the sink as in a local run. Batches travel through Ray's
  object store; the result of an in-place stage is copied back into its pool slot.
* **Chunked** (:meth:`RayExecutor.run_chunked`). One long video is cut at keyframes into
  segments; a Ray task decodes, processes and encodes each segment on its own (with a
  halo of extra frames for windowed stages), and the segments are joined by stream
  copy. Finished segments are kept, so a rerun does only what is missing.

Ray is imported here and nowhere else.

Example:
    >>> from hyperframes.executors.ray import RayExecutor  # doctest: +SKIP
    >>> pipeline.run(executor=RayExecutor(address="auto"))  # doctest: +SKIP
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.frames import committed_memory
from ..errors import StageError
from ._ray_actor import Answer, StageActor, pack
from ._wire import reraised

INSTALL = "pip install 'hyperframes-engine[ray]'"


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            f"the Ray executor needs Ray ({exc}); install it with: {INSTALL}"
        ) from exc
    return ray


class _RayRemote:
    """``fn`` as called from the engine's threads: each call goes to an idle actor."""

    def __init__(self, ray: Any, actors: list[Any], *, stage: str) -> None:
        self._ray, self._stage = ray, stage
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for actor in actors:
            self._idle.put(actor)

    def __call__(self, *args: Any) -> Any:
        ray = self._ray
        actor = self._idle.get()
        try:
            answer: Answer = ray.get(actor.call.remote(*[pack(a) for a in args]))
        except ray.exceptions.RayActorError as exc:
            raise StageError(
                f"stage {self._stage!r}: its Ray actor died ({exc}); the run stopped (a node "
                "was lost, the actor ran out of memory, or the function could not be loaded "
                "on the worker)"
            ) from exc
        finally:
            self._idle.put(actor)
        if answer.failure is not None:
            raise reraised(answer.failure, stage=self._stage, where="a Ray actor")
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
        init_kwargs: passed to ``ray.init`` when this executor starts Ray.

    Note:
        Every batch crosses the object store twice (there and back) and is copied once
        more into a writable array on the actor. For cheap stages that is slower than
        threads on one machine; it pays when a stage is costly per frame or needs the
        resources of other nodes (see docs/executors.md for measured figures).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        actor_options: dict[str, Any] | None = None,
        **init_kwargs: Any,
    ) -> None:
        self._ray = import_ray()
        if not self._ray.is_initialized():
            self._ray.init(address=address, **init_kwargs)
        self.actor_options = {"num_cpus": 0} | dict(actor_options or {})
        self._placed = 0
        self._actor_class = self._ray.remote(StageActor)
        self._actors: list[Any] = []
        self._lock = threading.Lock()

    def allocate(self, nbytes: int) -> Any:
        """Pools stay in the driver's memory."""
        return committed_memory(nbytes)

    def remote(self, fn: Callable[..., Any], *, stage: str, workers: int) -> Callable[..., Any]:
        """Start ``workers`` actors running ``fn``; return the callable that feeds them."""
        made = [self._actor_class.options(**self._options()).remote(fn) for _ in range(workers)]
        with self._lock:
            self._actors += made
        return _RayRemote(self._ray, made, stage=stage)

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
        """End this run's actors (Ray itself keeps running for later runs)."""
        with self._lock:
            actors, self._actors = self._actors, []
        for actor in actors:
            self._ray.kill(actor)

    def run_chunked(
        self,
        source: str | Path,
        output: str | Path,
        build: Callable[[Any], Any],
        **options: Any,
    ) -> Any:
        """Process one long video in keyframe-aligned segments, one Ray task each.

        See :func:`hyperframes.executors._ray_chunks.run_chunked` for the options.
        """
        from ._ray_chunks import run_chunked

        return run_chunked(self._ray, source, output, build, **options)

    def __repr__(self) -> str:
        return f"RayExecutor(actors={len(self._actors)})"
