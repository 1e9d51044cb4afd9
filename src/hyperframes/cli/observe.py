"""What every long command shares: its options (:data:`LONG_OPTIONS`: ``--workers``, the
sizing, the executor, and the observability ones, ``--metrics-port``, ``--report``,
``--plot-dir``, ``--view``) and its observed run.

A command adds the options, builds one monitor from them, passes it to the run and
writes the files afterwards::

    add_observe_options(parser)
    ...
    monitor = monitors_for(args.observe)
    report = pipeline.run(progress=bar, monitor=monitor)
    written = finish_observe(args.observe, monitor, report)   # {"report": path, "plots": [...]}
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..metrics.monitors import Monitors
from .common import add_sizing_options, port_number, progress_for, worker_count
from .options import DEFAULT_HOST, Observe, Scale
from .scale import add_executor_options, executor_for

if TYPE_CHECKING:
    from .. import Pipeline, RunReport
    from ..engine.watch import Monitor, SnapshotFn
    from ..metrics.prometheus import PrometheusExporter


class _Announce:
    """Tells the user on stderr where the metrics are, once the exporter is serving."""

    def __init__(self, exporter: PrometheusExporter) -> None:
        self.exporter = exporter

    def start(self, snapshot: SnapshotFn) -> None:
        print(f"hyperframes: serving metrics at {self.exporter.url}", file=sys.stderr)

    def stop(self, report: RunReport | None) -> None:
        return None


def add_observe_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--metrics-port``, ``--metrics-host``, ``--report`` and ``--plot-dir``."""
    group = parser.add_argument_group("observability")
    group.add_argument(
        "--metrics-port",
        type=port_number,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics on this port while the run goes (0: a free port)",
    )
    group.add_argument(
        "--metrics-host",
        default=DEFAULT_HOST,
        metavar="HOST",
        help=f"address for --metrics-port (default {DEFAULT_HOST}, this machine only)",
    )
    group.add_argument("--report", default=None, metavar="PATH", help="save the report as JSON")
    group.add_argument(
        "--plot-dir",
        default=None,
        metavar="DIR",
        help="write PNGs of stage utilisation and queue depth over time (needs matplotlib)",
    )


def monitors_for(observe: Observe, *, interval_s: float = 0.5) -> Monitors | None:
    """The monitor the options ask for, or None. Fails now if an optional package is missing.

    Raises:
        ImportError: ``--metrics-port`` without prometheus_client, or ``--plot-dir``
            without matplotlib (the message says what to install).
    """
    parts: list[Monitor] = []
    if observe.metrics_port is not None:
        from ..metrics.prometheus import PrometheusExporter

        exporter = PrometheusExporter(port=observe.metrics_port, host=observe.metrics_host)
        parts += [exporter, _Announce(exporter)]
    if observe.plot_dir:
        from ..metrics.timeline import Timeline, require_plotting

        require_plotting()
        parts.append(Timeline(interval_s=interval_s))
    return Monitors(parts) if parts else None


def finish_observe(observe: Observe, monitor: Monitors | None, report: RunReport) -> dict[str, Any]:
    """Write ``--report`` and ``--plot-dir`` after a run; returns what was written where."""
    from ..io.publish import write_output
    from ..metrics.timeline import Timeline

    written: dict[str, Any] = {}
    overwrite = observe.overwrite
    if observe.report:
        path = Path(observe.report)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(report.to_dict(), indent=2, default=str) + "\n"
        write_output(path, text, overwrite=overwrite)
        written["report"] = str(path)
    timeline = monitor.find(Timeline) if monitor is not None else None
    if timeline is not None and observe.plot_dir:
        plots = timeline.write_plots(observe.plot_dir, overwrite=overwrite)
        written["plots"] = [str(p) for p in plots]
    return written


LONG_OPTIONS = (
    "--workers", "--batch-size", "--memory", "--json", "--metrics-port", "--metrics-host",
    "--report", "--plot-dir", "--view", "--executor", "--ray-address",
)  # fmt: skip
"""The options every long command shares (a test checks each command's ``--help``)."""
WORKERS = 2
"""The workers when ``--workers`` is not given (``args.workers`` is then ``None``, so that
``--chunks`` can refuse a ``--workers`` it would ignore)."""


def workers_of(scale: Scale) -> int:
    """``--workers``, or :data:`WORKERS` when it was not given."""
    return int(scale.workers or WORKERS)


def add_long_options(
    parser: argparse.ArgumentParser, *, workers_help: str | None = "workers per stage"
) -> None:
    """The options every long command shares: :data:`LONG_OPTIONS`, defined here only
    (``workers_help=None``: a command with no stage to give workers has no ``--workers``)."""
    from .view import add_view_options

    if workers_help is not None:
        parser.add_argument("--workers", type=worker_count, default=None, help=workers_help)
    add_sizing_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object, no bar")
    add_observe_options(parser)
    add_view_options(parser)
    add_executor_options(parser)


def observed_run(
    observe: Observe, scale: Scale, pipeline: Pipeline, label: str, *, memory: int | None = None
) -> tuple[RunReport, dict[str, Any]]:
    """Run ``pipeline`` under ``--executor`` with the progress bar and every monitor the
    options ask for (``--metrics-port``, ``--report``, ``--plot-dir``, ``--view``); returns
    the report and what was written where. ``memory`` is the pools' budget when the
    command divides ``--memory`` itself (``pack``)."""
    budget = memory if memory is not None else scale.memory
    executor = executor_for(scale)

    def run(bar: Any, watch: Monitor | None) -> RunReport:
        return pipeline.run(progress=bar, monitor=watch, memory=budget, executor=executor)

    return observed(observe, label, run)


def observed(
    observe: Observe,
    label: str,
    run: Callable[[Any, Monitor | None], RunReport],
) -> tuple[RunReport, dict[str, Any]]:
    """Call ``run(progress, monitor)`` (a run the command starts its own way, such as
    ``analyze``) with the progress bar and the monitors the options ask for; returns its
    report and what was written where."""
    from .view import live_monitor_for

    monitor = monitors_for(observe)
    live = live_monitor_for(observe)
    parts = [m for m in (monitor, live) if m is not None]
    bar = progress_for(observe, label)
    try:
        report = run(bar, Monitors(parts) if parts else None)
    finally:
        bar.finish()
        if live is not None:
            live.close()
    return report, finish_observe(observe, monitor, report)
