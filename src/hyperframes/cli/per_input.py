"""Each input's own job (``transcode``, ``pack``, ``analyze``, ``info`` over many inputs):
one after the other, side by side in worker processes, or as Ray tasks.

With ``--file-timeout S`` (the default) each job runs in a worker process. One that does
nothing for ``S`` seconds (no CPU, no byte read or written: a read stuck on a stalled
mount, a FIFO with no writer) is stopped, as is one whose process dies (a crash in a
decoder); its input is listed with why, the temporary file it was writing beside its
output is removed, and the next input goes on in a fresh process. With ``workers`` above
one, that many worker processes take the inputs side by side (``--executor processes``);
the rows come in the inputs' order. ``map`` watches its reads more closely
(:mod:`..io.beating`, :mod:`..io.reader_process`).

Longer than 300 lines: the three ways to run the jobs share the outcome of one, its
tally and the order of the rows; apart, each would repeat them.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import MediaError
from .many import READ_ERRORS, first_line
from .options import Observe, Scale

if TYPE_CHECKING:
    from ..engine.watch import ProgressFn
    from ..executors.worker import Worker
    from ..metrics.progress import ProgressBar

Run = Callable[[Any], dict[str, Any]]
"""One input's job: what it gave, as a row (a module's function, or a ``partial`` of one,
where it runs in a worker process)."""
Outcome = tuple[str, Any]
"""``("done", what the job gave)`` or ``("failed", why, in one line)``."""


def each(
    inputs: list[Any], run: Run, *, fail_fast: bool, file_timeout: float | None = None,
    written: Callable[[Any], Path] | None = None, workers: int = 1, ray: Any = None,
    bar: ProgressBar | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """``run(input)`` for every input: what each finished one gave (with its path and
    seconds), and ``{"path", "reason"}`` of each that failed, in the inputs' order; with
    ``fail_fast`` the first failure is raised instead. ``file_timeout``: each in a worker
    process, watched (see the module); ``written(input)``: the output it writes;
    ``workers``: that many side by side (in worker processes, watched where
    ``file_timeout`` is given); ``ray``: Ray's module, each a task on the cluster (one
    CPU, spread over the nodes; watched there alike); ``bar``: the files and frames done as each
    job ends, side by side or on Ray (one after the other, each job draws its own)."""
    outcomes: Generator[Done]  # (closed below: one's worker process ends with it)
    tally = _Tally(len(inputs), bar)
    if ray is not None:
        outcomes = (made for made in _on_ray(inputs, run, ray, tally, file_timeout, written))
    elif workers > 1:
        side = _side_by_side(inputs, run, workers, file_timeout, written, fail_fast, tally)
        outcomes = (made for made in side)
    else:
        outcomes = _one_by_one(inputs, run, file_timeout, written, fail_fast)
    done, failed = [], []
    try:
        for item, (kind, got), seconds in outcomes:
            if kind == "done":
                done.append({"path": item.path, **got, "seconds": round(seconds, 3)})
            elif fail_fast:  # (what a worker process said of it)
                error = MediaError(got)
                error.add_note(f"in input {item.path!r}; drop --fail-fast to go on without it")
                raise error
            else:
                failed.append({"path": item.path, "reason": got})
    finally:
        outcomes.close()
        if bar is not None:
            bar.finish()
    return done, failed


def side_by_side(scale: Scale, observe: Observe) -> tuple[int, Scale, Observe]:
    """How many inputs' jobs run at once, and the options each runs under: with
    ``--executor processes``, ``--workers`` (else a core each) jobs side by side, each in
    its own process on threads, with its share of ``--memory`` (else of the default
    budget), and no progress bar of its own; with ``--executor ray`` the same options
    for each Ray task (a core's share of the budget: as many run on a node as it has
    cores); else one job at a time, as asked."""
    import dataclasses

    from ..engine.sizing import available_memory, default_budget

    if scale.executor not in ("processes", "ray"):
        return 1, scale, observe
    cores = len(os.sched_getaffinity(0))
    workers = scale.workers or cores
    whole = scale.memory or default_budget(available_memory())
    share = max(1, whole // (workers if scale.executor == "processes" else cores))
    return workers, Scale(memory=share), dataclasses.replace(observe, json=True)


@contextlib.contextmanager
def cluster_of(scale: Scale, function: str | None = None) -> Iterator[Any]:
    """Ray's module where ``--executor ray`` sends the inputs' jobs to a cluster (joined or
    started as ``--ray-address`` says; ``function``: the user's ``MODULE:NAME`` the jobs
    load, whose module the cluster's workers need), else ``None``."""
    if scale.executor != "ray":
        yield None
        return
    from ..models import PerWorker, load
    from .scale import ray_executor, ship_module_of

    executor = ray_executor(scale.ray_address)
    try:
        if function is not None:
            fn = load(function)
            ship_module_of(fn.cls if isinstance(fn, PerWorker) else fn, executor)
        yield executor.ray
    finally:
        executor.close()


Done = tuple[Any, Outcome, float]
"""An input, its job's outcome and the seconds it took."""


class _Tally:
    """The files done of ``total`` and their frames, told to ``progress`` as each ends
    (from any thread)."""

    def __init__(self, total: int, progress: ProgressFn | None) -> None:
        from ..engine.watch import Progress

        self.total, self.progress, self._made = total, progress, Progress
        self.files = self.frames = 0
        self._start, self._lock = time.perf_counter(), threading.Lock()

    def __call__(self, outcome: Outcome) -> None:
        if self.progress is None:
            return
        with self._lock:
            self.files += 1
            self.frames += int(outcome[1].get("frames") or 0) if outcome[0] == "done" else 0
            elapsed = time.perf_counter() - self._start
            note = f"file {self.files}/{self.total}"
            self.progress(self._made(self.frames, None, elapsed, "", note))


def _one_by_one(
    inputs: list[Any], run: Run, timeout: float | None, written: Callable[[Any], Path] | None,
    fail_fast: bool,
) -> Generator[Done]:  # fmt: skip
    if not timeout:  # in this process: an error is raised as itself
        for item in inputs:
            start = time.perf_counter()
            try:
                got = run(item)
            except READ_ERRORS as exc:
                if fail_fast:
                    exc.add_note(f"in input {item.path!r}; drop --fail-fast to go on without it")
                    raise
                yield item, ("failed", first_line(exc)), 0.0
                continue
            yield item, ("done", got), time.perf_counter() - start
        return
    with Watched(timeout, written) as watched:
        for item in inputs:
            start = time.perf_counter()
            outcome = watched(run, item)
            yield item, outcome, time.perf_counter() - start


def _side_by_side(
    inputs: list[Any], run: Run, workers: int, timeout: float | None,
    written: Callable[[Any], Path] | None, fail_fast: bool, tally: _Tally,
) -> list[Done]:  # fmt: skip
    """Every input's outcome, made by ``workers`` worker processes side by side; after a
    failure with ``fail_fast``, or an error, none is handed out (those running finish)
    and the outcomes come only up to the first input not made."""
    made: list[Done | None] = [None] * len(inputs)
    order, lock, stop = iter(range(len(inputs))), threading.Lock(), threading.Event()
    errors: list[tuple[int, BaseException]] = []
    watchers = [Watched(timeout, written) for _ in range(min(workers, len(inputs)))]

    def drive(watched: Watched) -> None:
        while not stop.is_set():
            with lock:
                k = next(order, None)
            if k is None:
                return
            start = time.perf_counter()
            try:
                outcome = watched(run, inputs[k])
            except BaseException as exc:
                with lock:
                    errors.append((k, exc))
                stop.set()
                return
            made[k] = (inputs[k], outcome, time.perf_counter() - start)
            tally(outcome)
            if fail_fast and outcome[0] == "failed":
                stop.set()

    threads = [threading.Thread(target=drive, args=(w,), name=f"hf-inputs-{n}", daemon=True)
               for n, w in enumerate(watchers)]  # fmt: skip
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.25)  # (a Ctrl-C reaches this thread between waits)
    finally:  # interrupted: the jobs running are stopped, what they wrote removed
        stop.set()
        for watched in watchers:
            watched.close()
        for thread in threads:
            thread.join()
    if errors:
        raise min(errors, key=lambda e: e[0])[1]
    ready = []
    for outcome in made:
        if outcome is None:
            break
        ready.append(outcome)
    return ready


def _on_ray(
    inputs: list[Any], run: Run, ray: Any, tally: _Tally, timeout: float | None,
    written: Callable[[Any], Path] | None,
) -> list[Done]:  # fmt: skip
    """Every input's outcome, its job a Ray task (one CPU, spread over the nodes, not
    retried: a task whose process dies fails its input), watched there as on this machine
    where ``timeout`` is given; interrupted, or where a job raises, the tasks still out
    are cancelled."""
    task = ray.remote(timed_run_one).options(
        num_cpus=1, scheduling_strategy="SPREAD", max_retries=0
    )
    refs = [task.remote(run, item, timeout, written) for item in inputs]
    made: list[Done] = []
    try:
        for item, ref in zip(inputs, refs, strict=True):
            try:
                kind, got, seconds = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                raise cause if isinstance(cause, BaseException) else exc from None
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
                kind, got, seconds = "failed", f"the process reading it stopped: {exc}", 0.0
            made.append((item, (kind, got), seconds))
            tally((kind, got))
    except BaseException:
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise
    return made


def timed_run_one(
    run: Run, item: Any, timeout: float | None = None,
    written: Callable[[Any], Path] | None = None,
) -> tuple[str, Any, float]:  # fmt: skip
    """:func:`run_one` in a Ray task, in a worker process of the task's watched for
    ``timeout`` where it is given (:class:`Watched`): what it gave (a row also says the
    node it ran on), and the seconds it took."""
    from ..executors.ray import node_id

    start = time.perf_counter()
    if timeout:
        with Watched(timeout, written) as watched:
            kind, got = watched(run, item)
    else:
        kind, got = run_one(run, item)
    if kind == "done":
        got = {**got, "node": node_id()}
    return kind, got, time.perf_counter() - start


def run_one(run: Run, item: Any, beat: Any = None) -> Outcome:
    """``run(item)``, where an input that cannot be read is an outcome, not an error (in the
    worker's process: what the error was crosses as one line); with ``beat``, its reads
    told there (:mod:`..io.pulse`)."""
    from ..io.pulse import tell_reads

    tell_reads(beat)
    try:
        return "done", run(item)
    except READ_ERRORS as exc:
        return "failed", first_line(exc)
    finally:
        tell_reads(None)


class Watched:
    """Runs ``run(item)`` in a worker process (see the module), made when first needed and
    again after one is stopped; ``timeout``: the file timeout (``None``: none);
    ``written(item)``: the output the job writes, whose temporary file a stopped job
    leaves (``None``: it writes none)."""

    def __init__(self, timeout: float | None, written: Callable[[Any], Path] | None = None) -> None:
        self.timeout, self.written = timeout, written
        self._worker: Worker | None = None
        self._beat: Any = None  # the worker's reads, told (shared memory)
        self._blocks: Any = None
        self._item: Any = None  # the input of the call running now
        self._lock = threading.Lock()

    def __call__(self, run: Run, item: Any) -> Outcome:
        from ..executors.idle import WorkerIdle, call_until_idle
        from ..executors.worker import SharedBlocks, Worker, WorkerDied
        from ..io.pulse import BEAT_BYTES, new_beat, read_state

        with self._lock:
            if self._worker is None:
                module = getattr(run, "func", run).__module__
                self._worker = Worker(run_one, name="hf-input", daemon=False, preload=(module,))
                self._blocks = SharedBlocks()
                self._beat = new_beat(self._blocks.create(BEAT_BYTES))
            worker, beat, self._item = self._worker, self._beat, item
        try:
            if self.timeout:
                outcome: Outcome = call_until_idle(
                    worker, run, item, beat, idle=self.timeout, reads=lambda: read_state(beat)
                )
            else:
                outcome = worker.call(run, item)
            return outcome
        except WorkerIdle as exc:
            self.close()
            return "failed", str(exc)
        except WorkerDied as exc:
            self.close()
            return "failed", f"the process reading it stopped: {exc}"
        except BaseException:  # (an error of the job, or Ctrl-C: the process goes too)
            self.close()
            raise
        finally:
            self._item = None

    def close(self) -> None:
        """End the worker process; where a job was running in it, remove the temporary
        file it was writing."""
        from ..io.publish import remove_stale_temps

        with self._lock:
            worker, self._worker, item = self._worker, None, self._item
            blocks, self._blocks = self._blocks, None
        if blocks is not None:
            blocks.unlink_all()
        if worker is not None:
            worker.close()
            if item is not None and self.written is not None:
                remove_stale_temps(self.written(item))

    def __enter__(self) -> Watched:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
