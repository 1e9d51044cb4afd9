"""Shared helpers of the reliability suite: the benchmark scripts it runs in short form, and a
small tmpfs."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` (a script, not a package) as a module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def benchmark_module() -> Callable[[str], ModuleType]:
    """``benchmark_module("soak")``: a benchmark script as a module."""
    return load_benchmark


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[int], tuple[Path, Callable[[int], None]]]]:
    """``folder, resize = tmpfs(size_kib)``: a small tmpfs mounted for the test (root only;
    the test is skipped where mounting is refused), unmounted after it. ``resize(kib)``
    remounts it with another size, keeping what it holds."""
    kill_trials = load_benchmark("kill_trials")
    with contextlib.ExitStack() as mounts:

        def mount(size_kib: int) -> tuple[Path, Callable[[int], None]]:
            folder = tmp_path / f"tmpfs-{len(list(tmp_path.glob('tmpfs-*')))}"
            try:
                resize = mounts.enter_context(kill_trials.tmpfs(folder, size_kib))
            except kill_trials.MountRefused as exc:
                pytest.skip(str(exc))
            return folder, resize

        yield mount
