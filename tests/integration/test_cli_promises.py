"""What the command line promises, held: shared options on every long command, flags in
error lines, a closed pipe that is no error, and reports that are JSON objects."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hyperframes.cli import build_parser, flags_of, main
from hyperframes.cli.common import as_flags
from hyperframes.cli.observe import LONG_OPTIONS

LONG_COMMANDS = ("transcode", "render", "pack", "unpack", "demo")


@pytest.mark.parametrize("command", [*LONG_COMMANDS, "analyze"])
def test_every_long_command_lists_the_shared_options(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = capsys.readouterr().out
    no_stage = command in ("analyze", "unpack")  # nothing to give workers
    shared = [f for f in LONG_OPTIONS if not (no_stage and f == "--workers")]
    missing = [flag for flag in shared if flag not in shown]
    assert not missing, f"{command} --help lacks {missing}"


def test_analyze_writes_its_report(tmp_path, synthetic_mp4, capsys):
    report_path = tmp_path / "a.json"
    assert main(["analyze", str(synthetic_mp4), "--report", str(report_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["report"] == str(report_path)
    assert json.loads(report_path.read_text())["frames"] == 40


def test_the_shared_options_are_defined_in_one_place():
    parser = build_parser()
    for command in LONG_COMMANDS:
        shared = set(LONG_OPTIONS) - ({"--workers"} if command == "unpack" else set())
        assert shared <= flags_of(parser, command), command


@pytest.mark.parametrize(
    ("library", "cli"),
    [
        ("store 'x' exists; pass overwrite=True to replace it", "pass --overwrite to replace"),
        ("pass resume=True to continue it", "pass --resume to continue"),
        ("odd size; resize to an even size or pass pix_fmt='yuv444p'", "pass --pix-fmt yuv444p"),
        ("lower batch_size= or slots=", "lower --batch-size or slots="),
        ("pass size=(320, 240) (--size 320x240 on the command line) to", "pass --size 320x240 to"),
        ("pass size=(width, height) (--size WxH) to read", "pass --size WxH to read"),
        (
            "in 'a.mp4'; pass on_error='skip' (drop --fail-fast) to go",
            "'a.mp4'; drop --fail-fast to",
        ),
        ("at threshold=0.001", "at threshold=0.001"),  # not a flag of this command: kept
        ("pass on_corrupt='skip' (--on-corrupt skip) to read", "pass --on-corrupt skip to read"),
        ("packed with (tier=lossless, intra=webp) than", "(tier=lossless, --intra webp) than"),
        ("packed with intra=None, at", "packed with --intra None, at"),
        ("intra=Nonesuch here", "--intra Nonesuch here"),  # a word, not None and the rest
    ],
)
def test_library_keywords_become_flags(library, cli):
    flags = {"--overwrite", "--resume", "--pix-fmt", "--batch-size", "--size", "--on-corrupt",
             "--intra", "--fail-fast"}  # fmt: skip
    assert cli in as_flags(library, flags)


def test_a_cli_error_names_the_flag(tmp_path, synthetic_mp4, capsys):
    out = tmp_path / "o.mp4"
    out.write_bytes(b"x")
    assert main(["transcode", str(synthetic_mp4), str(out)]) == 1
    err = capsys.readouterr().err
    assert "--overwrite" in err and "overwrite=True" not in err


def test_a_closed_pipe_is_not_an_error(synthetic_mp4):
    for _ in range(3):
        shell = subprocess.run(
            f"{sys.executable} -m hyperframes info {synthetic_mp4} | head -1",
            shell=True, capture_output=True, text=True, check=False,
            executable="/bin/bash",
        )  # fmt: skip
        assert shell.stderr == "" and shell.stdout.startswith("path")
    done = subprocess.run(
        [sys.executable, "-c",
         "import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1);"
         "from hyperframes.cli import main; sys.exit(main(['info', sys.argv[1]]))",
         str(synthetic_mp4)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "Broken pipe" not in done.stderr


def test_render_report_is_written(tmp_path, monkeypatch, capsys):
    (tmp_path / "hf_promise_render.py").write_text(
        "import numpy as np\ndef frame(i):\n    return np.full((16, 16, 3), i, np.uint8)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["render", "hf_promise_render:frame", "o.mkv", "--frames", "8", "--size",
                 "16x16", "--codec", "ffv1", "--report", "r.json", "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["frames"] == 8 and report["setup_s"] >= 0 and report["memory_budget"] > 0


def test_pack_report_output_is_an_object(tmp_path, synthetic_mp4, capsys):
    report_path = tmp_path / "r.json"
    code = main(["pack", str(synthetic_mp4), str(tmp_path / "s.hfs"), "--report",
                 str(report_path), "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    output = json.loads(report_path.read_text())["output"]
    assert isinstance(output, dict) and output["frames"] == 40


def test_unpack_takes_the_shared_options(tmp_path, synthetic_mp4, capsys):
    store = tmp_path / "s.hfs"
    assert main(["pack", str(synthetic_mp4), str(store), "--json"]) == 0
    report_path = tmp_path / "u.json"
    code = main(["unpack", str(store), str(tmp_path / "u.mkv"), "--report", str(report_path),
                 "--memory", "64MiB", "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert json.loads(report_path.read_text())["memory_budget"] == 64 << 20
