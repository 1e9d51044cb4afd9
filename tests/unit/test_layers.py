"""The layers of docs/architecture.md, held: no import runs up a floor, and no circle.

Every module's imports of other hyperframes modules (at the top, inside functions and
under TYPE_CHECKING alike) are read with ``ast``; each part sits on a floor and may
import its own floor's modules (within its own part) and any floor below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hyperframes

ROOT = Path(hyperframes.__file__).parent

FLOORS = {
    "errors": 0, "_version": 0, "choices": 0,
    "frames": 1,
    "executors": 2,
    "io": 3, "models": 3,
    "engine": 4,
    "hyper": 5, "metrics": 5, "modes": 5,
    "store": 6, "_estimate": 6, "identity": 6, "stages": 6,
    "pipeline": 7, "gpu": 7,
    "analysis": 8, "segments": 8,
    "chunked": 9, "viewer": 9,
    "transcoding": 10,
    "cli": 11,
    "__init__": 12, "__main__": 12,
}  # fmt: skip
"""The floor of each part: a top-level module or subpackage of ``hyperframes``."""

PUBLIC_API_USERS = {"cli", "viewer"}
"""Parts on top that may import the public API from the package root (``from .. import
Pipeline``), as a user would."""


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> list[tuple[str, str, int]]:
    """``(module, imported module, line)`` for every import of a hyperframes module."""
    found = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
                names = [f"{target}.{a.name}" for a in node.names] if not node.module else []
                found += [(module, t, node.lineno) for t in [target, *names] if t]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hyperframes"):
                found.append((module, node.module or "", node.lineno))
            elif isinstance(node, ast.Import):
                found += [(module, a.name, node.lineno) for a in node.names
                          if a.name.startswith("hyperframes")]  # fmt: skip
    return found


def test_every_part_has_a_floor():
    parts = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").is_file())}  # fmt: skip
    assert parts == set(FLOORS)


def test_no_import_runs_up_a_floor():
    upward = []
    for module, target, line in imports():
        if not target.startswith("hyperframes."):
            continue
        here, there = part_of(module), part_of(target)
        if here == there or (here in PUBLIC_API_USERS and there not in FLOORS):
            continue  # the same part, or a name of the public API (hyperframes.Pipeline)
        if FLOORS.get(there, 99) >= FLOORS[here]:
            upward.append(f"{module}:{line} imports {target} ({here} {FLOORS[here]} -> "
                          f"{there} {FLOORS.get(there)})")  # fmt: skip
    assert upward == []


def test_no_part_reaches_into_another_parts_private_module():
    reaching = [
        f"{module}:{line} imports {target}"
        for module, target, line in imports()
        if target.startswith("hyperframes.")
        and part_of(target) != part_of(module)
        and any(seg.startswith("_") and not seg.startswith("__") for seg in target.split(".")[2:])
    ]
    assert reaching == []


def test_the_command_line_calls_public_names_only():
    """The CLI is a user of the library: no private module (``hyperframes._x``, at any depth)
    and no private name (``_helper``) of another part; only ``_version``, the source of the
    public ``hyperframes.__version__``, read there so that start-up loads no more."""
    private = []
    for path in (ROOT / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level < 2:
                continue  # the CLI's own modules (level 1), or no hyperframes import
            segments = (node.module or "").split(".") + [a.name for a in node.names]
            hidden = [s for s in segments if s.startswith("_") and not s.startswith("__")]
            if hidden and node.module != "_version":
                private.append(f"cli/{path.name}:{node.lineno} imports {', '.join(hidden)}")
    assert private == []


PURE = {"hyperframes.engine.plan": {"hyperframes.frames", "hyperframes.io.base",
                                    "hyperframes.engine.sizing"}}  # fmt: skip
"""Modules that must stay pure functions of their arguments, and the only modules of the
package they may import: the run's plan reads footprints and sizes, and makes nothing."""


def test_the_plan_is_pure():
    """``engine/plan.py`` imports no threads, executors, pools' memory or I/O: a planner
    that builds objects to read facts would creep back in through an import."""
    for module, allowed in PURE.items():
        path = ROOT.parent / (module.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text())
        stdlib = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                stdlib |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                stdlib.add((node.module or "").split(".")[0])
        assert stdlib <= {"__future__", "math", "collections", "dataclasses", "typing"}, stdlib
        ours = {target for m, target, _ in imports() if m == module}
        assert ours <= allowed, ours - allowed


FEATURES = ("halo", "window", "group", "reuse", "target", "strateg", "stream")
"""Words of the features that stages add (windows, grouping, reuse)."""


def names_in(path: Path) -> set[str]:
    """Every name a module's code uses or defines (not its docstrings or comments)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def test_the_bottom_floor_knows_no_feature():
    """A batch is ids, metadata and a slot: a window's halo, grouping and reuse live with
    their stages (``engine.window``'s ``Haloed`` batches carry the halo)."""
    used = names_in(ROOT / "frames.py")
    assert {n for n in used if any(word in n.lower() for word in FEATURES)} == set()
