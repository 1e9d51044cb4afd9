"""The option groups the commands share, each parsed once into a frozen record.

``main`` reads the namespace once (:func:`parse_groups`) and sets ``args.observe``,
``args.scale`` and ``args.encoding``; the helpers that watch a run, choose where it runs
or encode take these records, never the namespace, so none of them asks whether a command
has an option. A command without an option (``demo`` has no ``--report``) gets the
field's default.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

DEFAULT_HOST = "127.0.0.1"
"""``--metrics-host``'s default, the exporter's own (``metrics.prometheus.DEFAULT_HOST``,
a test holds the two equal): the parser does not import the exporter's HTTP server."""


@dataclass(frozen=True)
class Observe:
    """How the run is watched and what is written about it: ``--json``, ``--report``,
    ``--plot-dir``, ``--metrics-port``/``--metrics-host``, ``--view``/``--host``, and
    ``--overwrite`` for those files."""

    json: bool = False
    report: str | None = None
    plot_dir: str | None = None
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_HOST
    view: int | None = None
    host: str | None = None
    overwrite: bool = False


@dataclass(frozen=True)
class Scale:
    """Where and how wide the run goes: ``--executor``, ``--ray-address``, ``--workers``
    (``None`` when not given, so that ``--chunks`` can refuse it), ``--memory``."""

    executor: str | None = None
    ray_address: str | None = None
    workers: int | None = None
    memory: int | None = None


@dataclass(frozen=True)
class Encoding:
    """How the output video is encoded: ``--codec``, ``--crf``, ``--preset``, ``--pix-fmt``,
    and ``--overwrite`` for the file."""

    codec: str = "libx264"
    crf: int | None = None
    preset: str | None = None
    pix_fmt: str | None = None
    overwrite: bool = False

    def options(self, **extra: Any) -> dict[str, Any]:
        """The :class:`~hyperframes.VideoSink` options these ask for, with ``extra``."""
        chosen = {"codec": self.codec, "crf": self.crf, "preset": self.preset}
        return chosen | {"pix_fmt": self.pix_fmt} | extra


Group = TypeVar("Group", Observe, Scale, Encoding)


def group_of(kind: type[Group], args: argparse.Namespace) -> Group:
    """The ``kind`` record of ``args``: each field from the option of its name where the
    command has it, else the field's default."""
    given: dict[str, Any] = vars(args)
    names = [f.name for f in dataclasses.fields(kind)]
    return kind(**{name: given[name] for name in names if given.get(name) is not None})


def parse_groups(args: argparse.Namespace) -> None:
    """Set ``args.observe``, ``args.scale`` and ``args.encoding``, once, before the command
    runs."""
    args.observe = group_of(Observe, args)
    args.scale = group_of(Scale, args)
    args.encoding = group_of(Encoding, args)
