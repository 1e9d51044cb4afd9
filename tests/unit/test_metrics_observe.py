import argparse
import json

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli.observe import Monitors, add_observe_options, finish_observe, monitors_for
from hyperframes.cli.options import Observe, group_of
from hyperframes.metrics.prometheus import PrometheusExporter
from hyperframes.metrics.timeline import Timeline


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_observe_options(parser)
    return group_of(Observe, parser.parse_args(argv))


class Recorder:
    def __init__(self, log, name, *, fail_start=False, fail_stop=False):
        self.log, self.name = log, name
        self.fail_start, self.fail_stop = fail_start, fail_stop

    def start(self, snapshot):
        self.log.append(f"start {self.name}")
        if self.fail_start:
            raise OSError("port taken")

    def stop(self, report):
        self.log.append(f"stop {self.name}")
        if self.fail_stop:
            raise RuntimeError(self.name)


def test_no_options_no_monitor():
    args = parse()
    assert args.metrics_host == "127.0.0.1"
    assert monitors_for(args) is None


@pytest.mark.parametrize("bad", ["-1", "65536", "http"])
def test_bad_port_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as info:
        parse("--metrics-port", bad)
    assert info.value.code == 2
    assert "port" in capsys.readouterr().err


def test_options_build_the_monitors():
    pytest.importorskip("prometheus_client")
    pytest.importorskip("matplotlib")
    monitor = monitors_for(parse("--metrics-port", "0", "--plot-dir", "plots"))
    assert isinstance(monitor.find(PrometheusExporter), PrometheusExporter)
    assert isinstance(monitor.find(Timeline), Timeline)


def test_monitors_stop_in_reverse_and_all_of_them():
    log = []
    group = Monitors([Recorder(log, "a", fail_stop=True), Recorder(log, "b", fail_stop=True)])
    group.start(dict)
    with pytest.raises(RuntimeError, match="b"):  # the first failure, after stopping all
        group.stop(None)
    assert log == ["start a", "start b", "stop b", "stop a"]


def test_a_failed_start_stops_what_started():
    log = []
    group = Monitors([Recorder(log, "a"), Recorder(log, "b", fail_start=True)])
    with pytest.raises(OSError):
        group.start(dict)
    assert log == ["start a", "start b", "stop a"]


def test_finish_writes_the_report_and_plots(tmp_path, capsys, no_thread_leak):
    pytest.importorskip("prometheus_client")
    pytest.importorskip("matplotlib")
    args = parse(
        "--report",
        str(tmp_path / "out" / "report.json"),
        "--plot-dir",
        str(tmp_path / "p"),
        "--metrics-port",
        "0",
    )
    monitor = monitors_for(args)
    frames = np.zeros((40, 8, 8, 3), np.uint8)
    report = hf.Pipeline.from_frames(frames, batch_size=8).map(np.bitwise_not).run(monitor=monitor)
    written = finish_observe(args, monitor, report)
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved == json.loads(json.dumps(report.to_dict()))
    assert written["report"].endswith("report.json")
    assert sorted(p.rsplit("/", 1)[-1] for p in written["plots"]) == [
        "queue_depth.png",
        "stage_utilisation.png",
    ]
    assert "serving metrics at http://127.0.0.1:" in capsys.readouterr().err
    assert not list((tmp_path / "out").glob(".*partial"))
