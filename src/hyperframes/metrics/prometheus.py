"""Serve a run's live figures to Prometheus, read from the run's snapshot at scrape time.

:class:`PrometheusExporter` is a :class:`~hyperframes.engine.watch.Monitor`: ``start``
opens an HTTP endpoint (``/metrics``, bound to 127.0.0.1 unless told otherwise) with a
private registry, and ``stop`` shuts it down and joins its thread. Nothing is counted in
the hot path: each scrape calls the run's ``snapshot()`` once (a typed
:class:`~hyperframes.engine.watch.RunSnapshot`) and turns it into metric families
(:func:`metric_rows`, a pure function). A stage's measured PSNR and the cache tiers of
the source's reads (a store's hot, warm and cold tiers) come typed in the snapshot and
get metrics of their own; figures that stages add under ``extra`` flow through on their
own: those of known kinds (typed: a grouping's hyperframes, a reuse stage's frames) get
their own names, every other number becomes ``hyperframes_stage_figure``.

Example:
    >>> exporter = PrometheusExporter(port=9464)
    >>> report = pipeline.run(monitor=exporter)  # doctest: +SKIP

Note:
    A scrape costs one snapshot (tens of microseconds); ``docs/observability.md`` has
    the measured overhead of a run with the exporter against one without.

Bound to a loopback address, the endpoint answers 403 to a request whose ``Host``
header is not a loopback name or its own address (:mod:`.hosts`), as the viewer does:
a web page elsewhere cannot read it through DNS rebinding.

Longer than 300 lines: each metric's definition sits next to its update from the
snapshot, so that the two cannot drift apart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from wsgiref.simple_server import make_server

from ..engine.figures import GroupingFigures, ReuseFigures
from ..engine.report import RunReport
from ..engine.watch import RunSnapshot, SnapshotFn
from ..io.base import CacheTier
from ._server import QuietHandler, server_class
from .hosts import allowed_hosts, host_allowed

DEFAULT_HOST = "127.0.0.1"
POLL_S = 0.05
"""How often the server loop checks for ``stop``: the most ``stop`` waits for it (the
standard 0.5 s would add a quarter of a second to every run on average)."""
INSTALL = "pip install prometheus-client (a dependency of hyperframes-engine that is missing here)"

Kind = Literal["counter", "gauge"]


@dataclass(frozen=True)
class MetricDef:
    """One exported metric: its full exposition name, type, labels and meaning."""

    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str


def _m(name: str, kind: Kind, labels: tuple[str, ...], text: str) -> MetricDef:
    return MetricDef(f"hyperframes_{name}", kind, labels, text)


_S, _P, _T = ("stage",), ("pool",), ("stage", "tier")
METRICS: tuple[MetricDef, ...] = (
    _m("run_elapsed_seconds", "gauge", (), "Seconds since the run started"),
    _m("frames_delivered_total", "counter", (), "Frames written to the sink"),
    _m("frames_expected", "gauge", (), "Frames the source will give, when known"),
    _m("batch_size_frames", "gauge", (), "Frames per batch"),
    _m("stage_workers", "gauge", _S, "Worker threads of a stage"),
    _m("stage_frames_total", "counter", _S, "Frames a stage has handled"),
    _m("stage_batches_total", "counter", _S, "Batches a stage has handled"),
    _m("stage_busy_seconds_total", "counter", _S, "Seconds in the stage function, all workers"),
    _m(
        "stage_wait_seconds_total",
        "counter",
        ("stage", "direction"),
        "Seconds waiting for work (in) or to hand work on (out), all workers",
    ),
    _m("stage_queue_depth_batches", "gauge", _S, "Batches waiting in a stage's input queue"),
    _m("stage_queue_capacity_batches", "gauge", _S, "Capacity of a stage's input queue"),
    _m("pool_slots", "gauge", _P, "Batch slots of a frame pool"),
    _m("pool_slots_in_use", "gauge", _P, "Slots of a pool held by batches now"),
    _m("pool_slots_high_water", "gauge", _P, "Most slots of a pool held at once"),
    _m("pool_slot_bytes", "gauge", _P, "Bytes of one slot of a pool"),
    _m("reorder_depth_batches", "gauge", (), "Batches the sink holds back to restore order"),
    _m(
        "head_of_line_wait_seconds_total",
        "counter",
        (),
        "Seconds the sink waited for a missing batch while later ones were ready",
    ),
    _m("failed_frames_total", "counter", (), "Frames that failed for good (dead letters)"),
    _m("hyperframes_total", "counter", _S, "Hyperframes (groups) formed by a grouping stage"),
    _m("hyperframe_mean_length_frames", "gauge", _S, "Mean frames per hyperframe"),
    _m("hyperframe_merge_ratio", "gauge", _S, "Share of frames merged into another's group"),
    _m(
        "reuse_frames_total",
        "counter",
        ("stage", "result"),
        "Frames whose result was computed or reused from their hyperframe's base",
    ),
    _m("psnr_db", "gauge", _S, "PSNR a stage measured, the mean over its recent frames"),
    _m("psnr_window_frames", "gauge", _S, "Measured frames the PSNR average covers"),
    _m("cache_hits_total", "counter", _T, "Cache hits per tier"),
    _m("cache_misses_total", "counter", _T, "Cache misses per tier"),
    _m("cache_bytes", "gauge", _T, "Bytes a cache tier holds now (cold: the data on disk)"),
    _m("cache_capacity_bytes", "gauge", _T, "The most bytes a cache tier may hold"),
    _m("cache_entries", "gauge", _T, "Entries a cache tier holds now"),
    _m("cache_evictions_total", "counter", _T, "Entries a cache tier dropped to make room"),
    _m("stage_figure", "gauge", ("stage", "figure"), "Any other number a stage reports"),
)
BY_NAME = {m.name: m for m in METRICS}


@dataclass
class MetricRow:
    """The samples of one metric in one scrape: ``(label values, value)`` pairs."""

    spec: MetricDef
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _extra_samples(
    stage: str, figures: Mapping[str, Any]
) -> Iterator[tuple[str, dict[str, str], float]]:
    """``(metric, labels, value)`` for each number in one stage's ``extra`` figures: those
    of a known kind of stage (typed: a grouping's hyperframes, a reuse stage's frames)
    under metrics of their own, every other number generically."""
    own: set[str] = set()
    if isinstance(figures, GroupingFigures):
        own = {"hyperframes", "mean_length", "merge_rate"}
        yield "hyperframes_hyperframes_total", {"stage": stage}, figures.hyperframes
        yield "hyperframes_hyperframe_mean_length_frames", {"stage": stage}, figures.mean_length
        yield "hyperframes_hyperframe_merge_ratio", {"stage": stage}, figures.merge_rate
    elif isinstance(figures, ReuseFigures):
        own = {"computed", "reused"}
        for result in ("computed", "reused"):
            labels = {"stage": stage, "result": result}
            yield "hyperframes_reuse_frames_total", labels, getattr(figures, result)
    for key, value in figures.items():
        if key in own:
            continue
        if isinstance(value, Mapping):  # a cache tier {"hits", "misses", ...}, or a sub-topic
            for sub, inner in value.items():
                number = _number(inner)
                if number is None:
                    continue
                if sub in ("hits", "misses"):
                    yield f"hyperframes_cache_{sub}_total", {"stage": stage, "tier": key}, number
                else:
                    labels = {"stage": stage, "figure": f"{key}_{sub}"}
                    yield "hyperframes_stage_figure", labels, number
            continue
        number = _number(value)
        if number is not None:
            yield "hyperframes_stage_figure", {"stage": stage, "figure": key}, number


def metric_rows(snap: RunSnapshot) -> list[MetricRow]:
    """Turn one ``Runner.snapshot()`` into metric rows (pure: no threads, no client)."""
    rows = {m.name: MetricRow(m) for m in METRICS}

    def put(name: str, value: Any, **labels: str) -> None:
        number = _number(value)
        if number is not None:
            row = rows[name]
            row.samples.append((tuple(labels[k] for k in row.spec.labels), number))

    put("hyperframes_run_elapsed_seconds", snap.elapsed_s)
    put("hyperframes_frames_delivered_total", snap.frames)
    put("hyperframes_frames_expected", snap.total)
    put("hyperframes_batch_size_frames", snap.batch_size)
    for st in snap.stages:
        name = st.name
        put("hyperframes_stage_workers", st.workers, stage=name)
        put("hyperframes_stage_frames_total", st.frames, stage=name)
        put("hyperframes_stage_batches_total", st.batches, stage=name)
        put("hyperframes_stage_busy_seconds_total", st.busy_s, stage=name)
        put("hyperframes_stage_wait_seconds_total", st.wait_in_s, stage=name, direction="in")
        put("hyperframes_stage_wait_seconds_total", st.wait_out_s, stage=name, direction="out")
        if st.queue_capacity:  # the source has no input queue
            put("hyperframes_stage_queue_depth_batches", st.queue_depth, stage=name)
            put("hyperframes_stage_queue_capacity_batches", st.queue_capacity, stage=name)
        if st.quality is not None:
            put("hyperframes_psnr_db", st.quality.psnr_db, stage=name)
            put("hyperframes_psnr_window_frames", st.quality.samples, stage=name)
    for pool in snap.pools:
        put("hyperframes_pool_slots", pool.slots, pool=pool.name)
        put("hyperframes_pool_slots_in_use", pool.in_use, pool=pool.name)
        put("hyperframes_pool_slots_high_water", pool.high_water, pool=pool.name)
        put("hyperframes_pool_slot_bytes", pool.slot_bytes, pool=pool.name)
    put("hyperframes_reorder_depth_batches", snap.reorder_depth)
    put("hyperframes_head_of_line_wait_seconds_total", snap.head_of_line_wait_s)
    put("hyperframes_failed_frames_total", snap.failures)
    for tier in snap.source_figures.cache:
        for metric, count in _tier_samples(tier):
            put(metric, count, stage="source", tier=tier.tier)
    for figure, number in snap.source_figures.numbers.items():
        put("hyperframes_stage_figure", number, stage="source", figure=figure)
    for stage, figures in snap.extra.items():
        for name, labels, value in _extra_samples(stage, figures):
            put(name, value, **labels)
    return [row for row in rows.values() if row.samples]


def _tier_samples(tier: CacheTier) -> Iterator[tuple[str, int]]:
    """``(metric, value)`` for each figure of one cache tier."""
    yield "hyperframes_cache_hits_total", tier.hits
    yield "hyperframes_cache_misses_total", tier.misses
    yield "hyperframes_cache_bytes", tier.bytes
    yield "hyperframes_cache_capacity_bytes", tier.capacity_bytes
    yield "hyperframes_cache_entries", tier.entries
    yield "hyperframes_cache_evictions_total", tier.evictions


def _client() -> Any:
    """The ``prometheus_client`` module: the one place it is imported."""
    try:
        import prometheus_client.core
    except ImportError as exc:
        raise ImportError(f"--metrics-port needs prometheus_client: {INSTALL}") from exc
    return prometheus_client


class SnapshotCollector:
    """A ``prometheus_client`` collector that reads the run's snapshot at each scrape."""

    def __init__(self, snapshot: SnapshotFn) -> None:
        self._snapshot: SnapshotFn | None = snapshot

    def detach(self) -> None:
        """Stop reading the run (after it ended): later scrapes return nothing."""
        self._snapshot = None

    def describe(self) -> list[Any]:
        return []  # names are fixed by METRICS; no scrape at registration

    def collect(self) -> Iterator[Any]:
        snapshot = self._snapshot
        if snapshot is None:
            return
        core = _client().core
        for row in metric_rows(snapshot()):
            spec = row.spec
            counter = spec.kind == "counter"
            family_type = core.CounterMetricFamily if counter else core.GaugeMetricFamily
            family = family_type(spec.name, spec.help, labels=list(spec.labels))
            for values, value in row.samples:
                family.add_metric(list(values), value)
            yield family


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def guard_host(app: WsgiApp, allowed: list[str] | None) -> WsgiApp:
    """``app``, answering 403 to requests whose ``Host`` is not in ``allowed`` (``None``: any)."""
    if allowed is None:
        return app

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if host_allowed(environ.get("HTTP_HOST"), allowed):
            return app(environ, start_response)
        body = f"403 Forbidden: the Host header must be one of {', '.join(allowed)}\n".encode()
        headers = [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
        ]
        start_response("403 Forbidden", headers)
        return [body]

    return guarded


class PrometheusExporter:
    """A monitor that serves the run's figures at ``http://HOST:PORT/metrics``.

    Args:
        port: TCP port; 0 picks a free one (see :attr:`port` after ``start``).
        host: address to bind; 127.0.0.1 (this machine only) by default. Use 0.0.0.0
            only on a trusted network: the endpoint has no authentication. On a loopback
            address, requests must name it, ``localhost`` or ``127.0.0.1`` as ``Host``.

    Raises:
        ImportError: ``prometheus_client`` is not installed (says how to install it).
    """

    def __init__(self, *, port: int = 0, host: str = DEFAULT_HOST) -> None:
        if not 0 <= int(port) <= 65535:
            raise ValueError(f"port must be between 0 and 65535, got {port}")
        _client()  # fail now, before a run, if the client is missing
        self.host = host
        self.requested_port = int(port)
        self.port: int | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._collector: SnapshotCollector | None = None

    @property
    def url(self) -> str:
        """Where the metrics are served (after ``start``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self, snapshot: SnapshotFn) -> None:
        """Register a fresh collector in a private registry and start serving."""
        if self._server is not None:
            raise RuntimeError("this exporter is already serving a run; make one per run")
        client = _client()
        registry = client.CollectorRegistry(auto_describe=False)
        self._collector = SnapshotCollector(snapshot)
        registry.register(self._collector)
        try:
            server = make_server(
                self.host,
                self.requested_port,
                guard_host(client.make_wsgi_app(registry), allowed_hosts(self.host)),
                server_class=server_class(self.host),
                handler_class=QuietHandler,
            )
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cannot serve metrics on {self.host}:{self.requested_port}: {exc.strerror}; "
                "choose another --metrics-port (0 picks a free one)",
            ) from exc
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": POLL_S},
            name="hf-metrics-http",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        self.port = int(server.server_address[1])

    def stop(self, report: RunReport | None) -> None:
        """Stop serving, close the socket and join the server thread."""
        if self._collector is not None:
            self._collector.detach()
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()
