"""Shared helpers of the reliability suite: the benchmark scripts it runs in short form."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
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
