import json
import re
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.engine.figures import GroupingFigures, ReuseFigures
from hyperframes.engine.watch import (
    PoolSnapshot,
    RunSnapshot,
    StageQuality,
    StageSnapshot,
)
from hyperframes.io.base import CacheTier, SourceFigures
from hyperframes.metrics.prometheus import (
    BY_NAME,
    DEFAULT_HOST,
    METRICS,
    PrometheusExporter,
    metric_rows,
)

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def snapshot(source_figures=None, quality=None, **extra):
    return RunSnapshot(
        elapsed_s=1.5,
        frames=32,
        total=None,
        batch_size=8,
        stages=(
            StageSnapshot("source", 1, 40, 5, 0.5, 0.0, 0.1, queue_depth=0, queue_capacity=0),
            StageSnapshot(
                "map:f", 2, 36, 5, 1.25, 0.2, 0.3, queue_depth=3, queue_capacity=5, quality=quality
            ),
        ),
        pools=(PoolSnapshot("source", slots=8, in_use=4, high_water=6, slot_bytes=1024),),
        reorder_depth=2,
        head_of_line_wait_s=0.05,
        failures=1,
        extra=extra,
        source_figures=source_figures or SourceFigures(),
    )


def samples(rows):
    return {(row.spec.name, values): value for row in rows for values, value in row.samples}


def test_rows_carry_every_core_figure():
    got = samples(metric_rows(snapshot()))
    assert got[("hyperframes_stage_busy_seconds_total", ("map:f",))] == 1.25
    assert got[("hyperframes_stage_wait_seconds_total", ("map:f", "out"))] == 0.3
    assert got[("hyperframes_stage_queue_depth_batches", ("map:f",))] == 3
    assert ("hyperframes_stage_queue_depth_batches", ("source",)) not in got  # no input queue
    assert got[("hyperframes_pool_slots_in_use", ("source",))] == 4
    assert got[("hyperframes_pool_slots_high_water", ("source",))] == 6
    assert got[("hyperframes_reorder_depth_batches", ())] == 2
    assert got[("hyperframes_head_of_line_wait_seconds_total", ())] == 0.05
    assert got[("hyperframes_failed_frames_total", ())] == 1
    assert ("hyperframes_frames_expected", ()) not in got  # total unknown: no sample


def test_extra_figures_flow_through_generically():
    extra = {
        "group": GroupingFigures(
            frames=40, hyperframes=10, mean_length=4.0, merge_rate=0.75, max_length=6
        ),
        "map:f": ReuseFigures(computed=10, reused=30, calls_saved=0.75, verified=2),
        "mine": {"computed": 5, "verified": True, "note": "text"},  # a stage of the user's
        "read": {"hot": {"hits": 9, "misses": 1}, "warm": {"hits": 2, "misses": 3, "bytes": 7}},
    }
    got = samples(metric_rows(snapshot(**extra)))
    assert got[("hyperframes_hyperframe_merge_ratio", ("group",))] == 0.75
    assert got[("hyperframes_hyperframe_mean_length_frames", ("group",))] == 4.0
    assert got[("hyperframes_hyperframes_total", ("group",))] == 10
    assert got[("hyperframes_stage_figure", ("group", "frames"))] == 40
    assert got[("hyperframes_reuse_frames_total", ("map:f", "reused"))] == 30
    assert got[("hyperframes_reuse_frames_total", ("map:f", "computed"))] == 10
    assert got[("hyperframes_cache_hits_total", ("read", "hot"))] == 9
    assert got[("hyperframes_cache_misses_total", ("read", "warm"))] == 3
    assert got[("hyperframes_stage_figure", ("read", "warm_bytes"))] == 7
    assert ("hyperframes_stage_figure", ("map:f", "reused")) not in got  # has its own metric
    assert got[("hyperframes_stage_figure", ("map:f", "calls_saved"))] == 0.75
    assert got[("hyperframes_stage_figure", ("mine", "computed"))] == 5  # untyped: generic
    assert not any(key[1] == ("mine", "verified") for key in got)  # booleans are not numbers
    assert not any(key[1] == ("mine", "note") for key in got)


def test_a_stages_measured_psnr_is_typed_and_exported():
    quality = StageQuality.of_mse(1e-4, samples=10, window=64)
    got = samples(metric_rows(snapshot(quality=quality)))
    assert got[("hyperframes_psnr_db", ("map:f",))] == pytest.approx(40.0)
    assert got[("hyperframes_psnr_window_frames", ("map:f",))] == 10
    assert ("hyperframes_psnr_db", ("source",)) not in got  # measures nothing
    exact = StageQuality.of_mse(0.0, samples=3, window=64)
    assert samples(metric_rows(snapshot(quality=exact)))[("hyperframes_psnr_db", ("map:f",))] == (
        float("inf")
    )
    assert not any(name == "hyperframes_psnr_db" for name, _ in samples(metric_rows(snapshot())))


def test_a_sources_cache_tiers_and_figures_are_exported_with_a_tier_label():
    figures = SourceFigures(
        cache=(
            CacheTier("hot", hits=7, misses=3, bytes=4096, capacity_bytes=8192, entries=2),
            CacheTier("warm", hits=1, misses=2, bytes=100, capacity_bytes=1000, evictions=5),
            CacheTier("cold", hits=2, misses=0, bytes=123456, capacity_bytes=123456),
        ),
        numbers={"records_read": 2.0},
    )
    got = samples(metric_rows(snapshot(source_figures=figures)))
    assert got[("hyperframes_cache_hits_total", ("source", "hot"))] == 7
    assert got[("hyperframes_cache_misses_total", ("source", "hot"))] == 3
    assert got[("hyperframes_cache_bytes", ("source", "hot"))] == 4096
    assert got[("hyperframes_cache_capacity_bytes", ("source", "hot"))] == 8192
    assert got[("hyperframes_cache_entries", ("source", "hot"))] == 2
    assert got[("hyperframes_cache_evictions_total", ("source", "warm"))] == 5
    assert got[("hyperframes_cache_hits_total", ("source", "cold"))] == 2
    assert got[("hyperframes_cache_bytes", ("source", "cold"))] == 123456
    assert got[("hyperframes_stage_figure", ("source", "records_read"))] == 2.0
    plain = samples(metric_rows(snapshot()))
    assert not any(name.startswith("hyperframes_cache_") for name, _ in plain)


def test_names_follow_prometheus_conventions():
    for m in METRICS:
        assert re.fullmatch(r"hyperframes_[a-z_]+", m.name), m.name
        assert m.name.endswith("_total") == (m.kind == "counter"), m.name
        if "seconds" in m.name:
            assert m.name.endswith(("_seconds", "_seconds_total")), m.name


def test_docs_and_dashboard_match_the_metrics():
    doc = (DOCS / "observability.md").read_text()
    for m in METRICS:
        assert f"`{m.name}`" in doc, f"{m.name} is missing from docs/observability.md"
    dashboard = json.dumps(json.loads((DOCS / "grafana-dashboard.json").read_text()))
    used = set(re.findall(r"hyperframes_[a-z_]+", dashboard))
    assert used, "the dashboard queries no metric"
    assert used <= set(BY_NAME), used - set(BY_NAME)


def test_bad_port_is_refused():
    with pytest.raises(ValueError, match="65535"):
        PrometheusExporter(port=70000)


def test_port_in_use_says_what_to_do():
    with socket.socket() as taken:
        taken.bind((DEFAULT_HOST, 0))
        taken.listen()
        exporter = PrometheusExporter(port=taken.getsockname()[1])
        with pytest.raises(OSError, match="another --metrics-port"):
            exporter.start(lambda: snapshot())
    exporter.stop(None)


def test_scrape_during_a_real_run(no_thread_leak):
    reached, release = threading.Event(), threading.Event()

    def hold(frames):
        if not reached.is_set():
            reached.set()
            release.wait(10)
        return frames

    exporter = PrometheusExporter(port=0)
    assert exporter.host == "127.0.0.1"
    scraped = {}

    def scrape():
        try:
            if reached.wait(10):
                scraped["text"] = urllib.request.urlopen(exporter.url, timeout=10).read().decode()
        finally:
            release.set()

    scraper = threading.Thread(target=scrape)
    scraper.start()
    frames = np.zeros((64, 8, 8, 3), np.uint8)
    report = (
        hf.Pipeline.from_frames(frames, batch_size=8)
        .group()
        .map(hold, workers=2)
        .run(monitor=exporter)
    )
    scraper.join()
    assert report.frames == 64
    families = {f.name: f for f in text_string_to_metric_families(scraped["text"])}
    expected = families["hyperframes_frames_expected"].samples[0].value
    assert expected == 64
    delivered = families["hyperframes_frames_delivered"].samples[0].value
    assert delivered < 64  # the scrape came mid-run: a batch was still held
    in_use = families["hyperframes_pool_slots_in_use"].samples[0].value
    assert in_use >= 1
    stages = {s.labels["stage"] for s in families["hyperframes_stage_frames"].samples}
    assert stages == {"source", "group", "map:hold", "sink"}
    assert "hyperframes_hyperframe_merge_ratio" in families
    # stopped: the port is closed and the server thread joined
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(exporter.url, timeout=2)
    assert not [t for t in threading.enumerate() if t.name == "hf-metrics-http"]


def _missing_client_message(monkeypatch) -> str:
    import sys

    monkeypatch.setitem(sys.modules, "prometheus_client.core", None)
    with pytest.raises(ImportError) as info:
        PrometheusExporter(port=0)
    return str(info.value)


def _project() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_missing_client_names_the_package_it_needs(monkeypatch):
    """prometheus-client is a core dependency (pyproject.toml): installing it is the fix."""
    core = {re.split(r"[<>=!~\[;\s]", d, maxsplit=1)[0].lower() for d in _project()["dependencies"]}
    assert "prometheus-client" in core
    message = _missing_client_message(monkeypatch)
    assert "pip install prometheus-client" in message, message


def test_missing_client_advice_names_only_extras_that_exist(monkeypatch):
    """An extra the advice names must exist (it once named ``[metrics]``, which does not)."""
    message = _missing_client_message(monkeypatch)
    extras = set(_project()["optional-dependencies"])
    named = {e.strip() for group in re.findall(r"\[([^\]]*)\]", message) for e in group.split(",")}
    assert named <= extras, f"{message!r} names extras {sorted(named - extras)}; real: {extras}"


def test_metrics_port_in_the_api_serves_during_the_run():
    import socket
    import urllib.request

    import numpy as np

    from hyperframes import Pipeline

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scraped = []

    def scrape(i, frame):
        if i == 0:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                scraped.append(r.read().decode())

    frames = np.zeros((64, 8, 8, 3), np.uint8)
    Pipeline.from_frames(frames, batch_size=8).map(np.bitwise_not).for_each(scrape).run(
        metrics_port=port
    )
    assert scraped and "hyperframes_stage_frames_total" in scraped[0]
    with pytest.raises(OSError):  # the server is gone after the run
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
