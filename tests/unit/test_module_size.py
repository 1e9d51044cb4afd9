"""Small modules with one job: one over 300 lines says why in its docstring."""

from __future__ import annotations

import ast
from pathlib import Path

import hyperframes

ROOT = Path(hyperframes.__file__).parent
LIMIT = 300


def test_a_long_module_says_why():
    unexplained = []
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > LIMIT:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if f"Longer than {LIMIT} lines:" not in doc:
                unexplained.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert unexplained == []
