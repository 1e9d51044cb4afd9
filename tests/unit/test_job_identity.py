"""Chunked runs reuse a segment only when its code and its file are what they claim."""

from __future__ import annotations

import functools
import importlib
import subprocess
import sys
import textwrap

from hyperframes.identity import code_identity, record_segment, segment_ok


def load(tmp_path, monkeypatch, name, source):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


SOURCE = """
    SCALE = {scale}

    def helper(x):
        return x * SCALE

    def render(i):
        return [helper(k) for k in range(i)]  # a comprehension: a nested code object
"""


def test_a_function_holding_a_comprehension_keeps_its_identity_across_processes(tmp_path):
    (tmp_path / "jobmod.py").write_text(textwrap.dedent(SOURCE.format(scale=2)))
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import jobmod; "
        "from hyperframes.identity import code_identity; print(code_identity(jobmod.render))"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for _ in range(2)
    }
    assert len(runs) == 1 and runs.pop().startswith("jobmod:render:")


def test_a_changed_global_or_helper_changes_the_identity(tmp_path, monkeypatch):
    before = code_identity(load(tmp_path, monkeypatch, "jobmod2", SOURCE.format(scale=2)).render)
    after = code_identity(load(tmp_path, monkeypatch, "jobmod2", SOURCE.format(scale=3)).render)
    assert before != after


def test_partials_and_callable_objects_have_identities_without_addresses():
    class Scale:
        def __call__(self, x):
            return x

    part = functools.partial(max, key=abs)
    assert code_identity(part) == code_identity(functools.partial(max, key=abs))
    assert code_identity(Scale()) == code_identity(Scale())
    assert "0x" not in code_identity(Scale())
    assert code_identity(None) == ""


def test_a_segment_is_reused_only_when_its_record_matches(tmp_path):
    part = tmp_path / "segment-00000.mkv"
    part.write_bytes(b"frames" * 100)
    assert not segment_ok(part)  # no record: its task may have been killed
    record_segment(part, 10)
    assert segment_ok(part)
    part.write_bytes(b"frames" * 99 + b"FRAMES")  # same size, other bytes
    assert not segment_ok(part)
    record_segment(part, 10)
    part.write_bytes(b"short")
    assert not segment_ok(part)
